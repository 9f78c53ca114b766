// Where a database URL connects and with which sslmode, as libpq will see it, and the warnings that follow.
#pragma once

#include <vector>

#include "config/config.hpp"
#include "config/security_warnings.hpp"
#include "core/result.hpp"

namespace outboxd::pg {

// The hosts (hostaddr where given, else host, per entry) and sslmode of a
// connection string as the config parsed it, with what the string leaves out
// taken as libpq takes it: from PGHOST, PGHOSTADDR, PGSSLMODE, else libpq's
// default ("prefer" for sslmode, the Unix socket for the host).
core::Result<config::PgTransport> pg_transport(const config::PgTarget& target);

// config::database_tls_warning for database.url and database.listen_url, or
// for those of another database: section at `section` (outboxes[1].database).
std::vector<std::string> database_tls_warnings(const config::DatabaseConfig& database,
                                               const std::string& section = "database");

}  // namespace outboxd::pg
