// Which link attach or which row brings the broker connection down: found by trying suspects one at a time.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/outbox_message.hpp"

namespace outboxd::dispatch {

// A broker may end the whole connection over one destination or one message
// (RabbitMQ 3.x's AMQP 1.0 plugin does so on attaching a link to an address
// outside Latin-1). Every row in flight then loses its outcome, and a daemon
// that charged them an attempt, or sent the culprit again alongside them,
// would park innocent rows and keep the connection resetting.
//
// The publisher tells this class what was going on when a connection ended,
// and asks it where each row goes and before each link attach and each send:
//  - The links being attached are suspects; if none was, the rows in flight are.
//  - A suspect is tried on a probe connection of its own (`on_probe`): the
//    main connection never attaches a suspect destination nor sends a suspect
//    row, so what it carries flows while the suspects are tried.
//  - On the probe a suspect goes alone: its attach starts only while no other
//    attach is under way and none other starts until it opened; a suspect row
//    is sent only while no other suspect row is in flight and no attach is
//    under way.
//  - A suspect that was alone when the connection ended takes the blame. One
//    blamed kMaxBlame times is convicted: its rows are answered unsendable
//    (and so parked) with the broker's words, and a convicted destination is
//    never attached again while the process runs.
//  - A suspect that opens or settles is cleared.
// Rows not under suspicion flow as ever, and no row is charged for a lost connection.
// A row is known by its DeliveryKey: the publisher serves many outboxes, and
// a suspect row of one must never hold back or convict a row of the same id
// of another.
class ConnectionSuspects {
 public:
  static constexpr int kMaxBlame = 3;
  // Suspect rows that never come back (cancelled, say) are dropped past this many.
  static constexpr std::size_t kMaxRows = 10000;

  // The connection ended with `reason`, while `attaching` destinations' links
  // were being attached and `in_flight` rows awaited their outcome.
  void on_connection_lost(const std::vector<std::string>& attaching, const std::vector<core::DeliveryKey>& in_flight,
                          std::string_view reason);

  // The link to `destination` opened: its attach was not the cause.
  void on_link_open(const std::string& destination);
  // The row was settled by the broker (any outcome): it was not the cause.
  void on_settled(const core::DeliveryKey& row);

  // The row goes to the probe connection: its destination or the row itself is a suspect.
  bool on_probe(const std::string& destination, const core::DeliveryKey& row) const {
    return suspect(destination) || suspect(row);
  }

  bool suspect(const std::string& destination) const { return destinations_.contains(destination); }
  bool suspect(const core::DeliveryKey& row) const { return rows_.contains(row); }

  // Why the destination or the row is refused, once convicted.
  std::optional<std::string> conviction(const std::string& destination) const;
  std::optional<std::string> conviction(const core::DeliveryKey& row) const;

  std::size_t suspects() const { return destinations_.size() + rows_.size(); }

 private:
  struct Suspicion {
    int blamed = 0;           // times the connection ended while it was alone under suspicion
    std::string last_reason;  // the broker's words the last time
  };

  static void blame(Suspicion& suspicion, std::string_view reason);
  void drop_unblamed_rows();

  std::unordered_map<std::string, Suspicion> destinations_;
  std::unordered_map<core::DeliveryKey, Suspicion> rows_;
};

}  // namespace outboxd::dispatch
