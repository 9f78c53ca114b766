// WatchStore: a watcher's row, and the signature and next due time of a dormant outbox, against PostgreSQL.
#include <catch2/catch.hpp>

#include <thread>

#include "outbox_rows.hpp"
#include "pg/lease_store.hpp"
#include "pg/operator_actions.hpp"
#include "pg/watch_store.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;
using std::chrono::milliseconds;

namespace {

WatchCheck must_check(WatchStore& store, std::string_view instance_id = "w") {
  auto seen = store.check(instance_id);
  if (!seen) FAIL("check: " << seen.error().message);
  return seen.value();
}

std::string signature(WatchStore& store) { return must_check(store).signature; }

// A parked row of session s1 and an immediate row behind it: nothing a RunLoop could send.
void blocked_session(Connection& setup) {
  insert(setup, {"parked", "s1", "now() - interval '1 minute'", "now() - interval '1 minute'", "parked"});
  insert(setup, {"behind", "s1"});
}

}  // namespace

TEST_CASE("watch registers an idle watcher that inserts wake, and unwatch removes it", "[pg][watch]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection daemon = db.dispatcher();
  WatchStore store(daemon, "outbox");
  CHECK(store.channel() == "outbox_wakeup");

  REQUIRE(store.watch("w").ok());
  REQUIRE(store.watch("w").ok());  // the heartbeat: the same row again
  CHECK(must(setup, "SELECT instance_id || ' ' || idle || ' ' || watching FROM outbox.instances").text(0, 0) ==
        "w true true");

  Connection listener = db.dispatcher("listener");
  REQUIRE(listener.listen(store.channel()).ok());
  insert(setup, {"new", std::nullopt});
  auto woken = listener.wait_for_notification(milliseconds(5000));
  REQUIRE(woken.ok());
  CHECK(woken.value());

  REQUIRE(store.unwatch("w").ok());
  CHECK(must(setup, "SELECT count(*) FROM outbox.instances").int64(0, 0) == 0);
  CHECK(store.unwatch("w").ok());  // gone already: nothing to do
}

TEST_CASE("check's signature stays while nothing that could be claimed changes", "[pg][watch]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection daemon = db.dispatcher();
  WatchStore store(daemon, "outbox");

  const WatchCheck empty = must_check(store);
  CHECK(empty.signature == "r:0:0 s:0:0 p:0:0");
  CHECK_FALSE(empty.next_due.has_value());
  CHECK(signature(store) == empty.signature);

  blocked_session(setup);
  const std::string blocked = signature(store);
  CHECK(blocked != empty.signature);
  CHECK(signature(store) == blocked);  // all blocked: a dormant outbox is not woken again

  // Rows no claim could take now: finished ones, and a timeout not yet due (next_due's).
  insert(setup, {"done", std::nullopt, "now()", "now()", "dispatched"});
  insert(setup, {"dropped", std::nullopt, "now()", "now()", "cancelled"});
  insert(setup, {"later", "s2", "now()", "now() + interval '1 hour'"});
  const WatchCheck after = must_check(store);
  CHECK(after.signature == blocked);
  CHECK(after.next_due.has_value());
}

TEST_CASE("check's signature changes on a new row, a late commit, a requeue, a skip and a timeout falling due",
          "[pg][watch]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection daemon = db.dispatcher();
  WatchStore store(daemon, "outbox");
  blocked_session(setup);
  std::string seen = signature(store);
  const auto changed = [&store, &seen] {
    const std::string now = signature(store);
    const bool differs = now != seen;
    seen = now;
    return differs;
  };

  insert(setup, {"new", "s2"});
  CHECK(changed());

  // A row whose transaction began before the check and committed after it,
  // with an id below a row the check has seen.
  Connection late_writer = db.connect("late-writer");
  must(late_writer, "BEGIN");
  insert(late_writer, {"late", "s3"});
  insert(setup, {"committed-first", "s4"});
  CHECK(changed());
  must(late_writer, "COMMIT");
  CHECK(changed());

  Connection cli = db.dispatcher("cli");
  OperatorActions operators(cli, "outbox", "");
  auto requeued = operators.requeue({{"parked"}, "", false, ""});
  REQUIRE(requeued.ok());
  REQUIRE(requeued.value().size() == 1);
  CHECK(changed());

  must(setup, "UPDATE outbox.messages SET status = 'parked' WHERE message_id = 'parked'");
  CHECK(changed());
  CHECK(signature(store) == seen);
  auto skipped = operators.skip({{"parked"}, "", false, ""});
  REQUIRE(skipped.ok());
  REQUIRE(skipped.value().size() == 1);
  CHECK(changed());

  insert(setup, {"timeout", "s5", "now()", "now() + interval '1 second'"});
  const WatchCheck waiting = must_check(store);
  CHECK(waiting.signature == seen);  // not due yet: next_due's
  REQUIRE(waiting.next_due.has_value());
  CHECK(*waiting.next_due <= milliseconds(1000));
  std::this_thread::sleep_for(*waiting.next_due + milliseconds(50));
  CHECK(changed());
}

