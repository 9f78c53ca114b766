// OutboxStore against the real migrations: marks, failures, lease fences, timing, purge, open transactions, roles.
#include <algorithm>
#include <set>
#include <thread>
#include <catch2/catch.hpp>

#include "outbox_rows.hpp"
#include "pg/outbox_store.hpp"
#include "pg/text_codec.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;
using std::chrono::milliseconds;

TEST_CASE("mark_dispatched updates or deletes pending rows by id", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  lease_all(connection);
  const core::RowId a = insert(connection, {"a", "s"});
  const core::RowId b = insert(connection, {"b", "s"});
  const core::RowId parked = insert(connection, {"c", "t", "now()", "now()", "parked"});
  const core::RowId untouched = insert(connection, {"d", "u"});

  SECTION("retention keep") {
    REQUIRE(store.mark_dispatched({a, b, parked}, config::RetentionMode::keep, kLeaseOwner).ok());
    const Rows rows = must(connection, "SELECT message_id, status, dispatched_at IS NOT NULL, next_attempt_at IS NULL "
                                       "FROM outbox.messages ORDER BY id");
    CHECK(rows.text(0, 1) == "dispatched");
    CHECK(rows.boolean(0, 2));
    CHECK(rows.boolean(0, 3));
    CHECK(rows.text(1, 1) == "dispatched");
    CHECK(rows.text(2, 1) == "parked");  // only pending rows are marked
    CHECK(rows.text(3, 1) == "pending");
  }
  SECTION("retention delete") {
    REQUIRE(store.mark_dispatched({a, b}, config::RetentionMode::delete_rows, kLeaseOwner).ok());
    CHECK(must(connection, "SELECT count(*) FROM outbox.messages").int64(0, 0) == 2);
  }
  CHECK(claim_ids(store) == Ids{untouched});
  CHECK(store.mark_dispatched({}, config::RetentionMode::keep, kLeaseOwner).ok());
}

TEST_CASE("record_failures backs off or parks a batch in one statement", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  lease_all(connection);
  const core::RowId retry = insert(connection, {"retry", "s1"});
  const core::RowId later_in_session = insert(connection, {"retry-next", "s1"});
  const core::RowId park = insert(connection, {"park", "s2"});
  const core::RowId other = insert(connection, {"other", "s3"});
  const std::string odd_error = "rejected: amqp:precondition-failed {\"x\"}, back\\slash, ü";
  const std::string long_error = std::string(999, 'e') + "üü";  // byte 1000 is inside the first ü
  const std::string hostile_error = "rejected: bad \xFF\xC0 bytes\nFAKE line\x1b[2J";

  // Invalid UTF-8 made PostgreSQL refuse the whole statement (22021), again
  // on every retry: it is repaired, and control characters go too.
  REQUIRE(store.record_failures({{retry, 3, milliseconds(60000), odd_error, false},
                                 {park, 10, milliseconds(0), long_error, true},
                                 {later_in_session, 1, milliseconds(60000), hostile_error, false}},
                                kLeaseOwner)
              .ok());
  const Rows rows = must(connection,
      "SELECT status, attempts, round(extract(epoch FROM next_attempt_at - now()))::bigint, last_error, "
      "octet_length(last_error) FROM outbox.messages WHERE id = ANY($1::bigint[]) ORDER BY id",
      {int_array_literal(std::vector<core::RowId>{retry, park, later_in_session})});
  CHECK(rows.text(0, 0) == "pending");
  CHECK(rows.int64(0, 1) == 3);
  CHECK(rows.int64(0, 2) == 60);
  CHECK(rows.text(0, 3) == odd_error);
  CHECK(rows.text(1, 3) == "rejected: bad \xEF\xBF\xBD\xEF\xBF\xBD bytes FAKE line [2J");
  CHECK(rows.text(2, 0) == "parked");
  CHECK(rows.int64(2, 1) == 10);
  CHECK(rows.is_null(2, 2));
  // Cut within 1000 bytes, at a character boundary, with a note of how much was cut.
  CHECK(rows.text(2, 3) == std::string(979, 'e') + " ... [24 bytes cut]");
  CHECK(rows.int64(2, 4) == 998);
  // Both sessions are blocked now; the third flows.
  CHECK(claim_ids(store) == Ids{other});
  CHECK(store.record_failures({}, kLeaseOwner).ok());

  // The first failure's time stays, the last one's moves; parking writes a parked event.
  must(connection, "UPDATE outbox.messages SET first_failed_at = now() - interval '1 hour' WHERE id = $1",
       {std::to_string(retry)});
  REQUIRE(store.record_failures({{retry, 4, milliseconds(0), "rejected again", true}}, kLeaseOwner).ok());
  const Rows times = must(connection,
      "SELECT first_failed_at < now() - interval '59 minutes', last_failed_at > now() - interval '1 minute', "
      "(SELECT string_agg(action || ':' || detail, ',') FROM outbox.row_events e WHERE e.message_id = m.message_id) "
      "FROM outbox.messages m WHERE id = ANY($1::bigint[]) ORDER BY id",
      {int_array_literal(std::vector<core::RowId>{retry, later_in_session})});
  CHECK(times.boolean(0, 0));
  CHECK(times.boolean(0, 1));
  CHECK(times.text(0, 2) == "parked:rejected again");
  CHECK_FALSE(times.boolean(1, 0));  // its first failure was a moment ago
  CHECK(times.boolean(1, 1));
  CHECK(times.is_null(1, 2));  // backing off is no event
}

