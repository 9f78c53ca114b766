// OutboxStore's connection concerns: wake-up by NOTIFY only when idle, reconnects, and index use.
#include <catch2/catch.hpp>

#include <poll.h>

#include "outbox_rows.hpp"
#include "pg/outbox_store.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

// Waits for the socket like the daemon's loop does, then reads.
bool woken_within(Connection& connection, int timeout_ms) {
  pollfd fd{connection.socket(), POLLIN, 0};
  if (::poll(&fd, 1, timeout_ms) <= 0) return false;
  auto notified = connection.consume_input_and_notifications();
  if (!notified) FAIL("consume: " << notified.error().message);
  return notified.value();
}

// The purges delete inside functions that run as the owner (028_dispatcher_locks.sql): their DELETE,
// taken from the function's source with older_than and batch_size as $1 and $2, prepared on `owner`
// as `name`, is the statement PL/pgSQL plans, with custom plans first and a generic one later.
void prepare_function_delete(Connection& owner, const std::string& function, const std::string& name) {
  const Rows source = must(owner, "SELECT prosrc FROM pg_proc WHERE oid = '" + function + "'::regprocedure");
  const std::string body(source.text(0, 0));
  const auto start = body.find("DELETE");
  REQUIRE(start != std::string::npos);
  std::string statement = body.substr(start, body.find(';', start) - start);
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"older_than", "$1"}, {"batch_size", "$2"}}) {
    const auto at = statement.find(from);
    REQUIRE(at != std::string::npos);
    statement.replace(at, from.size(), to);
  }
  // The function's pinned search_path, kept: a prepared statement is planned again under a new one.
  must(owner, "SET search_path = outbox, pg_catalog, pg_temp");
  must(owner, "PREPARE " + name + "(interval, int) AS " + statement);
}

}  // namespace

TEST_CASE("inserts wake the listener only while the instance is idle", "[pg][store]") {
  ScratchDatabase db;
  db.migrated();
  Connection daemon = db.dispatcher();
  Connection writer = db.connect("writer");
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  REQUIRE(store.listen().ok());
  CHECK(store.channel() == "outbox_wakeup");

  REQUIRE(store.arm_notify("instance-1", false).ok());
  insert(writer, {"busy", "s"});
  CHECK_FALSE(woken_within(daemon, 300));

  REQUIRE(store.arm_notify("instance-1", true).ok());
  CHECK(must(daemon, "SELECT idle FROM outbox.instances WHERE instance_id = 'instance-1'").boolean(0, 0));
  insert(writer, {"idle", "s"});
  CHECK(woken_within(daemon, 5000));

  SECTION("the wake-up survives a reconnect") {
    terminate_backend(daemon);
    auto lost = claim(store, all_partitions(), 10);
    REQUIRE_FALSE(lost.ok());
    CHECK(lost.error().kind == core::ErrorKind::transient);
    CHECK(daemon.last_failure().connection_lost);
    REQUIRE(daemon.reset().ok());
    insert(writer, {"after-reset", "s"});
    CHECK(woken_within(daemon, 5000));
    auto claimed = claim(store, all_partitions(), 10);  // statements prepared again
    REQUIRE(claimed.ok());
    CHECK(claimed.value().rows.size() == 3);
  }
}

