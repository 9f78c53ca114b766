// Unit tests of request-head parsing, refusals and response writing for the HTTP endpoint.
#include <catch2/catch.hpp>

#include "metrics/http_request.hpp"

using namespace outboxd::metrics;

TEST_CASE("The head ends at the first blank line", "[metrics][http]") {
  CHECK(request_head_end("GET / HTTP/1.1\r\nHost: x\r\n") == std::string_view::npos);
  CHECK(request_head_end("GET / HTTP/1.1\r\nHost: x\r\n\r\nbody") == 27);
  CHECK(request_head_end("GET / HTTP/1.1\nHost: x\n\nbody") == 24);
  CHECK(request_head_end("GET / HTTP/1.1\r\n\r\n\n\n") == 18);
}

TEST_CASE("A request line, headers and the body they announce", "[metrics][http]") {
  auto plain = parse_request_head("GET /metrics?name=x HTTP/1.1\r\nHost: a\r\nAccept: */*\r\n\r\n");
  REQUIRE(plain.ok());
  CHECK(plain.value().method == "GET");
  CHECK(plain.value().path == "/metrics");
  CHECK_FALSE(plain.value().has_body);

  CHECK_FALSE(parse_request_head("GET / HTTP/1.0\r\ncontent-length:  0 \r\n\r\n").value().has_body);
  CHECK(parse_request_head("GET / HTTP/1.0\r\ncontent-length: 12\r\n\r\n").value().has_body);
  CHECK(parse_request_head("GET / HTTP/1.1\nTRANSFER-ENCODING: chunked\n\n").value().has_body);
}

TEST_CASE("Malformed heads are rejected", "[metrics][http]") {
  for (const char* head : {"GET /\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n", "GET / HTTP/2\r\n\r\n",
                           "GET / HTTP/1.1 x\r\n\r\n", "G(T / HTTP/1.1\r\n\r\n", "GET /a\x01 HTTP/1.1\r\n\r\n", "\r\n\r\n",
                           "GET / HTTP/1.1\r\nno colon\r\n\r\n", "GET / HTTP/1.1\r\nBad Name: x\r\n\r\n",
                           "GET / HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n"}) {
    INFO(head);
    const auto parsed = parse_request_head(head);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().message.rfind("malformed request: ", 0) == 0);
  }
}

TEST_CASE("Refusals come before routing", "[metrics][http]") {
  CHECK(refusal(parse_request_head("nonsense\r\n\r\n"))->status == 400);
  CHECK(refusal(parse_request_head("POST /metrics HTTP/1.1\r\n\r\n"))->status == 405);
  CHECK(refusal(parse_request_head("OPTIONS * HTTP/1.1\r\n\r\n"))->status == 405);
  CHECK(refusal(parse_request_head("GET * HTTP/1.1\r\n\r\n"))->status == 400);
  CHECK(refusal(parse_request_head("GET http://x/metrics HTTP/1.1\r\n\r\n"))->status == 400);
  CHECK(refusal(parse_request_head("GET /metrics HTTP/1.1\r\nContent-Length: 1\r\n\r\n"))->status == 413);
  CHECK_FALSE(refusal(parse_request_head("GET /anything HTTP/1.1\r\n\r\n")));
  CHECK_FALSE(refusal(parse_request_head("HEAD /healthz HTTP/1.0\r\n\r\n")));
}

TEST_CASE("Responses close the connection and carry their length", "[metrics][http]") {
  const Response ok{200, "text/plain; charset=utf-8", "ok"};
  CHECK(serialize(ok, true) ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n"
        "Connection: close\r\n\r\nok");
  CHECK(serialize(ok, false) ==
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n"
        "Connection: close\r\n\r\n");
  const std::string refused = serialize({405, "text/plain; charset=utf-8", "method not allowed"}, true);
  CHECK(refused.rfind("HTTP/1.1 405 Method Not Allowed\r\n", 0) == 0);
  CHECK(refused.find("\r\nAllow: GET, HEAD\r\n") != std::string::npos);
}
