// Unit tests of the core value types: Result, clocks, random sources.
#include <catch2/catch.hpp>

#include "core/clock.hpp"
#include "core/result.hpp"

using namespace outboxd::core;

TEST_CASE("Result holds a value or an error with its kind", "[core]") {
  Result<int> good = 42;
  REQUIRE(good.ok());
  REQUIRE(good.value() == 42);

  Result<int> bad = transient_error("connection lost");
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.error().kind == ErrorKind::transient);
  REQUIRE(bad.error().message == "connection lost");

  Status fine;
  REQUIRE(fine.ok());
  Status broken = fatal_error("permission denied");
  REQUIRE(std::string(to_string(broken.error().kind)) == "fatal");
}

TEST_CASE("ManualClock moves only when advanced", "[core]") {
  ManualClock clock;
  const auto start = clock.now();
  REQUIRE(clock.now() == start);
  clock.advance(std::chrono::milliseconds(250));
  REQUIRE(clock.now() - start == std::chrono::milliseconds(250));
}

TEST_CASE("FastRandom stays within 0..1 and is reproducible from its seed", "[core]") {
  FastRandom a(7), b(7);
  for (int i = 0; i < 1000; ++i) {
    const double x = a.uniform();
    REQUIRE(x >= 0.0);
    REQUIRE(x < 1.0);
    REQUIRE(x == b.uniform());
  }
}