TEST_CASE("check's next_due is the earliest scheduled row or backoff of any partition", "[pg][watch]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection daemon = db.dispatcher();
  WatchStore store(daemon, "outbox");

  insert(setup, {"in-an-hour", "s1", "now()", "now() + interval '1 hour'"});
  auto due = must_check(store).next_due;
  REQUIRE(due.has_value());
  CHECK(*due > milliseconds(3590000));
  CHECK(*due <= milliseconds(3600000));

  insert(setup, {"backing-off", "s2", "now()", "now()", "pending", "now() + interval '10 seconds'"});
  due = must_check(store).next_due;
  REQUIRE(due.has_value());
  CHECK(*due > milliseconds(9000));
  CHECK(*due <= milliseconds(10000));
}

TEST_CASE("check's other_lease: until another instance's last live lease expires, never its own", "[pg][watch]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection daemon = db.dispatcher();
  WatchStore store(daemon, "outbox");
  CHECK_FALSE(must_check(store, "a").other_lease.has_value());  // no one holds a lease

  Connection other = db.dispatcher("other");
  LeaseStore leases(other, "outbox");
  REQUIRE(leases.register_instance("b").ok());
  REQUIRE(leases.balance("b", milliseconds(3000)).ok());
  const auto held = must_check(store, "a").other_lease;
  REQUIRE(held.has_value());
  CHECK(*held > milliseconds(2000));
  CHECK(*held <= milliseconds(3000));
  CHECK(must_check(store, "a").other_first);  // "a" holds none: of two that began at once, it goes
  CHECK_FALSE(must_check(store, "b").other_lease.has_value());  // its own

  // "a" began a moment later and took half the partitions: it goes, "b" stays.
  must(setup, "UPDATE outbox.leases SET owner = 'a', acquired_at = now() + interval '10 milliseconds' "
              "WHERE partition % 2 = 0");
  CHECK(must_check(store, "a").other_first);
  const WatchCheck for_b = must_check(store, "b");
  CHECK(for_b.other_lease.has_value());
  CHECK_FALSE(for_b.other_first);

  must(setup, "UPDATE outbox.leases SET expires_at = now() - interval '1 second'");  // b died a lease time ago
  CHECK_FALSE(must_check(store, "a").other_lease.has_value());
  REQUIRE(leases.balance("b", milliseconds(3000)).ok());
  REQUIRE(leases.hand_back_all("b").ok());  // b let go: no one serves it
  CHECK_FALSE(must_check(store, "a").other_lease.has_value());
}

TEST_CASE("check prepared on an empty outbox reads each part through its partial index once it has grown",
          "[pg][watch][plans]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  must(setup, "VACUUM outbox.messages");  // known to be empty
  Connection daemon = db.dispatcher();
  WatchStore store(daemon, "outbox");
  must_check(store);  // the generic plan is made now, for an empty table
  must(setup,
       "INSERT INTO outbox.messages (message_id, destination, session_id, created_at, due_at) "
       "SELECT 'r' || i, 'bulk', 's' || i % 50, now() - interval '1 hour', "
       "now() + CASE i % 3 WHEN 0 THEN interval '-1 hour' WHEN 1 THEN interval '1 day' ELSE interval '-1 minute' END "
       "FROM generate_series(1, 6000) i");
  must(setup, "UPDATE outbox.messages SET status = 'parked' WHERE message_id IN ('r3', 'r6')");
  const std::string text = plan_of(daemon, "EXECUTE \"outboxd.outbox.watch_check\"('w')");
  INFO(text);
  CHECK(text.find("Seq Scan on messages") == std::string::npos);  // leases: one row per partition
  CHECK(text.find("Index Only Scan Backward using messages_ready_idx") != std::string::npos);
  CHECK(text.find("Index Only Scan Backward using messages_scheduled_idx") != std::string::npos);
  CHECK(text.find("using messages_parked_idx") != std::string::npos);
  // next_due: the first scheduled row in due order, not all of them (min() read messages_due_session_idx whole).
  CHECK(text.find("Index Only Scan using messages_scheduled_idx on messages s") != std::string::npos);
  CHECK(text.find("messages_due_session_idx") == std::string::npos);
}
