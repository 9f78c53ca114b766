// OutboxStore against the real migrations: claim order and blocking, marking, failures, timing, purge.
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

namespace {

std::vector<core::RowId> ids_of(const std::vector<core::OutboxMessage>& messages) {
  std::vector<core::RowId> ids;
  for (const auto& m : messages) ids.push_back(m.id);
  return ids;
}

std::vector<core::RowId> claim_ids(OutboxStore& store, int limit = 100) {
  auto claimed = claim(store, all_partitions(), limit);
  if (!claimed) FAIL("claim: " << claimed.error().message);
  return ids_of(claimed.value().rows);
}

using Ids = std::vector<core::RowId>;

}  // namespace

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
  // a3 is read and reported, so that the caller holds back a's later rows in this pass.
  REQUIRE(all.value().held_back.size() == 1);
  CHECK(all.value().held_back[0].id == a3);
  CHECK(all.value().held_back[0].order ==
        core::order_key(std::string(must(connection, "SELECT session_user").text(0, 0)), "a"));
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
  for (int i = 1; i <= 4; ++i) rows.push_back(insert(connection, {"r" + std::to_string(i), "s" + std::to_string(i)}));
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

TEST_CASE("a due timeout holds back later rows of its session by its own writer only", "[pg][store]") {
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
  REQUIRE(claimed.value().held_back.size() == 1);
  CHECK(claimed.value().held_back[0].id == a_held);
  CHECK(claimed.value().held_back[0].order == core::order_key("app_a", "order-42"));
  CHECK(claimed.value().rows[1].writer == "app_b");
  CHECK_FALSE(claimed.value().rows[2].writer.has_value());
}

TEST_CASE("a parked or backing-off row holds back later rows of its own session only", "[pg][store]") {
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
  // Already due but held back by the parked row: must not make the daemon spin.
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

TEST_CASE("a session in the dispatcher role alone runs every statement of the dispatch loop", "[pg][store][roles]") {
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
