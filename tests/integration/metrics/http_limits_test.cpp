// Hostile clients against the HTTP endpoints: slow senders, huge bodies and heads, other methods.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "http/http_server.hpp"

using namespace outboxd::metrics;
using std::chrono::milliseconds;
using std::chrono::seconds;
using Clock = std::chrono::steady_clock;

namespace {

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
  return fd;
}

bool send_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

// Everything the server sends until it closes, or until `limit` passes.
std::string read_until_close(int fd, milliseconds limit) {
  std::string received;
  const auto deadline = Clock::now() + limit;
  char buffer[4096];
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
    if (::poll(&p, 1, static_cast<int>(std::max<long>(left, 0))) <= 0) break;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n <= 0) break;
    received.append(buffer, static_cast<std::size_t>(n));
  }
  return received;
}

// One request on a fresh connection; the raw response, "" if none came within `limit`.
std::string round_trip(int port, std::string_view request, milliseconds limit = milliseconds(2000)) {
  const int fd = connect_to(port);
  send_all(fd, request);
  std::string response = read_until_close(fd, limit);
  ::close(fd);
  return response;
}

// kB from a "Name:   1234 kB" line of /proc/self/status.
long status_kb(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(name + ":", 0) == 0) return std::stol(line.substr(name.size() + 1));
  }
  FAIL("no " << name << " in /proc/self/status");
  return 0;
}

struct Served {
  Registry registry;
  Health health;
  HttpServer server{registry, health, seconds(30)};
  Served() {
    beat(health, Clock::now());
    REQUIRE(server.start("127.0.0.1:0").ok());
  }
};

}  // namespace

TEST_CASE("Slow clients do not starve /healthz", "[metrics][http][limits]") {
  Served served;
  std::vector<int> slow;
  for (int i = 0; i < 10; ++i) {
    slow.push_back(connect_to(served.server.port()));
    REQUIRE(send_all(slow.back(), "GET /metrics HTTP/1.1\r\nHost: x\r\n"));
  }
  // The slow clients keep trickling one header byte each, well inside any read timeout.
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(milliseconds(200));
    for (const int fd : slow) send_all(fd, "X");
  }
  const auto before = Clock::now();
  const std::string response = round_trip(served.server.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                                        milliseconds(1000));
  CHECK(response.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(response.substr(response.size() - 2) == "ok");
  CHECK(Clock::now() - before < milliseconds(1000));
  for (const int fd : slow) ::close(fd);
}

TEST_CASE("200 idle connections do not keep /healthz out", "[metrics][http][limits]") {
  Served served;
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) idle.push_back(connect_to(served.server.port()));
  std::this_thread::sleep_for(milliseconds(100));  // all accepted, none sending
  for (int probe = 0; probe < 10; ++probe) {
    const auto before = Clock::now();
    const std::string response = round_trip(served.server.port(), "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                                          milliseconds(1000));
    INFO("probe " << probe);
    CHECK(response.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(Clock::now() - before < milliseconds(1000));
  }
  for (const int fd : idle) ::close(fd);
}

TEST_CASE("A request that never completes is cut off at the whole-request deadline", "[metrics][http][limits]") {
  Served served;
  const int fd = connect_to(served.server.port());
  REQUIRE(send_all(fd, "GET /metrics HTTP/1.1\r\n"));
  const auto before = Clock::now();
  bool closed = false;
  while (!closed && Clock::now() - before < seconds(10)) {
    send_all(fd, "X");  // fails once the server has closed
    pollfd p{fd, POLLIN, 0};
    // Readable: the server closed, possibly after a last word.
    if (::poll(&p, 1, 250) > 0) closed = (read_until_close(fd, milliseconds(500)), true);
  }
  ::close(fd);
  CHECK(closed);
  const auto took = Clock::now() - before;
  CHECK(took > seconds(4));
  CHECK(took < seconds(7));
}

TEST_CASE("A 400 MB request body is refused without being read into memory", "[metrics][http][limits]") {
  Served served;
  const long peak_before = status_kb("VmHWM");
  const int fd = connect_to(served.server.port());
  constexpr std::size_t kBody = 400u << 20;
  send_all(fd, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: " +
                   std::to_string(kBody) + "\r\n\r\n");
  // The body goes out while the server reads, and stops at its answer, as a
  // client reading its socket does: the answer is then always there to read.
  const std::string chunk(64 << 10, 'x');
  std::size_t sent = 0;
  while (sent < kBody) {
    pollfd p{fd, POLLIN | POLLOUT, 0};
    if (::poll(&p, 1, 2000) <= 0 || (p.revents & POLLOUT) == 0 || (p.revents & POLLIN) != 0) break;
    const ssize_t n = ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n <= 0) break;
    sent += static_cast<std::size_t>(n);
  }
  const std::string response = read_until_close(fd, milliseconds(2000));
  ::close(fd);
  INFO("sent " << sent << " bytes before the server answered");
  CHECK(status_kb("VmHWM") - peak_before < 4096);
  // The server answers and closes long before the body is through.
  CHECK(sent < kBody);
  CHECK(response.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0) == 0);
}

