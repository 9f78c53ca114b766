// The broker side of the run loop: rows published, news taken, the connection's coming and going logged.
#include "daemon/run/publish_step.hpp"

#include <spdlog/spdlog.h>

namespace outboxd::daemon {

PublishStep::PublishStep(Broker& broker, dispatch::RowBook& book, const LeaseKeeper& leases,
                         DecisionWriter& decisions, RunLoopMetrics& metrics, const core::Clock& clock)
    : broker_(broker), book_(book), leases_(leases), decisions_(decisions), metrics_(metrics), clock_(clock) {}

bool PublishStep::start() {
  if (auto started = broker_.start(); !started) {
    spdlog::critical("cannot start the AMQP client: {}", started.error().message);
    return false;
  }
  if (broker_.plain_over_cleartext()) {
    spdlog::warn("broker: SASL PLAIN sends the password in clear text over amqp:// to a non-loopback host; "
                 "use amqps:// (or set broker.allow_insecure_plain to silence this)");
  }
  return true;
}

std::vector<amqp::Outcome> PublishStep::take_outcomes() {
  auto news = broker_.take_news();
  note_connection(news.connection_events);
  return std::move(news.outcomes);
}

void PublishStep::publish_ready(bool stopping) {
  if (stopping || !up_ || !leases_.may_publish()) return;
  const auto unsendable = book_.counters().unsendable;
  auto rows = book_.take_ready();
  // Rows the claim found unsendable were parked instead of handed out.
  if (const auto parked = book_.counters().unsendable - unsendable; parked > 0) {
    metrics_.unsendable.inc(parked);
    decisions_.expect_decisions();
  }
  if (rows.empty()) return;
  const auto now = clock_.now();
  for (const auto& row : rows) observe_delay(metrics_.delay_to_publish, book_, row.id, now);
  metrics_.published.inc(rows.size());
  broker_.send(std::move(rows), leases_.valid_until());
}

void PublishStep::note_connection(const std::vector<BrokerNews::ConnectionEvent>& events) {
  for (const auto& event : events) {
    if (event.up) {
      if (!up_ && !event.replay) spdlog::info("broker connected: {}", event.reason);
      down_reason_.clear();
      metrics_.broker_node.replace({{{{"node", event.node}}, 1.0}});
    } else {
      metrics_.broker_node.replace({});
      // Every lost or refused connection counts; the log says it once per outage and
      // reason, so a broker that was never reached (or refuses anew) is named at warn.
      // The node is named apart from the reason: with broker.urls several nodes may
      // refuse for the same reason, and the next attempt goes to the next of them.
      metrics_.broker_lost.inc();
      if (up_) spdlog::warn("broker connection lost ({}): {}", event.node, event.reason);
      else if (event.reason != down_reason_) {
        spdlog::warn("broker unavailable ({}): {}; retrying", event.node, event.reason);
      } else {
        spdlog::debug("broker connection attempt failed ({}): {}", event.node, event.reason);
      }
      down_reason_ = event.reason;
    }
    up_ = event.up;
  }
}

}  // namespace outboxd::daemon
