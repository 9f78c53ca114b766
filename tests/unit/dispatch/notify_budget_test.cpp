// NotifyBudget: NOTIFYs wake claims freely until empty claims pile up, then one per gap.
#include <catch2/catch.hpp>

#include "dispatch/notify_budget.hpp"

using namespace std::chrono_literals;
using outboxd::core::ManualClock;
using outboxd::dispatch::NotifyBudget;

TEST_CASE("NOTIFYs wake claims at once until kFreeEmpty of them in a row found nothing", "[dispatch][notify]") {
  ManualClock clock;
  NotifyBudget budget;
  for (int i = 0; i < NotifyBudget::kFreeEmpty; ++i) {
    CHECK(budget.claim_at(clock.now()) == clock.now());
    budget.on_claim(0, clock.now());
    clock.advance(1ms);
  }
  const auto last_empty = clock.now() - 1ms;
  CHECK(budget.claim_at(clock.now()) == last_empty + NotifyBudget::kGap);
  clock.advance(NotifyBudget::kGap);
  CHECK(budget.claim_at(clock.now()) == clock.now());
}

TEST_CASE("A claim a NOTIFY woke that finds rows ends the run of empty ones", "[dispatch][notify]") {
  ManualClock clock;
  NotifyBudget budget;
  for (int i = 0; i < 10; ++i) budget.on_claim(0, clock.now());
  REQUIRE(budget.claim_at(clock.now()) > clock.now());
  budget.on_claim(1, clock.now());
  CHECK(budget.claim_at(clock.now()) == clock.now());
}
