// The database's own claim-and-mark ceiling: 100k immediate rows, batches of 500 (run with "[.bench]").
#include <catch2/catch.hpp>

#include <iostream>

#include "outbox_rows.hpp"
#include "pg/outbox_store.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

using Seconds = std::chrono::duration<double>;

struct Rate {
  double rows_per_second = 0;
  double claim_share = 0;  // of the elapsed time
};

Rate drain(OutboxStore& store, config::RetentionMode mode, int expected) {
  const auto start = std::chrono::steady_clock::now();
  Seconds claiming{0};
  int done = 0;
  for (;;) {
    const auto before_claim = std::chrono::steady_clock::now();
    auto claimed = claim(store, all_partitions(), 500);
    claiming += std::chrono::steady_clock::now() - before_claim;
    REQUIRE(claimed.ok());
    if (claimed.value().rows.empty()) break;
    std::vector<core::RowId> ids;
    ids.reserve(claimed.value().rows.size());
    for (const auto& m : claimed.value().rows) ids.push_back(m.id);
    REQUIRE(store.mark_dispatched(ids, mode, kLeaseOwner).ok());
    done += static_cast<int>(ids.size());
  }
  const Seconds elapsed = std::chrono::steady_clock::now() - start;
  CHECK(done == expected);
  return {done / elapsed.count(), claiming / elapsed};
}

}  // namespace

TEST_CASE("claim and mark 100k rows at batch 500", "[pg][.bench]") {
  constexpr int kRows = 100000;
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  lease_all(connection);
  for (const auto mode : {config::RetentionMode::keep, config::RetentionMode::delete_rows}) {
    must(connection,
         "INSERT INTO outbox.messages (message_id, destination, session_id, body, headers) "
         "SELECT md5(random()::text) || '-' || g, 'orders', 'session-' || (g % 1000), "
         "convert_to(repeat('x', 200), 'UTF8'), '{\"type\": \"OrderPlaced\"}' FROM generate_series(1, " +
             std::to_string(kRows) + ") g");
    must(connection, "VACUUM ANALYZE outbox.messages");
    const Rate rate = drain(store, mode, kRows);
    const char* label = mode == config::RetentionMode::keep ? "keep" : "delete";
    std::cout << "claim+mark (retention " << label << ", 1000 sessions, 200-byte bodies, batch 500): "
              << static_cast<long>(rate.rows_per_second) << " rows/s, "
              << static_cast<int>(rate.claim_share * 100) << "% of the time in claim\n";
    must(connection, "DELETE FROM outbox.messages");
  }
}
