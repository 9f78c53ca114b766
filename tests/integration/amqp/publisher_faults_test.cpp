// Publisher against a misbehaving peer: lost connections, silence, refused links, idle links, stop.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "amqp/publisher.hpp"
#include "amqp_peer.hpp"
#include "recording_sink.hpp"
#include "test_rows.hpp"

using namespace std::chrono_literals;
using outboxd::amqp::Publisher;
using outboxd::core::DeliveryOutcome;
using namespace outboxd::test;

namespace {

PeerDisposition hold(const ReceivedMessage&) { return {PeerAction::hold, {}, {}}; }

// Every row in [first, last] got exactly one outcome, and it was `expected`.
void check_all(const RecordingSink& sink, outboxd::core::RowId first, outboxd::core::RowId last,
               DeliveryOutcome expected) {
  const auto outcomes = sink.by_id();
  for (auto id = first; id <= last; ++id) {
    INFO("row " << id);
    REQUIRE(outcomes.count(id) == 1);
    CHECK(outcomes.at(id).size() == 1);
    CHECK(outcomes.at(id).front().outcome == expected);
  }
}

void check_recovers(AmqpPeer& peer, Publisher& publisher, RecordingSink& sink, outboxd::core::RowId first) {
  peer.set_policy({});
  REQUIRE(wait_until([&] { return publisher.connected() && peer.connections_opened() >= 2; }));
  const auto before = sink.outcome_count();
  publisher.publish(rows(first, first + 9));
  REQUIRE(sink.wait_for_outcomes(before + 10));
  check_all(sink, first, first + 9, DeliveryOutcome::accepted);
}

}  // namespace

TEST_CASE("peer closes the connection mid-batch: every unsettled row is connection_lost, then it reconnects",
          "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_policy(hold);
  peer.close_connection_after(50);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 100));

  REQUIRE(sink.wait_for_outcomes(100));
  check_all(sink, 1, 100, DeliveryOutcome::connection_lost);
  CHECK(sink.outcomes().front().reason.find("amqp:connection:forced") != std::string::npos);
  REQUIRE(sink.wait_for_connection_events(2));
  const auto events = sink.connection_events();
  REQUIRE(events.size() >= 2);
  CHECK(events[0].first);
  CHECK_FALSE(events[1].first);
  check_recovers(peer, publisher, sink, 101);
}

TEST_CASE("accepted rows stay accepted when the connection goes down after them", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_credit_window(1);  // one at a time: the first 29 are settled before the 30th arrives
  peer.close_connection_after(30);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 60));
  REQUIRE(sink.wait_for_outcomes(60));
  check_all(sink, 1, 29, DeliveryOutcome::accepted);
  check_all(sink, 30, 60, DeliveryOutcome::connection_lost);
  peer.set_credit_window(1000);
  check_recovers(peer, publisher, sink, 61);
}

TEST_CASE("peer drops the socket without a close frame", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_policy(hold);
  peer.drop_connection_after(10);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 30));
  REQUIRE(sink.wait_for_outcomes(30));
  check_all(sink, 1, 30, DeliveryOutcome::connection_lost);
  check_recovers(peer, publisher, sink, 31);
}

TEST_CASE("no outcome within outcome_timeout: connection_lost, reconnect, and no late outcome", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_policy(hold);
  RecordingSink sink;
  auto broker = peer_broker(peer.url());
  broker.outcome_timeout = 300ms;
  Publisher publisher(broker, "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  const auto started = std::chrono::steady_clock::now();
  publisher.publish(rows(1, 5));
  REQUIRE(peer.held_count() <= 5);
  REQUIRE(sink.wait_for_outcomes(5));
  const auto waited = std::chrono::steady_clock::now() - started;
  CHECK(waited >= 300ms);
  CHECK(waited < 1500ms);
  check_all(sink, 1, 5, DeliveryOutcome::connection_lost);
  CHECK(sink.outcomes().front().reason.find("within the outcome timeout (300 ms)") != std::string::npos);
  // Accepting now, on the old connection if it still exists, must not add outcomes.
  peer.settle_held({});
  check_recovers(peer, publisher, sink, 6);
  CHECK(sink.outcome_count() == 15);
}

TEST_CASE("a refused destination rejects its rows and leaves other destinations alone", "[amqp][peer]") {
  AmqpPeer peer;
  peer.refuse_address("missing", "amqp:not-found");
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 3, "missing"));
  publisher.publish(rows(4, 6, "orders"));
  REQUIRE(sink.wait_for_outcomes(6));
  check_all(sink, 1, 3, DeliveryOutcome::rejected);
  check_all(sink, 4, 6, DeliveryOutcome::accepted);
  const auto reason = sink.by_id().at(1).front().reason;
  CHECK(reason.find("link to missing closed") != std::string::npos);
  CHECK(reason.find("amqp:not-found") != std::string::npos);
  CHECK(peer.connections_opened() == 1);  // the connection survived
}

