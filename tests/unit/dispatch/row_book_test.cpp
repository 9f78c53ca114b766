// RowBook and merge_claim: the claim pass's rules and the payloads held from claim to mark, with no database.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "dispatch/claim_merge.hpp"
#include "dispatch/row_book.hpp"
#include "planner_fixture.hpp"

namespace outboxd::dispatch::test {
namespace {

core::OutboxMessage message(core::RowId id, std::optional<std::string> session = std::nullopt, int partition = 0) {
  core::OutboxMessage m;
  m.id = id;
  m.message_id = numbered("m", id);
  m.session_id = std::move(session);
  m.partition = partition;
  return m;
}

core::OutboxMessage message_to(std::string destination, core::RowId id) {
  auto m = message(id);
  m.destination = std::move(destination);
  return m;
}

core::OutboxMessage timeout(core::RowId id, std::optional<std::string> session = std::nullopt) {
  auto m = message(id, std::move(session));
  m.due_at = std::chrono::system_clock::time_point(std::chrono::hours(1));
  return m;
}

// An immediate set of `rows` as read, rows passed over given as (id, session) after them in id order.
core::ClaimedSet immediate(std::vector<core::OutboxMessage> rows, std::vector<core::PassedOverRow> passed_over = {}) {
  core::ClaimedSet set;
  set.read = rows.size() + passed_over.size();
  for (const auto& row : rows) set.last_id = std::max(set.last_id, row.id);
  for (const auto& over : passed_over) set.last_id = std::max(set.last_id, over.id);
  set.rows = std::move(rows);
  set.passed_over = std::move(passed_over);
  return set;
}

Ids ids_of(const std::vector<core::OutboxMessage>& rows) {
  Ids ids;
  for (const auto& row : rows) ids.push_back(row.id);
  return ids;
}

struct BookFixture {
  explicit BookFixture(PlannerPolicy policy = test_policy()) : book(std::move(policy), clock, random) {}

  core::ManualClock clock;
  core::FixedRandom random{0.5};
  RowBook book;

