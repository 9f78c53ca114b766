// The database's ceiling: the daemon's own claim and mark statements in a loop, without AMQP.
//
// usage: claim_mark -c CONFIG   (drains every pending row of the configured outbox)
// Give it the daemon's config: standing for the daemon, it needs only the dispatcher role.
// Prints one line: `claim_mark rows=N seconds=S rate=R`.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "config/loader.hpp"
#include "dispatch/claim_merge.hpp"
#include "pg/connection.hpp"
#include "pg/lease_store.hpp"
#include "pg/outbox_store.hpp"

int main(int argc, char** argv) {
  using namespace outboxd;
  if (argc != 3 || std::string(argv[1]) != "-c") {
    std::fprintf(stderr, "usage: %s -c CONFIG\n", argv[0]);
    return 2;
  }
  auto config = config::load_file(argv[2]);
  if (!config) {
    std::fprintf(stderr, "%s\n", config.error_text().c_str());
    return 2;
  }
  auto connection = pg::Connection::open(config.value().database, "outboxd claim_mark");
  if (!connection) {
    std::fprintf(stderr, "claim_mark: %s\n", connection.error().message.c_str());
    return 1;
  }
  pg::OutboxStore store(connection.value(), config.value().outbox.schema);
  // Marks are fenced by lease, as the daemon's are: lease the partitions for the run, every one
  // while no daemon of this outbox is live (balance shares them with live instances).
  const std::string owner = "claim_mark";
  pg::LeaseStore leases(connection.value(), config.value().outbox.schema);
  auto leased = leases.balance(owner, std::chrono::minutes(10));
  if (!leased) {
    std::fprintf(stderr, "claim_mark: %s\n", leased.error().message.c_str());
    return 1;
  }
  std::vector<int> partitions;
  for (const auto& lease : leased.value()) partitions.push_back(lease.partition);
  const int batch = config.value().dispatch.batch_size;
  long rows = 0;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    auto claimed = store.claim(partitions, batch);
    if (!claimed) {
      std::fprintf(stderr, "claim_mark: %s\n", claimed.error().message.c_str());
      return 1;
    }
    const auto batch_rows = dispatch::merge_claim(std::move(claimed).value(), static_cast<std::size_t>(batch)).rows;
    if (batch_rows.empty()) break;
    std::vector<core::RowId> ids;
    ids.reserve(batch_rows.size());
    for (const auto& row : batch_rows) ids.push_back(row.id);
    if (auto marked = store.mark_dispatched(ids, config.value().retention.mode, owner); !marked) {
      std::fprintf(stderr, "claim_mark: %s\n", marked.error().message.c_str());
      return 1;
    }
    rows += static_cast<long>(ids.size());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  [[maybe_unused]] auto handed = leases.hand_back_all(owner);
  [[maybe_unused]] auto gone = leases.deregister(owner);
  std::printf("claim_mark rows=%ld seconds=%.3f rate=%.0f\n", rows, seconds, static_cast<double>(rows) / seconds);
  return 0;
}
