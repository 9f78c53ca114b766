// OutboxStore::backlog as the dispatcher role: which destinations get series past the bound, and how many are left out.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "outbox_rows.hpp"
#include "pg/outbox_store.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

// `count` pending rows of `destination`, due `due_at` (an SQL expression), in `partition` (0 is the first in index
// order).
void add_rows(Connection& superuser, const std::string& destination, int count, const std::string& due_at,
              int partition = 0) {
  const std::string ids = destination + "/" + std::to_string(partition) + "/";
  must(superuser,
       "INSERT INTO outbox.messages (message_id, destination, due_at) SELECT $1 || g, $2, " + due_at +
           " FROM generate_series(1, " + std::to_string(count) + ") g",
       {ids, destination});
  must(superuser, "UPDATE outbox.messages SET partition = " + std::to_string(partition) +
                      " WHERE starts_with(message_id, $1)",
       {ids});
}

std::vector<std::string> names(const BacklogReport& report) {
  std::vector<std::string> out;
  for (const auto& d : report.destinations) out.push_back(d.destination);
  return out;
}

// As the daemon measures it: a session of the dispatcher role alone, every partition held.
BacklogReport measure(const ScratchDatabase& db, int count_cap, int max_destinations) {
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  auto report = store.backlog(all_partitions(), count_cap, max_destinations);
  if (!report) FAIL("backlog: " << report.error().message);
  return report.value();
}

}  // namespace

TEST_CASE("backlog lists every destination while they fit, and leaves none out", "[pg][backlog]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  add_rows(setup, "b", 1, "now()");
  add_rows(setup, "a", 2, "now() + interval '1 hour'");

  const auto report = measure(db, 5, 2);
  CHECK(names(report) == std::vector<std::string>{"a", "b"});
  CHECK(report.left_out == 0);
}

TEST_CASE("past the bound, backlog lists the destinations owing the most rows, then the oldest, whatever their names",
          "[pg][backlog]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  add_rows(setup, "!new", 1, "now()");
  add_rows(setup, "!parked", 1, "now()");
  must(setup, "UPDATE outbox.messages SET status = 'parked' WHERE destination = '!parked'");
  add_rows(setup, "!timeouts", 4, "now() + interval '1 hour'");
  add_rows(setup, "orders", 3, "now()");
  add_rows(setup, "z-old", 1, "now() - interval '1 hour'");

  // orders owes 3 rows; z-old, !new and !parked one each: z-old's due row is
  // the oldest, and !parked has none; !timeouts owes nothing.
  auto report = measure(db, 5, 2);
  CHECK(names(report) == std::vector<std::string>{"orders", "z-old"});
  CHECK(report.left_out == 3);
  report = measure(db, 5, 4);
  CHECK(names(report) == std::vector<std::string>{"!new", "!parked", "orders", "z-old"});
  CHECK(report.left_out == 1);
}

TEST_CASE("a destination past the count cap ranks by its due rows in every partition, not its first rows",
          "[pg][backlog]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  // In index order its first entries are 8 scheduled rows of partition 0; its 3 due rows are in partition 5.
  add_rows(setup, "big", 8, "now() + interval '1 hour'");
  add_rows(setup, "big", 3, "now() - interval '1 minute'", 5);
  add_rows(setup, "!a", 2, "now()");
  add_rows(setup, "!b", 1, "now()");

  const auto report = measure(db, 5, 1);
  REQUIRE(names(report) == std::vector<std::string>{"big"});
  CHECK(report.destinations[0].due == 3);
  CHECK(report.destinations[0].scheduled == 5);  // the series' count stops at the cap
  CHECK(report.destinations[0].oldest_due_age >= 60);
  CHECK(report.left_out == 2);
}

TEST_CASE("between rankings, backlog_of measures the destinations chosen, as they are now, and no other",
          "[pg][backlog]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  const std::string awkward = R"(a"b\c,{d})";  // through the text[] literal of $4
  add_rows(setup, "orders", 3, "now()");
  add_rows(setup, awkward, 2, "now()");
  add_rows(setup, "audit", 1, "now()");
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());

  auto ranked = store.backlog(all_partitions(), 5, 2);
  REQUIRE(ranked);
  const auto chosen = names(ranked.value());
  REQUIRE(chosen == std::vector<std::string>{awkward, "orders"});
  CHECK(ranked.value().left_out == 1);
  CHECK(ranked.value().beyond_bound);

  // A chosen destination grows, another drains, and a new one owes more than any.
  add_rows(setup, "orders", 1, "now()", 3);
  must(setup, "DELETE FROM outbox.messages WHERE destination = $1", {awkward});
  add_rows(setup, "big", 5, "now()");
  auto between = store.backlog_of(all_partitions(), 5, 2, chosen);
  REQUIRE(between);
  REQUIRE(names(between.value()) == chosen);
  CHECK(between.value().destinations[0].due == 0);
  CHECK(between.value().destinations[1].due == 4);
  CHECK(between.value().beyond_bound);
  CHECK(between.value().left_out == 0);  // not counted: the ranking's count stands

  // The next ranking finds it.
  ranked = store.backlog(all_partitions(), 5, 2);
  REQUIRE(ranked);
  CHECK(names(ranked.value()) == std::vector<std::string>{"big", "orders"});
  CHECK(ranked.value().left_out == 1);
}

TEST_CASE("backlog_of lists every destination, chosen or not, once they fit again", "[pg][backlog]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  add_rows(setup, "audit", 1, "now() + interval '1 hour'");
  add_rows(setup, "billing", 1, "now()");
  must(setup, "UPDATE outbox.messages SET status = 'parked' WHERE destination = 'billing'");

  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  auto report = store.backlog_of(all_partitions(), 5, 2, {"orders", "z-old"});
  REQUIRE(report);
  CHECK(names(report.value()) == std::vector<std::string>{"audit", "billing"});
  CHECK(report.value().destinations[0].scheduled == 1);
  CHECK(report.value().destinations[1].parked == 1);
  CHECK_FALSE(report.value().beyond_bound);
  CHECK(report.value().left_out == 0);
}
