// PublishStep on its own: when rows go out, what the broker's connection news does, rows parked unsent.
#include <catch2/catch.hpp>

#include <vector>

#include "daemon/run/publish_step.hpp"
#include "parts_fixture.hpp"

namespace outboxd::daemon::test {

using core::DeliveryOutcome;

TEST_CASE("PublishStep hands rows out only while the broker is up, the leases allow and the loop goes on",
          "[daemon][publish_step]") {
  WiredParts f;
  for (int i = 0; i < 3; ++i) f.database.insert();
  f.claims.claim(false);
  f.publisher.publish_ready(false);
  CHECK(f.broker.sent.empty());  // the broker never said it is up
  REQUIRE(f.publisher.start());
  CHECK(f.publisher.take_outcomes().empty());  // the news was its connection
  REQUIRE(f.publisher.up());
  f.publisher.publish_ready(true);  // stopping: rows published now could not be marked
  CHECK(f.broker.sent.empty());
  f.clock.advance(f.loop_config.leases.lease_ttl);  // the leases may have expired
  f.publisher.publish_ready(false);
  CHECK(f.broker.sent.empty());
  std::vector<int> stopped;
  std::vector<int> gained;
  REQUIRE(f.leases.maintain(f.database, stopped, gained));
  f.publisher.publish_ready(false);
  CHECK(f.broker.sent == std::vector<core::RowId>{1, 2, 3});
  CHECK(f.metrics.published.value() == 3);
  CHECK(f.publisher.take_outcomes().size() == 3);  // the fake broker accepted them at once
}

TEST_CASE("PublishStep counts every lost or refused broker connection and names the node only while connected",
          "[daemon][publish_step]") {
  WiredParts f;
  REQUIRE(f.publisher.start());
  f.broker.silent = true;
  f.broker.connection(false, "connection reset");
  f.broker.connection(false, "connection refused", "127.0.0.1:5673");
  f.broker.connection(false, "connection refused", "127.0.0.1:5673");
  f.publisher.take_outcomes();
  CHECK_FALSE(f.publisher.up());
  CHECK(f.metrics.broker_lost.value() == 3);
  CHECK(f.metrics.broker_node.samples().empty());
  f.broker.connection(true, "reconnected", "127.0.0.1:5673");
  f.publisher.take_outcomes();
  CHECK(f.publisher.up());
  CHECK(f.metrics.broker_node.samples().size() == 1);
}

TEST_CASE("PublishStep parks a row the claim found unsendable instead of sending it, and its park is due",
          "[daemon][publish_step]") {
  WiredParts f;
  const auto id = f.database.insert();
  f.database.table[id].message.unsendable = "larger than the broker's max-message-size";
  f.database.insert();
  REQUIRE(f.publisher.start());
  f.publisher.take_outcomes();
  f.claims.claim(false);
  f.publisher.publish_ready(false);
  CHECK(f.broker.sent == std::vector<core::RowId>{id + 1});
  CHECK(f.metrics.unsendable.value() == 1);
  REQUIRE(f.timers.at(dispatch::Timer::mark));  // the park is written within the mark delay
  CHECK(*f.timers.at(dispatch::Timer::mark) <= f.clock.now() + DecisionWriter::kMarkDelay);
}

}  // namespace outboxd::daemon::test
