// Parsing of the config's connection strings: AMQP URLs by hand, libpq strings by libpq itself.
#pragma once

#include <string>
#include <string_view>

#include "config/config.hpp"
#include "core/result.hpp"

namespace outboxd::config {

// amqp://host[:port] or amqps://host[:port]; no credentials, path or query.
// The error message never repeats a password.
core::Result<AmqpEndpoint> parse_amqp_url(std::string_view url);

// Parses `url` into broker.url, broker.endpoints (that one) and
// broker.tls.enabled: for code that builds a BrokerConfig without a config
// file (tests, tools).
core::Status set_broker_url(BrokerConfig& broker, std::string url);

// "host:port", with brackets around an IPv6 address: how logs, metrics and
// summaries name a broker node (a URL never carries credentials).
std::string host_port(const AmqpEndpoint& endpoint);

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

// "user@host:port/dbname?sslmode=mode", built from those keywords alone: no
// password or sslpassword reaches it, and the parts shown are shown whole
// (a password equal to the host name leaves the host name as it is).
std::string describe(const PgTarget& target);

// Which database a connection string reaches, whoever logs in:
// "host:port,.../dbname" (the database name defaulting to the user's, as in
// libpq). Two outboxes with one identity and one schema are one outbox.
std::string database_identity(const PgTarget& target);

}  // namespace outboxd::config
