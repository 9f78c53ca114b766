// http.listen held to one truth: each value the config accepts, the HTTP server binds; the others the config refuses.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "config/loader.hpp"
#include "http/http_server.hpp"

using namespace outboxd;

namespace {

// A port nothing listens on now (the kernel's pick for a socket closed at once).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  socklen_t length = sizeof address;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
  ::close(fd);
  return ntohs(address.sin_port);
}

config::LoadResult load_with_listen(const std::string& listen) {
  return config::load_string("database:\n  url: postgresql://outboxd@127.0.0.1:5432/app\n"
                             "broker:\n  url: amqp://127.0.0.1:5672\n"
                             "http:\n  listen: \"" + listen + "\"\n",
                             "outboxd.yaml");
}

}  // namespace

TEST_CASE("every http.listen the config accepts, the HTTP server binds", "[metrics][http][config]") {
  // "P" stands for a free port; every host here resolves on any machine.
  for (const std::string pattern : {"127.0.0.1:P", "localhost:P", "0.0.0.0:P", "[::1]:P", "[::]:P",
                                    "[::ffff:127.0.0.1]:P"}) {
    const std::string port = std::to_string(free_port());
    const std::string listen = pattern.substr(0, pattern.size() - 1) + port;
    INFO(listen);
    const auto loaded = load_with_listen(listen);
    INFO(loaded.error_text());
    REQUIRE(loaded.ok());
    metrics::Registry registry;
    metrics::Health health;
    metrics::HttpServer server(registry, health, std::chrono::seconds(30));
    const auto started = server.start(loaded.value().http.listen);
    INFO((started ? std::string() : started.error().message));
    CHECK(started.ok());
    CHECK(std::to_string(server.port()) == port);
  }
}

TEST_CASE("an http.listen the HTTP server would refuse, the config refuses first", "[metrics][http][config]") {
  for (const std::string listen : {"ho[st:9187", "[zz]:9187", "a:000080", "::1:9187", "[::1]9187", "host :80",
                                   "127.0.0.1:65536", "9187", ":9187"}) {
    INFO(listen);
    metrics::Registry registry;
    metrics::Health health;
    metrics::HttpServer server(registry, health, std::chrono::seconds(30));
    CHECK_FALSE(server.start(listen).ok());
    const auto loaded = load_with_listen(listen);
    REQUIRE_FALSE(loaded.ok());
    CHECK(loaded.error_text().find("outboxd.yaml:6:11: http.listen: ") != std::string::npos);
  }
  // The server could bind port 0, but to a port nobody can know.
  const auto any_port = load_with_listen("127.0.0.1:0");
  REQUIRE_FALSE(any_port.ok());
  CHECK(any_port.error_text() == "outboxd.yaml:6:11: http.listen: port 0 would be chosen anew at every start; give "
                                 "a fixed port such as 9187");
}
