// The catalog query, read-only and bounded; its rows made outboxes by the config's rules, a bad one left out.
#include "pg/outbox_catalog.hpp"

#include "config/catalog_rows.hpp"

namespace outboxd::pg {
namespace {

// The cursor bounds what is fetched whatever the query; DECLARE takes only a
// SELECT or VALUES without data-modifying WITH, and exec_params() one
// statement: with READ ONLY, the query can neither write nor run a second statement.
constexpr const char* kCursor = "outboxd_catalog";

core::Error catalog_error(const core::Error& error) {
  return core::Error{error.kind, "catalog query: " + error.message};
}

core::Result<Rows> fetch(Connection& connection, const config::CatalogConfig& catalog, int max_rows) {
  const auto timeout = catalog.database.statement_timeout.count() > 0 ? catalog.database.statement_timeout
                                                                       : kCatalogTimeoutWhenUnbounded;
  if (auto begun = connection.exec("START TRANSACTION READ ONLY"); !begun) return begun.error();
  auto fetched = [&]() -> core::Result<Rows> {
    if (auto set = connection.exec("SET LOCAL statement_timeout = " + std::to_string(timeout.count())); !set) {
      return set.error();
    }
    if (auto declared = connection.exec_params(std::string("DECLARE ") + kCursor + " NO SCROLL CURSOR FOR " +
                                                    catalog.query,
                                                {});
        !declared) {
      return declared.error();
    }
    return connection.exec("FETCH FORWARD " + std::to_string(max_rows + 1) + " FROM " + kCursor);
  }();
  (void)connection.exec("ROLLBACK");  // it wrote nothing; a failed transaction ends here too
  return fetched;
}

std::optional<std::string> value(const Rows& rows, int row, int column) {
  if (column < 0) return std::nullopt;
  return rows.optional_text(row, column);
}

}  // namespace

core::Result<CatalogRead> read_outbox_catalog(Connection& connection, const config::Config& config, int max_rows) {
  auto fetched = fetch(connection, config.tenants.catalog, max_rows);
  if (!fetched) return catalog_error(fetched.error());
  const Rows& rows = fetched.value();
  if (rows.size() > max_rows) {
    return core::fatal_error("catalog query: returns more than " + std::to_string(max_rows) +
                             " rows; refused whole (is it the right table?)");
  }
  std::vector<std::string> names;
  for (int column = 0; column < rows.columns(); ++column) names.emplace_back(rows.column_name(column));
  auto columns = config::catalog_columns(names);
  if (!columns) return catalog_error(columns.error());
  const auto& c = columns.value();
  CatalogRead read;
  for (int row = 0; row < rows.size(); ++row) {
    const config::CatalogRow values{value(rows, row, c.name), value(rows, row, c.url), value(rows, row, c.schema),
                                    value(rows, row, c.workflow_schema)};
    auto entry = config::catalog_entry(config, values);
    if (entry) read.entries.push_back(std::move(entry).value());
    else read.problems.push_back("catalog row " + std::to_string(row + 1) + ": " + entry.error().message);
  }
  return read;
}

core::Result<config::OutboxSet> resolve_outboxes(const config::Config& config, Connection* catalog) {
  if (catalog == nullptr || config.tenants.catalog.query.empty()) return config::merge_outboxes(config.outboxes, {});
  auto read = read_outbox_catalog(*catalog, config);
  if (!read) return read.error();
  auto set = config::merge_outboxes(config.outboxes, std::move(read.value().entries));
  set.problems.insert(set.problems.begin(), read.value().problems.begin(), read.value().problems.end());
  return set;
}

}  // namespace outboxd::pg
