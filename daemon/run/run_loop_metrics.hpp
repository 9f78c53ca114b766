// The run loop's Prometheus metrics, registered once and updated by the loop.
#pragma once

#include "core/clock.hpp"
#include "dispatch/row_book.hpp"
#include "metrics/registry.hpp"

namespace outboxd::daemon {

struct RunLoopMetrics {
  explicit RunLoopMetrics(metrics::Registry& r)
      : claimed(r.counter("outboxd_rows_claimed_total", "Rows read from the outbox and handed to the planner")),
        published(r.counter("outboxd_deliveries_sent_total", "Deliveries handed to the broker")),
        accepted(r.counter("outboxd_outcomes_total", "Broker outcomes", {{"outcome", "accepted"}})),
        rejected(r.counter("outboxd_outcomes_total", "Broker outcomes", {{"outcome", "rejected"}})),
        unsendable(r.counter("outboxd_outcomes_total", "Broker outcomes", {{"outcome", "unsendable"}})),
        released(r.counter("outboxd_outcomes_total", "Broker outcomes", {{"outcome", "released"}})),
        unknown(r.counter("outboxd_outcomes_total", "Broker outcomes", {{"outcome", "unknown"}})),
        connection_lost(r.counter("outboxd_outcomes_total", "Broker outcomes", {{"outcome", "connection_lost"}})),
        not_sent(r.counter("outboxd_outcomes_total", "Broker outcomes", {{"outcome", "not_sent"}})),
        dispatched(r.counter("outboxd_rows_dispatched_total", "Rows marked dispatched in the database")),
        retried(r.counter("outboxd_rows_retried_total", "Rejected rows scheduled for another attempt")),
        parked(r.counter("outboxd_rows_parked_total", "Rows parked: max_attempts reached, or unsendable")),
        database_lost(r.counter("outboxd_disconnects_total", "Connections lost or refused", {{"peer", "database"}})),
        broker_lost(r.counter("outboxd_disconnects_total", "Connections lost or refused", {{"peer", "broker"}})),
        in_flight(r.gauge("outboxd_in_flight", "Deliveries awaiting a broker outcome")),
        buffered(r.gauge("outboxd_buffered", "Claimed rows waiting to be published")),
        partitions(r.gauge("outboxd_partitions_held", "Partitions leased by this instance")),
        database_up(r.gauge("outboxd_connected", kConnectedHelp, {{"peer", "database"}})),
        broker_up(r.gauge("outboxd_connected", kConnectedHelp, {{"peer", "broker"}})),
        broker_node(r.gauge_set("outboxd_broker_node", kBrokerNodeHelp)),
        claim_seconds(r.histogram("outboxd_claim_duration_seconds", "Time of one claim round trip")),
        mark_seconds(r.histogram("outboxd_mark_duration_seconds", "Time to persist one batch of outcomes")),
        standby_wait_seconds(r.histogram("outboxd_standby_wait_seconds",
                                         "Time a claim waited until the standby had flushed its rows "
                                         "(database.wait_for_standby)",
                                         {}, delay_buckets())),
        standby_waiting_rows(r.gauge("outboxd_standby_waiting_rows",
                                     "Claimed rows waiting until the standby has flushed them (database.wait_for_standby)")),
        delay_to_publish(r.histogram("outboxd_dispatch_delay_seconds", kDelayHelp, {{"until", "publish"}},
                                     delay_buckets())),
        delay_to_accept(r.histogram("outboxd_dispatch_delay_seconds", kDelayHelp, {{"until", "accept"}},
                                    delay_buckets())),
        redelivery_window(r.gauge("outboxd_redelivery_window_rows",
                                  "Rows a crash may make this instance publish again: dispatch.in_flight + 2 * "
                                  "dispatch.batch_size (size a broker's duplicate-id cache above it)")),
        destination_policy(r.gauge_set("outboxd_destination_policy",
                                       "The delivery policy of each destination that destinations: names, by "
                                       "setting: priority, max_rate, burst, max_in_flight (0: no limit)")),
        destination_in_flight(r.gauge_set("outboxd_destination_in_flight",
                                          "Deliveries awaiting a broker outcome, per destination that "
                                          "destinations: names")),
        destination_held_rows(r.gauge_set("outboxd_destination_held_rows",
                                          "Rows waiting in memory because the destination's limit (rate, "
                                          "in_flight) holds them now; 0 when it does not")) {}

  metrics::Counter& claimed;
  metrics::Counter& published;
  metrics::Counter& accepted;
  metrics::Counter& rejected;
  metrics::Counter& unsendable;  // could not be encoded: parked at once
  metrics::Counter& released;
  metrics::Counter& unknown;
  metrics::Counter& connection_lost;
  metrics::Counter& not_sent;  // stopped by the lease fence
  metrics::Counter& dispatched;
  metrics::Counter& retried;
  metrics::Counter& parked;
  metrics::Counter& database_lost;
  metrics::Counter& broker_lost;
  metrics::Gauge& in_flight;
  metrics::Gauge& buffered;
  metrics::Gauge& partitions;
  metrics::Gauge& database_up;
  metrics::Gauge& broker_up;
  metrics::GaugeSet& broker_node;  // which node of broker.url(s) the connection is to
  metrics::Histogram& claim_seconds;
  metrics::Histogram& mark_seconds;
  metrics::Histogram& standby_wait_seconds;
  metrics::Gauge& standby_waiting_rows;
  metrics::Histogram& delay_to_publish;  // handed to the AMQP client
  metrics::Histogram& delay_to_accept;   // the broker's accepted outcome applied
  metrics::Gauge& redelivery_window;
  metrics::GaugeSet& destination_policy;     // destinations: as configured
  metrics::GaugeSet& destination_in_flight;
  metrics::GaugeSet& destination_held_rows;  // rows a limit holds back, by destination and limit

 private:
  static constexpr const char* kConnectedHelp = "1 while the connection to the peer is up, 0 otherwise";
  static constexpr const char* kBrokerNodeHelp =
      "1 for the broker node (host:port) the publisher is connected to; no series while it is not connected";
  static constexpr const char* kDelayHelp =
      "Time from a row becoming due (created_at, due_at of a timeout, or the end of a backoff; database "
      "clock up to the claim) until it was handed to the AMQP client or the broker accepted it";
  // Finer than the default buckets where a healthy instance lives: a few milliseconds.
  static std::vector<double> delay_buckets() {
    return {0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 5,
            10, 30, 60, 300};
  }
};

// From the moment row `id` became due (its claim's start less how long the
// database says it had been due) to `now`, if `book` still holds it.
inline void observe_delay(metrics::Histogram& histogram, const dispatch::RowBook& book, core::RowId id,
                          core::SteadyTime now) {
  if (const auto due_since = book.due_since(id)) {
    histogram.observe(std::chrono::duration<double>(now - *due_since).count());
  }
}

}  // namespace outboxd::daemon
