// The probe connection's lifecycle: connect on demand, try suspects, end, retry, close when idle.
#include "amqp/detail/probe_connection.hpp"

#include <exception>

#include <proton/error_condition.hpp>
#include <proton/work_queue.hpp>

#include "core/safe_text.hpp"

namespace outboxd::amqp {

namespace {

void consider(std::optional<core::SteadyTime>& next, core::SteadyTime at) {
  if (!next || at < *next) next = at;
}

}  // namespace

ProbeConnection::ProbeConnection(OutcomeSink& sink, dispatch::ConnectionSuspects& suspects,
                                 dispatch::BackoffPolicy backoff, core::RandomSource& random)
    // Stable after no time at all: a probe that opened and then ended did its job.
    : links_(sink, suspects, "outboxd-probe:"), backoff_(1, backoff, core::Duration::zero()), random_(random) {}

void ProbeConnection::connect(const Dial& dial, SteadyTime now) {
  state_ = State::connecting;
  open_ = false;
  attempt_started_ = now;
  try {
    connection_ = dial();
  } catch (const std::exception&) {
    connection_ = proton::connection();
  }
  if (!connection_) {
    state_ = State::waiting;
    reconnect_at_ = backoff_.failed(now, random_);
  }
}

void ProbeConnection::queue_delivery(const Dial& dial, const std::string& destination, const Target& target,
                                     LinkSet::Pending pending) {
  const SteadyTime now = pending.queued_at;
  if (state_ == State::idle) connect(dial, now);
  try {
    links_.queue_delivery(usable(), destination, target, std::move(pending));
  } catch (const std::exception& e) {
    close("cannot open a link on the probe connection: " + core::safe_text(e.what()), now);
  }
}

void ProbeConnection::on_open(SteadyTime now) {
  if (state_ != State::connecting) return;
  state_ = State::up;
  open_ = true;
  backoff_.connected(now);
  links_.resume(connection_, now);
}

void ProbeConnection::lost(const std::string& reason, SteadyTime now) {
  connection_ = proton::connection();
  open_ = false;
  links_.fail_all("probe connection: " + reason);
  state_ = State::waiting;
  reconnect_at_ = backoff_.failed(now, random_);
}

// Ours to end, as when the broker gives no outcome: what was under way is
// named or blamed as if the broker had ended it.
void ProbeConnection::close(const std::string& reason, SteadyTime now) {
  if (connection_) {
    connection_.close(proton::error_condition("outboxd:abandoned", reason));
    flush();
  }
  lost(reason, now);
}

std::optional<ProbeConnection::SteadyTime> ProbeConnection::next_deadline(Duration timeout, Duration idle) const {
  switch (state_) {
    case State::idle:
      return std::nullopt;
    case State::connecting:
      return attempt_started_ + timeout;
    case State::waiting:
      return reconnect_at_;
    case State::up:
      break;
  }
  if (links_.links() == 0) return SteadyTime{};  // nothing left to try: close now
  std::optional<SteadyTime> next = links_.next_idle_close(idle);
  if (auto oldest = links_.oldest_in_flight()) consider(next, oldest->first + timeout);
  if (auto oldest = links_.oldest_queued()) consider(next, *oldest + timeout);
  return next;
}

bool ProbeConnection::on_timer(const Dial& dial, SteadyTime now, Duration timeout, Duration idle) {
  switch (state_) {
    case State::idle:
      return false;
    case State::waiting:
      if (now < reconnect_at_) return false;
      if (links_.queued() == 0) {
        state_ = State::idle;
        return false;
      }
      connect(dial, now);
      return true;
    case State::connecting:
      if (now - attempt_started_ < timeout) return false;
      close("no probe connection within the outcome timeout", now);
      return false;
    case State::up:
      break;
  }
  if (auto oldest = links_.oldest_in_flight(); oldest && now - oldest->first >= timeout) {
    close("no outcome for " + core::describe(oldest->second) + " within the outcome timeout", now);
    return false;
  }
  links_.expire_queued(now, timeout);
  links_.close_idle(now, idle);
  if (links_.links() == 0) {
    connection_.close();  // nothing under way: no suspect to name
    flush();
    connection_ = proton::connection();
    open_ = false;
    state_ = State::idle;
    return false;
  }
  return true;
}

void ProbeConnection::shutdown(const std::string& reason, bool close_it) {
  links_.fail_all(reason);
  if (close_it && connection_) {
    connection_.close();
    flush();
  }
  connection_ = proton::connection();
  open_ = false;
  state_ = State::idle;
}

void ProbeConnection::flush() {
  if (connection_) connection_.work_queue().add([] {});  // add() wakes the connection
}

}  // namespace outboxd::amqp
