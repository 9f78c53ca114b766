// The outboxes of the catalog: the configured query run read-only and bounded, each row checked as the loader checks an item.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/outboxes.hpp"
#include "core/result.hpp"
#include "pg/connection.hpp"

namespace outboxd::pg {

// More rows than this and the catalog is refused whole: a query that reads
// the wrong table must not make a million outboxes.
inline constexpr int kMaxCatalogRows = 100'000;
// The catalog query's statement_timeout when its database: sets none (0).
inline constexpr std::chrono::milliseconds kCatalogTimeoutWhenUnbounded{30'000};

struct CatalogRead {
  std::vector<config::OutboxEntry> entries;  // in the query's order
  std::vector<std::string> problems;         // "catalog row 3: ...", one a row left out; never a password
};

// Runs tenants.catalog.query on `connection`, which reaches
// tenants.catalog.database: in a READ ONLY transaction, under
// statement_timeout (the catalog database's statement_timeout_ms, or
// kCatalogTimeoutWhenUnbounded when that is 0), through a cursor from which
// at most max_rows + 1 rows are fetched. The columns are taken by name
// (config::catalog_columns) and each row made an outbox by
// config::catalog_entry: a row it refuses is left out and reported, the
// others kept. Fails whole when the query fails, its columns are not the
// contract's, or it returns more than max_rows rows.
core::Result<CatalogRead> read_outbox_catalog(Connection& connection, const config::Config& config,
                                              int max_rows = kMaxCatalogRows);

// The outboxes to serve, for the CLI: the list, then the entries the
// catalog's query returns on `catalog` (none when it is nullptr or no query
// is set) that clash with none before them (config::merge_outboxes: the list
// wins a name); the problems of both. Fails only when the catalog cannot be read.
core::Result<config::OutboxSet> resolve_outboxes(const config::Config& config, Connection* catalog);

}  // namespace outboxd::pg
