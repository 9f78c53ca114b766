// ClaimPass: where each claim of a pass starts, when a pass ends, which rows wait for the next one.
#include <catch2/catch.hpp>

#include "dispatch/claim_pass.hpp"

using outboxd::core::OutboxMessage;
using outboxd::core::session_key;
using outboxd::dispatch::ClaimPass;

namespace {

OutboxMessage row(outboxd::core::RowId id, std::optional<std::string> session) {
  OutboxMessage m;
  m.id = id;
  m.session_id = std::move(session);
  return m;
}

}  // namespace

TEST_CASE("A full batch moves the cursor, and after a short one the next claim starts from the lowest id",
          "[dispatch][claim_pass]") {
  ClaimPass pass;
  CHECK(pass.cursor() == 0);
  pass.on_claim(true, 10);
  CHECK(pass.cursor() == 10);
  pass.on_claim(true, 20);
  CHECK(pass.cursor() == 20);
  // Short: a row that committed late with an id below 20 is found by the very next claim.
  pass.on_claim(false, 25);
  CHECK(pass.cursor() == 0);
  pass.on_claim(true, 10);
  pass.on_claim(false, 0);  // nothing at all above the cursor
  CHECK(pass.cursor() == 0);
}

TEST_CASE("A row passed over stops its session's later rows until the pass ends", "[dispatch][claim_pass]") {
  ClaimPass pass;
  pass.on_claim(true, 10);
  pass.pass_over(7, session_key(std::nullopt, "a"));
  pass.pass_over(5, session_key(std::nullopt, "a"));  // the lowest counts
  CHECK(pass.passed_over_any());
  CHECK(pass.waits(row(6, "a")));
  CHECK_FALSE(pass.waits(row(4, "a")));
  CHECK_FALSE(pass.waits(row(6, "b")));
  CHECK_FALSE(pass.waits(row(6, std::nullopt)));
  pass.on_claim(true, 20);
  CHECK(pass.waits(row(12, "a")));  // still this pass
  pass.on_claim(false, 22);
  CHECK_FALSE(pass.waits(row(12, "a")));
  CHECK_FALSE(pass.passed_over_any());
}

TEST_CASE("restart starts from the lowest id and forgets the rows passed over", "[dispatch][claim_pass]") {
  ClaimPass pass;
  pass.on_claim(true, 30);
  pass.pass_over(25, session_key(std::nullopt, "a"));
  pass.restart();
  CHECK(pass.cursor() == 0);
  CHECK_FALSE(pass.waits(row(26, "a")));
}

TEST_CASE("The horizon is the first claim's snapshot, and moves on while no late commit was possible",
          "[claim_pass]") {
  ClaimPass pass;
  CHECK_FALSE(pass.horizon());  // before a pass: nothing below a cursor to ask about
  pass.on_claim(true, 100, "10:12:", false);
  REQUIRE(pass.horizon() == std::optional<std::string>("10:12:"));
  pass.on_claim(true, 200, "14:15:", false);
  CHECK(pass.horizon() == std::optional<std::string>("14:15:"));
}

TEST_CASE("Once a claim asked for late commits the pass has no horizon until it ends", "[claim_pass]") {
  ClaimPass pass;
  pass.on_claim(true, 100, "10:12:", false);
  pass.on_claim(true, 200, "14:15:", true);
  CHECK_FALSE(pass.horizon());
  // A row found late stays below the cursor: the next claims ask again, whatever they saw.
  pass.on_claim(true, 300, "16:16:", false);
  CHECK_FALSE(pass.horizon());
  pass.on_claim(false, 350, "17:17:", false);  // short: the pass ends
  CHECK(pass.cursor() == 0);
  pass.on_claim(true, 100, "18:18:", false);
  CHECK(pass.horizon() == std::optional<std::string>("18:18:"));
}

TEST_CASE("A restart drops the horizon and the rows read", "[claim_pass]") {
  ClaimPass pass;
  pass.on_claim(true, 100, "10:12:", false);
  pass.count_read(100);
  pass.restart();
  CHECK_FALSE(pass.horizon());
  CHECK(pass.read() == 0);
  // A claim without a snapshot leaves none: every claim asks.
  pass.on_claim(true, 100, "", false);
  CHECK_FALSE(pass.horizon());
}
