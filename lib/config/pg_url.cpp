// libpq connection strings, parsed by libpq's own PQconninfoParse; what is shown of them never holds a secret.
#include <libpq-fe.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "config/url.hpp"

namespace outboxd::config {
namespace {

bool is_uri(std::string_view url) { return url.starts_with("postgresql://") || url.starts_with("postgres://"); }

// libpq's parse errors quote the offending text, which may be part of a
// password: each quoted fragment is withheld, except the few one-character
// ones libpq writes itself ("=", "]", ":", "/").
std::string without_quoted_text(std::string_view message) {
  while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) message.remove_suffix(1);
  std::string out;
  std::size_t pos = 0;
  while (pos < message.size()) {
    const auto open = message.find('"', pos);
    const auto close = open == std::string_view::npos ? open : message.find('"', open + 1);
    if (close == std::string_view::npos) {
      out += message.substr(pos);
      break;
    }
    const std::string_view quoted = message.substr(open + 1, close - open - 1);
    const bool libpq_text = quoted == "=" || quoted == "]" || quoted == ":" || quoted == "/";
    out.append(message.substr(pos, open - pos));
    if (libpq_text) out.append(1, '"').append(quoted).append(1, '"');
    else out.append("(withheld)");
    pos = close + 1;
  }
  return out;
}

// The checks libpq leaves to connection time, where its message would quote the value.
core::Status check_target(std::string_view url, const PgTarget& target) {
  const std::string port = target.get("port");
  if (!std::all_of(port.begin(), port.end(), [](char c) { return (c >= '0' && c <= '9') || c == ','; })) {
    return core::fatal_error(is_uri(url) ? "the port is not a number (a '/' in a password must be written %2F)"
                                         : "the port is not a number");
  }
  if (!is_uri(url)) return {};
  for (const char* key : {"host", "port", "dbname"}) {
    if (target.get(key).find('@') != std::string::npos) {
      return core::fatal_error("has an '@' outside the user info: write '@' and '/' in a user name or password as "
                               "%40 and %2F");
    }
  }
  return {};
}

// "h1:p1,h2:p2": libpq pairs a list of hosts with a list of ports, or with one port for all.
std::string hosts_and_ports(const std::string& hosts, const std::string& ports) {
  std::vector<std::string> port_list;
  for (std::size_t start = 0;;) {
    const auto comma = ports.find(',', start);
    port_list.push_back(ports.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  std::string out;
  std::size_t index = 0;
  for (std::size_t start = 0;; ++index) {
    const auto comma = hosts.find(',', start);
    const std::string host = hosts.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::string& port = port_list.size() == 1 ? port_list[0] : port_list[std::min(index, port_list.size() - 1)];
    // "[local]" is how PostgreSQL itself names a Unix-socket connection.
    out += (host.empty() ? "[local]" : host) + ":" + (port.empty() ? "5432" : port);
    if (comma == std::string::npos) break;
    out += ',';
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::string PgTarget::get(std::string_view keyword) const {
  for (const auto& [key, value] : options) {
    if (key == keyword) return value;
  }
  return {};
}

core::Result<PgTarget> parse_pg_url(std::string_view url) {
  if (url.find("://") != std::string_view::npos && !is_uri(url)) {
    return core::fatal_error("a libpq URI must start with postgresql:// or postgres://");
  }
  const std::string text(url);
  char* raw_error = nullptr;
  const std::unique_ptr<PQconninfoOption, decltype(&PQconninfoFree)> options(PQconninfoParse(text.c_str(), &raw_error),
                                                                            &PQconninfoFree);
  const std::unique_ptr<char, decltype(&PQfreemem)> error(raw_error, &PQfreemem);
  if (!options) {
    return core::fatal_error("must be a libpq URI (postgresql://user@host:5432/dbname) or a conninfo string "
                             "(host=... dbname=...); libpq: " +
                             (error ? without_quoted_text(error.get()) : std::string("out of memory")));
  }
  PgTarget target;
  for (const PQconninfoOption* option = options.get(); option->keyword != nullptr; ++option) {
    if (option->val != nullptr) target.options.emplace_back(option->keyword, option->val);
  }
  // "" parses to nothing: not a connection string at all.
  if (target.options.empty()) return core::fatal_error("sets no connection keyword (host=... dbname=...)");
  if (auto checked = check_target(url, target); !checked) return checked.error();
  return target;
}

core::Status set_database_url(DatabaseConfig& database, std::string url) {
  auto target = parse_pg_url(url);
  if (!target) return core::Error{target.error().kind, "database.url " + target.error().message};
  database.url = std::move(url);
  database.target = std::move(target).value();
  return {};
}

namespace {

std::string host_of(const PgTarget& target) {
  return target.get("host").empty() ? target.get("hostaddr") : target.get("host");
}

}  // namespace

std::string database_identity(const PgTarget& target) {
  const std::string dbname = target.get("dbname").empty() ? target.get("user") : target.get("dbname");
  return hosts_and_ports(host_of(target), target.get("port")) + "/" + dbname;
}

std::string describe(const PgTarget& target) {
  const std::string host = host_of(target);
  // Appended piece by piece: GCC 12 at -O3 warns (-Wrestrict, a false positive) on "literal" + string.
  std::string out;
  if (!target.get("user").empty()) out.append(target.get("user")).append(1, '@');
  out.append(hosts_and_ports(host, target.get("port")));
  if (!target.get("dbname").empty()) out.append(1, '/').append(target.get("dbname"));
  if (!target.get("sslmode").empty()) out.append("?sslmode=").append(target.get("sslmode"));
  return out;
}

}  // namespace outboxd::config
