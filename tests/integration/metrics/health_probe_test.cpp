// probe_healthz, the client of `outboxd healthcheck`, against the real server over loopback sockets.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "http/health_probe.hpp"
#include "http/http_server.hpp"

using namespace outboxd;
using namespace outboxd::metrics;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

constexpr milliseconds kTimeout{2000};

std::string at(const char* host, int port) { return std::string(host) + ":" + std::to_string(port); }

}  // namespace

TEST_CASE("The probe is ok while /healthz answers 200 and names the reply otherwise", "[metrics][probe]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.start("127.0.0.1:0").ok());
  const std::string listen = at("127.0.0.1", server.port());

  const auto before = probe_healthz(listen, kTimeout);
  REQUIRE_FALSE(before.ok());
  CHECK(before.error().kind == core::ErrorKind::transient);
  CHECK(before.error().message ==
        "GET http://127.0.0.1:" + std::to_string(server.port()) + "/healthz: 503 main loop not started");

  beat(health, std::chrono::steady_clock::now());
  CHECK(probe_healthz(listen, kTimeout).ok());
}

TEST_CASE("A wildcard listen address is probed on loopback", "[metrics][probe]") {
  Registry registry;
  Health health;
  beat(health, std::chrono::steady_clock::now());
  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.start("0.0.0.0:0").ok());
  const auto probed = probe_healthz(at("0.0.0.0", server.port()), kTimeout);
  CHECK(probed.ok());
  if (!probed.ok()) FAIL_CHECK(probed.error().message);
}

TEST_CASE("An IPv6 wildcard listen address is probed on ::1", "[metrics][probe]") {
  Registry registry;
  Health health;
  beat(health, std::chrono::steady_clock::now());
  HttpServer server(registry, health, seconds(30));
  if (const auto started = server.start("[::1]:0"); !started.ok()) {
    WARN("no IPv6 loopback here: " << started.error().message);
    return;
  }
  CHECK(probe_healthz("[::]:" + std::to_string(server.port()), kTimeout).ok());
}

TEST_CASE("No daemon listening is a transient error naming the URL", "[metrics][probe]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.start("127.0.0.1:0").ok());
  const int port = server.port();
  server.stop();

  const auto probed = probe_healthz(at("127.0.0.1", port), kTimeout);
  REQUIRE_FALSE(probed.ok());
  CHECK(probed.error().kind == core::ErrorKind::transient);
  CHECK(probed.error().message.rfind("GET http://127.0.0.1:" + std::to_string(port) + "/healthz: ", 0) == 0);
}

TEST_CASE("A listen address without a fixed port cannot be probed", "[metrics][probe]") {
  const auto any_port = probe_healthz("127.0.0.1:0", kTimeout);
  REQUIRE_FALSE(any_port.ok());
  CHECK(any_port.error().kind == core::ErrorKind::fatal);
  CHECK(any_port.error().message.find("port 0") != std::string::npos);
  CHECK_FALSE(probe_healthz("no-port", kTimeout).ok());
}
