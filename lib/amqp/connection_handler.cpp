// Connection lifecycle of the publisher: connect, accept work, lose and re-open, timers, shutdown.
#include "amqp/detail/connection_handler.hpp"

#include <algorithm>

#include <proton/duration.hpp>
#include <proton/error_condition.hpp>
#include <proton/work_queue.hpp>

#include "amqp/destination.hpp"
#include "amqp/message_mapping.hpp"
#include "config/secrets.hpp"
#include "core/safe_text.hpp"

namespace outboxd::amqp {

using core::DeliveryOutcome;
using std::chrono::milliseconds;

namespace {

std::string ms_text(milliseconds value) { return std::to_string(value.count()) + " ms"; }

}  // namespace

ConnectionHandler::ConnectionHandler(const config::BrokerConfig& broker, ConnectionSettings settings,
                                     proton::connection_options options, OutcomeSink& sink,
                                     std::atomic<bool>& connected, const core::Clock& clock,
                                     core::RandomSource& random)
    : broker_(broker),
      settings_(std::move(settings)),
      options_(std::move(options)),
      sink_(sink),
      connected_(connected),
      clock_(clock),
      random_(random),
      // Up for reconnect_max: the connection was stable, its loss starts the count afresh.
      rotation_(settings_.nodes.size(), {broker.reconnect_min, broker.reconnect_max, 2.0, 0.2}, broker.reconnect_max),
      links_(sink, suspects_, "outboxd:"),
      probe_(sink, suspects_, {broker.reconnect_min, broker.reconnect_max, 2.0, 0.2}, random),
      encoder_(broker.cloudevents) {}

void ConnectionHandler::guarded(const char* where, const std::function<void()>& step) {
  std::string failure;
  try {
    step();
    return;
  } catch (const std::exception& e) {
    failure = std::string("internal error in ") + where + ": " + core::safe_text(e.what());
  } catch (...) {
    failure = std::string("internal error in ") + where;
  }
  try {
    connection_lost(failure, true);
  } catch (...) {
    // Nothing sensible is left to do on this container: end it; Publisher
    // answers what is left and starts a fresh one.
    try {
      if (container_) container_->stop();
    } catch (...) {
    }
  }
}

void ConnectionHandler::on_container_start(proton::container& container) {
  container_ = &container;
  state_ = State::idle;
  guarded("connect", [this] { connect(); });
}

// The password file is read at every attempt, so a rotated password is used
// from the next connection on. An unreadable file fails the attempt like a
// refused connection (the reason names the file, never its contents).
std::optional<proton::connection_options> ConnectionHandler::options_now(std::string& error) const {
  proton::connection_options options = options_;
  if (!broker_.password_file.empty()) {
    auto password = config::read_secret_file(broker_.password_file, broker_.password_file);
    if (!password) {
      error = "broker.password_file: " + password.error().message;
      return std::nullopt;
    }
    options.password(password.value());
  }
  return options;
}

void ConnectionHandler::connect() {
  state_ = State::connecting;
  attempt_started_ = now();
  std::string error;
  auto options = options_now(error);
  if (!options) return connection_lost(error, false);
  connection_ = container_->connect(node().url, *options);
  arm_timer();
}

// The probe goes to the node the main connection is on (or tries next).
proton::connection ConnectionHandler::dial_probe() {
  std::string error;
  auto options = options_now(error);
  if (!options || !container_) return proton::connection();
  return container_->connect(node().url, *options);
}

bool ConnectionHandler::is_current(const proton::connection& connection) const {
  return connection_ && connection == connection_;
}

LinkSet* ConnectionHandler::links_of(const proton::connection& connection) {
  if (probe_.owns(connection)) return &probe_.links();
  return is_current(connection) ? &links_ : nullptr;
}

void ConnectionHandler::accept_batch(std::vector<core::OutboxMessage> batch, SteadyTime send_before) {
  for (auto& row : batch) {
    guarded("publish", [&] { accept_one(row, send_before); });
  }
  guarded("publish", [this] {
    arm_timer();
    flush();
    probe_.flush();
  });
}

void ConnectionHandler::accept_one(core::OutboxMessage& row, SteadyTime send_before) {
  auto answer = [&](DeliveryOutcome outcome, std::string reason) {
    sink_.on_outcome(outcome_for(core::delivery_key(row), outcome, std::move(reason)));
  };
  if (state_ == State::stopping || state_ == State::stopped) {
    return answer(DeliveryOutcome::connection_lost, "publisher stopping");
  }
  // Retrying would not change the row: its answer is final.
  if (row.destination.empty()) return answer(DeliveryOutcome::unsendable, "destination is empty");
  Target target = target_for(row.destination, broker_.profile);
  if (auto why = carry_problem(target, broker_.profile)) return answer(DeliveryOutcome::unsendable, *why);
  auto message = encoder_.encode(row, broker_.profile);
  // The encoded message holds the body now: this share goes at once, not with the whole batch.
  row.body.clear();
  if (!message) return answer(DeliveryOutcome::unsendable, message.error().message);
  if (state_ != State::connecting && state_ != State::up) {
    return answer(DeliveryOutcome::connection_lost, "not connected to the broker: " + last_error_);
  }
  // The clock is read per row: the thread may have stalled anywhere in the batch.
  LinkSet::Pending pending{core::delivery_key(row), std::move(message).value(), now(), send_before};
  if (suspects_.on_probe(row.destination, pending.key)) {
    return probe_.queue_delivery([this] { return dial_probe(); }, row.destination, target, std::move(pending));
  }
  links_.queue_delivery(connection_, row.destination, target, std::move(pending));
}

void ConnectionHandler::connection_lost(const std::string& reason, bool close_it) {
  if (close_it && connection_) {
    connection_.close(proton::error_condition("outboxd:abandoned", reason));
    flush();
  }
  connection_ = proton::connection();
  if (state_ == State::stopping || state_ == State::stopped) {
    links_.fail_all(reason);
    return stop_container();
  }
  const bool was_trying = state_ == State::up || state_ == State::connecting || state_ == State::idle;
  connected_ = false;
  if (!was_trying) return links_.fail_all(reason);  // already waiting to reconnect
  last_error_ = reason;
  sink_.on_connection(false, node().name, reason);  // first, so that logs read "lost", then the rows it took along
  links_.fail_all(reason);
  state_ = State::waiting;
  reconnect_at_ = rotation_.failed(now(), random_);
  arm_timer();
}

void ConnectionHandler::begin_shutdown() {
  guarded("shutdown", [this] {
    if (state_ == State::stopping || state_ == State::stopped) return;
    const bool was_up = state_ == State::up;
    connected_ = false;
    state_ = State::stopping;
    if (was_up) sink_.on_connection(false, node().name, "publisher stopping");
    links_.fail_all("publisher stopping");
    probe_.shutdown("publisher stopping", true);
    if (!connection_) return stop_container();
    connection_.close();  // graceful: the broker answers, then the transport closes
    flush();
    shutdown_deadline_ = now() + kCloseGrace;
    arm_timer();
  });
}

void ConnectionHandler::stop_container() {
  if (state_ == State::stopped) return;
  state_ = State::stopped;
  connection_ = proton::connection();
  if (container_) container_->stop();
}

void ConnectionHandler::flush() {
  if (connection_) connection_.work_queue().add([] {});  // add() wakes the connection
}

void ConnectionHandler::after_run(const std::string& reason) {
  connection_ = proton::connection();
  connected_ = false;
  if (state_ == State::up) sink_.on_connection(false, node().name, reason);
  links_.fail_all(reason);
  probe_.shutdown(reason, false);  // the container is gone: nothing to close
  container_ = nullptr;
  timer_armed_ = false;
  state_ = State::idle;
}

std::optional<ConnectionHandler::SteadyTime> ConnectionHandler::next_deadline() const {
  const auto timeout = broker_.outcome_timeout;
  auto next = main_deadline();
  if (probe_runs()) {
    if (auto probe = probe_.next_deadline(timeout, broker_.link_idle_close); probe && (!next || *probe < *next)) {
      next = probe;
    }
  }
  return next;
}

// The probe runs beside the main connection until the publisher stops.
bool ConnectionHandler::probe_runs() const {
  return state_ == State::connecting || state_ == State::up || state_ == State::waiting;
}

std::optional<ConnectionHandler::SteadyTime> ConnectionHandler::main_deadline() const {
  const auto timeout = broker_.outcome_timeout;
  switch (state_) {
    case State::connecting:
      return attempt_started_ + timeout;
    case State::waiting:
      return reconnect_at_;
    case State::stopping:
      return shutdown_deadline_;
    case State::up: {
      std::optional<SteadyTime> next = links_.next_idle_close(broker_.link_idle_close);
      auto consider = [&](SteadyTime at) {
        if (!next || at < *next) next = at;
      };
      if (auto oldest = links_.oldest_in_flight()) consider(oldest->first + timeout);
      if (auto oldest = links_.oldest_queued()) consider(*oldest + timeout);
      return next;
    }
    case State::idle:
    case State::stopped:
      break;
  }
  return std::nullopt;
}

void ConnectionHandler::arm_timer() {
  if (timer_armed_ || !container_ || state_ == State::stopped) return;
  const auto deadline = next_deadline();
  if (!deadline) return;
  auto delay = std::chrono::ceil<milliseconds>(*deadline - now());
  delay = std::clamp(delay, milliseconds(1), milliseconds(kMaxTimerSlice));
  timer_armed_ = true;
  container_->schedule(proton::duration(delay.count()), [this] {
    timer_armed_ = false;
    guarded("timer", [this] {
      on_timer();
      arm_timer();
    });
  });
}

void ConnectionHandler::on_timer() {
  const auto at = now();
  const auto timeout = broker_.outcome_timeout;
  if (probe_runs() && probe_.on_timer([this] { return dial_probe(); }, at, timeout, broker_.link_idle_close)) {
    probe_.flush();
  }
  switch (state_) {
    case State::waiting:
      if (at >= reconnect_at_) connect();
      return;
    case State::connecting:
      if (at - attempt_started_ >= timeout) {
        connection_lost("no connection to " + node().name + " within the outcome timeout (" +
                            ms_text(timeout) + ")",
                        true);
      }
      return;
    case State::up:
      if (auto oldest = links_.oldest_in_flight(); oldest && at - oldest->first >= timeout) {
        connection_lost("no outcome for " + core::describe(oldest->second) + " within the outcome timeout (" +
                            ms_text(timeout) + "); closing the connection",
                        true);
        return;
      }
      links_.expire_queued(at, timeout);
      if (links_.close_idle(at, broker_.link_idle_close) > 0) flush();
      return;
    case State::stopping:
      if (at >= shutdown_deadline_) stop_container();
      return;
    case State::idle:
    case State::stopped:
      return;
  }
}

}  // namespace outboxd::amqp
