// The publisher without a connection: rows of two outboxes with the same row id keep their own outcomes.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "amqp/destination.hpp"
#include "amqp/detail/link_set.hpp"
#include "amqp/publisher.hpp"
#include "config/url.hpp"
#include "dispatch/connection_suspects.hpp"

using outboxd::amqp::LinkSet;
using outboxd::amqp::Outcome;
using outboxd::amqp::Publisher;
using outboxd::amqp::target_for;
using outboxd::config::BrokerProfile;
using outboxd::core::DeliveryKey;
using outboxd::core::DeliveryOutcome;
using outboxd::core::OutboxMessage;
using outboxd::core::SteadyTime;
using outboxd::dispatch::ConnectionSuspects;

namespace {

class Sink final : public outboxd::amqp::OutcomeSink {
 public:
  void on_outcome(Outcome outcome) override { outcomes.push_back(std::move(outcome)); }
  void on_connection(bool, std::string, std::string) override {}
  std::vector<Outcome> outcomes;
};

// A link set handed no connection queues its rows, attaches nothing and sends nothing.
struct Fixture {
  void queue(DeliveryKey key) {
    proton::connection none;
    links.queue_delivery(none, "orders", target_for("orders", BrokerProfile::generic),
                         {key, {}, start, SteadyTime::max()});
  }

  Sink sink;
  ConnectionSuspects suspects;
  LinkSet links{sink, suspects, "test:"};
  SteadyTime start{};
};

}  // namespace

TEST_CASE("link set: two outboxes' rows with the same id are answered apart, each with its outbox",
          "[amqp][link_set]") {
  Fixture f;
  f.queue({1, 7});
  f.queue({2, 7});
  CHECK(f.links.queued() == 2);
  f.links.fail_all("connection lost");
  REQUIRE(f.sink.outcomes.size() == 2);
  CHECK(f.sink.outcomes[0].key() == DeliveryKey{1, 7});
  CHECK(f.sink.outcomes[1].key() == DeliveryKey{2, 7});
  for (const auto& outcome : f.sink.outcomes) {
    CHECK(outcome.id == 7);
    CHECK(outcome.outcome == DeliveryOutcome::connection_lost);
    CHECK(outcome.reason == "connection lost");
  }
}

TEST_CASE("link set: a convicted row of one outbox leaves the same id of another outbox to be sent",
          "[amqp][link_set]") {
  Fixture f;
  for (int i = 0; i <= ConnectionSuspects::kMaxBlame; ++i) f.suspects.on_connection_lost({}, {{1, 7}}, "killed");
  REQUIRE(f.suspects.conviction(DeliveryKey{1, 7}));
  f.queue({2, 7});
  CHECK(f.sink.outcomes.empty());  // the other outbox's row 7 waits for its link
  f.queue({1, 7});
  REQUIRE(f.sink.outcomes.size() == 1);  // the convicted row, at once
  CHECK(f.sink.outcomes[0].key() == DeliveryKey{1, 7});
  CHECK(f.sink.outcomes[0].outcome == DeliveryOutcome::unsendable);
  CHECK(f.links.queued() == 1);
  f.links.expire_queued(f.start + std::chrono::seconds(1), std::chrono::seconds(1));
  REQUIRE(f.sink.outcomes.size() == 2);
  CHECK(f.sink.outcomes[1].key() == DeliveryKey{2, 7});
  CHECK(f.sink.outcomes[1].outcome == DeliveryOutcome::unknown);
}

TEST_CASE("publisher: rows of two outboxes with the same id published before start are answered apart",
          "[amqp][publisher]") {
  Sink sink;
  outboxd::config::BrokerConfig broker;
  REQUIRE(outboxd::config::set_broker_url(broker, "amqp://127.0.0.1:1"));
  Publisher publisher(broker, "test", sink);
  std::vector<OutboxMessage> batch;
  for (const std::uint32_t outbox : {1u, 2u}) {
    OutboxMessage row;
    row.id = 7;
    row.outbox = outbox;
    row.message_id = "m";
    row.destination = "orders";
    batch.push_back(std::move(row));
  }
  publisher.publish(batch);  // answered at once, on this thread
  REQUIRE(sink.outcomes.size() == 2);
  CHECK(sink.outcomes[0].key() == DeliveryKey{1, 7});
  CHECK(sink.outcomes[1].key() == DeliveryKey{2, 7});
  for (const auto& outcome : sink.outcomes) CHECK(outcome.outcome == DeliveryOutcome::connection_lost);
}
