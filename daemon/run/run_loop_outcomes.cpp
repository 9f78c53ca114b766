// Broker news: its connection's state kept, its outcomes and the decisions they make handed to DecisionWriter.
#include "daemon/run/run_loop.hpp"

#include <spdlog/spdlog.h>

namespace outboxd::daemon {

void RunLoop::apply_outcomes() {
  auto news = broker_.take_news();
  note_broker_connection(news.connection_events);
  decisions_.apply(news.outcomes);
}

void RunLoop::note_broker_connection(const std::vector<BrokerNews::ConnectionEvent>& events) {
  for (const auto& event : events) {
    if (event.up) {
      if (!broker_up_) spdlog::info("broker connected: {}", event.reason);
      broker_down_reason_.clear();
      metrics_.broker_node.replace({{{{"node", event.node}}, 1.0}});
    } else {
      metrics_.broker_node.replace({});
      // Every lost or refused connection counts; the log says it once per outage and
      // reason, so a broker that was never reached (or refuses anew) is named at warn.
      // The node is named apart from the reason: with broker.urls several nodes may
      // refuse for the same reason, and the next attempt goes to the next of them.
      metrics_.broker_lost.inc();
      if (broker_up_) spdlog::warn("broker connection lost ({}): {}", event.node, event.reason);
      else if (event.reason != broker_down_reason_) {
        spdlog::warn("broker unavailable ({}): {}; retrying", event.node, event.reason);
      } else {
        spdlog::debug("broker connection attempt failed ({}): {}", event.node, event.reason);
      }
      broker_down_reason_ = event.reason;
    }
    broker_up_ = event.up;
  }
}

void RunLoop::persist_decisions() {
  if (auto written = decisions_.persist(stopping_); !written) fail_database(written.error());
}

}  // namespace outboxd::daemon
