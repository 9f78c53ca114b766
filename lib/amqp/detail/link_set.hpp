// The sender links of one connection, their queues, and the deliveries awaiting an outcome.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>

#include <proton/binary.hpp>
#include <proton/connection.hpp>
#include <proton/sender.hpp>
#include <proton/session.hpp>

#include "amqp/destination.hpp"
#include "amqp/message_mapping.hpp"
#include "amqp/outcome.hpp"
#include "core/clock.hpp"
#include "dispatch/connection_suspects.hpp"

namespace outboxd::amqp {

// Lives on the container thread. One sender link per destination, opened on
// first use, each on an AMQP session of its own: RabbitMQ answers a failed queue
// declaration (a durable target for an existing non-durable queue, say) by
// ending the AMQP session, which must not take other destinations' deliveries
// along. A message waits in its link's queue until the link has credit.
// Every delivery gets a tag from one 64-bit counter that is never reset, so
// tags are unique across links and connections: Proton's own numbering
// restarts at 0 in every proton::sender copy and would repeat tags on a link.
//
// A delivery is known by its core::DeliveryKey (outbox and row id), never by
// the row id alone: rows of several outboxes share the link set, and two of
// them may carry the same id.
//
// When a connection ends, dispatch::ConnectionSuspects learns which attaches
// and deliveries were under way; a suspect link waits to be attached alone and
// a suspect row to be sent alone, and a convicted one is answered unsendable.
// The publisher has two: the main connection's, which is never handed a
// suspect, and the probe connection's (ProbeConnection), which tries them.
// A link set handed no connection yet (an empty one) queues and attaches later,
// in resume().
class LinkSet {
 public:
  using SteadyTime = core::SteadyTime;
  using Duration = core::Duration;

  // A message waiting for its link's credit.
  struct Pending {
    core::DeliveryKey key;
    EncodedMessage message;
    SteadyTime queued_at;
    SteadyTime send_before;  // fencing deadline: past it, the row is answered not_sent
  };

  // `suspects` is shared by the link sets of the publisher; link names start with `name_prefix`.
  LinkSet(OutcomeSink& sink, dispatch::ConnectionSuspects& suspects, std::string name_prefix)
      : sink_(sink), suspects_(suspects), name_prefix_(std::move(name_prefix)) {}

  // Queues a message for `destination`, opening its link on `connection` when
  // there is none, and sends what the link's credit allows (`queued_at` is now).
  void queue_delivery(proton::connection& connection, const std::string& destination, const Target& target,
                      Pending pending);

  // The peer attached `sender`: its destination is cleared, and links kept
  // waiting while it was being attached may be attached now.
  void on_open(const proton::sender& sender, SteadyTime now);

  // Attaches the links waiting that may be attached now (after a link
  // opened or closed), and sends what may be sent.
  void resume(proton::connection& connection, SteadyTime now);

  // The peer granted credit on `sender`.
  void on_sendable(const proton::sender& sender, SteadyTime now);

  // An outcome for the delivery tagged `tag`; a second outcome for the same
  // delivery, or one for a delivery already reported unknown, is dropped.
  void settle(const proton::binary& tag, core::DeliveryOutcome outcome, std::string reason, SteadyTime now);

  // The peer closed or detached `sender`. Its deliveries in flight become
  // unknown; its queued messages become rejected when the peer refused the
  // destination (`refused`), unknown otherwise.
  void link_closed(const proton::sender& sender, const std::string& reason, bool refused);
  // The peer ended the AMQP session of a link: the same as closing that link.
  void session_closed(const proton::session& session, const std::string& reason, bool refused);

  // The connection is gone: everything queued or in flight becomes
  // connection_lost, and what was under way becomes suspect.
  void fail_all(const std::string& reason);

  // Queued messages that got no credit within `timeout` become unknown.
  void expire_queued(SteadyTime now, Duration timeout);

  // Closes the links that had nothing queued or in flight for `idle`;
  // returns how many.
  std::size_t close_idle(SteadyTime now, Duration idle);

  // The send time and row of the oldest delivery awaiting an outcome.
  std::optional<std::pair<SteadyTime, core::DeliveryKey>> oldest_in_flight() const;
  std::optional<SteadyTime> oldest_queued() const;
  std::optional<SteadyTime> next_idle_close(Duration idle) const;

  std::size_t in_flight() const { return in_flight_.size(); }
  std::size_t queued() const;
  std::size_t links() const { return links_.size(); }

 private:
  struct Link {
    std::string name;
    std::string address;
    Target target;
    bool attached = false;  // attach sent (false: kept waiting by the suspects)
    bool opening = false;   // attach sent, not yet answered
    proton::session session;
    proton::sender sender;
    std::deque<Pending> queue;
    std::size_t in_flight = 0;
    SteadyTime last_used;
  };
  struct InFlight {
    core::DeliveryKey key;
    std::string link_name;
    SteadyTime sent_at;
    bool suspect = false;
  };

  Link& add_link(const std::string& destination, const Target& target, SteadyTime now);
  void attach(proton::connection& connection, Link& link);
  bool may_attach(const std::string& destination) const;
  bool may_send(const core::DeliveryKey& row) const;
  std::size_t opening() const;
  void pump(Link& link, SteadyTime now);
  void pump_attached(SteadyTime now);
  void closed(const std::string& link_name, const std::string& reason, bool refused);
  Link* by_name(const std::string& link_name);
  void forget(const std::string& link_name);
  void report(const core::DeliveryKey& row, core::DeliveryOutcome outcome, std::string reason);

  OutcomeSink& sink_;
  std::unordered_map<std::string, Link> links_;                     // by destination
  std::unordered_map<std::string, std::string> destination_of_;    // link name -> destination
  std::map<std::uint64_t, InFlight> in_flight_;                     // by tag, so oldest first
  std::uint64_t last_tag_ = 0;
  std::uint64_t links_opened_ = 0;
  dispatch::ConnectionSuspects& suspects_;  // across connections and link sets
  const std::string name_prefix_;
  std::size_t suspects_in_flight_ = 0;
};

}  // namespace outboxd::amqp
