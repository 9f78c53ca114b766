// The probe connection: where the suspects of a lost connection are tried, away from the main connection.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include <proton/connection.hpp>

#include "amqp/destination.hpp"
#include "amqp/detail/link_set.hpp"
#include "amqp/outcome.hpp"
#include "core/clock.hpp"
#include "dispatch/connection_suspects.hpp"
#include "dispatch/node_rotation.hpp"

namespace outboxd::amqp {

// Lives on the container thread, beside the main connection, to the same
// node with the same settings. It is handed only the rows that
// dispatch::ConnectionSuspects::on_probe names, and tries them by the
// suspects' rules (one attach or one suspect row at a time). A destination
// whose link opens here is cleared, and its next rows go to the main
// connection. When this connection ends, what was under way on it is blamed
// (or named) as on the main one; its failures never touch the main
// connection's reconnect plan. It connects when handed a row, attaches only
// once open (so a refused connection blames nothing), retries after its own
// backoff (reset by every open: ending is what a probe is for), and closes
// once its last link closed for idleness.
class ProbeConnection {
 public:
  using SteadyTime = core::SteadyTime;
  using Duration = core::Duration;
  // Opens a connection to the main connection's node with its settings.
  using Dial = std::function<proton::connection()>;

  ProbeConnection(OutcomeSink& sink, dispatch::ConnectionSuspects& suspects, dispatch::BackoffPolicy backoff,
                  core::RandomSource& random);

  bool owns(const proton::connection& connection) const { return connection_ && connection == connection_; }
  LinkSet& links() { return links_; }
  // The connection the link set attaches on: empty until it opened.
  proton::connection& usable() { return open_ ? connection_ : none_; }

  void queue_delivery(const Dial& dial, const std::string& destination, const Target& target,
                      LinkSet::Pending pending);
  void on_open(SteadyTime now);
  // It ended (the broker closed it, or the transport failed): what was under
  // way on it is named or blamed, and every row it had is connection_lost.
  void lost(const std::string& reason, SteadyTime now);

  std::optional<SteadyTime> next_deadline(Duration timeout, Duration idle) const;
  // Reconnects when due, gives up on an attempt or a delivery past `timeout`,
  // closes idle links and then itself; returns whether frames wait to be written.
  bool on_timer(const Dial& dial, SteadyTime now, Duration timeout, Duration idle);

  // The publisher stops: every row is answered, the connection closed (`close_it`) or dropped.
  void shutdown(const std::string& reason, bool close_it);
  void flush();

 private:
  enum class State { idle, connecting, up, waiting };

  void connect(const Dial& dial, SteadyTime now);
  void close(const std::string& reason, SteadyTime now);

  LinkSet links_;
  dispatch::NodeRotation backoff_;  // one node: the backoff alone
  core::RandomSource& random_;
  proton::connection connection_;
  proton::connection none_;
  State state_ = State::idle;
  bool open_ = false;
  SteadyTime attempt_started_{};
  SteadyTime reconnect_at_{};
};

}  // namespace outboxd::amqp
