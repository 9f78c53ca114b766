// The run loop's broker side: rows out to the AMQP client, its news in, the connection's state kept.
#pragma once

#include <string>
#include <vector>

#include "amqp/outcome.hpp"
#include "core/clock.hpp"
#include "daemon/run/decision_writer.hpp"
#include "daemon/run/lease_keeper.hpp"
#include "daemon/run/ports.hpp"
#include "daemon/run/run_loop_metrics.hpp"
#include "dispatch/row_book.hpp"

namespace outboxd::daemon {

// Hands the rows the book has ready to the broker while it is connected and
// the leases allow, and takes back what the publisher's thread reported: its
// outcomes, for DecisionWriter, and its connection coming and going, which
// is logged (each outage and reason once at warn) and counted here.
class PublishStep {
 public:
  PublishStep(Broker& broker, dispatch::RowBook& book, const LeaseKeeper& leases, DecisionWriter& decisions,
              RunLoopMetrics& metrics, const core::Clock& clock);

  // Starts the AMQP client; false (logged) when it cannot start.
  bool start();
  void stop() { broker_.stop(); }

  // The outcomes reported since the last call; connection news is noted on the way.
  std::vector<amqp::Outcome> take_outcomes();
  // The rows the book has ready, unless `stopping` (rows published then
  // could not be marked), the broker is down or the leases may have expired.
  void publish_ready(bool stopping);
  bool up() const { return up_; }

 private:
  void note_connection(const std::vector<BrokerNews::ConnectionEvent>& events);

  Broker& broker_;
  dispatch::RowBook& book_;
  const LeaseKeeper& leases_;
  DecisionWriter& decisions_;
  RunLoopMetrics& metrics_;
  const core::Clock& clock_;
  bool up_ = false;
  std::string down_reason_;  // the last failed attempt's, logged at warn once
};

}  // namespace outboxd::daemon
