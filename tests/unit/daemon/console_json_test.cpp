// Unit tests of which console requests are answered with JSON: /api/ of one outbox, /o/<name>/api/ of many.
#include <catch2/catch.hpp>

#include "daemon/console/console_app.hpp"

using outboxd::daemon::wants_json;

namespace {

bool json_for(const std::string& path, const std::string& accept = "") {
  httplib::Request request;
  request.path = path;
  if (!accept.empty()) request.headers.emplace("Accept", accept);
  return wants_json(request);
}

}  // namespace

TEST_CASE("The console answers JSON under /api/ and /o/<name>/api/, or when asked to", "[console]") {
  CHECK(json_for("/api/status"));
  CHECK(json_for("/o/acme/api/parked"));
  CHECK(json_for("/o/api/api/status"));  // an outbox named api
  CHECK_FALSE(json_for("/o/api/parked"));
  CHECK_FALSE(json_for("/o/acme/parked"));
  CHECK_FALSE(json_for("/sessions/x/api/y"));
  CHECK_FALSE(json_for("/o/acme/sessions/x/api/y"));
  CHECK_FALSE(json_for("/o/acme"));
  CHECK(json_for("/o/acme/parked", "application/json"));
}
