// How long the daemon's loop may block on PostgreSQL, checked against the service manager's watchdog interval.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "config/config.hpp"

namespace outboxd::config {

// connect_timeout as libpq applies it to each host of the URL: in whole
// seconds, rounded up, and at least 2 (libpq reads 1 as 2).
std::chrono::seconds connect_timeout_applied(const DatabaseConfig& database);

// The longest the loop waits on the database between two watchdog pings
// without a failure ending the wait: one connection attempt (libpq applies
// connect_timeout in whole seconds) plus one statement, which PostgreSQL
// cancels after statement_timeout, e.g. while it waits on a lock. A cancelled
// statement drops the connection, so the rest of that loop turn skips the database.
// Empty when statement_timeout is 0 (no limit).
std::optional<std::chrono::milliseconds> database_wait_bound(const DatabaseConfig& database);

// The loop pings at half the watchdog interval, so a turn may take up to the
// other half; the bound must stay within 40% of the interval to leave the
// rest of the turn some room. An explanation naming the keys and the largest
// statement_timeout that fits when it does not, else nullopt.
std::optional<std::string> watchdog_conflict(const DatabaseConfig& database, std::chrono::microseconds watchdog);

}  // namespace outboxd::config
