// Publisher against the in-process peer: outcomes, credit, pipelining, tags, and what goes over the wire.
#include <catch2/catch.hpp>

#include <chrono>
#include <iostream>
#include <set>
#include <unordered_map>
#include <utility>

#include <proton/binary.hpp>
#include <proton/message_id.hpp>
#include <proton/scalar.hpp>
#include <proton/timestamp.hpp>

#include "amqp/publisher.hpp"
#include "amqp_peer.hpp"
#include "recording_sink.hpp"
#include "test_rows.hpp"

using namespace std::chrono_literals;
using outboxd::amqp::Publisher;
using outboxd::core::DeliveryOutcome;
using namespace outboxd::test;

namespace {

PeerDisposition scripted(const ReceivedMessage& message) {
  const auto id = std::stoll(message.message_id().substr(4));
  switch (id % 4) {
    case 0: return {PeerAction::accept, {}, {}};
    case 1: return {PeerAction::reject, "amqp:precondition-failed", "queue full, id " + std::to_string(id)};
    case 2: return {PeerAction::release, {}, {}};
    default: return {PeerAction::modify, {}, {}};
  }
}

}  // namespace

TEST_CASE("each scripted outcome reaches the sink exactly once, with the right id", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_policy(scripted);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 40));

  REQUIRE(sink.wait_for_outcomes(40));
  REQUIRE(wait_until([&] { return publisher.connected(); }));
  const auto outcomes = sink.by_id();
  REQUIRE(outcomes.size() == 40);
  for (const auto& [id, reported] : outcomes) {
    INFO("row " << id);
    REQUIRE(reported.size() == 1);
    const auto& outcome = reported.front();
    switch (id % 4) {
      case 0:
        CHECK(outcome.outcome == DeliveryOutcome::accepted);
        CHECK(outcome.reason.empty());
        break;
      case 1:
        CHECK(outcome.outcome == DeliveryOutcome::rejected);
        CHECK(outcome.reason == "amqp:precondition-failed: queue full, id " + std::to_string(id));
        break;
      case 2:
        CHECK(outcome.outcome == DeliveryOutcome::released);
        CHECK(outcome.reason == "released by broker");
        break;
      default:
        CHECK(outcome.outcome == DeliveryOutcome::released);
        CHECK(outcome.reason.starts_with("modified by broker"));
    }
  }
  publisher.stop();
  CHECK(sink.outcome_count() == 40);  // stop adds nothing for settled rows
}

// One publisher serves every outbox of the daemon, and row ids are each outbox's own.
TEST_CASE("rows of two outboxes with the same ids get their own outcomes, each naming its outbox", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_policy([](const ReceivedMessage& message) {
    const auto outbox = proton::get<std::string>(message.decode().properties().get("outboxd_outbox"));
    if (outbox == "globex") return PeerDisposition{PeerAction::reject, "amqp:precondition-failed", "globex is full"};
    return PeerDisposition{PeerAction::accept, {}, {}};
  });
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  std::vector<outboxd::core::OutboxMessage> batch;
  for (outboxd::core::RowId id = 1; id <= 3; ++id) {
    for (const auto& [outbox, name] : {std::pair{1u, "acme"}, std::pair{2u, "globex"}}) {
      auto message = row(id);  // the same message id too
      message.outbox = outbox;
      message.outbox_name = std::make_shared<const std::string>(name);
      batch.push_back(message);
    }
  }
  publisher.publish(batch);
  REQUIRE(sink.wait_for_outcomes(6));
  std::unordered_map<outboxd::core::DeliveryKey, DeliveryOutcome> by_key;
  for (const auto& outcome : sink.outcomes()) {
    INFO("row " << outcome.id << " of outbox " << outcome.outbox << ": " << outcome.reason);
    CHECK(by_key.emplace(outcome.key(), outcome.outcome).second);  // one outcome per row of each outbox
  }
  for (outboxd::core::RowId id = 1; id <= 3; ++id) {
    CHECK(by_key.at({1, id}) == DeliveryOutcome::accepted);
    CHECK(by_key.at({2, id}) == DeliveryOutcome::rejected);
  }
  CHECK(peer.received_count() == 6);
}

TEST_CASE("a reject without a condition still says who rejected", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_policy([](const ReceivedMessage&) { return PeerDisposition{PeerAction::reject, "", ""}; });
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 1));
  REQUIRE(sink.wait_for_outcomes(1));
  CHECK(sink.outcomes().front().outcome == DeliveryOutcome::rejected);
  CHECK(sink.outcomes().front().reason == "rejected by broker");
}