  RowBook::Claimed claim(core::ClaimedSets sets, std::size_t batch = 10) {
    const auto request = book.claim_request(batch);
    return book.on_claim(std::move(sets), request, clock.now());
  }
};

}  // namespace

TEST_CASE("merge_claim: scheduled rows above a full immediate batch wait for the next claim",
          "[dispatch][row_book]") {
  core::ClaimedSets sets;
  sets.immediate = immediate({message(1), message(5)});
  core::ClaimedSet scheduled;
  scheduled.rows = {timeout(7), timeout(3)};  // due order
  scheduled.read = 2;
  sets.scheduled = scheduled;
  const auto full = merge_claim(sets, 2);
  CHECK(ids_of(full.rows) == Ids{1, 3, 5});
  CHECK(full.immediate_full);
  CHECK(full.scheduled_full);
  CHECK(full.last_immediate_id == 5);
  const auto short_claim = merge_claim(sets, 3);
  CHECK(ids_of(short_claim.rows) == Ids{1, 3, 5, 7});
  CHECK_FALSE(short_claim.more());
}

TEST_CASE("merge_claim: rows behind a timeout count towards a full batch and move the cursor", "[dispatch][row_book]") {
  core::ClaimedSets sets;
  sets.immediate = immediate({message(1)}, {{4, "a"}});
  const auto claim = merge_claim(sets, 2);
  CHECK(claim.immediate_full);
  CHECK(claim.last_immediate_id == 4);
  REQUIRE(claim.passed_over.size() == 1);
  CHECK(claim.passed_over[0].order == "a");
  CHECK(ids_of(claim.rows) == Ids{1});
}

TEST_CASE("RowBook holds the payloads of claimed rows and hands them out in the planner's order",
          "[dispatch][row_book]") {
  BookFixture f;
  core::ClaimedSets sets;
  sets.immediate = immediate({message(1, "s"), message(2, "s"), message(3)});
  const auto claimed = f.claim(sets);
  CHECK(claimed.added == 3);
  CHECK_FALSE(claimed.more);
  CHECK_FALSE(f.book.claim_may_find_rows());  // the claim came back short
  const auto ready = f.book.take_ready();
  CHECK(ids_of(ready) == Ids{1, 3});
  CHECK(ready[0].message_id == "m1");
  // Claimed again (a new pass), the rows held are left out of the claim and ignored.
  f.book.restart_pass();
  auto known = f.book.claim_request(10).known;
  std::sort(known.begin(), known.end());
  CHECK(known == Ids{1, 2, 3});
  CHECK(f.claim(sets).added == 0);
}

TEST_CASE("RowBook hands out a row that shares the body it holds, and the body outlives either holder",
          "[dispatch][row_book]") {
  BookFixture f;
  core::ClaimedSets sets;
  sets.immediate = immediate({message(1)});
  sets.immediate.rows[0].body = std::string(1000, 'b');
  f.claim(sets);
  auto ready = f.book.take_ready();
  REQUIRE(ready.size() == 1);
  const core::OutboxMessage* held = f.book.find(1);
  REQUIRE(held != nullptr);
  CHECK(ready[0].body.view().data() == held->body.view().data());  // one buffer, not a copy
  ready[0].body.clear();  // the sender lets go of its share once the message is encoded
  CHECK(held->body == std::string(1000, 'b'));  // a retry sends it again from the buffer held
}

TEST_CASE("RowBook forgets a payload once its outcome is persisted", "[dispatch][row_book]") {
  BookFixture f;
  core::ClaimedSets sets;
  sets.immediate = immediate({message(1)});
  f.claim(sets);
  f.book.take_ready();
  f.book.on_outcome(1, core::DeliveryOutcome::accepted, "");
  REQUIRE(f.book.find(1) != nullptr);  // accepted, not yet marked: still held
  CHECK(f.book.pending_writes().dispatched == Ids{1});
  f.book.on_persisted();
  CHECK(f.book.find(1) == nullptr);
  CHECK_FALSE(f.book.due_since(1).has_value());
}

TEST_CASE("RowBook: a session's rows after one behind a timeout wait for the next pass", "[dispatch][row_book]") {
  BookFixture f;
  core::ClaimedSets sets;
  sets.immediate = immediate({message(1), message(6, "a")}, {{4, "a"}});
  const auto claimed = f.claim(sets, 3);
  CHECK(claimed.more);
  CHECK(claimed.added == 1);  // 6 waits: 4 of its session was passed over
  CHECK(f.book.find(6) == nullptr);
  CHECK(f.book.claim_request(3).after_id == 6);
}

TEST_CASE("RowBook: a row behind a timeout stops its own writer's rows of the session id, not another's",
          "[dispatch][row_book]") {
  BookFixture f;
  auto written_by = [](const char* writer, core::OutboxMessage m) {
    m.writer = writer;
    return m;
  };
  core::ClaimedSets sets;
  sets.immediate = immediate({written_by("app_a", message(6, "order-42")), written_by("app_b", message(7, "order-42"))},
                             {{4, core::session_key("app_a", "order-42")}});
  const auto claimed = f.claim(sets, 3);
  CHECK(claimed.added == 1);
  CHECK(f.book.find(6) == nullptr);  // behind app_a's 4
  CHECK(f.book.find(7) != nullptr);
}

TEST_CASE("RowBook: a timeout marked lets a claim find the rows behind it", "[dispatch][row_book]") {
  BookFixture f;
  core::ClaimedSets first;
  first.immediate = immediate({message(1)}, {{4, "a"}});
  core::ClaimedSet due;
  due.rows = {timeout(3, "a")};
  due.read = 1;
  first.scheduled = due;
  f.claim(first, 2);  // immediate batch full: the pass goes on past 4
  CHECK(f.book.claim_request(2).after_id == 4);
  for (const auto& row : f.book.take_ready()) f.book.on_outcome(row.id, core::DeliveryOutcome::accepted, "");
  core::ClaimedSets empty;
  f.claim(empty, 2);
  CHECK_FALSE(f.book.claim_may_find_rows());
  f.book.on_persisted();  // the timeout 3 is marked
  CHECK(f.book.claim_may_find_rows());
  CHECK(f.book.claim_request(2).after_id == 0);  // a new pass finds 4
}

TEST_CASE("RowBook: a draining partition is drained once none of its rows is held", "[dispatch][row_book]") {
  BookFixture f;
  core::ClaimedSets sets;
  sets.immediate = immediate({message(1, std::nullopt, 1), message(2, std::nullopt, 2)});
  f.claim(sets);
  CHECK(f.book.drained({1, 2}).empty());
  f.book.take_ready();
  f.book.on_outcome(1, core::DeliveryOutcome::accepted, "");
  CHECK(f.book.drained({1, 2}).empty());  // accepted, not yet marked
  f.book.on_persisted();
  CHECK(f.book.drained({1, 2}) == std::vector<int>{1});
  f.book.drop_partitions({2});  // 2 is in flight: held until its outcome
  CHECK(f.book.drained({2}).empty());
  f.book.on_outcome(2, core::DeliveryOutcome::released, "");
  f.book.on_persisted();
  CHECK(f.book.drained({2}) == std::vector<int>{2});
}

}  // namespace outboxd::dispatch::test

namespace outboxd::dispatch::test {

TEST_CASE("RowBook claims a lost connection's rows again at once, from the start of a new pass",
          "[dispatch][row_book]") {
  BookFixture f;
  core::ClaimedSets sets;
  sets.immediate = immediate({message(1, "A"), message(2, "A"), message(3)});
  const auto claimed = f.claim(std::move(sets));
  REQUIRE_FALSE(claimed.more);
  CHECK_FALSE(f.book.claim_may_find_rows());  // caught up: the next claim waits for a NOTIFY or the poll
  CHECK(ids_of(f.book.take_ready()) == Ids{1, 3});
  f.book.on_outcome(1, core::DeliveryOutcome::connection_lost, "gone");
  CHECK(f.book.claim_may_find_rows());
  const auto request = f.book.claim_request(10);
  CHECK(request.after_id == 0);
  CHECK(request.known == Ids{3});  // 1 and 2 are read again; 3 is still in flight
}

}  // namespace outboxd::dispatch::test