TEST_CASE("an idle link is closed and re-opened on the next message", "[amqp][peer]") {
  AmqpPeer peer;
  RecordingSink sink;
  auto broker = peer_broker(peer.url());
  broker.link_idle_close = 300ms;
  Publisher publisher(broker, "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 2, "a"));
  publisher.publish(rows(3, 3, "b"));
  REQUIRE(sink.wait_for_outcomes(3));
  REQUIRE(wait_until([&] {
    const auto links = peer.links();
    return links.size() == 2 && links[0].closed && links[1].closed;
  }));
  publisher.publish(rows(4, 4, "a"));
  REQUIRE(sink.wait_for_outcomes(4));
  check_all(sink, 1, 4, DeliveryOutcome::accepted);
  const auto links = peer.links();
  REQUIRE(links.size() == 3);
  CHECK(links[2].address == "a");
  CHECK_FALSE(links[2].closed);
  CHECK(peer.connections_opened() == 1);
}

TEST_CASE("stop answers every unsettled row connection_lost, promptly; later rows too", "[amqp][peer]") {
  AmqpPeer peer;
  peer.set_policy(hold);
  RecordingSink sink;
  Publisher publisher(peer_broker(peer.url()), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 10));
  REQUIRE(wait_until([&] { return peer.held_count() == 10; }));
  const auto started = std::chrono::steady_clock::now();
  publisher.stop();
  CHECK(std::chrono::steady_clock::now() - started < 1s);
  check_all(sink, 1, 10, DeliveryOutcome::connection_lost);
  CHECK(sink.by_id().at(1).front().reason == "publisher stopping");
  CHECK_FALSE(publisher.connected());
  publisher.publish(rows(11, 11));
  check_all(sink, 11, 11, DeliveryOutcome::connection_lost);
  CHECK(sink.by_id().at(11).front().reason == "publisher stopped");
  REQUIRE(wait_until([&] { return peer.connections_open() == 0; }));
}

TEST_CASE("no broker: rows are connection_lost with the connection error, retries go on, stop is prompt",
          "[amqp][peer]") {
  int port = 0;
  {
    AmqpPeer gone;  // a port that was free a moment ago and has nobody listening now
    port = gone.port();
  }
  RecordingSink sink;
  Publisher publisher(peer_broker("amqp://127.0.0.1:" + std::to_string(port)), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 3));
  REQUIRE(sink.wait_for_outcomes(3));
  check_all(sink, 1, 3, DeliveryOutcome::connection_lost);
  REQUIRE(sink.wait_for_connection_events(3));  // several failed attempts, each with its reason
  for (const auto& [up, reason] : sink.connection_events()) {
    CHECK_FALSE(up);
    CHECK_FALSE(reason.empty());
  }
  publisher.publish(rows(4, 4));
  REQUIRE(sink.wait_for_outcomes(4));
  CHECK(sink.by_id().at(4).front().outcome == DeliveryOutcome::connection_lost);
  const auto started = std::chrono::steady_clock::now();
  publisher.stop();
  CHECK(std::chrono::steady_clock::now() - started < 1s);
}

TEST_CASE("publish before start and a bad configuration", "[amqp][peer]") {
  RecordingSink sink;
  auto broker = peer_broker("amqp://127.0.0.1:1");
  Publisher publisher(broker, "outboxd-test", sink);
  publisher.publish(rows(1, 1));
  REQUIRE(sink.outcome_count() == 1);
  CHECK(sink.outcomes().front().outcome == DeliveryOutcome::connection_lost);
  CHECK(sink.outcomes().front().reason == "publisher not started");

  auto unparsed = broker;  // a BrokerConfig made by hand, its url not parsed
  unparsed.url = "http://example.com";
  unparsed.endpoints.clear();
  Publisher bad(unparsed, "outboxd-test", sink);
  const auto status = bad.start();
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().kind == outboxd::core::ErrorKind::fatal);

  REQUIRE(outboxd::config::set_broker_url(broker, "amqps://127.0.0.1:1"));
  broker.tls.ca_file = "/nonexistent/ca.pem";
  Publisher no_ca(broker, "outboxd-test", sink);
  const auto tls = no_ca.start();
  REQUIRE_FALSE(tls.ok());
  CHECK(tls.error().message.starts_with("broker.tls.ca_file: cannot read"));
}

TEST_CASE("plain_over_cleartext reflects the settings", "[amqp][peer]") {
  RecordingSink sink;
  auto broker = peer_broker("amqp://broker.example:5672");
  broker.username = "app";
  broker.password = "secret";
  CHECK(Publisher(broker, "x", sink).plain_over_cleartext());
  REQUIRE(outboxd::config::set_broker_url(broker, "amqp://127.0.0.1:5672"));
  CHECK_FALSE(Publisher(broker, "x", sink).plain_over_cleartext());
}
