// Settings that work but expose something: database TLS weaker than verify-full, password files others can read.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace outboxd::config {

// Whether a libpq host entry stays on this machine: "localhost", 127.0.0.0/8,
// ::1, or a Unix socket (a directory, "@" and an abstract name, or "" for
// libpq's default).
bool is_loopback_host(std::string_view host);

// Where a libpq connection string connects and how: each entry of host (or
// of hostaddr where given) and the sslmode libpq will use.
struct PgTransport {
  std::vector<std::string> hosts;
  std::string sslmode;  // "disable" ... "verify-full"
};

// A warning for `key` (e.g. "database.url") when some host is not loopback
// and sslmode is weaker than verify-full, naming what that leaves open;
// nothing otherwise.
std::optional<std::string> database_tls_warning(std::string_view key, const PgTransport& transport);

// A warning for `key` (e.g. "database.password_file") when the permission
// bits `mode` give the group or others any access (mode & 077); nothing otherwise.
std::optional<std::string> secret_file_warning(std::string_view key, std::string_view path, unsigned mode);

// secret_file_warning for database.password_file and broker.password_file
// (and each outbox's and the catalog's own database password_file),
// with the modes read from the files now; a file that cannot be examined any
// more is left to the next read to report.
std::vector<std::string> secret_file_warnings(const Config& config);

}  // namespace outboxd::config
