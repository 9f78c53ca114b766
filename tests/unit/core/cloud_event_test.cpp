// CloudEvents rules without AMQP: extension names, RFC 3339 time, URI-references.
#include <catch2/catch.hpp>

#include <chrono>

#include "core/cloud_event.hpp"

using outboxd::core::is_extension_name;
using outboxd::core::is_uri_reference;
using outboxd::core::rfc3339_utc;
using std::chrono::microseconds;
using std::chrono::system_clock;

TEST_CASE("extension names are 1..20 of a-z0-9 and not an attribute the daemon sets", "[core][cloudevents]") {
  CHECK(is_extension_name("tenant"));
  CHECK(is_extension_name("region2"));
  CHECK(is_extension_name("dataschema"));
  CHECK(is_extension_name("abcdefghijklmnopqrst"));   // 20
  CHECK_FALSE(is_extension_name("abcdefghijklmnopqrstu"));  // 21
  CHECK_FALSE(is_extension_name(""));
  CHECK_FALSE(is_extension_name("Tenant"));
  CHECK_FALSE(is_extension_name("tenant_id"));
  CHECK_FALSE(is_extension_name("tenant-id"));
  CHECK_FALSE(is_extension_name("tenant.id"));
  CHECK_FALSE(is_extension_name("t\xc3\xa9nant"));
  for (const char* kept : {"id", "source", "specversion", "type", "time", "subject", "datacontenttype", "data",
                           "traceparent"}) {
    INFO(kept);
    CHECK_FALSE(is_extension_name(kept));
  }
}

TEST_CASE("time is RFC 3339 in UTC with microseconds", "[core][cloudevents]") {
  const system_clock::time_point epoch;
  CHECK(rfc3339_utc(epoch) == "1970-01-01T00:00:00.000000Z");
  CHECK(rfc3339_utc(epoch + microseconds(1700000000123456)) == "2023-11-14T22:13:20.123456Z");
  CHECK(rfc3339_utc(epoch + microseconds(951782400000001)) == "2000-02-29T00:00:00.000001Z");
  // Before 1970 the fraction still counts forward from the whole second.
  CHECK(rfc3339_utc(epoch - microseconds(1)) == "1969-12-31T23:59:59.999999Z");
}

TEST_CASE("source must be a URI-reference", "[core][cloudevents]") {
  for (const char* good : {"/orders", "orders", "https://shop.example/orders?x=1#f", "urn:uuid:6e8bc430-9c3a",
                           "mailto:ops@shop.example", "//host/path", "/a%20b", "./a:b", "x+y.z-1:rest"}) {
    INFO(good);
    CHECK(is_uri_reference(good));
  }
  for (const char* bad : {"", "has space", "/a%2", "/a%zz", "1http://x", "a:b/c d", "/caf\xc3\xa9", "tab\there",
                          "<x>", "a\"b", ":nothing", "a{b}"}) {
    INFO(bad);
    CHECK_FALSE(is_uri_reference(bad));
  }
}
