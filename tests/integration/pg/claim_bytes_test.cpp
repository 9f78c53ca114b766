// The claim's byte bounds against the real statements: small rows inline, larger ones read afterwards within the budget.
#include <catch2/catch.hpp>

#include "outbox_rows.hpp"
#include "pg/outbox_store.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;

namespace {

core::RowId insert_sized(Connection& connection, const std::string& message_id, int body_bytes) {
  return must(connection,
              "INSERT INTO outbox.messages (message_id, destination, session_id, body) "
              "VALUES ($1, 'orders', $1, convert_to(repeat('x', $2::int), 'UTF8')) RETURNING id",
              {message_id, std::to_string(body_bytes)})
      .int64(0, 0);
}

std::vector<core::RowId> ids_of(const core::ClaimedSet& set) {
  std::vector<core::RowId> ids;
  for (const auto& row : set.rows) ids.push_back(row.id);
  return ids;
}

}  // namespace

TEST_CASE("a claim reads small rows inline and larger ones afterwards, until the byte budget is reached",
          "[pg][store][bytes]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  // Each row's payload is its body and its headers as JSON text ("{}", 2 bytes).
  const core::RowId small = insert_sized(setup, "small", 10);
  const core::RowId large = insert_sized(setup, "large", 3000);
  const core::RowId oversize = insert_sized(setup, "oversize", 10000);
  const core::RowId small_too = insert_sized(setup, "small-too", 10);
  const core::RowId large_too = insert_sized(setup, "large-too", 3000);
  insert_sized(setup, "past-the-budget", 3000);
  insert_sized(setup, "after-it", 10);
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());

  // Half of the statement's 12,000 bytes inline, 600 per row of a batch of 10;
  // the larger rows within the other 6,000: the first two (3,002 each) reach it.
  core::ClaimBytes bytes;
  bytes.max_message = kPropertiesMargin + 5000;
  bytes.budget = 12000;
  auto sets = store.claim(all_partitions(), 10, 0, {}, bytes);
  REQUIRE(sets.ok());
  const core::ClaimedSet& set = sets.value().immediate;
  CHECK(ids_of(set) == std::vector<core::RowId>{small, large, oversize, small_too, large_too});
  CHECK(set.budget_used);
  CHECK(set.read == 5);
  CHECK(set.last_id == large_too);
  REQUIRE(set.rows.size() == 5);
  CHECK(set.rows[0].body.size() == 10);
  CHECK(set.rows[1].body.size() == 3000);
  CHECK(set.rows[1].headers_json == "{}");
  CHECK_FALSE(set.rows[1].unsendable);
  REQUIRE(set.rows[2].unsendable);
  CHECK_THAT(*set.rows[2].unsendable, Catch::Contains("message too large: its body and headers take 10002 bytes"));
  CHECK(set.rows[2].body.empty());
  CHECK(set.rows[4].body.size() == 3000);

  SECTION("the first row is read whatever the budget") {
    bytes.budget = 2;  // an inline share of 0: every row is read afterwards, the first whatever its size
    auto one = store.claim(all_partitions(), 10, 0, {}, bytes);
    REQUIRE(one.ok());
    CHECK(ids_of(one.value().immediate) == std::vector<core::RowId>{small});
    CHECK(one.value().immediate.rows[0].body.size() == 10);
    CHECK(one.value().immediate.budget_used);
  }
}

// The largest message is dispatch.max_message_bytes less kPropertiesMargin of
// body and headers: a row at it is read whole, inline or afterwards, and a
// row one byte over comes back unsendable, its reason naming both sizes.
TEST_CASE("a row one byte over the largest message comes back unsendable with its size and the limit, one at it whole",
          "[pg][store][bytes]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  const core::RowId at_limit = insert_sized(setup, "at-limit", 998);  // with "{}": 1000 bytes
  const core::RowId over = insert_sized(setup, "over", 999);
  Connection daemon = db.dispatcher();
  OutboxStore store(daemon, "outbox");
  REQUIRE(store.prepare().ok());
  core::ClaimBytes bytes;
  bytes.max_message = kPropertiesMargin + 1000;
  // Inline rows up to 1,000 bytes, or none: a larger one is read afterwards.
  const auto budget = GENERATE(std::int64_t{1000000}, std::int64_t{4000});
  bytes.budget = budget;
  auto sets = store.claim(all_partitions(), 10, 0, {}, bytes);
  REQUIRE(sets.ok());
  const core::ClaimedSet& set = sets.value().immediate;
  INFO("budget " << budget);
  REQUIRE(ids_of(set) == std::vector<core::RowId>{at_limit, over});
  CHECK_FALSE(set.rows[0].unsendable);
  CHECK(set.rows[0].body.size() == 998);
  REQUIRE(set.rows[1].unsendable);
  CHECK(*set.rows[1].unsendable == "message too large: its body and headers take 1001 bytes, over the limit of " +
                                       std::to_string(bytes.max_message) + " bytes (dispatch.max_message_bytes, less " +
                                       std::to_string(kPropertiesMargin) + " for properties and framing); not sent");
  CHECK(set.rows[1].body.empty());
}