TEST_CASE("10k messages are pipelined within the peer's credit", "[amqp][peer]") {
  constexpr int kMessages = 10000;
  const int window = GENERATE(100, 1000);
  AmqpPeer peer;
  peer.set_credit_window(window);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  REQUIRE(wait_until([&] { return publisher.connected(); }));

  const auto started = std::chrono::steady_clock::now();
  for (int first = 1; first <= kMessages; first += 500) publisher.publish(rows(first, first + 499));
  REQUIRE(sink.wait_for_outcomes(kMessages, 60s));
  const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cerr << "in-process peer, credit window " << window << ": " << kMessages << " messages in "
            << static_cast<int>(elapsed * 1000) << " ms = " << static_cast<int>(kMessages / elapsed) << " msg/s\n";

  const auto outcomes = sink.by_id();
  CHECK(outcomes.size() == static_cast<std::size_t>(kMessages));
  std::size_t accepted = 0;
  for (const auto& [id, reported] : outcomes) {
    if (reported.size() == 1 && reported.front().outcome == DeliveryOutcome::accepted) ++accepted;
  }
  CHECK(accepted == static_cast<std::size_t>(kMessages));
  // One link, sent in publish order.
  const auto received = peer.received();
  REQUIRE(received.size() == static_cast<std::size_t>(kMessages));
  for (std::size_t i = 0; i < received.size(); ++i) {
    if (received[i].message_id() != "msg-" + std::to_string(i + 1)) FAIL("out of order at " << i);
  }
  CHECK(peer.links().size() == 1);
}

TEST_CASE("nothing is sent beyond the credit the peer granted", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_manual_credit(5);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 20));

  REQUIRE(sink.wait_for_outcomes(5));
  std::this_thread::sleep_for(200ms);
  CHECK(peer.received_count() == 5);
  CHECK(sink.outcome_count() == 5);

  peer.grant_credit(15);
  REQUIRE(sink.wait_for_outcomes(20));
  CHECK(peer.received_count() == 20);
  for (const auto& outcome : sink.outcomes()) CHECK(outcome.outcome == DeliveryOutcome::accepted);
}

TEST_CASE("a drain request gets the unused credit back, and sending goes on after", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_manual_credit(5);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 2));
  REQUIRE(sink.wait_for_outcomes(2));
  peer.drain_links();
  REQUIRE(wait_until([&] { return peer.drains_finished() == 1; }));
  peer.grant_credit(3);
  publisher.publish(rows(3, 5));
  REQUIRE(sink.wait_for_outcomes(5));
  for (const auto& outcome : sink.outcomes()) CHECK(outcome.outcome == DeliveryOutcome::accepted);
}

TEST_CASE("many links: every delivery has its own tag and every outcome arrives", "[amqp][peer]") {
  constexpr int kDestinations = 20;
  constexpr int kPerDestination = 100;
  AmqpPeer peer;
  peer.set_credit_window(7);  // small, so on_sendable fires a lot on every link
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());

  outboxd::core::RowId id = 0;
  for (int round = 0; round < kPerDestination; round += 10) {
    std::vector<outboxd::core::OutboxMessage> batch;
    for (int destination = 0; destination < kDestinations; ++destination) {
      for (int i = 0; i < 10; ++i) batch.push_back(row(++id, "dest-" + std::to_string(destination)));
    }
    publisher.publish(std::move(batch));
  }
  REQUIRE(sink.wait_for_outcomes(static_cast<std::size_t>(id), 30s));
  const auto outcomes = sink.by_id();
  CHECK(outcomes.size() == static_cast<std::size_t>(id));
  for (const auto& [row_id, reported] : outcomes) {
    INFO("row " << row_id);
    CHECK(reported.size() == 1);
    CHECK(reported.front().outcome == DeliveryOutcome::accepted);
  }
  std::set<std::string> tags;
  for (const auto& message : peer.received()) tags.insert(message.tag);
  CHECK(tags.size() == static_cast<std::size_t>(id));
  CHECK(peer.links().size() == static_cast<std::size_t>(kDestinations));
}

