// The largest message each broker profile accepts in its default configuration.
#include "config/config.hpp"

namespace outboxd::config {

// Azure Service Bus standard tier: 256 KiB per message (premium allows more:
// set dispatch.max_message_bytes). RabbitMQ 3.10+: max_message_size defaults
// to 128 MiB. Artemis stores AMQP messages above amqpMinLargeMessageSize as
// large messages and sets no maximum, and ActiveMQ Classic's transports
// default to a 100 MB maxFrameSize: 100 MiB keeps one message within what
// a daemon on a small host should hold, and is the generic profile's too.
int profile_max_message_bytes(BrokerProfile profile) {
  switch (profile) {
    case BrokerProfile::azure_servicebus:
      return 256 << 10;
    case BrokerProfile::rabbitmq:
      return 128 << 20;
    case BrokerProfile::generic:
    case BrokerProfile::activemq:
    case BrokerProfile::artemis:
      break;
  }
  return 100 << 20;
}

int max_message_bytes(const Config& config) {
  return config.dispatch.max_message_bytes > 0 ? config.dispatch.max_message_bytes
                                               : profile_max_message_bytes(config.broker.profile);
}

}  // namespace outboxd::config
