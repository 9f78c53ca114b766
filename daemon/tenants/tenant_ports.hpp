// The Broker and Events ports of one serve job: rows out through the shared publisher, its own wake-ups.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "amqp/publisher.hpp"
#include "daemon/run/event_loop.hpp"
#include "daemon/run/outcome_queue.hpp"
#include "daemon/run/ports.hpp"
#include "daemon/tenants/outcome_router.hpp"

namespace outboxd::daemon::tenants {

// Rows leave stamped with the job's route (outcomes come back by it) and the
// outbox's name (the message carries it: consumers and Artemis' duplicate
// detection tell equal message ids of two outboxes apart).
class TenantBroker final : public Broker {
 public:
  TenantBroker(amqp::Publisher& publisher, OutcomeRouter& router, std::uint32_t route, std::string name,
               EventFd& wake)
      : publisher_(publisher),
        router_(router),
        route_(route),
        name_(std::make_shared<const std::string>(std::move(name))),
        queue_(wake) {}
  ~TenantBroker() override { router_.detach(route_); }
  TenantBroker(const TenantBroker&) = delete;
  TenantBroker& operator=(const TenantBroker&) = delete;

  // The publisher is the supervisor's, started and stopped by it.
  core::Status start() override;
  void send(std::vector<core::OutboxMessage> rows, core::SteadyTime send_before) override;
  BrokerNews take_news() override { return queue_.take(); }
  void stop() override { router_.detach(route_); }
  bool plain_over_cleartext() const override { return false; }  // the supervisor warns, once

 private:
  amqp::Publisher& publisher_;
  OutcomeRouter& router_;
  std::uint32_t route_;
  std::shared_ptr<const std::string> name_;  // each row sent shares it
  OutcomeQueue queue_;
};

// The job's sleep: its eventfd (outcomes, and the supervisor's pokes) and the
// database socket, never longer than kTick so the job looks at its orders
// (yield, stop, let go) at least that often. No signals: the supervisor has them.
class TenantEvents final : public Events {
 public:
  static constexpr std::chrono::milliseconds kTick{1000};
  explicit TenantEvents(EventFd& wake) : wake_(wake) {}

  std::vector<int> take_signals() override { return {}; }
  Readiness wait(int database_fd, std::chrono::milliseconds timeout) override;

 private:
  EventFd& wake_;
};

}  // namespace outboxd::daemon::tenants
