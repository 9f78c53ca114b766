// Rules of many outboxes: each item of outboxes: with a url, a name and schemas of its own; tenants: only where it applies.
#include "config/checks.hpp"
#include "config/outboxes.hpp"
#include "config/scalar.hpp"

namespace outboxd::config {
namespace {

// Where a clash is pointed at: the key that makes it, as far as the item gives it.
void report_clash(const OutboxClash& clash, const std::string& item, CrossCheck& check) {
  switch (clash.kind) {
    case OutboxClash::Kind::name: check.fail({item + ".name"}, clash.message); break;
    case OutboxClash::Kind::schema:
      check.fail({item + ".outbox.schema", item + ".database.url", item}, clash.message);
      break;
    case OutboxClash::Kind::workflow_schema:  // mostly inherited: where the outbox would give its own
      check.fail({item + ".outbox.workflow_schema", item + ".outbox", item + ".database.url", item}, clash.message);
      break;
  }
}

}  // namespace

void check_outboxes(const Config& config, CrossCheck& check) {
  CrossCheck item_check = check.over_defaults();
  // Items that inherit a default already reported are not compared with each other.
  const bool defaults_usable = check.usable({"database.url", "outbox.schema", "outbox.workflow_schema"});
  OutboxPlaces places;
  for (std::size_t i = 0; i < config.outboxes.size(); ++i) {
    const OutboxEntry& entry = config.outboxes[i];
    const std::string item = "outboxes[" + std::to_string(i) + "]";
    if (check.reported_at(item)) continue;  // no mapping, or no name: nothing to compare it by
    check_database(entry.database, item + ".database", item_check);
    check_outbox(entry.outbox, item + ".outbox", item_check);
    if (entry.database.url.empty()) {
      if (check.usable({item + ".database"})) {
        check.fail({item + ".database"},
                   "missing required key \"url\" (give it here, or database.url for every outbox)");
      }
      continue;
    }
    // Compared by what it is known to name: another mistake of the item's (an unknown key) does not hide a clash.
    if (!defaults_usable || !check.usable({item + ".name", item + ".database.url", item + ".outbox.schema",
                                           item + ".outbox.workflow_schema"})) {
      continue;
    }
    if (auto clash = places.take(entry, item + " (" + quote_value(entry.name) + ")")) report_clash(*clash, item, check);
  }
}

void check_tenants(const Config& config, CrossCheck& check) {
  const CatalogConfig& catalog = config.tenants.catalog;
  if (catalog.query.empty()) {
    for (const char* path : {"tenants.catalog.database", "tenants.catalog.refresh_interval_ms"}) {
      if (check.given(path) && check.usable({"tenants.catalog.query"})) {
        check.fail({path}, "is for the catalog, which needs a query: set tenants.catalog.query");
      }
    }
  } else {
    CrossCheck catalog_check = check.over_defaults();
    check_database(catalog.database, "tenants.catalog.database", catalog_check);
    if (catalog.database.url.empty() && check.usable({"database", "tenants.catalog.database"})) {
      check.fail({"tenants.catalog.database", "tenants.catalog.query"},
                 "the catalog needs a database url: give tenants.catalog.database.url or database.url");
    }
  }
  if (config.many_outboxes() || !check.usable({"outboxes", "tenants.catalog.query"})) return;
  for (const char* path : {"tenants.max_connections", "tenants.idle_check_interval_ms", "tenants.release_after_ms"}) {
    if (check.given(path) && check.usable({path})) {
      check.fail({path}, "applies only to many outboxes: add outboxes: or tenants.catalog.query, or remove it");
    }
  }
}

}  // namespace outboxd::config
