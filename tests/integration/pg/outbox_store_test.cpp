// OutboxStore against the real migrations: claim order and blocking (marks, failures, timing and purge: outbox_writes_test.cpp).
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

TEST_CASE("claim returns due rows of both kinds in id order with every column", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());

  const core::RowId full = must(connection,
      "SELECT outbox.enqueue(destination => 'orders', message_id => 'm-1', body => '\\x00ff41'::bytea, "
      "session_id => 's1', correlation_id => 'c-1', parent_message_id => 'p-1', originating_message_id => 'o-1', "
      "subject => 'OrderPlaced', content_type => 'application/octet-stream', headers => '{\"k\": \"v\", \"n\": 1}', "
      "ttl => interval '1500 milliseconds', "
      "traceparent => '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')").int64(0, 0);
  const core::RowId scheduled_due =
      insert(connection, {"m-2", "s1", "now() - interval '1 minute'", "now() - interval '1 second'"});
  insert(connection, {"m-3", "s1", "now()", "now() + interval '1 hour'"});  // not yet due
  const core::RowId plain = insert(connection, {"m-4", std::nullopt});

  auto claimed = claim(store, all_partitions(), 10);
  REQUIRE(claimed.ok());
  REQUIRE(ids_of(claimed.value().rows) == Ids{full, scheduled_due, plain});

  const core::OutboxMessage& m = claimed.value().rows[0];
  CHECK(m.message_id == "m-1");
  CHECK(m.destination == "orders");
  CHECK(m.session_id == "s1");
  CHECK(m.writer == std::string(must(connection, "SELECT session_user").text(0, 0)));
  CHECK(m.correlation_id == "c-1");
  CHECK(m.parent_message_id == "p-1");
  CHECK(m.originating_message_id == "o-1");
  CHECK(m.subject == "OrderPlaced");
  CHECK(m.content_type == "application/octet-stream");
  CHECK(m.traceparent == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  CHECK(m.headers_json == "{\"k\": \"v\", \"n\": 1}");
  CHECK(m.body == std::string("\x00\xff\x41", 3));
  CHECK(m.ttl == milliseconds(1500));
  CHECK_FALSE(m.due_at.has_value());
  CHECK(m.attempts == 0);
  CHECK(m.partition == must(connection, "SELECT partition FROM outbox.messages WHERE id = $1",
                            {std::to_string(full)}).int64(0, 0));
  const auto age = std::chrono::system_clock::now() - m.created_at;
  CHECK(age > -std::chrono::seconds(5));
  CHECK(age < std::chrono::seconds(60));

  const core::OutboxMessage& s = claimed.value().rows[1];
  REQUIRE(s.due_at.has_value());
  CHECK(*s.due_at > s.created_at);
  CHECK_FALSE(claimed.value().rows[2].session_id.has_value());
  CHECK_FALSE(claimed.value().rows[2].ttl.has_value());
}

TEST_CASE("claim reads bodies and numbers byte for byte (binary format)", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  // Every byte value, then a body of 100 kB; the largest ttl and a creation
  // time before 1970 check 8-byte integers and their sign.
  const core::RowId bytes = must(connection,
      "INSERT INTO outbox.messages (message_id, destination, body, ttl, created_at, due_at) "
      "SELECT 'bytes', 'orders', string_agg(set_byte('\\x00'::bytea, 0, b), ''::bytea ORDER BY b), "
      "interval '4294967.295 seconds', '1969-12-31 23:59:58.5+00', '1969-12-31 23:59:58.5+00' "
      "FROM generate_series(0, 255) b RETURNING id").int64(0, 0);
  const core::RowId large = must(connection,
      "INSERT INTO outbox.messages (message_id, destination, body) "
      "VALUES ('large', 'orders', convert_to(repeat('0123456789', 10000), 'UTF8')) RETURNING id").int64(0, 0);
  const core::RowId empty = must(connection,
      "INSERT INTO outbox.messages (message_id, destination, body, attempts) "
      "VALUES ('empty', 'orders', '', 7) RETURNING id").int64(0, 0);

  auto claimed = claim(store, all_partitions(), 10);
  REQUIRE(claimed.ok());
  REQUIRE(ids_of(claimed.value().rows) == Ids{bytes, large, empty});
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  const auto& rows = claimed.value().rows;
  CHECK(rows[0].body == all);
  CHECK(rows[0].ttl == milliseconds(4294967295));
  CHECK(rows[0].created_at.time_since_epoch() == std::chrono::microseconds(-1500000));
  CHECK(rows[1].body.size() == 100000);
  CHECK(rows[1].body.view().substr(99990) == "0123456789");
  CHECK(rows[2].body.empty());
  CHECK(rows[2].attempts == 7);
  CHECK(rows[2].headers_json == "{}");
}

