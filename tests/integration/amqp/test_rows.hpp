// Rows and broker settings shared by the publisher's integration tests.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/url.hpp"
#include "core/outbox_message.hpp"

namespace outboxd::test {

inline core::OutboxMessage row(core::RowId id, std::string destination = "orders") {
  core::OutboxMessage message;
  message.id = id;
  message.message_id = "msg-" + std::to_string(id);
  message.destination = std::move(destination);
  message.session_id = "session-" + std::to_string(id % 7);
  message.subject = "Tested";
  message.content_type = "application/octet-stream";
  message.body = "body-" + std::to_string(id);
  message.created_at = std::chrono::system_clock::now();
  return message;
}

inline std::vector<core::OutboxMessage> rows(core::RowId first, core::RowId last, std::string destination = "orders") {
  std::vector<core::OutboxMessage> batch;
  for (auto id = first; id <= last; ++id) batch.push_back(row(id, destination));
  return batch;
}

// Fast reconnects and short timeouts, so that fault tests finish quickly.
inline config::BrokerConfig peer_broker(const std::string& url) {
  using std::chrono::milliseconds;
  config::BrokerConfig broker;
  REQUIRE(config::set_broker_url(broker, url));
  broker.profile = config::BrokerProfile::generic;
  broker.reconnect_min = milliseconds(20);
  broker.reconnect_max = milliseconds(200);
  broker.outcome_timeout = milliseconds(5000);
  broker.idle_timeout = milliseconds(5000);
  return broker;
}

}  // namespace outboxd::test
