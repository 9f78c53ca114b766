// Parsing of the config's connection strings: AMQP URLs, libpq URIs and conninfo strings.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.hpp"

namespace outboxd::config {

// "scheme://userinfo@hostport/path?query#fragment", as views into the text.
struct UriParts {
  std::string_view scheme;
  bool has_userinfo = false;
  std::string_view userinfo;
  std::string_view hostport;
  std::string_view path;      // with its leading '/', or empty
  std::string_view query;     // without the '?'
  std::string_view fragment;  // without the '#'
  bool has_query = false;
  bool has_fragment = false;
};

// nullopt unless the text starts with "scheme://" (scheme: letters, digits, + - .).
std::optional<UriParts> split_uri(std::string_view text);

struct AmqpEndpoint {
  bool tls = false;  // amqps://
  std::string host;  // without IPv6 brackets
  int port = 0;      // the scheme's default (5672 / 5671) when the URL names none
};

// amqp://host[:port] or amqps://host[:port]; no credentials, path or query.
// The error message never repeats a password.
core::Result<AmqpEndpoint> parse_amqp_url(std::string_view url);

// What a libpq connection string says about where it connects. Fields the
// string leaves out are empty.
struct PgTarget {
  std::string host;  // may be a comma-separated list, or a socket directory
  std::string port;
  std::string dbname;
  std::string user;
  bool has_password = false;
};

// A libpq URI (postgresql:// or postgres://) or a conninfo string (key=value ...).
core::Result<PgTarget> parse_pg_url(std::string_view url);

// One key=value pair of a conninfo string, with the value unquoted.
struct ConninfoPair {
  std::string key;
  std::string value;
};

// nullopt when the text is not a well-formed conninfo string.
std::optional<std::vector<ConninfoPair>> parse_conninfo(std::string_view text);

// A conninfo value starting at `pos` (quoted with '...' or bare): the
// unescaped value and the offset just past it.
struct ConninfoValue {
  std::string value;
  std::size_t end = 0;
  bool ok = true;  // false: unterminated quote
};
ConninfoValue scan_conninfo_value(std::string_view text, std::size_t pos);

std::string percent_decode(std::string_view text);

}  // namespace outboxd::config