TEST_CASE("the store's statements use the partial indexes", "[pg][store]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  // A realistic table: mostly finished rows, a few pending, parked and scheduled ones.
  must(connection,
       "INSERT INTO outbox.messages (message_id, destination, session_id, status, dispatched_at) "
       "SELECT 'done-' || g, 'orders', 's' || (g % 500), 'dispatched', now() - g * interval '1 second' "
       "FROM generate_series(1, 20000) g");
  must(connection,
       "INSERT INTO outbox.messages (message_id, destination, session_id) "
       "SELECT 'new-' || g, 'orders', 's' || (g % 500) FROM generate_series(1, 50) g");
  must(connection,
       "INSERT INTO outbox.messages (message_id, destination, session_id, due_at) "
       "SELECT 'later-' || g, 'orders', 's' || (g % 500), now() + g * interval '1 minute' "
       "FROM generate_series(1, 50) g");
  must(connection, "UPDATE outbox.messages SET status = 'parked' WHERE message_id IN ('new-1', 'new-2')");
  must(connection, "ANALYZE outbox.messages");

  // The plan built for these values, and the generic plan a prepared
  // statement settles on after five executions.
  const std::string mode = GENERATE(as<std::string>{}, "auto", "force_generic_plan");
  must(daemon, "SET plan_cache_mode = " + mode);
  INFO("plan_cache_mode " << mode);
  const std::string known = "'{3,4,5}'";
  const std::string bytes = ", 16384";  // largest payload read inline
  const std::string immediate =
      plan_of(daemon, "EXECUTE \"outboxd.outbox.claim_immediate\"('{0,1,2,3,4,5,6,7}', 500, 0, " + known + bytes + ", NULL, '{}')");
  INFO(immediate);
  CHECK_THAT(immediate, Catch::Contains("messages_ready_idx"));
  CHECK_THAT(immediate, Catch::Contains("messages_blocked_idx"));
  CHECK_THAT(immediate, Catch::Contains("messages_due_session_idx"));
  CHECK_THAT(immediate, Catch::Contains("NOT (hashed SubPlan"));  // one hash of the known rows, not a scan per row
  const std::string scheduled =
      plan_of(daemon, "EXECUTE \"outboxd.outbox.claim_scheduled\"('{0,1,2,3,4,5,6,7}', 500, " + known + bytes + ")");
  INFO(scheduled);
  CHECK_THAT(scheduled, Catch::Contains("messages_scheduled_idx"));
  CHECK_THAT(scheduled, Catch::Contains("messages_blocked_idx"));
  CHECK_THAT(scheduled, Catch::Contains("messages_due_session_idx"));
  CHECK_THAT(scheduled, Catch::Contains("NOT (hashed SubPlan"));
  const std::string next_due = plan_of(daemon, "EXECUTE \"outboxd.outbox.time_to_next_due\"('{0,1,2,3,4,5,6,7}')");
  INFO(next_due);
  CHECK_THAT(next_due, Catch::Contains("messages_scheduled_idx"));
  // The earliest backoff end: either partial index of failed rows serves (both are small); never the table.
  CHECK_THAT(next_due, Catch::Contains("messages_blocked_idx") || Catch::Contains("messages_retrying_idx"));
  CHECK_THAT(next_due, !Catch::Contains("Seq Scan on messages"));
  must(connection, "SET plan_cache_mode = " + mode);
  prepare_function_delete(connection, "outbox.purge_dispatched(interval, int)", "purge_body");
  prepare_function_delete(connection, "outbox.purge_cancelled(interval, int)", "purge_cancelled_body");
  const std::string purge = plan_of(connection, "EXECUTE purge_body('1 hour', 1000)");
  INFO(purge);
  CHECK_THAT(purge, Catch::Contains("messages_dispatched_idx"));
  const std::string cancelled = plan_of(connection, "EXECUTE purge_cancelled_body('1 hour', 1000)");
  INFO(cancelled);
  CHECK_THAT(cancelled, Catch::Contains("messages_cancelled_idx"));
  const std::string mark = plan_of(daemon, "EXECUTE \"outboxd.outbox.mark_dispatched\"('{1,2,3}', 'a')");
  INFO(mark);
  CHECK_THAT(mark, Catch::Contains("messages_pkey"));
}

TEST_CASE("the daemon's connection plans each statement once, however often it runs", "[pg][store]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  insert(setup, {"due", "s"});
  insert(setup, {"timeout", "s", "now() - interval '1 minute'", "now() - interval '1 second'"});
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  // Planning the claim afresh on every call cost about 2 ms, more than running it.
  for (int i = 0; i < 8; ++i) REQUIRE(store.claim(all_partitions(), 10, 0).ok());
  const Rows plans = must(daemon,
                          "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements "
                          "WHERE name IN ('outboxd.outbox.claim_immediate', 'outboxd.outbox.claim_scheduled', "
                          "'outboxd.outbox.time_to_next_due') ORDER BY name");
  REQUIRE(plans.size() == 3);
  for (int i = 0; i < plans.size(); ++i) {
    INFO(plans.text(i, 0));
    CHECK(plans.int64(i, 1) == 8);
    CHECK(plans.int64(i, 2) == 0);
  }
}