namespace outboxd::dispatch::test {

TEST_CASE("RowBook: while a limited destination holds enough rows, the claim reads the others by destination alone",
          "[dispatch][row_book][limits]") {
  auto policy = test_policy();
  policy.max_buffered = 16;  // limited_buffer() is 2
  policy.destinations["slow"].max_in_flight = 1;
  BookFixture f(policy);
  auto& clock = f.clock;
  auto& book = f.book;
  auto slow = [](core::RowId id) { return message_to("slow", id); };
  core::ClaimedSets first;
  first.immediate = immediate({slow(1), slow(2), slow(3)});
  auto request = book.claim_request(10);
  CHECK_FALSE(request.lanes.only);
  book.on_claim(std::move(first), request, clock.now());

  request = book.claim_request(10);
  CHECK(request.lanes.only);
  CHECK(request.lanes.skip == std::vector<std::string>{"slow"});
  CHECK(request.lanes.limit == request.limit);
  CHECK(request.lanes.after.empty());
  // A full claim by destination goes on after its last destination; a short
  // one from there looks once more from the first.
  core::ClaimedSets full;
  full.lanes = immediate({message_to("fast", 4), message_to("fast", 5)});
  request.lanes.limit = 2;
  CHECK(book.on_claim(std::move(full), request, clock.now()).more);
  request = book.claim_request(10);
  CHECK(request.lanes.after == "fast");
  CHECK(book.on_claim(core::ClaimedSets{}, request, clock.now()).more);
  request = book.claim_request(10);
  CHECK(request.lanes.after.empty());
  CHECK_FALSE(book.on_claim(core::ClaimedSets{}, request, clock.now()).more);
  // The slow rows left unread are claimed once those held have gone out.
  CHECK_FALSE(book.claim_may_find_rows());
  for (int round = 0; round < 2; ++round) {
    for (const auto& row : book.take_ready()) book.on_outcome(row.id, core::DeliveryOutcome::accepted, "");
    book.on_persisted();
  }
  CHECK(book.claim_may_find_rows());
  request = book.claim_request(10);
  CHECK_FALSE(request.lanes.only);
  // A full claim then goes on, as a pass does.
  core::ClaimedSets again;
  again.immediate = immediate({slow(6), slow(7), slow(8), slow(9), slow(10), slow(11), slow(12), slow(13)});
  request.limit = 8;
  CHECK(book.on_claim(std::move(again), request, clock.now()).more);
  CHECK(book.claim_may_find_rows());
}

TEST_CASE("RowBook: while a backlog fills the room, a small claim by destination runs beside the pass now and then",
          "[dispatch][row_book][limits]") {
  auto policy = test_policy();
  policy.max_buffered = 16;
  policy.window = 1;
  BookFixture f(policy);
  auto& clock = f.clock;
  auto& book = f.book;
  std::vector<core::OutboxMessage> backlog;
  for (core::RowId id = 1; id <= 16; ++id) backlog.push_back(message_to("bulk", id));
  core::ClaimedSets first;
  first.immediate = immediate(std::move(backlog));
  auto request = book.claim_request(16);
  REQUIRE(book.on_claim(std::move(first), request, clock.now()).more);  // full: a backlog
  // No room for the pass's next claim: one by destination beside it, at once the first time.
  REQUIRE(book.room_for_claim(16));
  request = book.claim_request(16);
  CHECK(request.beside_pass);
  CHECK(request.lanes.only);
  CHECK(request.limit == 2);  // an eighth of the batch, beyond max_buffered
  CHECK(request.after_id == 16);
  CHECK(request.lanes.skip == std::vector<std::string>{"bulk"});
  CHECK(request.lanes.alone);
  CHECK(request.known.empty());  // the bulk's rows held are not what it reads
  core::ClaimedSets lanes;
  lanes.lanes = immediate({message_to("payments", 40)});
  CHECK(book.on_claim(std::move(lanes), request, clock.now()).added == 1);
  // The pass is where it was, and the next claim beside it waits kLanesInterval.
  CHECK(book.claim_request(16).after_id == 16);
  CHECK(book.claim_may_find_rows());
  CHECK_FALSE(book.room_for_claim(16));
  REQUIRE(book.next_lanes_claim(16).has_value());
  CHECK(*book.next_lanes_claim(16) == clock.now() + RowBook::kLanesInterval);
  clock.advance(RowBook::kLanesInterval);
  CHECK(book.room_for_claim(16));
  request = book.claim_request(16);
  CHECK(request.limit == 1);  // one row of the extra eighth is taken
  CHECK(request.known == Ids{40});
}

}  // namespace outboxd::dispatch::test
