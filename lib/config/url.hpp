// Parsing of the config's connection strings: AMQP URLs by hand, libpq strings by libpq itself.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "core/result.hpp"

namespace outboxd::config {

// amqp://host[:port] or amqps://host[:port]; no credentials, path or query.
// The error message never repeats a password.
core::Result<AmqpEndpoint> parse_amqp_url(std::string_view url);

// Parses `url` into broker.url, broker.endpoint and broker.tls.enabled: for
// code that builds a BrokerConfig without a config file (tests, tools).
core::Status set_broker_url(BrokerConfig& broker, std::string url);

// A libpq URI (postgresql:// or postgres://) or a conninfo string (key=value
// ...), parsed by PQconninfoParse. Also refused: a port that is not a number
// and, in a URI, an '@' outside the user info (an unescaped '/' or '@' in a
// password moves part of it into the host, port or database name). Errors
// quote nothing of the string: libpq's own message is kept with every quoted
// fragment withheld.
core::Result<PgTarget> parse_pg_url(std::string_view url);

// Parses `url` into database.url and database.target: for code that builds a
// DatabaseConfig without a config file (tests, tools).
core::Status set_database_url(DatabaseConfig& database, std::string url);

// What must never be shown of a database connection: the url's password and
// sslpassword, and database.password.
std::vector<std::string> database_secrets(const DatabaseConfig& database);

// "user@host:port/dbname?sslmode=mode": never a password, and with any
// text equal to one of `secrets` withheld (a password can equal a host name).
std::string describe(const PgTarget& target, const std::vector<std::string>& secrets);

// `text` with each non-empty secret replaced by "***".
std::string withhold(std::string text, const std::vector<std::string>& secrets);

}  // namespace outboxd::config
