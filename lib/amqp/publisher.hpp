// Publishes outbox rows to an AMQP 1.0 broker on a thread of its own, one outcome per row.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "amqp/outcome.hpp"
#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/outbox_message.hpp"
#include "core/result.hpp"

namespace outboxd::amqp {

// Owns a Proton container running on its own thread; no Proton object ever
// leaves that thread. The publisher keeps one connection to the broker,
// re-opening it with backoff (reconnect_min..reconnect_max) for as long as it
// runs, and one sender link per destination, opened on first use and closed
// after link_idle_close without traffic. Deliveries are unsettled (at least
// once) and sent only within the broker's link credit.
//
// Every row handed to publish() gets exactly one Outcome, which names the row
// by its outbox and id (rows of two outboxes may share an id):
//   accepted  the broker accepted the delivery
//   rejected  the broker rejected it (reason: its error condition), or the
//             broker refused the link to its destination
//   unsendable  the row cannot be made into a message (headers outside the
//             rules, an empty destination); not sent, and never will be
//   released  the broker released or modified it
//   unknown   its link ended before the outcome, the broker settled it
//             without one, or it waited outcome_timeout for credit. Publish
//             it again.
//   connection_lost  the connection ended before the outcome (lost, or
//             closed because some delivery got no outcome within
//             outcome_timeout); or the publisher is not connected or is
//             stopping. An attempt for no row: read it again and publish it.
//             A destination or row that keeps ending the connection is
//             found (dispatch::ConnectionSuspects, tried on a second, probe
//             connection beside the main one) and answered unsendable.
//   unsendable also: the profile's broker cannot carry its address (rabbitmq
//             and an address beyond Latin-1).
//   not_sent  its send_before had passed when it was about to be sent; it
//             was not sent.
// Once a row was reported unknown or connection_lost, nothing else is reported for it.
class Publisher {
 public:
  // `clock` reads the time on the container thread (send_before is on it);
  // `random` is used there alone (reconnect jitter), so it must not be shared
  // with another thread. Without them: the steady clock and a seeded FastRandom.
  Publisher(const config::BrokerConfig& broker, std::string container_id, OutcomeSink& sink,
            const core::Clock& clock, core::RandomSource& random);
  Publisher(const config::BrokerConfig& broker, std::string container_id, OutcomeSink& sink);
  ~Publisher();  // stop()
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Validates the URL, SASL and TLS settings (errors are fatal) and starts
  // the container thread, which connects in the background.
  core::Status start();

  // Thread-safe and non-blocking: hands the batch to the container thread.
  // Rows published before start() or after stop() are answered
  // `connection_lost` at once, on the calling thread.
  //
  // `send_before` is a fencing deadline on the steady clock: a row is handed
  // to Proton only while the container thread reads the clock before it, so a
  // process that stalled (SIGSTOP, swapping) between deciding to publish and
  // sending does not send on a lease that may have expired meanwhile. What
  // remains is the moment between that check and the socket write.
  void publish(std::vector<core::OutboxMessage> batch, core::SteadyTime send_before = core::SteadyTime::max());

  // Closes the connection, answers every row without an outcome
  // `connection_lost`, and joins the thread. Idempotent. Must not be called from an OutcomeSink
  // callback.
  void stop();

  bool connected() const;

  // PLAIN may go over cleartext TCP to a host that is not loopback, and
  // broker.allow_insecure_plain is not set: the daemon should log a warning.
  // (The password itself is never logged or put into a reason.)
  bool plain_over_cleartext() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace outboxd::amqp
