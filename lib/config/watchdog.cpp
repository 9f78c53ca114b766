// The rule that keeps a statement waiting on a lock from looking like a hung daemon to the watchdog.
#include "config/watchdog.hpp"

#include <algorithm>

namespace outboxd::config {
namespace {

using std::chrono::milliseconds;

std::string ms(milliseconds value) { return std::to_string(value.count()) + " ms"; }

}  // namespace

std::chrono::seconds connect_timeout_applied(const DatabaseConfig& database) {
  return std::max(std::chrono::seconds(2), std::chrono::ceil<std::chrono::seconds>(database.connect_timeout));
}

std::optional<milliseconds> database_wait_bound(const DatabaseConfig& database) {
  if (database.statement_timeout == milliseconds(0)) return std::nullopt;
  return database.statement_timeout + connect_timeout_applied(database);
}

std::optional<std::string> watchdog_conflict(const DatabaseConfig& database, std::chrono::microseconds watchdog) {
  const auto allowed = std::chrono::floor<milliseconds>(watchdog * 2 / 5);
  const auto bound = database_wait_bound(database);
  if (bound && *bound <= allowed) return std::nullopt;
  const auto connect = connect_timeout_applied(database);
  const auto fits = allowed - connect;
  const std::string fix = fits > milliseconds(0) ? "set statement_timeout_ms to at most " + std::to_string(fits.count())
                                                 : "lower connect_timeout_ms";
  const std::string watchdog_text =
      "the service manager's watchdog interval (" + ms(std::chrono::floor<milliseconds>(watchdog)) + ")";
  if (!bound) {
    return "database.statement_timeout_ms is 0 (no limit): a statement waiting on a lock would block the loop "
           "past " + watchdog_text + " and get the daemon killed; " + fix;
  }
  return "database.statement_timeout_ms (" + ms(database.statement_timeout) + ") plus database.connect_timeout_ms (" +
         ms(connect) + ", applied in whole seconds) must stay within 40% of " + watchdog_text + ", that is " +
         ms(allowed) + ", or a statement waiting on a lock gets the daemon killed; " + fix + " or raise WatchdogSec";
}

}  // namespace outboxd::config
