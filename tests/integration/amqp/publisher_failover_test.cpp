// Publisher over broker.urls: a refused node is passed over at once, a lost connection moves on to the next node.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "amqp/publisher.hpp"
#include "amqp_peer.hpp"
#include "recording_sink.hpp"
#include "test_rows.hpp"

using namespace std::chrono_literals;
using outboxd::amqp::Publisher;
using outboxd::core::DeliveryOutcome;
using namespace outboxd::test;

namespace {

// peer_broker's timings with the nodes of broker.urls, and a reconnect wait long enough to show.
outboxd::config::BrokerConfig nodes_broker(const std::vector<std::string>& urls) {
  auto broker = peer_broker(urls.front());
  broker.url.clear();
  broker.urls = urls;
  broker.endpoints.clear();
  for (const auto& url : urls) broker.endpoints.push_back(outboxd::config::parse_amqp_url(url).value());
  broker.reconnect_min = 5s;
  broker.reconnect_max = 10s;
  return broker;
}

bool all_accepted(const RecordingSink& sink, outboxd::core::RowId first, outboxd::core::RowId last) {
  const auto outcomes = sink.by_id();
  for (auto id = first; id <= last; ++id) {
    if (outcomes.count(id) != 1 || outcomes.at(id).back().outcome != DeliveryOutcome::accepted) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("broker.urls: a refused node is passed over at once, a lost connection moves on to the next node",
          "[amqp][peer]") {
  int dead = 0;
  {
    AmqpPeer gone;  // a port that was free a moment ago and has nobody listening now
    dead = gone.port();
  }
  AmqpPeer first;
  AmqpPeer second;
  RecordingSink sink;
  Publisher publisher(nodes_broker({"amqp://127.0.0.1:" + std::to_string(dead), first.url(), second.url()}),
                      "outboxd-test", sink);
  const auto started = std::chrono::steady_clock::now();
  REQUIRE(publisher.start().ok());
  REQUIRE(wait_until([&] { return publisher.connected(); }, 4s));
  CHECK(std::chrono::steady_clock::now() - started < 2s);  // not reconnect_min (5 s) after the refusal
  CHECK(first.connections_opened() == 1);
  publisher.publish(rows(1, 10));
  REQUIRE(sink.wait_for_outcomes(10));
  CHECK(all_accepted(sink, 1, 10));

  const auto lost = std::chrono::steady_clock::now();
  first.close_connections();
  REQUIRE(wait_until([&] { return second.connections_opened() == 1 && publisher.connected(); }, 4s));
  CHECK(std::chrono::steady_clock::now() - lost < 2s);  // the next node at once, not the same one after a wait
  CHECK(first.connections_opened() == 1);
  publisher.publish(rows(11, 20));
  REQUIRE(sink.wait_for_outcomes(20));
  CHECK(all_accepted(sink, 11, 20));

  std::vector<std::string> ups;
  for (const auto& [up, reason] : sink.connection_events()) {
    if (up) ups.push_back(reason);
  }
  CHECK(ups == std::vector<std::string>{"connected to 127.0.0.1:" + std::to_string(first.port()),
                                        "connected to 127.0.0.1:" + std::to_string(second.port())});
}
