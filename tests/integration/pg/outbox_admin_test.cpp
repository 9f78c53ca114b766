// The CLI's view of the outbox: status counts, requeue and skip of parked rows with their audit rows.
#include <catch2/catch.hpp>

#include <poll.h>

#include "outbox_rows.hpp"
#include "pg/operator_actions.hpp"
#include "pg/outbox_store.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

TEST_CASE("status counts rows per destination and in total", "[pg][admin]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection cli = db.dispatcher("cli");
  OutboxStore store(cli, "outbox");
  insert(connection, {"due-1", "s", "now() - interval '10 seconds'", "now() - interval '10 seconds'"});
  insert(connection, {"due-2", "s"});
  insert(connection, {"later", "s", "now()", "now() + interval '1 hour'"});
  insert(connection, {"retry", "t", "now()", "now()", "pending", "now() + interval '1 minute'"});
  insert(connection, {"parked", "u", "now()", "now()", "parked"});
  insert(connection, {"done", "v", "now()", "now()", "dispatched"});
  must(connection, "UPDATE outbox.messages SET destination = 'invoices' WHERE message_id = 'parked'");

  auto report = store.status();
  REQUIRE(report.ok());
  const DestinationStatus& total = report.value().total;
  CHECK(total.pending == 4);
  CHECK(total.due == 2);
  CHECK(total.scheduled == 1);
  CHECK(total.retrying == 1);
  CHECK(total.parked == 1);
  REQUIRE(total.oldest_pending_age.has_value());
  CHECK(*total.oldest_pending_age >= std::chrono::seconds(10));
  CHECK(*total.oldest_pending_age < std::chrono::seconds(60));
  REQUIRE(report.value().destinations.size() == 2);
  CHECK(report.value().destinations[0].destination == "invoices");
  CHECK(report.value().destinations[0].parked == 1);
  CHECK_FALSE(report.value().destinations[0].oldest_pending_age.has_value());
  CHECK(report.value().destinations[1].destination == "orders");
  CHECK(report.value().destinations[1].pending == 4);
}

TEST_CASE("requeue and skip change parked rows only, record who did it, and wake dispatchers", "[pg][admin]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection cli = db.dispatcher("cli");
  Connection daemon = db.dispatcher("daemon");
  OperatorActions admin(cli, "outbox", "alice");
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.listen().ok());
  insert(setup, {"p1", "s", "now()", "now()", "parked"});
  insert(setup, {"p2", "t", "now()", "now()", "parked"});
  insert(setup, {"p3", "u", "now()", "now()", "parked"});
  insert(setup, {"pending", "v"});
  must(setup, "UPDATE outbox.messages SET attempts = 10, last_error = 'rejected: bad' WHERE status = 'parked'");

  auto not_parked = admin.requeue({{"pending", "nope"}, "", false, ""});
  REQUIRE(not_parked.ok());
  CHECK(not_parked.value().empty());

  auto requeued = admin.requeue({{"p1"}, "", false, ""});
  REQUIRE(requeued.ok());
  CHECK(requeued.value() == std::vector<std::string>{"p1"});
  pollfd fd{daemon.socket(), POLLIN, 0};
  REQUIRE(::poll(&fd, 1, 5000) == 1);
  auto woken = daemon.consume_input_and_notifications();
  REQUIRE(woken.ok());
  CHECK(woken.value());
  const Rows p1 = must(setup, "SELECT status, attempts, next_attempt_at FROM outbox.messages WHERE message_id = 'p1'");
  CHECK(p1.text(0, 0) == "pending");
  CHECK(p1.int64(0, 1) == 0);
  CHECK(p1.is_null(0, 2));
  // Read as the CLI's own login role: db_role is that role, and the dispatcher may read the trail.
  const Rows event = must(cli, "SELECT action, os_user, db_role = session_user FROM outbox.row_events "
                               "WHERE message_id = 'p1'");
  REQUIRE(event.size() == 1);
  CHECK(event.text(0, 0) == "requeued");
  CHECK(event.text(0, 1) == "alice");
  CHECK(event.boolean(0, 2));

  auto skipped = admin.skip({{}, "t", false, ""});
  REQUIRE(skipped.ok());
  CHECK(skipped.value() == std::vector<std::string>{"p2"});
  const Rows p2 = must(setup, "SELECT status, cancelled_at IS NOT NULL, last_error FROM outbox.messages "
                            "WHERE message_id = 'p2'");
  CHECK(p2.text(0, 0) == "cancelled");
  CHECK(p2.boolean(0, 1));
  CHECK(p2.text(0, 2) == "skipped by operator; last error: rejected: bad");

  auto all = admin.requeue({{}, "", true, ""});
  REQUIRE(all.ok());
  CHECK(all.value() == std::vector<std::string>{"p3"});
  auto claimed = claim(store, all_partitions(), 10);
  REQUIRE(claimed.ok());
  CHECK(claimed.value().rows.size() == 3);  // p1, p3, pending
}

// A claim in the middle of a pass reads immediate rows from above its cursor
// only: a replayed row must still go out before its session's later rows.
TEST_CASE("replayed rows are claimed before their session's later rows, even above the pass's cursor", "[pg][admin]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection cli = db.dispatcher("cli");
  Connection daemon = db.dispatcher("daemon");
  OperatorActions admin(cli, "outbox", "");
  OutboxStore store(daemon, "outbox");
  const core::RowId first = insert(setup, {"r1", "s", "now() - interval '1 hour'", "now() - interval '1 hour'",
                                           "dispatched"});
  const core::RowId second = insert(setup, {"r2", "s", "now() - interval '1 hour'", "now() - interval '1 hour'",
                                            "dispatched"});
  const core::RowId later = insert(setup, {"r3", "s"});
  const core::RowId other = insert(setup, {"o1", "t"});

  auto dry = admin.replay({{}, "s", "", "", {}, {}, 10}, true);
  REQUIRE(dry.ok());
  CHECK(dry.value().matched == 2);
  CHECK(dry.value().waiting_behind == 1);
  CHECK(must(setup, "SELECT count(*) FROM outbox.messages WHERE status = 'dispatched'").int64(0, 0) == 2);
  auto replayed = admin.replay({{}, "s", "", "", {}, {}, 10}, false);
  REQUIRE(replayed.ok());
  CHECK(replayed.value().message_ids == std::vector<std::string>{"r1", "r2"});

  auto claimed = claim(store, all_partitions(), 10, second);  // the cursor is past both replayed rows
  REQUIRE(claimed.ok());
  std::vector<core::RowId> ids;
  for (const auto& row : claimed.value().rows) ids.push_back(row.id);
  CHECK(ids == std::vector<core::RowId>{first, other});  // r2 waits for r1; r3 waits behind a timeout
  REQUIRE(claimed.value().passed_over.size() == 1);
  CHECK(claimed.value().passed_over[0].id == later);

  must(setup, "UPDATE outbox.messages SET status = 'dispatched', dispatched_at = now() WHERE session_id = 's'");
  auto too_many = admin.replay({{"r1", "r2"}, "", "", "", {}, {}, 1}, false);
  REQUIRE_FALSE(too_many.ok());
  CHECK_THAT(too_many.error().message, Catch::Contains("replay would touch 2 rows, more than the limit of 1"));
  CHECK(must(setup, "SELECT count(*) FROM outbox.messages WHERE status = 'dispatched'").int64(0, 0) == 3);
}
