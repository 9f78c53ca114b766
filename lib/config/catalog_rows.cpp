// The catalog query's columns by name, and each of its rows checked as the loader checks an item of outboxes:.
#include "config/catalog_rows.hpp"

#include <array>

#include "config/checks.hpp"
#include "config/outboxes.hpp"
#include "config/scalar.hpp"
#include "config/schema_name.hpp"
#include "config/suggest.hpp"
#include "config/url.hpp"

namespace outboxd::config {
namespace {

const std::array<std::string, 4> kColumnNames{"name", "url", "schema", "workflow_schema"};

int* slot_of(CatalogColumns& columns, const std::string& name) {
  if (name == "name") return &columns.name;
  if (name == "url") return &columns.url;
  if (name == "schema") return &columns.schema;
  if (name == "workflow_schema") return &columns.workflow_schema;
  return nullptr;
}

core::Status take_schema(const std::optional<std::string>& value, SchemaKind kind, const char* column,
                         std::string& out) {
  if (!value) return {};
  if (auto problem = schema_name_problem(*value, kind)) return core::fatal_error(column + (" " + *problem));
  out = *value;
  return {};
}

// The row's values over database: and outbox:, checked as check_database()
// and check_outbox() check an item of outboxes:.
core::Result<OutboxEntry> entry_over_defaults(const Config& config, const CatalogRow& row) {
  OutboxEntry entry{*row.name, config.database, config.outbox};
  if (row.url) {
    auto target = parse_pg_url(*row.url);
    if (!target) return core::fatal_error("url " + target.error().message);
    entry.database.url = *row.url;
    entry.database.target = std::move(target).value();
    entry.database.listen_url.clear();  // it reaches the defaults' server
    entry.database.listen_target = {};
  }
  if (entry.database.url.empty()) return core::fatal_error("url is NULL, and database.url gives no default");
  if (auto twice = password_given_twice(entry.database)) return core::fatal_error("url: " + *twice);
  if (auto taken = take_schema(row.schema, SchemaKind::outbox, "schema", entry.outbox.schema); !taken) {
    return taken.error();
  }
  if (auto taken =
          take_schema(row.workflow_schema, SchemaKind::workflow, "workflow_schema", entry.outbox.workflow_schema);
      !taken) {
    return taken.error();
  }
  if (auto problem = schemas_problem(entry.outbox)) return core::fatal_error(*problem);
  return entry;
}

}  // namespace

core::Result<CatalogColumns> catalog_columns(const std::vector<std::string>& names) {
  CatalogColumns columns;
  for (std::size_t i = 0; i < names.size(); ++i) {
    int* slot = slot_of(columns, names[i]);
    if (slot == nullptr) {
      std::string message = "the catalog query returns the column " + quote_value(names[i]) +
                            ", which is none of name, url, schema, workflow_schema";
      if (auto close = closest_match(names[i], kColumnNames)) message += " (did you mean " + quote_value(*close) + "?)";
      return core::fatal_error(message);
    }
    if (*slot >= 0) {
      return core::fatal_error("the catalog query returns the column " + quote_value(names[i]) + " twice");
    }
    *slot = static_cast<int>(i);
  }
  if (columns.name < 0) {
    return core::fatal_error("the catalog query returns no column \"name\" (its columns: name, and as needed url, "
                             "schema, workflow_schema)");
  }
  return columns;
}

core::Result<OutboxEntry> catalog_entry(const Config& config, const CatalogRow& row) {
  if (!row.name) return core::fatal_error("name is NULL");
  if (auto problem = outbox_name_problem(*row.name)) return core::fatal_error("name " + *problem);
  auto entry = entry_over_defaults(config, row);
  if (!entry) return core::fatal_error(quote_value(*row.name) + ": " + entry.error().message);
  return entry;
}

}  // namespace outboxd::config