TEST_CASE("claim cuts both batches at the last id of a full one", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const std::string past = "now() - interval '1 minute'";
  const std::string due = "now() - interval '1 second'";
  const core::RowId i1 = insert(connection, {"i1", "a"});
  const core::RowId s2 = insert(connection, {"s2", "a", past, due});
  const core::RowId i3 = insert(connection, {"i3", "b"});
  const core::RowId s4 = insert(connection, {"s4", "b", past, due});
  const core::RowId i5 = insert(connection, {"i5", "c"});

  CHECK(claim_ids(store, 10) == Ids{i1, s2, i3, s4, i5});
  // Immediate batch [i1 i3] is full: s4 (> i3) waits for the next claim.
  CHECK(claim_ids(store, 2) == Ids{i1, s2, i3});
  // [i1] is full: s2 (> i1) waits too.
  CHECK(claim_ids(store, 1) == Ids{i1});
  CHECK(claim_ids(store, 0).empty());
}

TEST_CASE("a row waits while an earlier row of its session is a due timeout still pending", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  lease_all(connection);
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const std::string created = "now() - interval '2 hours'";
  // Session a: two due timeouts, the later id due first, then a plain row.
  const core::RowId t1 = insert(connection, {"t1", "a", created, "now() - interval '1 second'"});
  const core::RowId t2 = insert(connection, {"t2", "a", created, "now() - interval '1 hour'"});
  const core::RowId a3 = insert(connection, {"a3", "a"});
  // Session b: a timeout not yet due holds nothing back.
  insert(connection, {"later", "b", "now()", "now() + interval '1 hour'"});
  const core::RowId b5 = insert(connection, {"b5", "b"});
  const core::RowId loose = insert(connection, {"loose", std::nullopt});

  // t2 waits behind t1, a3 behind both, whatever order the claim reads them in.
  auto all = claim(store, all_partitions(), 10);
  REQUIRE(all.ok());
  CHECK(ids_of(all.value().rows) == Ids{t1, b5, loose});
  // a3 is read and reported, so that the caller stops a's later rows in this pass.
  REQUIRE(all.value().passed_over.size() == 1);
  CHECK(all.value().passed_over[0].id == a3);
  CHECK(all.value().passed_over[0].order ==
        core::session_key(std::string(must(connection, "SELECT session_user").text(0, 0)), "a"));
  // One row per batch: the immediate batch reads a3 and drops it (a pass
  // moves on past it); the scheduled batch takes t1 though t2 is due first.
  auto one = claim(store, all_partitions(), 1);
  REQUIRE(one.ok());
  CHECK(ids_of(one.value().rows) == Ids{t1});
  CHECK(one.value().immediate_full);
  CHECK(one.value().last_immediate_id == a3);
  CHECK(one.value().scheduled_full);
  REQUIRE(store.mark_dispatched({t1, b5, loose}, config::RetentionMode::keep, kLeaseOwner).ok());
  CHECK(claim_ids(store, 10) == Ids{t2});
  REQUIRE(store.mark_dispatched({t2}, config::RetentionMode::delete_rows, kLeaseOwner).ok());
  CHECK(claim_ids(store, 10) == Ids{a3});
}

TEST_CASE("claim leaves out the rows the caller holds, and they do not fill its batches", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const std::string created = "now() - interval '2 hours'";
  Ids rows;
  for (int i = 1; i <= 4; ++i) {
    const std::string n = std::to_string(i);
    rows.push_back(insert(connection, {std::string("r").append(n), std::string("s").append(n)}));
  }
  const core::RowId t1 = insert(connection, {"t1", "a", created, "now() - interval '1 hour'"});
  const core::RowId t2 = insert(connection, {"t2", "b", created, "now() - interval '1 minute'"});

  // A new pass from 0 while r1, r2 and t1 are in flight: two new rows per batch.
  const Ids known{rows[0], rows[1], t1};
  auto claimed = claim(store, all_partitions(), 2, 0, known);
  REQUIRE(claimed.ok());
  CHECK(ids_of(claimed.value().rows) == Ids{rows[2], rows[3]});  // t2 is above the full batch's last id
  CHECK(claimed.value().immediate_full);
  CHECK(claimed.value().last_immediate_id == rows[3]);
  CHECK_FALSE(claimed.value().scheduled_full);  // t1 is known: t2 alone is due and new

  auto rest = claim(store, all_partitions(), 2, rows[3], known);
  REQUIRE(rest.ok());
  CHECK(ids_of(rest.value().rows) == Ids{t2});
  CHECK_FALSE(rest.value().more());
}

