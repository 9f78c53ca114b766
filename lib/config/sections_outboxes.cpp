// The readers of many outboxes: each item of outboxes: and the catalog's database, read through the top-level sections' rows.
#include "config/key_table.hpp"
#include "config/outboxes.hpp"
#include "config/sections.hpp"

namespace outboxd::config {
namespace {

// listen_url goes with url: an outbox that names a database of its own does
// not LISTEN on the server of database:'s, and without a transaction pooler
// the main connection LISTENs itself.
void drop_inherited_listen_url(MapReader& database, DatabaseConfig& out) {
  if (database.given("listen_url")) return;
  if (database.given("url") || out.pooler != Pooler::transaction) {
    out.listen_url.clear();
    out.listen_target = {};
  }
}

// The two sections an outbox has, as `config` has them: the defaults an
// outbox's own keys go over. Only these are copied: their rows read nothing
// else, and a whole Config would copy the list being read, item by item.
Config defaults_of(const Config& config) {
  Config defaults;
  defaults.database = config.database;
  defaults.outbox = config.outbox;
  return defaults;
}

OutboxEntry read_outbox_item(MapReader& item, const Config& config) {
  OutboxEntry entry;
  if (item.required_text("name", entry.name)) {
    if (auto problem = outbox_name_problem(entry.name)) item.report("name", *problem);
  }
  Config sections = defaults_of(config);
  {
    MapReader database = item.section("database");
    read_section_keys(database, "database", sections);
    drop_inherited_listen_url(database, sections.database);
  }
  MapReader outbox = item.section("outbox");
  read_section_keys(outbox, "outbox", sections);
  entry.database = std::move(sections.database);
  entry.outbox = std::move(sections.outbox);
  return entry;
}

}  // namespace

void read_outboxes(MapReader& root, std::string_view key, std::vector<OutboxEntry>& out, Config& config) {
  const auto count = root.maps(key, [&](MapReader& item) { out.push_back(read_outbox_item(item, config)); });
  if (count == 0u) root.report(key, "must list at least one outbox, or be left out (the one outbox of database:)");
}

void read_catalog_query(MapReader& catalog, std::string_view key, std::string& out, Config&) {
  (void)catalog.nonempty_text(key, out);
}

void read_catalog_database(MapReader& catalog, std::string_view key, DatabaseConfig& out, Config& config) {
  MapReader section = catalog.section(key);
  if (!catalog.given(key)) {
    if (!config.tenants.catalog.query.empty()) out = config.database;
    return;
  }
  Config over = defaults_of(config);
  read_section_keys(section, "database", over);
  drop_inherited_listen_url(section, over.database);
  out = std::move(over.database);
}

}  // namespace outboxd::config
