// Maps a row's logical destination to the link target a broker profile expects (README, Brokers).
#pragma once

#include <optional>

#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace outboxd::amqp {

// What a sender link attaches to.
struct Target {
  std::string address;
  bool durable_target = false;             // terminus durability "configuration"
  std::vector<std::string> capabilities;   // target capabilities (symbols)

  friend bool operator==(const Target&, const Target&) = default;
};

// True for a destination that already is a broker address: it starts with
// '/' (RabbitMQ's /queue/..., /exchange/...) or carries a scheme ("queue://x").
bool is_full_address(std::string_view destination);

// rabbitmq:  orders -> /queue/orders, durable target (RabbitMQ 3.10 then
//            declares a missing queue durable; a missing /amq/queue/NAME would
//            accept messages and drop them silently)
// artemis:   orders -> orders with the "queue" capability (anycast)
// activemq:  orders -> queue://orders (ActiveMQ 5's AMQP destination prefix)
// generic, azure-servicebus: orders -> orders
// A full address is used as it is; it keeps the profile's durability (so an
// explicit /queue/NAME on RabbitMQ is still declared durable) but gets no
// capabilities, since whoever wrote the address chose the routing.
Target target_for(std::string_view destination, config::BrokerProfile profile);

// Why the profile's broker cannot carry `target`, or nothing. rabbitmq: an
// address with a character beyond Latin-1 (U+00FF), on which RabbitMQ 3.x's
// AMQP 1.0 plugin ends the whole connection instead of refusing the link.
// activemq: an address with a comma, which ActiveMQ Classic splits into a
// composite destination (a copy to each queue or topic named).
std::optional<std::string> carry_problem(const Target& target, config::BrokerProfile profile);

}  // namespace outboxd::amqp
