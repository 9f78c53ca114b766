// The HTTP endpoints over loopback sockets: /metrics, /healthz, /readyz, 404, 405, bind failures.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <httplib.h>

#include <chrono>
#include <string>

#include "http/http_server.hpp"

using namespace outboxd;
using namespace outboxd::metrics;
using std::chrono::seconds;

namespace {

struct Reply {
  int status = 0;
  std::string body;
  std::string content_type;
};

Reply get(const std::string& host, int port, const std::string& path) {
  httplib::Client client(host, port);
  client.set_connection_timeout(seconds(5));
  client.set_read_timeout(seconds(5));
  auto result = client.Get(path.c_str());
  REQUIRE(result);  // the server answered at all
  return {result->status, result->body, result->get_header_value("Content-Type")};
}

Reply get(int port, const std::string& path) { return get("127.0.0.1", port, path); }

void beat_now(Health& health) { beat(health, std::chrono::steady_clock::now()); }

}  // namespace

TEST_CASE("GET /metrics serves the registry in Prometheus text format", "[metrics][http]") {
  Registry registry;
  Health health;
  registry.counter("outboxd_published_total", "Messages the broker accepted.", {{"destination", "orders"}}).inc(3);
  registry.gauge("outboxd_in_flight", "Unsettled messages.").set(2);

  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.port() == 0);
  const auto started = server.start("127.0.0.1:0");
  REQUIRE(started.ok());
  REQUIRE(server.port() > 0);

  const Reply first = get(server.port(), "/metrics");
  CHECK(first.status == 200);
  CHECK(first.content_type == "text/plain; version=0.0.4");
  CHECK(first.body ==
        "# HELP outboxd_published_total Messages the broker accepted.\n"
        "# TYPE outboxd_published_total counter\n"
        "outboxd_published_total{destination=\"orders\"} 3\n"
        "# HELP outboxd_in_flight Unsettled messages.\n"
        "# TYPE outboxd_in_flight gauge\n"
        "outboxd_in_flight 2\n");

  // Each scrape renders afresh.
  registry.counter("outboxd_published_total", "Messages the broker accepted.", {{"destination", "orders"}}).inc();
  CHECK(get(server.port(), "/metrics").body.find("outboxd_published_total{destination=\"orders\"} 4\n") !=
        std::string::npos);
}

TEST_CASE("GET /healthz follows the main loop's heartbeat", "[metrics][http]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.start("127.0.0.1:0").ok());

  const Reply before = get(server.port(), "/healthz");
  CHECK(before.status == 503);
  CHECK(before.body == "main loop not started");

  beat_now(health);
  const Reply alive = get(server.port(), "/healthz");
  CHECK(alive.status == 200);
  CHECK(alive.body == "ok");
  CHECK(alive.content_type == "text/plain; charset=utf-8");

  // A heartbeat 45 s old: the loop is stuck.
  health.loop_heartbeat_ms = steady_ms(std::chrono::steady_clock::now() - seconds(45));
  const Reply stale = get(server.port(), "/healthz");
  CHECK(stale.status == 503);
  CHECK(stale.body.rfind("main loop stalled: last turn 4", 0) == 0);
  CHECK(stale.body.find("(limit 30 s)") != std::string::npos);

  beat_now(health);
  CHECK(get(server.port(), "/healthz").status == 200);
}

TEST_CASE("GET /readyz reports what is missing until everything is up", "[metrics][http]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.start("127.0.0.1:0").ok());

  Reply reply = get(server.port(), "/readyz");
  CHECK(reply.status == 503);
  CHECK(reply.body == "not ready: database down, broker down, no leases held");

  health.database_up = true;
  health.leases_held = true;
  reply = get(server.port(), "/readyz");
  CHECK(reply.status == 503);
  CHECK(reply.body == "not ready: broker down");

  health.broker_up = true;
  reply = get(server.port(), "/readyz");
  CHECK(reply.status == 200);
  CHECK(reply.body == "ok");

  health.stopping = true;
  reply = get(server.port(), "/readyz");
  CHECK(reply.status == 503);
  CHECK(reply.body == "not ready: stopping");

  // Readiness is not liveness: a stopping daemon whose loop turns is alive.
  beat_now(health);
  CHECK(get(server.port(), "/healthz").status == 200);
}