TEST_CASE("Only GET and HEAD are served", "[metrics][http][limits]") {
  Served served;
  const int port = served.server.port();

  const std::string posted = round_trip(port, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  CHECK(posted.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0) == 0);
  CHECK(posted.find("\r\nAllow: GET, HEAD\r\n") != std::string::npos);
  CHECK(round_trip(port, "DELETE /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405 ", 0) == 0);
  CHECK(round_trip(port, "OPTIONS * HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 405 ", 0) == 0);

  const std::string head = round_trip(port, "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  CHECK(head.find("\r\nContent-Length: 2\r\n") != std::string::npos);
  CHECK(head.substr(head.size() - 4) == "\r\n\r\n");  // no body

  // A GET that announces a body is refused rather than read.
  const std::string with_body = round_trip(port, "GET /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  CHECK(with_body.rfind("HTTP/1.1 413 ", 0) == 0);
  CHECK(round_trip(port, "GET /metrics HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").rfind("HTTP/1.1 413 ", 0) == 0);
}

TEST_CASE("Request heads past the size limit are refused", "[metrics][http][limits]") {
  Served served;
  const int port = served.server.port();

  const std::string long_line = round_trip(port, "GET /" + std::string(16 << 10, 'a') + " HTTP/1.1\r\n\r\n");
  CHECK(long_line.rfind("HTTP/1.1 431 ", 0) == 0);

  std::string many_headers = "GET /healthz HTTP/1.1\r\n";
  for (int i = 0; i < 1000; ++i) many_headers += "X-Filler-" + std::to_string(i) + ": y\r\n";
  CHECK(round_trip(port, many_headers + "\r\n").rfind("HTTP/1.1 431 ", 0) == 0);

  CHECK(round_trip(port, "garbage\r\n\r\n").rfind("HTTP/1.1 400 ", 0) == 0);
  CHECK(round_trip(port, "GET /healthz HTTP/1.1\r\n\r\n").rfind("HTTP/1.1 200 ", 0) == 0);
}

TEST_CASE("Running out of file descriptors pauses accepting instead of spinning", "[metrics][http][limits]") {
  Served served;
  const int port = served.server.port();
  // One request first. In the sanitizer build, UBSan checks a connection's
  // stream type the first time it meets it through a pipe of its own, which
  // a process out of descriptors cannot open; it would report the stream as
  // invalid. Later checks hit its cache; the server is done with the
  // connection's stream before the client sees it closed.
  const int warm = connect_to(port);
  send_all(warm, "GET /healthz HTTP/1.1\r\n\r\n");
  CHECK(read_until_close(warm, milliseconds(2000)).rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
  ::close(warm);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  std::vector<int> clients;
  for (int i = 0; i < 6; ++i) clients.push_back(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));

  // Room for one more descriptor: the server accepts one connection, then
  // accept fails with EMFILE while five more wait in the backlog.
  rlimit old{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &old) == 0);
  const auto open_now = static_cast<rlim_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                                          std::filesystem::directory_iterator{}));
  rlimit tight = old;
  tight.rlim_cur = open_now;  // the iterator's own descriptor is closed again: one free
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
  for (const int fd : clients) ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);

  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  std::this_thread::sleep_for(milliseconds(500));
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &old) == 0);
  const auto cpu_us = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1000000L + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  };
  CHECK(cpu_us(after) - cpu_us(before) < 200000);

  // With descriptors back, the waiting connections are served.
  for (const int fd : clients) send_all(fd, "GET /healthz HTTP/1.1\r\n\r\n");
  for (const int fd : clients) {
    CHECK(read_until_close(fd, milliseconds(2000)).rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    ::close(fd);
  }
}