TEST_CASE("marks and failures leave rows of partitions not leased unexpired by the owner", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const core::RowId row = insert(connection, {"fenced", "s"});
  // Expired, then another owner's: a paused instance must change nothing.
  must(connection, "UPDATE outbox.leases SET owner = 'zombie', expires_at = now() - interval '1 second'");
  CHECK(store.mark_dispatched({row}, config::RetentionMode::keep, "zombie").value() == 0);
  CHECK(store.record_failures({{row, 1, milliseconds(60000), "rejected", false}}, "zombie").value() == 0);
  // Then every statement again while another owner holds the lease unexpired.
  must(connection, "UPDATE outbox.leases SET owner = 'heir', expires_at = now() + interval '1 hour'");
  CHECK(store.mark_dispatched({row}, config::RetentionMode::keep, "zombie").value() == 0);
  CHECK(store.mark_dispatched({row}, config::RetentionMode::delete_rows, "zombie").value() == 0);
  CHECK(store.record_failures({{row, 1, milliseconds(60000), "rejected", false}}, "zombie").value() == 0);
  CHECK(store.record_failures({{row, 1, milliseconds(0), "rejected", true}}, "zombie").value() == 0);
  const Rows rows = must(connection, "SELECT status, attempts FROM outbox.messages");
  REQUIRE(rows.size() == 1);
  CHECK(rows.text(0, 0) == "pending");
  CHECK(rows.int64(0, 1) == 0);
  CHECK(store.mark_dispatched({row}, config::RetentionMode::keep, "heir").value() == 1);
  CHECK(must(connection, "SELECT status FROM outbox.messages").text(0, 0) == "dispatched");
}

TEST_CASE("time_to_next_due looks at future schedules and backoffs only", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  auto nothing = store.time_to_next_due(all_partitions());
  REQUIRE(nothing.ok());
  CHECK_FALSE(nothing.value().has_value());
  auto claimed_nothing = claim(store, all_partitions(), 10);
  REQUIRE(claimed_nothing.ok());
  CHECK_FALSE(claimed_nothing.value().next_due.has_value());

  insert(connection, {"parked", "s"});
  must(connection, "UPDATE outbox.messages SET status = 'parked'");
  // Already due but blocked by the parked row: must not make the daemon spin.
  insert(connection, {"held", "s", "now() - interval '1 minute'", "now() - interval '1 second'"});
  auto still_nothing = store.time_to_next_due(all_partitions());
  REQUIRE(still_nothing.ok());
  CHECK_FALSE(still_nothing.value().has_value());

  insert(connection, {"timeout", "t", "now()", "now() + interval '5 seconds'"});
  auto scheduled = store.time_to_next_due(all_partitions());
  REQUIRE(scheduled.ok());
  REQUIRE(scheduled.value().has_value());
  CHECK(*scheduled.value() > milliseconds(4000));
  CHECK(*scheduled.value() <= milliseconds(5000));

  insert(connection, {"backoff", "u", "now()", "now()", "pending", "now() + interval '2 seconds'"});
  auto backoff = store.time_to_next_due(all_partitions());
  REQUIRE(backoff.ok());
  REQUIRE(backoff.value().has_value());
  CHECK(*backoff.value() > milliseconds(1000));
  CHECK(*backoff.value() <= milliseconds(2000));
  // A claim reads the same in its pipeline, without a round trip of its own.
  auto claimed = claim(store, all_partitions(), 10);
  REQUIRE(claimed.ok());
  CHECK(claimed.value().rows.empty());
  REQUIRE(claimed.value().next_due.has_value());
  CHECK(*claimed.value().next_due > milliseconds(1000));
  CHECK(*claimed.value().next_due <= milliseconds(2000));
  auto elsewhere = store.time_to_next_due({});
  REQUIRE(elsewhere.ok());
  CHECK_FALSE(elsewhere.value().has_value());
}

TEST_CASE("purge deletes old dispatched rows in batches, oldest first; purge_failed the cancelled ones", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  for (int i = 0; i < 5; ++i) {
    insert(connection, {"old-" + std::to_string(i), std::nullopt, "now() - interval '3 days'",
                        "now() - interval '3 days'", "dispatched", "NULL",
                        "now() - interval '2 days' + " + std::to_string(i) + " * interval '1 minute'"});
  }
  insert(connection, {"old-cancelled", std::nullopt, "now() - interval '3 days'", "now() + interval '1 day'",
                      "cancelled", "NULL", "now() - interval '2 days'"});
  insert(connection, {"recent", std::nullopt, "now()", "now()", "dispatched"});
  insert(connection, {"pending", std::nullopt});

  auto first = store.purge(std::chrono::hours(24), 4);
  REQUIRE(first.ok());
  CHECK(first.value() == 4);
  auto second = store.purge(std::chrono::hours(24), 4);
  REQUIRE(second.ok());
  CHECK(second.value() == 1);
  auto third = store.purge(std::chrono::hours(24), 4);
  REQUIRE(third.ok());
  CHECK(third.value() == 0);
  auto young = store.purge_failed(std::chrono::hours(72), 4);
  REQUIRE(young.ok());
  CHECK(young.value().rows == 0);
  auto failed = store.purge_failed(std::chrono::hours(24), 4);
  REQUIRE(failed.ok());
  CHECK(failed.value().rows == 1);
  const Rows left = must(connection, "SELECT message_id FROM outbox.messages ORDER BY id");
  REQUIRE(left.size() == 2);
  CHECK(left.text(0, 0) == "recent");
  CHECK(left.text(1, 0) == "pending");
}