TEST_CASE("what the peer receives: mapped fields, exact body bytes, target per profile", "[amqp][peer]") {
  AmqpPeer peer;
  RecordingSink sink;
  auto broker = peer_broker(peer.url());
  broker.profile = outboxd::config::BrokerProfile::rabbitmq;
  Publisher publisher(broker, "outboxd-test", sink);
  REQUIRE(publisher.start().ok());

  auto message = row(7);
  message.correlation_id = "corr-7";
  message.parent_message_id = "parent-7";
  message.traceparent = "00-11111111111111111111111111111111-2222222222222222-01";
  message.headers_json = R"({"tenant":"acme","n":3})";
  message.body = std::string("\x00\xff\xfe binary \x80", 13);
  message.ttl = 90s;
  message.created_at = std::chrono::system_clock::time_point(1700000000456ms);
  publisher.publish({message});
  REQUIRE(sink.wait_for_outcomes(1));
  CHECK(sink.outcomes().front().outcome == DeliveryOutcome::accepted);

  const auto links = peer.links();
  REQUIRE(links.size() == 1);
  CHECK(links.front().address == "/queue/orders");
  CHECK(links.front().durable);
  const auto got = peer.received().front().decode();
  CHECK(proton::get<std::string>(got.id()) == "msg-7");
  CHECK(got.group_id() == "session-0");
  CHECK(proton::get<std::string>(got.correlation_id()) == "corr-7");
  CHECK(got.subject() == "Tested");
  CHECK(got.content_type() == "application/octet-stream");
  CHECK(got.creation_time() == proton::timestamp(1700000000456));
  CHECK(got.ttl() == proton::duration(90000));
  CHECK(got.durable());
  CHECK(got.inferred());
  const auto body = proton::get<proton::binary>(got.body());
  CHECK(std::string(body.begin(), body.end()) == message.body);
  CHECK(proton::get<std::string>(got.properties().get("tenant")) == "acme");
  CHECK(proton::get<std::int64_t>(got.properties().get("n")) == 3);
  CHECK(proton::get<std::string>(got.properties().get("parent_message_id")) == "parent-7");
  CHECK(proton::get<std::string>(got.properties().get("traceparent")) == *message.traceparent);
}

TEST_CASE("artemis profile asks for the queue capability", "[amqp][peer]") {
  AmqpPeer peer;
  RecordingSink sink;
  auto broker = peer_broker(peer.url());
  broker.profile = outboxd::config::BrokerProfile::artemis;
  Publisher publisher(broker, "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 1));
  REQUIRE(sink.wait_for_outcomes(1));
  const auto links = peer.links();
  REQUIRE(links.size() == 1);
  CHECK(links.front().address == "orders");
  CHECK_FALSE(links.front().durable);
  CHECK(links.front().capabilities == std::vector<std::string>{"queue"});
  CHECK(proton::get<std::string>(peer.received().front().decode().properties().get("_AMQ_DUPL_ID")) == "msg-1");
}

TEST_CASE("a row that cannot be encoded is answered unsendable without being sent", "[amqp][peer]") {
  AmqpPeer peer;
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  auto bad = row(1);
  bad.headers_json = R"({"list":[1,2]})";
  auto empty_destination = row(2, "");
  publisher.publish({bad, empty_destination, row(3)});
  REQUIRE(sink.wait_for_outcomes(3));
  const auto outcomes = sink.by_id();
  CHECK(outcomes.at(1).front().outcome == DeliveryOutcome::unsendable);
  CHECK(outcomes.at(1).front().reason == R"(headers: key "list": arrays and objects are not supported)");
  CHECK(outcomes.at(2).front().outcome == DeliveryOutcome::unsendable);
  CHECK(outcomes.at(2).front().reason == "destination is empty");
  CHECK(outcomes.at(3).front().outcome == DeliveryOutcome::accepted);
  CHECK(peer.received_count() == 1);
}

TEST_CASE("a row whose fencing deadline has passed is answered not_sent and never sent", "[amqp][peer][fence]") {
  AmqpPeer peer;
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  REQUIRE(wait_until([&] { return publisher.connected(); }));
  publisher.publish(rows(1, 5), std::chrono::steady_clock::now());

  REQUIRE(sink.wait_for_outcomes(5));
  for (const auto& outcome : sink.outcomes()) {
    CHECK(outcome.outcome == DeliveryOutcome::not_sent);
    CHECK(outcome.reason.find("fencing deadline passed") != std::string::npos);
  }
  publisher.publish(rows(6, 8), std::chrono::steady_clock::now() + 1h);
  REQUIRE(sink.wait_for_outcomes(8));
  CHECK(peer.received_count() == 3);
}

TEST_CASE("rows waiting for credit past their fencing deadline are not sent when credit comes",
          "[amqp][peer][fence]") {
  AmqpPeer peer;
  peer.set_manual_credit(2);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 6), std::chrono::steady_clock::now() + 300ms);
  REQUIRE(sink.wait_for_outcomes(2));
  std::this_thread::sleep_for(400ms);  // past the deadline, still without credit
  CHECK(sink.outcome_count() == 2);

  peer.grant_credit(10);
  REQUIRE(sink.wait_for_outcomes(6));
  const auto outcomes = sink.by_id();
  for (outboxd::core::RowId id = 3; id <= 6; ++id) {
    INFO("row " << id);
    CHECK(outcomes.at(id).front().outcome == DeliveryOutcome::not_sent);
  }
  std::this_thread::sleep_for(100ms);
  CHECK(peer.received_count() == 2);
}
