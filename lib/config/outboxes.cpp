// Many outboxes in one daemon: the name rule, one outbox's own Config, the places each outbox takes, the merge.
#include "config/outboxes.hpp"

#include <algorithm>
#include <tuple>

#include "config/scalar.hpp"
#include "config/url.hpp"

namespace outboxd::config {
namespace {

bool name_character(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
         c == '-';
}

}  // namespace

std::optional<std::string> outbox_name_problem(std::string_view name) {
  if (!name.empty() && name.size() <= kMaxOutboxNameBytes && std::all_of(name.begin(), name.end(), name_character)) {
    return std::nullopt;
  }
  return "must be 1 to " + std::to_string(kMaxOutboxNameBytes) + " characters of A-Z, a-z, 0-9, _, . and -, got " +
         quote_value(name);
}

Config for_outbox(const Config& config, const OutboxEntry& entry) {
  Config one = config;
  one.database = entry.database;
  one.outbox = entry.outbox;
  // Freed, not cleared: each of a thousand outboxes would keep the list's buffer.
  std::vector<OutboxEntry>().swap(one.outboxes);
  one.tenants = TenantsConfig{};
  return one;
}

std::optional<OutboxClash> OutboxPlaces::take(const OutboxEntry& entry, std::string label) {
  using Kind = OutboxClash::Kind;
  if (const auto named = names_.find(entry.name); named != names_.end()) {
    return OutboxClash{Kind::name, "the name " + quote_value(entry.name) + " is taken by " + named->second};
  }
  const std::string database = database_identity(entry.database.target);
  const auto schema = schemas_.find({database, entry.outbox.schema});
  const auto workflow = schemas_.find({database, entry.outbox.workflow_schema});
  if (schema != schemas_.end() && !schema->second.workflow) {
    return OutboxClash{Kind::schema, "names the same database and schema as " + schema->second.label + ": " +
                                         database + ", schema " + entry.outbox.schema};
  }
  // The workflow tables of two outboxes cannot share one schema: migrate
  // builds each outbox's workflow functions against its own outbox schema.
  for (const auto& [found, kind, key] : {std::tuple{schema, Kind::schema, "schema "},
                                         std::tuple{workflow, Kind::workflow_schema, "workflow_schema "}}) {
    if (found == schemas_.end()) continue;
    const std::string whose = found->second.workflow ? " is the workflow schema of " : " is the schema of ";
    return OutboxClash{kind, "its " + std::string(key) + found->first.second + whose + found->second.label +
                                 " in the same database (" + database +
                                 "); give each outbox of one database schemas of its own"};
  }
  names_.emplace(entry.name, label);
  schemas_.emplace(std::pair{database, entry.outbox.schema}, Owner{label, false});
  schemas_.emplace(std::pair{database, entry.outbox.workflow_schema}, Owner{std::move(label), true});
  return std::nullopt;
}

OutboxSet merge_outboxes(const std::vector<OutboxEntry>& listed, std::vector<OutboxEntry> found) {
  OutboxSet set;
  OutboxPlaces places;
  for (std::size_t i = 0; i < listed.size(); ++i) {
    // Checked by the loader: a clash here is one it reported already.
    if (!places.take(listed[i], "outboxes[" + std::to_string(i) + "] (" + quote_value(listed[i].name) + ")")) {
      set.entries.push_back(listed[i]);
    }
  }
  for (auto& entry : found) {
    const auto listed_too = std::find_if(listed.begin(), listed.end(),
                                         [&](const OutboxEntry& item) { return item.name == entry.name; });
    if (listed_too != listed.end()) {
      set.problems.push_back("catalog: " + quote_value(entry.name) + " is in outboxes: too; the list's entry is used");
      continue;
    }
    if (auto clash = places.take(entry, "catalog " + quote_value(entry.name))) {
      set.problems.push_back("catalog: " + quote_value(entry.name) + " left out: " + clash->message);
      continue;
    }
    set.entries.push_back(std::move(entry));
  }
  return set;
}

std::vector<DatabaseSection> database_sections(const Config& config) {
  std::vector<DatabaseSection> sections{{"database", &config.database}};
  for (std::size_t i = 0; i < config.outboxes.size(); ++i) {
    const DatabaseConfig& database = config.outboxes[i].database;
    if (database != config.database) sections.push_back({"outboxes[" + std::to_string(i) + "].database", &database});
  }
  const CatalogConfig& catalog = config.tenants.catalog;
  if (!catalog.query.empty() && catalog.database != config.database) {
    sections.push_back({"tenants.catalog.database", &catalog.database});
  }
  return sections;
}

std::string name_list(const std::vector<OutboxEntry>& entries, std::size_t limit) {
  std::string out;
  for (std::size_t i = 0; i < entries.size() && i < limit; ++i) out += (i == 0 ? "" : ", ") + entries[i].name;
  if (entries.size() > limit) out += " and " + std::to_string(entries.size() - limit) + " more";
  return out;
}

}  // namespace outboxd::config
