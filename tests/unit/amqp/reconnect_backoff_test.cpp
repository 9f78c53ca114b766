// Reconnect delays with pinned randomness.
#include <catch2/catch.hpp>

#include "amqp/reconnect_backoff.hpp"

using namespace std::chrono_literals;
using outboxd::amqp::ReconnectBackoff;
using outboxd::core::FixedRandom;

TEST_CASE("reconnect delays double from min to max", "[amqp]") {
  FixedRandom middle(0.5);  // factor 1.0
  ReconnectBackoff backoff(100ms, 1000ms, middle);
  CHECK(backoff.next() == 100ms);
  CHECK(backoff.next() == 200ms);
  CHECK(backoff.next() == 400ms);
  CHECK(backoff.next() == 800ms);
  CHECK(backoff.next() == 1000ms);
  CHECK(backoff.next() == 1000ms);
  backoff.reset();
  CHECK(backoff.next() == 100ms);
}

TEST_CASE("reconnect jitter stays within [min, max]", "[amqp]") {
  FixedRandom random(0.0);  // factor 0.8
  ReconnectBackoff backoff(100ms, 1000ms, random);
  CHECK(backoff.next() == 100ms);  // 80 ms clamped up to min
  CHECK(backoff.next() == 160ms);
  random.set(0.999999);           // factor just below 1.2
  CHECK(backoff.next() == 479ms);
  CHECK(backoff.next() == 959ms);
  CHECK(backoff.next() == 1000ms);  // 1199 clamped down to max
}

TEST_CASE("a zero or inverted range still yields positive delays", "[amqp]") {
  FixedRandom middle(0.5);
  ReconnectBackoff backoff(0ms, 0ms, middle);
  CHECK(backoff.next() == 1ms);
  CHECK(backoff.next() == 1ms);
}
