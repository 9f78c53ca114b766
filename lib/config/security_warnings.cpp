// Decisions behind the start-up warnings on database TLS and password file permissions.
#include "config/security_warnings.hpp"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cstdio>

#include "config/outboxes.hpp"

namespace outboxd::config {

bool is_loopback_host(std::string_view host) {
  if (host.empty() || host.front() == '/' || host.front() == '@') return true;
  if (host == "localhost" || host == "localhost." || host == "::1" || host == "[::1]") return true;
  in_addr v4{};
  const std::string text(host);
  return ::inet_pton(AF_INET, text.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::optional<std::string> database_tls_warning(std::string_view key, const PgTransport& transport) {
  if (transport.sslmode == "verify-full") return std::nullopt;
  std::string remote;
  for (const std::string& host : transport.hosts) {
    if (!is_loopback_host(host)) remote += (remote.empty() ? "" : ", ") + host;
  }
  if (remote.empty()) return std::nullopt;
  const std::string& mode = transport.sslmode;
  const char* exposure = mode == "verify-ca"  ? "the server's certificate is checked but not that it names the host"
                         : mode == "require" ? "the connection is encrypted but the server is not authenticated, "
                                               "so anyone on the path can impersonate it"
                                             : "the connection may be unencrypted and the server is not "
                                               "authenticated: anyone on the path can read and change the outbox";
  return std::string(key) + ": sslmode is " + mode + " for " + remote + ", not loopback: " + exposure +
         "; add sslmode=verify-full and sslrootcert=<CA file>";
}

std::optional<std::string> secret_file_warning(std::string_view key, std::string_view path, unsigned mode) {
  if ((mode & 077U) == 0) return std::nullopt;
  char octal[8];
  std::snprintf(octal, sizeof octal, "%04o", mode & 07777U);
  return std::string(key) + ": \"" + std::string(path) + "\" is accessible to group or others (mode " + octal +
         "); chmod 600 it";
}

std::vector<std::string> secret_file_warnings(const Config& config) {
  std::vector<std::string> warnings;
  const auto check = [&](std::string_view key, const std::string& path) {
    struct stat status {};
    if (path.empty() || ::stat(path.c_str(), &status) != 0) return;
    if (auto warning = secret_file_warning(key, path, status.st_mode)) warnings.push_back(std::move(*warning));
  };
  for (const auto& section : database_sections(config)) {
    // An outbox's password file that is database:'s was checked as database:'s.
    if (section.path != "database" && section.database->password_file == config.database.password_file) continue;
    check(section.path + ".password_file", section.database->password_file);
  }
  check("broker.password_file", config.broker.password_file);
  return warnings;
}

}  // namespace outboxd::config
