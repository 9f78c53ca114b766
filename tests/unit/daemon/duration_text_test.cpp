// The durations of --older-than, --since and --until.
#include <catch2/catch.hpp>

#include "daemon/operator/duration_text.hpp"

using outboxd::daemon::parse_duration;
using namespace std::chrono_literals;

TEST_CASE("durations are a whole number and one unit", "[daemon][duration]") {
  CHECK(parse_duration("90s") == std::optional(std::chrono::milliseconds(90s)));
  CHECK(parse_duration("10m") == std::optional(std::chrono::milliseconds(10min)));
  CHECK(parse_duration("2h") == std::optional(std::chrono::milliseconds(2h)));
  CHECK(parse_duration("7d") == std::optional(std::chrono::milliseconds(168h)));
  CHECK(parse_duration("0s") == std::optional(std::chrono::milliseconds(0)));
}

TEST_CASE("anything else is no duration", "[daemon][duration]") {
  for (const char* text : {"", "h", "10", "10x", "1.5h", "-1h", " 1h", "1h ", "1 h", "2026-12-01", "99999999999d"}) {
    INFO(text);
    CHECK_FALSE(parse_duration(text).has_value());
  }
}