TEST_CASE("claim says how long each row has been due, by the database's clock", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const core::RowId written = insert(connection, {"written", "a", "now() - interval '1 hour'", "now() - interval '1 hour'"});
  const core::RowId timeout = insert(connection, {"timeout", "b", "now() - interval '1 hour'", "now() - interval '2 seconds'"});
  TestRow retried{"retried", "c", "now() - interval '1 hour'", "now() - interval '1 hour'"};
  retried.next_attempt_at = "now() - interval '3 seconds'";
  const core::RowId backed_off = insert(connection, retried);

  auto claimed = claim(store, all_partitions(), 10);
  REQUIRE(claimed.ok());
  const auto& rows = claimed.value().rows;
  REQUIRE(ids_of(rows) == Ids{written, timeout, backed_off});
  using std::chrono::seconds;
  CHECK(rows[0].due_for >= seconds(3600));
  CHECK(rows[0].due_for < seconds(3610));
  CHECK(rows[1].due_for >= seconds(2));  // since due_at, not since the insert
  CHECK(rows[1].due_for < seconds(12));
  CHECK(rows[2].due_for >= seconds(3));  // since its backoff ended
  CHECK(rows[2].due_for < seconds(13));
}

TEST_CASE("scheduled rows are claimed earliest due first", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const std::string created = "now() - interval '2 hours'";
  const core::RowId due_recently = insert(connection, {"recent", "a", created, "now() - interval '1 second'"});
  const core::RowId due_long_ago = insert(connection, {"long-ago", "b", created, "now() - interval '1 hour'"});
  CHECK(claim_ids(store, 1) == Ids{due_long_ago});
  CHECK(claim_ids(store, 2) == Ids{due_recently, due_long_ago});
}

