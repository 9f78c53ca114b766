// The claim by destination in the core: when it is asked for, what it asks, and how its rows join the claim.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "dispatch/claim_merge.hpp"
#include "dispatch/row_book.hpp"
#include "planner_fixture.hpp"

namespace outboxd::dispatch::test {
namespace {

core::OutboxMessage message_to(const char* destination, core::RowId id) {
  core::OutboxMessage m;
  m.id = id;
  m.message_id = numbered("m", id);
  m.destination = destination;
  return m;
}

core::ClaimedSet set_of(std::vector<core::OutboxMessage> rows) {
  core::ClaimedSet set;
  set.read = rows.size();
  for (const auto& row : rows) set.last_id = std::max(set.last_id, row.id);
  set.rows = std::move(rows);
  return set;
}

Ids ids_of(const std::vector<core::OutboxMessage>& rows) {
  Ids ids;
  for (const auto& row : rows) ids.push_back(row.id);
  return ids;
}

}  // namespace

TEST_CASE("merge_claim: rows by destination join above a full batch's cut, each row once", "[dispatch][lanes]") {
  core::ClaimedSets sets;
  sets.immediate = set_of({message_to("bulk", 1), message_to("bulk", 2), message_to("alerts", 3), message_to("bulk", 4)});
  // In destination order, as the statement returns them; row 3 came in both.
  sets.lanes = set_of({message_to("alerts", 3), message_to("alerts", 9), message_to("payments", 7)});
  const auto claim = merge_claim(std::move(sets), 4, 3);
  CHECK(claim.immediate_full);
  CHECK(ids_of(claim.rows) == Ids{1, 2, 3, 4, 7, 9});
  CHECK(claim.backlog_destinations == std::vector<std::string>{"bulk", "alerts"});
  CHECK(claim.lanes_after == "payments");  // full: the next claim goes on after the last destination read
}

TEST_CASE("merge_claim: a short claim by destination starts again from the first destination", "[dispatch][lanes]") {
  core::ClaimedSets sets;
  sets.immediate = set_of({message_to("bulk", 1), message_to("bulk", 2)});
  sets.lanes = set_of({message_to("payments", 7)});
  const auto claim = merge_claim(std::move(sets), 2, 3);
  CHECK_FALSE(claim.lanes_after.has_value());
  CHECK(ids_of(claim.rows) == Ids{1, 2, 7});
}

TEST_CASE("RowBook asks for rows by destination only while its pass reads a backlog", "[dispatch][lanes]") {
  core::ManualClock clock;
  core::FixedRandom random{0.5};
  RowBook book{test_policy(), clock, random};

  auto request = book.claim_request(16);
  CHECK(request.lanes.limit == 0);
  CHECK(request.limit == 16);

  // A full claim of bulk: the pass is in a backlog.
  core::ClaimedSets full;
  std::vector<core::OutboxMessage> rows;
  for (core::RowId id = 1; id <= 16; ++id) rows.push_back(message_to("bulk", id));
  full.immediate = set_of(std::move(rows));
  book.on_claim(std::move(full), request, clock.now());

  request = book.claim_request(16);
  CHECK(request.lanes.limit == 2);  // an eighth of the claim
  CHECK(request.limit == 14);
  CHECK(request.lanes.per_lane == 1);
  CHECK(request.lanes.skip == std::vector<std::string>{"bulk"});
  CHECK(request.lanes.after.empty());
  // Every row held is listed, the backlog's below the cursor too: the claim
  // tells a late commit below the cursor from them (see pg::outbox_sql).
  CHECK(request.known.size() == 16);

  // The claim by destination came back full: the next one goes on from there.
  core::ClaimedSets next;
  std::vector<core::OutboxMessage> more;
  for (core::RowId id = 17; id <= 30; ++id) more.push_back(message_to("bulk", id));
  next.immediate = set_of(std::move(more));
  next.lanes = set_of({message_to("alerts", 40), message_to("carts", 41)});
  const auto claimed = book.on_claim(std::move(next), request, clock.now());
  CHECK(claimed.added == 16);
  request = book.claim_request(16);
  CHECK(request.lanes.after == "carts");

  // Rows of other destinations held below the cursor are listed with the rest: the claim by destination would
  // read them again.
  core::ClaimedSets third;
  std::vector<core::OutboxMessage> beyond;
  for (core::RowId id = 42; id <= 55; ++id) beyond.push_back(message_to("bulk", id));
  third.immediate = set_of(std::move(beyond));
  book.on_claim(std::move(third), request, clock.now());
  auto known = book.claim_request(16).known;
  std::sort(known.begin(), known.end());
  CHECK(known.size() == 30 + 2 + 14);  // bulk 1-30 and 42-55, alerts 40, carts 41
  CHECK(std::binary_search(known.begin(), known.end(), core::RowId{40}));
  CHECK(std::binary_search(known.begin(), known.end(), core::RowId{41}));

  // A short claim ends the pass, and with it the claim by destination.
  core::ClaimedSets shorter;
  shorter.immediate = set_of({message_to("bulk", 31)});
  book.on_claim(std::move(shorter), book.claim_request(16), clock.now());
  CHECK(book.claim_request(16).lanes.limit == 0);
}

}  // namespace outboxd::dispatch::test
