// The Broker port on amqp::Publisher: rows go to its thread, its reports come back through an OutcomeQueue.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "amqp/publisher.hpp"
#include "core/clock.hpp"
#include "daemon/run/event_loop.hpp"
#include "daemon/run/outcome_queue.hpp"
#include "daemon/run/ports.hpp"

namespace outboxd::daemon {

class PublisherBroker final : public Broker {
 public:
  // `random` goes to the publisher's thread alone.
  PublisherBroker(const config::BrokerConfig& broker, std::string container_id, EventFd& event_fd,
                  const core::Clock& clock, core::RandomSource& random)
      : outcomes_(event_fd), publisher_(broker, std::move(container_id), outcomes_, clock, random) {}

  core::Status start() override { return publisher_.start(); }
  void send(std::vector<core::OutboxMessage> rows, core::SteadyTime send_before) override {
    publisher_.publish(std::move(rows), send_before);
  }
  BrokerNews take_news() override { return outcomes_.take(); }
  void stop() override { publisher_.stop(); }
  bool plain_over_cleartext() const override { return publisher_.plain_over_cleartext(); }

 private:
  OutcomeQueue outcomes_;
  amqp::Publisher publisher_;
};

}  // namespace outboxd::daemon
