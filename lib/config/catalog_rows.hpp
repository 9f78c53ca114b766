// The catalog query's contract: its columns by name, and each row made an outbox by the loader's own rules.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "core/result.hpp"

namespace outboxd::config {

// Where the catalog query's columns are; -1: the query returns no such column.
struct CatalogColumns {
  int name = -1;             // required
  int url = -1;              // NULL or absent: database.url (tenants.catalog's defaults are database:'s)
  int schema = -1;           // NULL or absent: outbox.schema
  int workflow_schema = -1;  // NULL or absent: outbox.workflow_schema
};

// The columns of a result, by name: `name` is required, url, schema and
// workflow_schema are optional; any other column, or one given twice, is an
// error (a misspelt `shema` would otherwise put every outbox in the default schema).
core::Result<CatalogColumns> catalog_columns(const std::vector<std::string>& names);

// One row of the catalog query as text; nullopt: SQL NULL or no such column.
struct CatalogRow {
  std::optional<std::string> name;
  std::optional<std::string> url;
  std::optional<std::string> schema;
  std::optional<std::string> workflow_schema;
};

// The outbox a row describes: database: and outbox: of `config` with the
// row's values over them, checked as the loader checks an item of
// outboxes: (name, url, schema names). A row with its own url does not
// inherit database.listen_url, which reaches the defaults' server. The error
// never quotes the url: it may hold a password.
core::Result<OutboxEntry> catalog_entry(const Config& config, const CatalogRow& row);

}  // namespace outboxd::config
