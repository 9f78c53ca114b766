// The claim by destination against the real statements: every destination's first rows besides a backlog, in session order.
#include <catch2/catch.hpp>

#include "outbox_rows.hpp"
#include "pg/outbox_store.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

std::vector<std::string> message_ids(const core::ClaimedSet& set) {
  std::vector<std::string> ids;
  for (const auto& row : set.rows) ids.push_back(row.message_id);
  return ids;
}

// A row of `destination`; `session` "" for none.
TestRow to(const std::string& destination, const std::string& message_id, const std::string& session = "") {
  TestRow row;
  row.message_id = message_id;
  if (!session.empty()) row.session_id = session;
  row.destination = destination;
  return row;
}

core::LaneRequest lanes(std::size_t limit, std::size_t per_lane, std::string after = "",
                        std::vector<std::string> skip = {"bulk"}) {
  return {limit, per_lane, std::move(after), std::move(skip)};
}

}  // namespace

TEST_CASE("the claim by destination reads the first rows of each destination but the backlog's, in name order",
          "[pg][store][lanes]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  for (int i = 1; i <= 6; ++i) insert(setup, to("bulk", std::string("b").append(std::to_string(i))));
  for (const char* id : {"p1", "p2", "p3"}) insert(setup, to("payments", id));
  insert(setup, to("alerts", "a1"));
  insert(setup, to("carts", "c1"));
  TestRow sent = to("alerts", "a-sent");
  sent.status = "dispatched";
  insert(setup, sent);
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());

  auto sets = store.claim(all_partitions(), 2, 0, {}, {}, lanes(10, 2));
  REQUIRE(sets.ok());
  CHECK(message_ids(sets.value().immediate) == std::vector<std::string>{"b1", "b2"});
  // Destinations in name order, two rows of each at most, none of bulk's.
  CHECK(message_ids(sets.value().lanes) == std::vector<std::string>{"a1", "c1", "p1", "p2"});

  SECTION("at most `limit` rows: the walk stops there") {
    auto few = store.claim(all_partitions(), 2, 0, {}, {}, lanes(2, 2));
    REQUIRE(few.ok());
    CHECK(message_ids(few.value().lanes) == std::vector<std::string>{"a1", "c1"});
    CHECK(few.value().lanes.read == 2);
  }
  SECTION("from just after a destination, round the claims") {
    auto rest = store.claim(all_partitions(), 2, 0, {}, {}, lanes(10, 2, "carts"));
    REQUIRE(rest.ok());
    CHECK(message_ids(rest.value().lanes) == std::vector<std::string>{"p1", "p2"});
  }
  SECTION("rows known to the caller are left out and take no destination's share") {
    const auto p1 = daemon.exec("SELECT id FROM outbox.messages WHERE message_id = 'p1'");
    REQUIRE(p1.ok());
    const std::vector<core::RowId> known{p1.value().int64(0, 0)};
    auto next = store.claim(all_partitions(), 2, 0, known, {}, lanes(10, 2));
    REQUIRE(next.ok());
    CHECK(message_ids(next.value().lanes) == std::vector<std::string>{"a1", "c1", "p2", "p3"});
  }
  SECTION("alone, instead of the id-order claim: its statement only, and held-back destinations left out") {
    auto request = lanes(10, 2, "", {"bulk", "payments"});
    request.only = true;
    request.alone = true;
    auto alone = store.claim(all_partitions(), 2, 0, {}, {}, request);
    REQUIRE(alone.ok());
    CHECK(alone.value().immediate.rows.empty());
    CHECK(alone.value().scheduled.rows.empty());
    CHECK(alone.value().horizon.empty());
    CHECK(message_ids(alone.value().lanes) == std::vector<std::string>{"a1", "c1"});
  }
  SECTION("instead of the id-order claim, with the others: no immediate row, the destinations held back left out") {
    auto request = lanes(10, 2, "", {"payments"});
    request.only = true;
    auto held = store.claim(all_partitions(), 2, 0, {}, {}, request);
    REQUIRE(held.ok());
    CHECK(held.value().immediate.rows.empty());
    CHECK(message_ids(held.value().lanes) == std::vector<std::string>{"a1", "b1", "b2", "c1"});
  }
  SECTION("not asked for, the claim runs its three statements") {
    auto plain = store.claim(all_partitions(), 2);
    REQUIRE(plain.ok());
    CHECK(plain.value().lanes.rows.empty());
  }
}

