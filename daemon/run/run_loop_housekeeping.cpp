// Housekeeping between claims: decisions written, leases kept and handed back, retention's purge.
#include "daemon/run/run_loop.hpp"

#include <vector>

namespace outboxd::daemon {

void RunLoop::persist_decisions() {
  if (auto written = decisions_.persist(stopping_); !written) fail_database(written.error());
}

void RunLoop::keep_leases() {
  auto& db = ports_.database;
  if (!db.up() || stopping_) return;
  std::vector<int> stopped;
  std::vector<int> gained;
  if (auto kept = leases_.maintain(db.leases(), stopped, gained); !kept) return fail_database(kept.error());
  book_.drop_partitions(stopped);
  if (!gained.empty()) book_.restart_pass();  // rows of a new partition may lie below the cursor
  hand_back_drained();
}

// A draining partition is handed back once none of its rows is held any more.
void RunLoop::hand_back_drained() {
  auto& db = ports_.database;
  const auto& draining = leases_.draining();
  if (draining.empty() || !db.up()) return;
  const auto drained = book_.drained(draining);
  if (auto handed = leases_.hand_back_drained(db.leases(), drained); !handed) fail_database(handed.error());
}

void RunLoop::purge_finished() {
  if (!ports_.database.up() || stopping_) return;
  if (auto purged = decisions_.purge(); !purged) fail_database(purged.error());
}

}  // namespace outboxd::daemon
