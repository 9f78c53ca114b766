// The start-up warnings' decisions: database TLS to remote hosts, password file permissions.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/loader.hpp"
#include "config/security_warnings.hpp"

using namespace outboxd::config;
namespace fs = std::filesystem;

TEST_CASE("Loopback hosts", "[config][security]") {
  for (const char* host : {"", "/var/run/postgresql", "localhost", "localhost.", "127.0.0.1", "127.1.2.3", "::1",
                           "[::1]", "@abstract"}) {
    INFO(host);
    CHECK(is_loopback_host(host));
  }
  for (const char* host : {"db.example.com", "10.0.0.5", "128.0.0.1", "::2", "localhost.example.com", "0.0.0.0",
                           "127.evil.example", "127.0.0.1.evil.example"}) {
    INFO(host);
    CHECK_FALSE(is_loopback_host(host));
  }
}

TEST_CASE("Database TLS weaker than verify-full to a remote host is a warning", "[config][security]") {
  CHECK_FALSE(database_tls_warning("database.url", {{"db.example.com"}, "verify-full"}));
  CHECK_FALSE(database_tls_warning("database.url", {{"localhost", "/tmp"}, "disable"}));

  const auto preferred = database_tls_warning("database.url", {{"127.0.0.1", "db.example.com"}, "prefer"});
  REQUIRE(preferred);
  CHECK(*preferred ==
        "database.url: sslmode is prefer for db.example.com, not loopback: the connection may be unencrypted and "
        "the server is not authenticated: anyone on the path can read and change the outbox; add "
        "sslmode=verify-full and sslrootcert=<CA file>");
  CHECK(database_tls_warning("database.listen_url", {{"10.0.0.5"}, "require"})->find(
            "database.listen_url: sslmode is require for 10.0.0.5, not loopback: the connection is encrypted but "
            "the server is not authenticated") == 0);
  CHECK(database_tls_warning("database.url", {{"a", "b"}, "verify-ca"})->find("for a, b, not loopback: the "
                                                                              "server's certificate is checked") !=
        std::string::npos);
}

TEST_CASE("Password files open to group or others are a warning", "[config][security]") {
  CHECK_FALSE(secret_file_warning("database.password_file", "/run/secrets/db", 0100600));
  CHECK_FALSE(secret_file_warning("database.password_file", "/run/secrets/db", 0100400));
  CHECK(*secret_file_warning("database.password_file", "/run/secrets/db", 0100644) ==
        "database.password_file: \"/run/secrets/db\" is accessible to group or others (mode 0644); chmod 600 it");
  CHECK(secret_file_warning("broker.password_file", "p", 0100640));
  CHECK(secret_file_warning("broker.password_file", "p", 0100604));
  CHECK(secret_file_warning("broker.password_file", "p", 0100610));
}

TEST_CASE("secret_file_warnings reads the modes of both password files", "[config][security]") {
  const fs::path dir = fs::temp_directory_path() / ("outboxd-security-test-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "db") << "pw\n";
  std::ofstream(dir / "broker") << "pw\n";
  ::chmod((dir / "db").c_str(), 0640);
  ::chmod((dir / "broker").c_str(), 0600);
  auto loaded = load_string("database:\n  url: postgresql://outboxd@127.0.0.1/app\n  password_file: db\n"
                            "broker:\n  url: amqp://127.0.0.1:5672\n  username: u\n  password_file: broker\n",
                            (dir / "outboxd.yaml").string());
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  CHECK(loaded.value().database.password_file == (dir / "db").string());
  const auto warnings = secret_file_warnings(loaded.value());
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].rfind("database.password_file: \"" + (dir / "db").string() + "\" is accessible", 0) == 0);

  ::chmod((dir / "db").c_str(), 0400);
  CHECK(secret_file_warnings(loaded.value()).empty());
  fs::remove_all(dir);
}

TEST_CASE("secret_file_warnings reads an outbox's own password file, not database:'s again", "[config][security]") {
  const fs::path dir = fs::temp_directory_path() / ("outboxd-security-many-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* name : {"shared", "acme"}) std::ofstream(dir / name) << "pw\n";
  ::chmod((dir / "shared").c_str(), 0644);
  ::chmod((dir / "acme").c_str(), 0644);
  auto loaded = load_string("database:\n  url: postgresql://outboxd@127.0.0.1/app\n  password_file: shared\n"
                            "outboxes:\n  - name: acme\n    database: {password_file: acme}\n"
                            "  - name: globex\n    database: {url: \"postgresql://outboxd@127.0.0.1/globex\"}\n"
                            "broker:\n  url: amqp://127.0.0.1:5672\n",
                            (dir / "outboxd.yaml").string());
  INFO(loaded.error_text());
  REQUIRE(loaded.ok());
  const auto warnings = secret_file_warnings(loaded.value());
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0].starts_with("database.password_file: "));
  CHECK(warnings[1].starts_with("outboxes[0].database.password_file: \"" + (dir / "acme").string() + "\""));
  fs::remove_all(dir);
}