TEST_CASE("the claim by destination keeps each session in id order across destinations", "[pg][store][lanes]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  const core::RowId first = insert(setup, to("bulk", "s1-bulk", "s1"));
  insert(setup, to("payments", "s1-payments", "s1"));
  // A timeout not yet due does not hold its session's later rows back.
  TestRow later = to("bulk", "s2-timeout", "s2");
  later.due_at = "now() + interval '1 day'";
  insert(setup, later);
  insert(setup, to("payments", "s2-payments", "s2"));
  // Earlier rows of the same destination come first in its lane.
  insert(setup, to("refunds", "s3-one", "s3"));
  insert(setup, to("refunds", "s3-two", "s3"));
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());

  auto sets = store.claim(all_partitions(), 1, 0, {}, {}, lanes(10, 5));
  REQUIRE(sets.ok());
  // s1's row to payments waits for its earlier row to bulk, which nobody has claimed.
  CHECK(message_ids(sets.value().lanes) == std::vector<std::string>{"s2-payments", "s3-one", "s3-two"});

  // Once the caller holds that earlier row, the later one may follow it.
  const std::vector<core::RowId> known{first};
  auto after = store.claim(all_partitions(), 1, 0, known, {}, lanes(10, 5));
  REQUIRE(after.ok());
  CHECK(message_ids(after.value().lanes) ==
        std::vector<std::string>{"s1-payments", "s2-payments", "s3-one", "s3-two"});
}

TEST_CASE("a claim planned while the outbox was empty walks messages_ready_idx once it has grown",
          "[pg][store][plans]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  must(setup, "VACUUM outbox.messages");  // known to be empty
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  REQUIRE(store.claim(all_partitions(), 100).ok());  // the generic plan is made now, for an empty table
  must(setup,
       "INSERT INTO outbox.messages (message_id, destination, body) "
       "SELECT 'r' || i, 'bulk', '\\x00'::bytea FROM generate_series(1, 20000) i");
  const std::string text =
      plan_of(daemon, "EXECUTE \"outboxd.outbox.claim_immediate\"('{0,1,2,3,4,5,6,7}', 100, 0, '{}', 1000, NULL, '{}')");
  INFO(text);
  // With sequential scans allowed, this plan read the 20,000 rows and sorted them (pg::daemon_settings()).
  CHECK(text.find("Seq Scan on messages m") == std::string::npos);
  CHECK(text.find("messages_ready_idx") != std::string::npos);
  // The late-commit probe looks up each session's range: on messages_lane_idx
  // it read every pending row below the cursor once per session (0.44 s a
  // claim of 100 sessions behind a bulk).
  CHECK(text.find("messages_lane_idx") == std::string::npos);
}

TEST_CASE("the claim by destination steps over a backlog without reading the dead rows at its head",
          "[pg][store][lanes]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  must(setup, "ALTER TABLE outbox.messages SET (autovacuum_enabled = false)");
  insert(setup, to("alerts", "a1"));
  must(setup,
       "INSERT INTO outbox.messages (message_id, destination, body) "
       "SELECT 'b' || i, 'bulk', '\\x00'::bytea FROM generate_series(1, 20000) i");
  insert(setup, to("payments", "p1"));
  // A backlog half drained: its first rows deleted, their index entries still there until VACUUM.
  must(setup, "DELETE FROM outbox.messages WHERE destination = 'bulk' AND message_id <> 'b20000'");
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  auto sets = store.claim(all_partitions(), 1, 0, {}, {}, lanes(10, 2));
  REQUIRE(sets.ok());
  CHECK(message_ids(sets.value().lanes) == std::vector<std::string>{"a1", "p1"});

  auto plan = daemon.exec(
      "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE \"outboxd.outbox.claim_lanes\""
      "('{0,1,2,3,4,5,6,7}', 10, '{}', 1000, '{bulk}', '', 2)");
  REQUIRE(plan.ok());
  const std::string top(plan.value().text(1, 0));  // the top node's buffers, the whole statement's
  INFO(top);
  REQUIRE(top.find("shared hit=") != std::string::npos);
  // Two lanes and two steps past them read a few pages each; the dead head is 20,000 entries.
  CHECK(std::stoi(top.substr(top.find("shared hit=") + 11)) < 40);
}