TEST_CASE("Other paths are 404, other methods 405", "[metrics][http]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.start("127.0.0.1:0").ok());

  const Reply missing = get(server.port(), "/nope");
  CHECK(missing.status == 404);
  CHECK(missing.body == "not found");
  CHECK(get(server.port(), "/").status == 404);
  CHECK(get(server.port(), "/metrics/extra").status == 404);

  httplib::Client client("127.0.0.1", server.port());
  auto posted = client.Post("/metrics", "x", "text/plain");
  REQUIRE(posted);
  CHECK(posted->status == 405);
  CHECK(posted->get_header_value("Allow") == "GET, HEAD");
}

TEST_CASE("A port in use is a fatal error naming the address and the reason", "[metrics][http]") {
  Registry registry;
  Health health;
  HttpServer first(registry, health, seconds(30));
  REQUIRE(first.start("127.0.0.1:0").ok());

  HttpServer second(registry, health, seconds(30));
  const std::string listen = "127.0.0.1:" + std::to_string(first.port());
  const auto status = second.start(listen);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().kind == core::ErrorKind::fatal);
  CHECK(status.error().message == "http.listen " + listen + ": Address already in use");
  CHECK(second.port() == 0);
  second.stop();  // harmless on a server that never ran

  // The first one is unaffected.
  CHECK(get(first.port(), "/readyz").status == 503);
}

TEST_CASE("A port held by another program is reported too", "[metrics][http]") {
  const int holder = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(holder >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  REQUIRE(::bind(holder, reinterpret_cast<sockaddr*>(&address), length) == 0);
  REQUIRE(::listen(holder, 1) == 0);
  REQUIRE(::getsockname(holder, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  const std::string listen = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));

  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  const auto status = server.start(listen);
  ::close(holder);
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message == "http.listen " + listen + ": Address already in use");
}

TEST_CASE("Bad listen addresses and a second start are refused", "[metrics][http]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));

  const auto malformed = server.start("127.0.0.1");
  REQUIRE_FALSE(malformed.ok());
  CHECK(malformed.error().message == "http.listen: expected host:port (got \"127.0.0.1\")");

  const auto unresolvable = server.start("no-such-host.invalid:0");
  REQUIRE_FALSE(unresolvable.ok());
  CHECK(unresolvable.error().kind == core::ErrorKind::fatal);
  CHECK(unresolvable.error().message.rfind("http.listen no-such-host.invalid:0: ", 0) == 0);
  CHECK(server.port() == 0);

  // After failures the same server may still start; after a success it may not.
  REQUIRE(server.start("127.0.0.1:0").ok());
  CHECK(server.port() > 0);
  const auto again = server.start("127.0.0.1:0");
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().message == "http.listen 127.0.0.1:0: server already started");
}

TEST_CASE("stop() closes the port and is idempotent", "[metrics][http]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.start("127.0.0.1:0").ok());
  const int port = server.port();
  CHECK(get(port, "/readyz").status == 503);

  server.stop();
  server.stop();
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(seconds(2));
  CHECK_FALSE(client.Get("/readyz"));
}

TEST_CASE("stop() does not wait long for a client holding a keep-alive connection", "[metrics][http]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  REQUIRE(server.start("127.0.0.1:0").ok());
  httplib::Client client("127.0.0.1", server.port());
  client.set_keep_alive(true);
  REQUIRE(client.Get("/metrics"));

  const auto before = std::chrono::steady_clock::now();
  server.stop();
  CHECK(std::chrono::steady_clock::now() - before < seconds(4));
}

TEST_CASE("stop() right after start() returns", "[metrics][http]") {
  Registry registry;
  Health health;
  for (int i = 0; i < 20; ++i) {
    HttpServer server(registry, health, seconds(30));
    REQUIRE(server.start("127.0.0.1:0").ok());
    server.stop();
  }
}

TEST_CASE("An IPv6 loopback listener serves too", "[metrics][http]") {
  Registry registry;
  Health health;
  HttpServer server(registry, health, seconds(30));
  const auto started = server.start("[::1]:0");
  if (!started.ok()) {
    WARN("no IPv6 loopback here: " << started.error().message);
    return;
  }
  beat_now(health);
  CHECK(get("::1", server.port(), "/healthz").body == "ok");
}
