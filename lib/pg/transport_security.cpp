// libpq's own reading of a database URL, for the TLS warning at start-up.
#include "pg/transport_security.hpp"

#include <libpq-fe.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string_view>

namespace outboxd::pg {

namespace {

struct OptionsFree {
  void operator()(PQconninfoOption* options) const { PQconninfoFree(options); }
};

std::vector<std::string> split_list(std::string_view list) {
  std::vector<std::string> items;
  for (std::size_t start = 0;;) {
    const std::size_t comma = list.find(',', start);
    items.emplace_back(list.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
    if (comma == std::string_view::npos) return items;
    start = comma + 1;
  }
}

// As libpq's conninfo_add_defaults: the string's value, else the
// environment variable's, else the compiled-in default.
std::string effective(const PQconninfoOption* options, std::string_view keyword) {
  for (const PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (keyword != o->keyword) continue;
    if (o->val != nullptr) return o->val;
    if (const char* env = o->envvar ? std::getenv(o->envvar) : nullptr; env != nullptr) return env;
    return o->compiled ? o->compiled : "";
  }
  return {};
}

}  // namespace

core::Result<config::PgTransport> pg_transport(const std::string& url) {
  char* error = nullptr;
  std::unique_ptr<PQconninfoOption, OptionsFree> options(PQconninfoParse(url.c_str(), &error));
  if (!options) {
    // The message may quote the URL, password included: it is dropped.
    PQfreemem(error);
    return core::fatal_error("libpq cannot parse the connection string");
  }
  config::PgTransport transport;
  transport.sslmode = effective(options.get(), "sslmode");
  const auto hosts = split_list(effective(options.get(), "host"));
  const auto addresses = split_list(effective(options.get(), "hostaddr"));
  for (std::size_t i = 0; i < std::max(hosts.size(), addresses.size()); ++i) {
    const bool has_address = i < addresses.size() && !addresses[i].empty();
    transport.hosts.push_back(has_address ? addresses[i] : (i < hosts.size() ? hosts[i] : ""));
  }
  return transport;
}

std::vector<std::string> database_tls_warnings(const config::DatabaseConfig& database) {
  std::vector<std::string> warnings;
  const auto check = [&](const char* key, const std::string& url) {
    if (url.empty()) return;
    const auto transport = pg_transport(url);
    if (!transport) return;  // the connection attempt reports it
    if (auto warning = config::database_tls_warning(key, transport.value())) warnings.push_back(std::move(*warning));
  };
  check("database.url", database.url);
  check("database.listen_url", database.listen_url);
  return warnings;
}

}  // namespace outboxd::pg
