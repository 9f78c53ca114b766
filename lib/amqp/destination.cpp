// Destination-to-target mapping per broker profile.
#include "amqp/destination.hpp"

#include <algorithm>

namespace outboxd::amqp {

bool is_full_address(std::string_view destination) {
  return destination.starts_with('/') || destination.find("://") != std::string_view::npos;
}

Target target_for(std::string_view destination, config::BrokerProfile profile) {
  using config::BrokerProfile;
  const bool durable = profile == BrokerProfile::rabbitmq;
  if (is_full_address(destination)) {
    return {std::string(destination), durable, {}};
  }
  switch (profile) {
    case BrokerProfile::rabbitmq:
      return {"/queue/" + std::string(destination), true, {}};
    case BrokerProfile::artemis:
      return {std::string(destination), false, {"queue"}};
    case BrokerProfile::activemq:
      return {"queue://" + std::string(destination), false, {}};
    case BrokerProfile::generic:
    case BrokerProfile::azure_servicebus:
      break;
  }
  return {std::string(destination), false, {}};
}

namespace {

// In UTF-8, a character beyond U+00FF starts with a byte from 0xC4 up;
// continuation bytes are below (0x80..0xBF), and U+0080..U+00FF start with
// 0xC2 or 0xC3.
bool latin1(std::string_view address) {
  return std::none_of(address.begin(), address.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xC4; });
}

}  // namespace

std::optional<std::string> carry_problem(const Target& target, config::BrokerProfile profile) {
  using config::BrokerProfile;
  if (profile == BrokerProfile::rabbitmq && !latin1(target.address)) {
    return "the rabbitmq profile's broker (RabbitMQ 3.x) cannot carry an address beyond Latin-1: its AMQP 1.0 "
           "plugin ends the whole connection on such a link";
  }
  // ActiveMQ Classic reads "queue://a,b" as a composite destination: one
  // message would reach every queue named, none of them the one written.
  if (profile == BrokerProfile::activemq && target.address.find(',') != std::string::npos) {
    return "the activemq profile's broker (ActiveMQ Classic) takes a comma in an address as a composite "
           "destination, one copy of the message to each name: write the row to a destination without a comma";
  }
  return std::nullopt;
}

}  // namespace outboxd::amqp
