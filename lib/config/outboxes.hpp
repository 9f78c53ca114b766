// Many outboxes in one daemon: the name rule, one outbox's own Config, where each outbox lives, and the list merged with the catalog.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace outboxd::config {

inline constexpr std::size_t kMaxOutboxNameBytes = 63;

// Why `name` cannot name an outbox, or nullopt when it can: 1..63 characters
// of [A-Za-z0-9_.-], so that it reads the same in logs, metric labels,
// status, --outbox and the catalog. The message names no key: callers prefix their own.
std::optional<std::string> outbox_name_problem(std::string_view name);

// The one-outbox Config of `entry`: `config` with database: and outbox: the
// entry's and neither list nor catalog, so that every command and part made
// for one outbox runs on it unchanged.
Config for_outbox(const Config& config, const OutboxEntry& entry);

// Why two outboxes cannot both be served: one name, or one schema name
// (outbox or workflow) in one database, where migrate would build one
// outbox's tables into the other's.
struct OutboxClash {
  enum class Kind { name, schema, workflow_schema };
  Kind kind;
  std::string message;  // names the other outbox by the label it was taken with
};

// The names and schemas taken so far, outbox by outbox in the order served.
class OutboxPlaces {
 public:
  // Takes the entry's name and its schemas in its database; when one is
  // taken already, takes nothing and says by whom. `label` names the entry
  // in later messages: `outboxes[1] ("acme")`, `catalog row 3 ("acme")`.
  std::optional<OutboxClash> take(const OutboxEntry& entry, std::string label);

 private:
  struct Owner {
    std::string label;
    bool workflow = false;  // the name is the owner's workflow schema
  };
  std::map<std::string, std::string, std::less<>> names_;                  // name: label
  std::map<std::pair<std::string, std::string>, Owner> schemas_;  // (database, schema): owner
};

// The outboxes to serve and what was left out, one line each.
struct OutboxSet {
  std::vector<OutboxEntry> entries;   // the list's, then the catalog's
  std::vector<std::string> problems;  // a catalog entry left out and why; never a password
};

// The list (already checked by the loader) and then each catalog entry that
// clashes with none before it. An entry named in both: the list's wins,
// and the catalog's is reported.
OutboxSet merge_outboxes(const std::vector<OutboxEntry>& listed, std::vector<OutboxEntry> found);

// A database: section of a config, and its path in the file.
struct DatabaseSection {
  std::string path;  // "database", "outboxes[1].database", "tenants.catalog.database"
  const DatabaseConfig* database;
};

// database:, then each listed outbox's and the catalog's database where it
// differs from database:'s: every connection a check of the file makes
// (TLS, password file modes) without repeating database:'s for each outbox.
std::vector<DatabaseSection> database_sections(const Config& config);

// The first `limit` names, comma-separated, then "and N more": for messages that offer the choices.
std::string name_list(const std::vector<OutboxEntry>& entries, std::size_t limit = 20);

}  // namespace outboxd::config
