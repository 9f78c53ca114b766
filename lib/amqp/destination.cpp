// Destination-to-target mapping per broker profile.
#include "amqp/destination.hpp"

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

}  // namespace outboxd::amqp