TEST_CASE("no scheduled row is claimed before its due_at, however often the claim runs", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  // Claims every 20 ms, as a daemon busy with immediate rows makes them: each
  // must leave a scheduled row alone until its due_at, by the database's clock
  // (on this machine the same clock as ours).
  const core::RowId immediate = insert(connection, {"now", "a"});
  const core::RowId soon = insert(connection, {"soon", "b", "now()", "now() + interval '300 milliseconds'"});
  const core::RowId later = insert(connection, {"later", "c", "now() - interval '1 hour'",
                                                "now() + interval '900 milliseconds'"});
  std::set<core::RowId> seen;
  const auto until = std::chrono::steady_clock::now() + milliseconds(1300);
  while (std::chrono::steady_clock::now() < until) {
    auto claimed = claim(store, all_partitions(), 10);
    REQUIRE(claimed.ok());
    const auto after = std::chrono::system_clock::now();
    for (const auto& m : claimed.value().rows) {
      seen.insert(m.id);
      if (m.due_at) CHECK(std::chrono::duration<double>(after - *m.due_at).count() >= 0.0);
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
  CHECK(seen == std::set<core::RowId>{immediate, soon, later});
}

TEST_CASE("claim looks only at the given partitions", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const core::RowId id = insert(connection, {"only", "session-x"});
  const int partition =
      static_cast<int>(must(connection, "SELECT partition FROM outbox.messages WHERE id = $1", {std::to_string(id)})
                           .int64(0, 0));
  std::vector<int> others;
  for (int p : all_partitions()) {
    if (p != partition) others.push_back(p);
  }
  auto none = claim(store, others, 10);
  REQUIRE(none.ok());
  CHECK(none.value().rows.empty());
  auto one = claim(store, {partition}, 10);
  REQUIRE(one.ok());
  CHECK(ids_of(one.value().rows) == Ids{id});
  auto empty = claim(store, {}, 10);
  REQUIRE(empty.ok());
  CHECK(empty.value().rows.empty());
}

TEST_CASE("a due timeout stops later rows of its session by its own writer only", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const std::string created = "now() - interval '2 hours'";
  TestRow timeout{"a-timeout", "order-42", created, "now() - interval '1 second'"};
  timeout.writer = "'app_a'";
  const core::RowId a_timeout = insert(connection, timeout);
  TestRow a_later{"a-later", "order-42"};
  a_later.writer = "'app_a'";
  const core::RowId a_held = insert(connection, a_later);
  TestRow b_later{"b-later", "order-42"};
  b_later.writer = "'app_b'";
  const core::RowId b_row = insert(connection, b_later);
  TestRow none_later{"none-later", "order-42"};
  none_later.writer = "NULL";
  const core::RowId none_row = insert(connection, none_later);

  auto claimed = claim(store, all_partitions(), 10);
  REQUIRE(claimed.ok());
  CHECK(ids_of(claimed.value().rows) == Ids{a_timeout, b_row, none_row});
  REQUIRE(claimed.value().passed_over.size() == 1);
  CHECK(claimed.value().passed_over[0].id == a_held);
  CHECK(claimed.value().passed_over[0].order == core::session_key("app_a", "order-42"));
  CHECK(claimed.value().rows[1].writer == "app_b");
  CHECK_FALSE(claimed.value().rows[2].writer.has_value());
}

TEST_CASE("a parked or backing-off row blocks later rows of its own session only", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  const core::RowId before_park = insert(connection, {"p0", "parked-session"});
  insert(connection, {"p1", "parked-session", "now()", "now()", "parked"});
  insert(connection, {"p2", "parked-session"});
  insert(connection, {"b1", "backoff-session", "now()", "now()", "pending", "now() + interval '1 hour'"});
  insert(connection, {"b2", "backoff-session"});
  const core::RowId retry_due =
      insert(connection, {"r1", "retry-session", "now()", "now()", "pending", "now() - interval '1 second'"});
  const core::RowId after_retry = insert(connection, {"r2", "retry-session"});
  const core::RowId free_row = insert(connection, {"x1", "free-session"});
  const core::RowId no_session = insert(connection, {"y1", std::nullopt});
  const core::RowId scheduled_later = insert(connection, {"p3", "parked-session", "now() - interval '1 minute'",
                                                         "now() - interval '1 second'"});
  // The same session ids by other writers: a session is its writer's.
  TestRow other{"other-writer", "parked-session"};
  other.writer = "'app_b'";
  const core::RowId other_writer = insert(connection, other);
  TestRow none{"no-writer", "backoff-session"};
  none.writer = "NULL";  // written before 009: a writer of its own
  const core::RowId no_writer = insert(connection, none);

  CHECK(claim_ids(store) == Ids{before_park, retry_due, after_retry, free_row, no_session, other_writer, no_writer});
  (void)scheduled_later;

  // Requeue the parked row and end the backoff: the sessions flow again.
  must(connection, "UPDATE outbox.messages SET status = 'pending' WHERE message_id = 'p1'");
  must(connection, "UPDATE outbox.messages SET next_attempt_at = now() - interval '1 second' WHERE message_id = 'b1'");
  CHECK(claim_ids(store).size() == 12);
}

// A transaction that took its ids before the pass's cursor passed them and
// committed after: its rows below the cursor wait for the next pass, and so
// must its sessions' later rows, or a session's second row would go out first.
TEST_CASE("past the start of a pass a row waits while its session has a late row below the cursor",
          "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  const core::RowId late = insert(connection, {"a1", "s"});              // committed after the cursor passed it
  const core::RowId in_flight = insert(connection, {"c1", "t"});         // held by the caller
  const core::RowId cursor = insert(connection, {"x1", "u"});            // the last row of the claim before
  const core::RowId next_of_late = insert(connection, {"b1", "s"});      // the same session, a later transaction
  const core::RowId next_of_held = insert(connection, {"c2", "t"});
  const core::RowId free_row = insert(connection, {"y1", "v"});
  const core::RowId no_session = insert(connection, {"z1", std::nullopt});
  TestRow other{"b1-other-writer", "s"};
  other.writer = "'app_b'";  // the same session id by another writer: not its session
  const core::RowId other_writer = insert(connection, other);

  auto claim_after = [&](core::RowId after, std::vector<core::RowId> held) {
    auto sets = store.claim(all_partitions(), 100, after, held, {}, {});
    if (!sets) FAIL("claim: " << sets.error().message);
    return ids_of(sets.value().immediate.rows);
  };
  CHECK(claim_after(cursor, {in_flight}) == Ids{next_of_held, free_row, no_session, other_writer});
  // The late row's session's row comes flagged, for the pass to keep the session's later rows back too.
  const Ids holding{in_flight};
  auto flagged = store.claim(all_partitions(), 100, cursor, holding, {}, {});
  REQUIRE(flagged);
  Ids passed_over;
  for (const auto& row : flagged.value().immediate.passed_over) passed_over.push_back(row.id);
  CHECK(passed_over == Ids{next_of_late});
  // The next pass starts from the lowest id: the late row first, its session's next after it.
  CHECK(claim_after(0, {in_flight}) == Ids{late, cursor, next_of_late, next_of_held, free_row, no_session, other_writer});
  // Once the caller holds the late row, its session's later rows follow it in this pass too.
  CHECK(claim_after(cursor, {late, in_flight}) == Ids{next_of_late, next_of_held, free_row, no_session, other_writer});
}

// The claim asks about late commits only when a transaction other than the
// store's own writes finished since the pass's horizon (late_commits_possible()).
TEST_CASE("a claim looks for late commits only when another transaction finished since the horizon",
          "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  lease_all(connection);
  std::vector<core::RowId> to_mark;  // one a try, below the cursor
  for (int i = 0; i < 50; ++i) to_mark.push_back(insert(connection, {std::string("m").append(std::to_string(i)), std::nullopt}));
  const core::RowId cursor = insert(connection, {"h2", "t"});
  const core::RowId later = insert(connection, {"h3", "u"});
  auto claim_from = [&](core::RowId after, const std::optional<std::string>& horizon) {
    auto sets = store.claim(all_partitions(), 100, after, {}, {}, {}, horizon);
    if (!sets) FAIL("claim: " << sets.error().message);
    return std::move(sets).value();
  };
  const auto start = claim_from(0, std::nullopt);  // a pass's first claim: nothing to ask about
  CHECK_FALSE(start.late_commits_asked);
  REQUIRE_FALSE(start.horizon.empty());
  CHECK(start.table_rows.has_value());
  // Transaction ids are the cluster's: a test in another database may take
  // one between two claims. Each try takes a fresh horizon; one quiet try is the proof.
  auto quiet = [&](bool mark_between) {
    for (int attempt = 0; attempt < 50; ++attempt) {
      const auto horizon = claim_from(0, std::nullopt).horizon;
      if (mark_between) {
        auto marked = store.mark_dispatched({to_mark.at(static_cast<std::size_t>(attempt))},
                                            config::RetentionMode::keep, kLeaseOwner);
        REQUIRE(marked.ok());
        REQUIRE(marked.value() == 1);
      }
      if (!claim_from(cursor, horizon).late_commits_asked) return true;
    }
    return false;
  };
  CHECK(quiet(false));  // nothing finished since: no late row can exist
  CHECK(quiet(true));   // the store's own marks do not count
  // Without a horizon, and once a writer committed, the claim asks.
  CHECK(claim_from(cursor, std::nullopt).late_commits_asked);
  const core::RowId fresh = insert(connection, {"h4", "u"});
  const auto asked = claim_from(cursor, start.horizon);
  CHECK(asked.late_commits_asked);
  CHECK(ids_of(asked.immediate.rows) == Ids{later, fresh});
}

TEST_CASE("past the start of a pass a backing-off row below the cursor holds its session back after its time",
          "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  const core::RowId backing_off = insert(connection, {"r1", "s"});
  const core::RowId cursor = insert(connection, {"r2", "t"});
  const core::RowId next = insert(connection, {"r3", "s"});
  const core::RowId free_row = insert(connection, {"r4", "u"});
  // Its backoff is over now: a new pass claims it first; this pass has moved past it. The
  // horizon is taken after: no late commit can exist, and the rule alone holds the session back.
  REQUIRE(connection.exec("UPDATE outbox.messages SET next_attempt_at = now() - interval '1 second' WHERE id = " +
                          std::to_string(backing_off)).ok());
  auto horizon = store.claim(all_partitions(), 1, 0);
  REQUIRE(horizon);
  auto past = store.claim(all_partitions(), 100, cursor, {}, {}, {}, horizon.value().horizon);
  REQUIRE(past);
  // Held back by the rule, not passed over by the late-commit probe, whether or not it ran.
  CHECK(ids_of(past.value().immediate.rows) == Ids{free_row});
  CHECK(past.value().immediate.passed_over.empty());
  auto fresh = store.claim(all_partitions(), 100, 0);
  REQUIRE(fresh);
  CHECK(ids_of(fresh.value().immediate.rows) == Ids{backing_off, cursor, next, free_row});
}
