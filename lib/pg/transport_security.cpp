// Where the config's parsed database URL connects, with libpq's defaults for what it leaves out; the TLS warning.
#include "pg/transport_security.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <memory>
#include <string_view>

#include "config/url.hpp"

namespace outboxd::pg {

namespace {

std::vector<std::string> split_list(std::string_view list) {
  std::vector<std::string> items;
  for (std::size_t start = 0;;) {
    const std::size_t comma = list.find(',', start);
    items.emplace_back(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

struct OptionsFree {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};

// As libpq's conninfo_add_defaults: the string's value, else the
// environment variable's, else the compiled-in default (PQconndefaults
// gives the latter two).
std::string effective(const config::PgTarget& target, const PQconninfoOption* defaults, std::string_view keyword) {
  for (const auto& [key, value] : target.options) {
    if (key == keyword) return value;
  }
  for (const PQconninfoOption* o = defaults; o->keyword != nullptr; ++o) {
    if (keyword == o->keyword) return o->val ? o->val : "";
  }
  return {};
}

}  // namespace

core::Result<config::PgTransport> pg_transport(const config::PgTarget& target) {
  const std::unique_ptr<PQconninfoOption, OptionsFree> defaults(PQconndefaults());
  if (!defaults) return core::transient_error("libpq cannot list its connection defaults: out of memory");
  config::PgTransport transport;
  transport.sslmode = effective(target, defaults.get(), "sslmode");
  const auto hosts = split_list(effective(target, defaults.get(), "host"));
  const auto addresses = split_list(effective(target, defaults.get(), "hostaddr"));
  for (std::size_t i = 0; i < std::max(hosts.size(), addresses.size()); ++i) {
    const bool has_address = i < addresses.size() && !addresses[i].empty();
    transport.hosts.push_back(has_address ? addresses[i] : (i < hosts.size() ? hosts[i] : ""));
  }
  return transport;
}

std::vector<std::string> database_tls_warnings(const config::DatabaseConfig& database, const std::string& section) {
  std::vector<std::string> warnings;
  const auto check = [&](const std::string& key, const config::PgTarget& target) {
    if (target.options.empty()) return;  // not given (or not parsed: nothing to connect to)
    const auto transport = pg_transport(target);
    if (!transport) return;  // the connection attempt reports it
    if (auto warning = config::database_tls_warning(key, transport.value())) warnings.push_back(std::move(*warning));
  };
  check(section + ".url", database.target);
  check(section + ".listen_url", database.listen_target);
  return warnings;
}

}  // namespace outboxd::pg
