// The Proton handler behind Publisher: one broker connection, reconnects, timers, outcomes.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <proton/connection.hpp>
#include <proton/connection_options.hpp>
#include <proton/container.hpp>
#include <proton/messaging_handler.hpp>

#include "amqp/connection_settings.hpp"
#include "amqp/detail/link_set.hpp"
#include "amqp/detail/probe_connection.hpp"
#include "amqp/message_mapping.hpp"
#include "amqp/outcome.hpp"
#include "config/config.hpp"
#include "core/clock.hpp"
#include "core/outbox_message.hpp"
#include "dispatch/connection_suspects.hpp"
#include "dispatch/node_rotation.hpp"

namespace outboxd::amqp {

// Everything here runs on the container thread. Proton's reconnect_options
// are not used: after a graceful broker stop they left links unattached, so
// the handler opens a fresh connection itself and links are re-created lazily
// by the next messages. Which node it connects to, and after what wait, is
// dispatch::NodeRotation's plan (the nodes of broker.urls in order, the
// backoff once per round).
//
// The suspects of a lost connection (dispatch::ConnectionSuspects) are tried
// on a ProbeConnection to the same node: the main connection is never handed
// a row that on_probe() names, so a destination or row that ends connections
// ends only the probe's, and the probe's losses never delay the main one.
//
// Batches, timers and shutdown run as container-level work, outside any
// connection's event batch: the proactor writes a connection's pending frames
// only after one of its own events, so such work ends with flush(), which
// wakes the connection. Without it, a send or close waits for the next
// incoming frame or heartbeat.
//
// Timers: a pending container::schedule() keeps container::run() alive even
// after container::stop(), and Proton 0.37 cannot cancel one. So there is at
// most one timer at a time, armed only while something has a deadline, and
// never longer than kMaxTimerSlice; stop therefore waits at most that long.
class ConnectionHandler final : public proton::messaging_handler {
 public:
  static constexpr std::chrono::milliseconds kMaxTimerSlice{200};
  static constexpr std::chrono::milliseconds kCloseGrace{2000};  // for the broker to answer our close

  // `clock` and `random` are used on the container thread only (random: reconnect jitter).
  ConnectionHandler(const config::BrokerConfig& broker, ConnectionSettings settings, proton::connection_options options,
                    OutcomeSink& sink, std::atomic<bool>& connected, const core::Clock& clock,
                    core::RandomSource& random);

  // Work handed in from other threads (through the container's work queue).
  // Rows are sent only while the clock reads before `send_before`.
  void accept_batch(std::vector<core::OutboxMessage> batch, core::SteadyTime send_before);
  void begin_shutdown();
  // After container::run() returned: answer whatever is left, drop Proton objects.
  void after_run(const std::string& reason);

  // proton::messaging_handler
  void on_container_start(proton::container& container) override;
  void on_connection_open(proton::connection& connection) override;
  void on_sendable(proton::sender& sender) override;
  void on_tracker_accept(proton::tracker& tracker) override;
  void on_tracker_reject(proton::tracker& tracker) override;
  void on_tracker_release(proton::tracker& tracker) override;
  void on_tracker_settle(proton::tracker& tracker) override;
  void on_sender_open(proton::sender& sender) override;
  void on_sender_detach(proton::sender& sender) override;
  void on_sender_close(proton::sender& sender) override;
  void on_sender_error(proton::sender& sender) override;
  void on_session_close(proton::session& session) override;
  void on_session_error(proton::session& session) override;
  void on_connection_close(proton::connection& connection) override;
  void on_connection_error(proton::connection& connection) override;
  void on_transport_close(proton::transport& transport) override;
  void on_transport_error(proton::transport& transport) override;
  void on_receiver_close(proton::receiver& receiver) override;
  void on_receiver_error(proton::receiver& receiver) override;
  void on_error(const proton::error_condition& condition) override;

 private:
  enum class State { idle, connecting, up, waiting, stopping, stopped };

  using SteadyTime = core::SteadyTime;
  SteadyTime now() const { return clock_.now(); }

  // Runs `step` and turns any exception into a failed connection.
  void guarded(const char* where, const std::function<void()>& step);
  void connect();
  void accept_one(core::OutboxMessage& row, SteadyTime send_before);
  bool is_current(const proton::connection& connection) const;
  // The link set of `connection` (the main's or the probe's), or none for a connection gone.
  LinkSet* links_of(const proton::connection& connection);
  // The connection options for the next attempt (with the password read now), or why there are none.
  std::optional<proton::connection_options> options_now(std::string& error) const;
  proton::connection dial_probe();
  // The connection `links` attaches on (the probe's: only once it opened).
  proton::connection& attach_on(const LinkSet& links) { return &links == &links_ ? connection_ : probe_.usable(); }
  const BrokerNode& node() const { return settings_.nodes[rotation_.current()]; }
  // Ends the current connection (closing it with `reason` if it is still
  // open), answers every message it still has with `unknown`, then reconnects
  // after the backoff or, when stopping, stops the container.
  void connection_lost(const std::string& reason, bool close_it);
  void stop_container();
  void flush();
  void arm_timer();
  void on_timer();
  std::optional<SteadyTime> next_deadline() const;
  std::optional<SteadyTime> main_deadline() const;
  bool probe_runs() const;

  const config::BrokerConfig broker_;
  const ConnectionSettings settings_;
  const proton::connection_options options_;
  OutcomeSink& sink_;
  std::atomic<bool>& connected_;
  const core::Clock& clock_;
  core::RandomSource& random_;  // reconnect jitter
  dispatch::NodeRotation rotation_;  // which node of settings_.nodes, and when
  dispatch::ConnectionSuspects suspects_;  // shared by the main and the probe link sets
  LinkSet links_;  // the main connection's
  ProbeConnection probe_;
  MessageEncoder encoder_;

  proton::container* container_ = nullptr;
  proton::connection connection_;
  State state_ = State::idle;
  SteadyTime attempt_started_{};
  SteadyTime reconnect_at_{};
  SteadyTime shutdown_deadline_{};
  bool timer_armed_ = false;
  std::string last_error_ = "not connected yet";
};

}  // namespace outboxd::amqp
