// Proton callbacks of the publisher: outcomes, credit, and every way a link or connection can end.
#include <proton/connection.hpp>
#include <proton/error_condition.hpp>
#include <proton/receiver.hpp>
#include <proton/sender.hpp>
#include <proton/session.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>

#include "amqp/detail/connection_handler.hpp"
#include "amqp/detail/proton_access.hpp"
#include "core/safe_text.hpp"

namespace outboxd::amqp {

using core::DeliveryOutcome;

namespace {

// Link-level conditions that say the destination itself is refused (missing,
// forbidden, malformed): the rows for it are rejected so that they back off
// and park instead of being retried at the release rate forever.
bool refuses_destination(const std::string& condition) {
  return condition == "amqp:not-found" || condition == "amqp:unauthorized-access" ||
         condition == "amqp:not-allowed" || condition == "amqp:invalid-field" ||
         condition == "amqp:precondition-failed" || condition == "amqp:not-implemented";
}

// The peer chose the condition's text: it may be any size, any bytes, and it
// ends up in a log line and in last_error.
std::string or_default(const proton::error_condition& condition, const char* fallback) {
  return condition.empty() ? fallback : core::safe_text(condition.what());
}

// Why the broker ended the whole connection. A refused login is retried (a
// password may be mid-rotation) but says which keys to check.
std::string connection_reason(const proton::error_condition& condition, const char* fallback) {
  std::string reason = or_default(condition, fallback);
  if (condition.name() == "amqp:unauthorized-access") {
    reason += " (the broker refused the login: check broker.username and broker.password or broker.password_file)";
  }
  return reason;
}

}  // namespace

void ConnectionHandler::on_connection_open(proton::connection& connection) {
  guarded("on_connection_open", [&] {
    if (probe_.owns(connection)) return probe_.on_open(now());
    if (!is_current(connection) || state_ != State::connecting) return;
    state_ = State::up;
    rotation_.connected(now());
    connected_ = true;
    sink_.on_connection(true, node().name, "connected to " + node().name);
  });
}

void ConnectionHandler::on_sendable(proton::sender& sender) {
  guarded("on_sendable", [&] {
    if (LinkSet* links = links_of(sender.connection())) links->on_sendable(sender, now());
  });
}

void ConnectionHandler::on_tracker_accept(proton::tracker& tracker) {
  guarded("on_tracker_accept", [&] {
    if (LinkSet* links = links_of(tracker.connection())) {
      links->settle(tracker.tag(), DeliveryOutcome::accepted, {}, now());
    }
  });
}

void ConnectionHandler::on_tracker_reject(proton::tracker& tracker) {
  guarded("on_tracker_reject", [&] {
    std::string reason = remote_condition(tracker);
    if (reason.empty()) reason = "rejected by broker";
    LinkSet* links = links_of(tracker.connection());
    if (links) links->settle(tracker.tag(), DeliveryOutcome::rejected, std::move(reason), now());
  });
}

// Proton reports released and modified through this one callback.
void ConnectionHandler::on_tracker_release(proton::tracker& tracker) {
  guarded("on_tracker_release", [&] {
    std::string reason = "released by broker";
    if (tracker.state() == proton::transfer::MODIFIED) {
      const auto flags = remote_modified_flags(tracker);
      reason = "modified by broker";
      if (flags.delivery_failed && flags.undeliverable_here) {
        reason += " (delivery-failed, undeliverable-here)";
      } else if (flags.delivery_failed) {
        reason += " (delivery-failed)";
      } else if (flags.undeliverable_here) {
        reason += " (undeliverable-here)";
      }
    }
    if (LinkSet* links = links_of(tracker.connection())) {
      links->settle(tracker.tag(), DeliveryOutcome::released, std::move(reason), now());
    }
  });
}

// Settled without one of the outcomes above (no state, or a non-terminal one):
// nothing says the broker kept the message, so the row is published again.
// For a delivery that already had its outcome this is a no-op.
void ConnectionHandler::on_tracker_settle(proton::tracker& tracker) {
  guarded("on_tracker_settle", [&] {
    if (LinkSet* links = links_of(tracker.connection())) {
      links->settle(tracker.tag(), DeliveryOutcome::unknown, "settled by the broker without an outcome", now());
    }
  });
}

void ConnectionHandler::on_sender_open(proton::sender& sender) {
  guarded("on_sender_open", [&] {
    if (LinkSet* links = links_of(sender.connection())) links->on_open(sender, now());
  });
}

// The error, if any, is read in on_sender_close, which always follows.
void ConnectionHandler::on_sender_error(proton::sender&) {}

void ConnectionHandler::on_sender_close(proton::sender& sender) {
  guarded("on_sender_close", [&] {
    LinkSet* links = links_of(sender.connection());
    if (!links) return;
    const auto condition = sender.error();
    links->link_closed(sender, or_default(condition, "closed by the broker"), refuses_destination(condition.name()));
    links->resume(attach_on(*links), now());
    arm_timer();
  });
}

void ConnectionHandler::on_sender_detach(proton::sender& sender) {
  guarded("on_sender_detach", [&] {
    LinkSet* links = links_of(sender.connection());
    if (!links) return;
    const auto condition = sender.error();
    links->link_closed(sender, or_default(condition, "detached by the broker"), refuses_destination(condition.name()));
    links->resume(attach_on(*links), now());
    arm_timer();
  });
}

// Every link has an AMQP session of its own: the AMQP session's end is its link's end.
void ConnectionHandler::on_session_close(proton::session& session) {
  guarded("on_session_close", [&] {
    LinkSet* links = links_of(session.connection());
    if (!links || state_ == State::stopping) return;
    const auto condition = session.error();
    links->session_closed(session, "AMQP session ended: " + or_default(condition, "no reason given"),
                          refuses_destination(condition.name()));
    links->resume(attach_on(*links), now());
    arm_timer();
  });
}

void ConnectionHandler::on_session_error(proton::session&) {}  // on_session_close follows

void ConnectionHandler::on_connection_close(proton::connection& connection) {
  guarded("on_connection_close", [&] {
    if (probe_.owns(connection)) {
      probe_.lost("closed by the broker: " + connection_reason(connection.error(), "no reason given"), now());
      return arm_timer();
    }
    if (!is_current(connection)) return;
    if (state_ == State::stopping) return stop_container();
    connection_lost("connection closed by the broker: " + connection_reason(connection.error(), "no reason given"), false);
  });
}

void ConnectionHandler::on_connection_error(proton::connection&) {}  // on_connection_close follows

void ConnectionHandler::on_transport_error(proton::transport& transport) {
  guarded("on_transport_error", [&] {
    if (probe_.owns(transport.connection())) {
      probe_.lost(connection_reason(transport.error(), "connection lost"), now());
      return arm_timer();
    }
    if (!is_current(transport.connection())) return;
    if (state_ == State::stopping) return stop_container();
    connection_lost(connection_reason(transport.error(), "connection lost"), false);
  });
}

void ConnectionHandler::on_transport_close(proton::transport& transport) {
  guarded("on_transport_close", [&] {
    if (probe_.owns(transport.connection())) {
      probe_.lost("connection lost", now());
      return arm_timer();
    }
    if (!is_current(transport.connection())) return;
    if (state_ == State::stopping) return stop_container();
    connection_lost("connection lost", false);
  });
}

void ConnectionHandler::on_receiver_close(proton::receiver&) {}
void ConnectionHandler::on_receiver_error(proton::receiver&) {}

// Only Proton's default callbacks call this, and all of them are overridden;
// kept so that a future default cannot throw out of container::run().
void ConnectionHandler::on_error(const proton::error_condition& condition) {
  guarded("on_error", [&] { last_error_ = core::safe_text(condition.what()); });
}

}  // namespace outboxd::amqp