TEST_CASE("open_transactions lists writers still open; still_open drops those that ended", "[pg][store][wakeup]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  Connection writer = db.connect();
  must(writer, "BEGIN");
  const std::string xid(must(writer, "SELECT pg_current_xact_id()::xid::text").text(0, 0));

  auto open = store.open_transactions();
  REQUIRE(open.ok());
  CHECK(std::find(open.value().begin(), open.value().end(), xid) != open.value().end());
  auto still = store.still_open({xid});
  REQUIRE(still.ok());
  CHECK(still.value() == std::vector<std::string>{xid});

  must(writer, "COMMIT");
  auto ended = store.still_open(open.value());
  REQUIRE(ended.ok());
  CHECK(std::find(ended.value().begin(), ended.value().end(), xid) == ended.value().end());
  auto none = store.still_open({});
  REQUIRE(none.ok());
  CHECK(none.value().empty());
}

TEST_CASE("open_transactions lists a transaction that has not written yet, not other databases' or its own",
          "[pg][store][wakeup]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  auto contains = [](const std::vector<std::string>& ids, const std::string& id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  const std::string own_vxid =
      "SELECT virtualxid FROM pg_locks WHERE locktype = 'virtualxid' AND pid = pg_backend_pid()";
  Connection reader = db.connect();
  must(reader, "BEGIN ISOLATION LEVEL REPEATABLE READ");
  must(reader, "SELECT count(*) FROM outbox.instances");  // a snapshot, no transaction id
  const std::string vxid(must(reader, own_vxid).text(0, 0));
  Connection elsewhere = ScratchDatabase::admin();
  must(elsewhere, "BEGIN");
  const std::string other_vxid(must(elsewhere, own_vxid).text(0, 0));

  auto open = store.open_transactions();
  REQUIRE(open.ok());
  CHECK(contains(open.value(), vxid));
  CHECK_FALSE(contains(open.value(), other_vxid));
  must(daemon, "BEGIN");
  const std::string caller_vxid(must(daemon, own_vxid).text(0, 0));
  auto during = store.open_transactions();
  must(daemon, "COMMIT");
  REQUIRE(during.ok());
  CHECK_FALSE(contains(during.value(), caller_vxid));

  must(reader, "COMMIT");
  auto ended = store.still_open(open.value());
  REQUIRE(ended.ok());
  CHECK_FALSE(contains(ended.value(), vxid));
  must(elsewhere, "COMMIT");
}

TEST_CASE("a connection in the dispatcher role alone runs every statement of the dispatch loop", "[pg][store][roles]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  lease_all(setup);
  const core::RowId sent = insert(setup, {"sent", "a"});
  const core::RowId retried = insert(setup, {"retried", "b"});
  const core::RowId parked = insert(setup, {"parked", "c"});
  const core::RowId deleted = insert(setup, {"deleted", "d"});
  insert(setup, {"old", std::nullopt, "now() - interval '3 days'", "now() - interval '3 days'", "dispatched", "NULL",
                 "now() - interval '2 days'"});
  // A session of a login role that holds nothing else, from its first statement:
  // nothing planned with more privileges can hide a missing grant.
  Connection connection = db.dispatcher();
  OutboxStore store(connection, "outbox");
  REQUIRE(store.prepare().ok());
  CHECK(claim_ids(store).size() == 4);
  auto marked = store.mark_dispatched({sent}, config::RetentionMode::keep, kLeaseOwner);
  REQUIRE(marked.ok());
  CHECK(marked.value() == 1);
  auto failed = store.record_failures({{retried, 1, milliseconds(60000), "rejected", false},
                                       {parked, 5, milliseconds(0), "rejected", true}},
                                      kLeaseOwner);
  REQUIRE(failed.ok());
  CHECK(failed.value() == 2);
  auto removed = store.mark_dispatched({deleted}, config::RetentionMode::delete_rows, kLeaseOwner);
  REQUIRE(removed.ok());
  CHECK(removed.value() == 1);
  auto purged = store.purge(std::chrono::hours(24), 10);
  REQUIRE(purged.ok());
  CHECK(purged.value() == 1);
  CHECK(store.arm_notify("dispatcher-only", true).ok());
  CHECK(store.time_to_next_due(all_partitions()).ok());
  CHECK(store.open_transactions().ok());
}
