// ClaimStep on its own: when it claims, what a failed claim does, the wait for the standby, NOTIFY's arming.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/run/claim_step.hpp"
#include "daemon/run/run_loop.hpp"
#include "parts_fixture.hpp"

namespace outboxd::daemon::test {
namespace {

constexpr const char* kInstance = "claim-test";

config::Config claim_config(config::StandbyWait::Mode standby = config::StandbyWait::Mode::none) {
  config::Config config;
  config.dispatch.batch_size = 10;
  config.dispatch.in_flight = 100;
  config.database.wait_for_standby.mode = standby;
  return config;
}

struct StepFixture : PartsFixture {
  explicit StepFixture(config::Config config = claim_config())
      : book(planner_policy(config.dispatch, config.destinations), clock, random),
        leases(config.leases, kInstance, clock),
        step(ClaimStep::settings_of(config), config.dispatch, kInstance, book, database, leases, metrics, timers, clock,
             [this](const core::Error& error) { failures.push_back(error.message); }) {
    std::vector<int> stopped;
    std::vector<int> gained;
    REQUIRE(leases.maintain(database, stopped, gained));
    REQUIRE(leases.may_publish());
  }

  std::size_t held() { return book.take_ready().size(); }

  dispatch::RowBook book;
  LeaseKeeper leases;
  std::vector<std::string> failures;
  ClaimStep step;
};

}  // namespace

TEST_CASE("ClaimStep claims while a claim may find rows, and not after a short claim until told",
          "[daemon][claim_step]") {
  StepFixture f;
  for (int i = 0; i < 3; ++i) f.database.insert();
  REQUIRE(f.step.possible(false));
  CHECK_FALSE(f.step.possible(true));  // stopping
  f.step.claim(false);
  CHECK(f.held() == 3);
  CHECK(f.failures.empty());
  CHECK_FALSE(f.step.possible(false));  // the claim came back short
  f.database.insert();
  f.step.claim(false);
  CHECK(f.held() == 0);  // nobody said so
  f.book.expect_rows();  // a NOTIFY, the poll
  f.step.claim(false);
  CHECK(f.held() == 1);
}

TEST_CASE("A claim that fails goes to the loop's failure and hands nothing to the book", "[daemon][claim_step]") {
  StepFixture f;
  f.database.insert();
  f.database.fail_claim = core::Error{core::ErrorKind::transient, "connection lost"};
  f.step.claim(false);
  CHECK(f.failures == std::vector<std::string>{"connection lost"});
  CHECK(f.held() == 0);
  f.step.claim(false);  // the book still expects rows
  CHECK(f.held() == 1);
}

TEST_CASE("With wait_for_standby a claim's rows reach the book once the standby has flushed past it",
          "[daemon][claim_step]") {
  StepFixture f(claim_config(config::StandbyWait::Mode::any));
  f.database.insert();
  f.database.insert();
  f.database.standby_flushed = 0;  // behind the rows' commits
  f.step.claim(false);
  CHECK(f.step.standby().waiting());
  CHECK(f.held() == 0);
  CHECK_FALSE(f.step.possible(false));  // no second claim while one waits
  f.database.standby_flushed = f.database.wal;
  f.clock.advance(1s);
  f.step.claim(false);  // checks the standby instead of claiming
  CHECK_FALSE(f.step.standby().waiting());
  CHECK(f.held() == 2);
}

TEST_CASE("A claim waiting for the standby is dropped when stopping, its rows left to be claimed again",
          "[daemon][claim_step]") {
  StepFixture f(claim_config(config::StandbyWait::Mode::any));
  f.database.insert();
  f.database.standby_flushed = 0;
  f.step.claim(false);
  REQUIRE(f.step.standby().waiting());
  f.step.claim(true);
  CHECK_FALSE(f.step.standby().waiting());
  CHECK(f.held() == 0);
  CHECK(f.book.claim_may_find_rows());
}

TEST_CASE("Arming NOTIFY marks the instance idle for writers; a new connection forgets it", "[daemon][claim_step]") {
  StepFixture f;
  f.step.arm_notify(true);
  CHECK(f.database.armed);
  CHECK(f.step.notify_armed());
  f.step.on_reconnect();
  CHECK_FALSE(f.step.notify_armed());
  f.step.arm_notify(true);
  f.step.arm_notify(false);
  CHECK_FALSE(f.database.armed);
  CHECK(f.failures.empty());
}

TEST_CASE("NOTIFYs that wake only empty claims wake one per gap after the first few", "[daemon][claim_step]") {
  StepFixture f;
  f.step.claim(false);  // caught up
  int claims = f.database.claims;
  for (int i = 0; i < dispatch::NotifyBudget::kFreeEmpty; ++i) {
    f.step.on_notified();
    f.step.claim(false);
  }
  CHECK(f.database.claims == claims + dispatch::NotifyBudget::kFreeEmpty);
  claims = f.database.claims;
  f.step.on_notified();  // held back until the gap has passed
  f.step.claim(false);
  CHECK(f.database.claims == claims);
  REQUIRE(f.timers.at(dispatch::Timer::notified));
  f.clock.advance(dispatch::NotifyBudget::kGap);
  REQUIRE(f.timers.fire(dispatch::Timer::notified, f.clock.now()));
  f.step.on_notified();  // as the loop does when the timer fires
  f.database.insert();
  f.step.claim(false);
  CHECK(f.held() == 1);
  f.step.on_notified();  // a claim that found rows ends the run
  f.step.claim(false);
  CHECK(f.database.claims == claims + 2);
}

}  // namespace outboxd::daemon::test
