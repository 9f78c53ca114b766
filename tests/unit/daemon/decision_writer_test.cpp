// DecisionWriter on its own: outcomes into the book, marks and failures written in batches, the retention purge.
#include <catch2/catch.hpp>

#include <vector>

#include "daemon/run/decision_writer.hpp"
#include "daemon/run/run_loop.hpp"
#include "parts_fixture.hpp"

namespace outboxd::daemon::test {
namespace {

constexpr const char* kInstance = "writer-test";

struct WriterFixture : PartsFixture {
  explicit WriterFixture(DecisionWriter::Settings settings = {3, {}}, int max_attempts = 3)
      : book(policy(max_attempts), clock, random),
        writer(std::move(settings), kInstance, book, database, metrics, timers, clock) {
    database.owners[0] = kInstance;
  }

  static dispatch::PlannerPolicy policy(int max_attempts) {
    config::DispatchConfig dispatch;
    dispatch.max_attempts = max_attempts;
    dispatch.backoff_initial = 100ms;
    return planner_policy(dispatch, {});
  }

  // `n` new rows claimed and handed out, as the loop publishes them.
  std::vector<core::RowId> publish(int n) {
    for (int i = 0; i < n; ++i) database.insert();
    const auto request = book.claim_request(100);
    auto sets = database.claim({0}, static_cast<int>(request.limit), request.after_id, request.known, {}, {}, {});
    REQUIRE(sets);
    book.on_claim(std::move(sets).value(), request, clock.now());
    std::vector<core::RowId> ids;
    for (const auto& row : book.take_ready()) ids.push_back(row.id);
    REQUIRE(ids.size() == static_cast<std::size_t>(n));
    return ids;
  }
  void outcome(const std::vector<core::RowId>& ids, core::DeliveryOutcome what) {
    std::vector<amqp::Outcome> outcomes;
    for (const auto id : ids) outcomes.push_back({id, what, what == core::DeliveryOutcome::accepted ? "" : "no"});
    writer.apply(outcomes);
  }

  dispatch::RowBook book;
  DecisionWriter writer;
};

}  // namespace

TEST_CASE("DecisionWriter marks accepted rows after the mark delay, or at once when a batch is full",
          "[daemon][decision_writer]") {
  WriterFixture f;  // batches of 3
  const auto two = f.publish(2);
  f.outcome(two, core::DeliveryOutcome::accepted);
  REQUIRE(f.writer.persist(false));
  CHECK(f.database.marks.empty());  // a batch of 2 waits for more, up to the delay
  f.clock.advance(DecisionWriter::kMarkDelay);
  REQUIRE(f.writer.persist(false));
  REQUIRE(f.database.marks.size() == 1);
  CHECK(f.database.marks[0].ids == two);
  CHECK(f.database.marks[0].owner == kInstance);

  const auto three = f.publish(3);
  f.outcome(three, core::DeliveryOutcome::accepted);
  REQUIRE(f.writer.persist(false));  // full: no delay
  REQUIRE(f.database.marks.size() == 2);
  CHECK(f.database.marks[1].ids == three);
  CHECK(f.writer.totals().dispatched == 5);
  CHECK(f.database.count(FakeDatabase::Status::dispatched) == 5);
}

TEST_CASE("DecisionWriter writes everything at once when stopping, nothing while the database is down",
          "[daemon][decision_writer]") {
  WriterFixture f;
  const auto one = f.publish(1);
  f.outcome(one, core::DeliveryOutcome::accepted);
  f.database.lost(core::Error{core::ErrorKind::transient, "gone"});
  REQUIRE(f.writer.persist(true));
  CHECK(f.database.marks.empty());
  f.clock.advance(1s);
  REQUIRE(f.database.ensure_connected());
  REQUIRE(f.writer.persist(true));
  CHECK(f.database.marks.size() == 1);
}

TEST_CASE("A mark that fails returns its error and is written whole by the next try", "[daemon][decision_writer]") {
  WriterFixture f;
  const auto rows = f.publish(3);
  f.outcome(rows, core::DeliveryOutcome::accepted);
  f.database.fail_mark = core::Error{core::ErrorKind::transient, "connection lost"};
  const auto failed = f.writer.persist(false);
  REQUIRE_FALSE(failed);
  CHECK(failed.error().message == "connection lost");
  CHECK(f.writer.totals().dispatched == 0);
  CHECK(f.database.count(FakeDatabase::Status::pending) == 3);
  REQUIRE(f.writer.persist(false));
  CHECK(f.database.count(FakeDatabase::Status::dispatched) == 3);
  CHECK(f.writer.totals().dispatched == 3);
}

TEST_CASE("A rejected row backs off, and is parked at max_attempts; each is counted once",
          "[daemon][decision_writer]") {
  WriterFixture f({3, {}}, 1);  // the first rejection parks
  const auto row = f.publish(1);
  f.outcome(row, core::DeliveryOutcome::rejected);
  REQUIRE(f.writer.persist(true));
  CHECK(f.database.status(row[0]) == FakeDatabase::Status::parked);
  CHECK(f.writer.totals().parked == 1);
  CHECK(f.writer.totals().retried == 0);

  WriterFixture g;  // three attempts
  const auto retried = g.publish(1);
  g.outcome(retried, core::DeliveryOutcome::rejected);
  REQUIRE(g.writer.persist(true));
  CHECK(g.database.status(retried[0]) == FakeDatabase::Status::pending);
  CHECK(g.database.attempts.at(retried[0]) == 1);
  CHECK(g.writer.totals().retried == 1);
  CHECK(g.writer.totals().parked == 0);
}

TEST_CASE("A lease lost before the mark leaves the row to the next owner: not counted dispatched",
          "[daemon][decision_writer]") {
  WriterFixture f;
  const auto rows = f.publish(3);
  f.outcome(rows, core::DeliveryOutcome::accepted);
  f.database.owners[0] = "another-instance";
  REQUIRE(f.writer.persist(false));
  CHECK(f.writer.totals().dispatched == 0);
  CHECK(f.database.count(FakeDatabase::Status::pending) == 3);
  CHECK(f.book.pending_writes().empty());  // the decisions are done with: the row is the next owner's
}

TEST_CASE("The purge runs when its timer is due, keeping dispatched rows for keep_for under retention keep",
          "[daemon][decision_writer]") {
  config::RetentionConfig keep;
  keep.mode = config::RetentionMode::keep;
  keep.keep_for = 2h;
  keep.failed_keep_for = 3h;
  keep.purge_interval = 60s;
  WriterFixture f({3, keep});
  REQUIRE(f.writer.purge());
  CHECK(f.database.purged_dispatched.empty());  // no timer set: not due
  f.timers.set(dispatch::Timer::purge, f.clock.now());
  REQUIRE(f.writer.purge());
  CHECK(f.database.purged_dispatched == std::vector<std::chrono::milliseconds>{2h});
  CHECK(f.database.purged_failed == std::vector<std::chrono::milliseconds>{3h});
  REQUIRE(f.writer.purge());
  CHECK(f.database.purged_dispatched.size() == 1);  // next at the interval
  f.clock.advance(60s);
  config::RetentionConfig deleting = keep;
  deleting.mode = config::RetentionMode::delete_rows;
  f.writer.set_settings({3, deleting});
  REQUIRE(f.writer.purge());
  CHECK(f.database.purged_dispatched == std::vector<std::chrono::milliseconds>{2h, 0ms});
}

}  // namespace outboxd::daemon::test
