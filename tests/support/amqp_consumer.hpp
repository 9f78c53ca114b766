// A blocking AMQP 1.0 consumer for broker tests: read N messages from an address, accepting each.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "amqp_peer.hpp"

namespace outboxd::test {

struct ConsumeRequest {
  std::string url;               // amqp://host:port
  std::string user;              // empty: SASL ANONYMOUS
  std::string password;
  std::string address;           // source address, e.g. /queue/orders or orders
  std::vector<std::string> source_capabilities;  // e.g. {"queue"} for Artemis anycast
  bool durable_source = false;   // RabbitMQ: must match the queue's durability
  std::size_t count = 1;
  std::chrono::milliseconds timeout{10000};
};

struct Consumed {
  std::vector<ReceivedMessage> messages;  // in arrival order; address = the source address
  std::string error;                      // empty when `count` messages arrived in time
};

// Runs a Proton container on the calling thread until `count` messages
// arrived, an error happened, or `timeout` passed.
Consumed consume(const ConsumeRequest& request);

}  // namespace outboxd::test
