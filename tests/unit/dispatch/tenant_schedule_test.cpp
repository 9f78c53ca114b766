// TenantSchedule: dormant outboxes cost a check now and then, wanted ones get workers oldest first, long ones yield.
#include <catch2/catch.hpp>

#include "dispatch/tenant_schedule.hpp"

using namespace std::chrono_literals;
using outboxd::core::ManualClock;
using outboxd::dispatch::TenantPolicy;
using outboxd::dispatch::TenantSchedule;
using State = TenantSchedule::State;

namespace {

struct SetRandom final : outboxd::core::RandomSource {
  double value = 0.5;  // a backoff's middle; a check at 0.9 of its interval
  double uniform() override { return value; }
};

TenantPolicy policy(std::size_t workers) {
  TenantPolicy p;
  p.workers = workers;
  p.idle_check = 5s;
  p.listened_check = 30s;
  p.slice = 2s;
  p.lease_ttl = 3s;
  p.join_backlog = 1000;
  return p;
}

const TenantSchedule::Baseline kEmpty{"r:0:0 s:0:0 p:0:0", false, std::nullopt, 0, std::nullopt, false};
const TenantSchedule::Baseline kBlocked{"r:1:7 s:0:0 p:1:6", true, std::nullopt, 1, std::nullopt, false};

// Rows waiting, and another instance's lease on the outbox for `left` more.
TenantSchedule::Baseline served_elsewhere(std::chrono::milliseconds left, std::uint64_t backlog = 3,
                                          bool other_first = false) {
  return {"r:" + std::to_string(backlog) + ":9 s:0:0 p:0:0", backlog > 0, std::nullopt, backlog, left, other_first};
}

struct Fixture {
  ManualClock clock;
  SetRandom random;
  TenantSchedule schedule{policy(2), clock, random};

  // Adds outboxes 0..n-1 in one database and checks them all with `baseline`.
  void dormant(std::size_t n, const TenantSchedule::Baseline& baseline = kEmpty) {
    for (std::size_t id = 0; id < n; ++id) schedule.add(id, 0);
    const auto plan = schedule.plan(1);
    REQUIRE(plan.checks.size() == 1);
    for (const auto id : plan.checks[0]) schedule.on_checked(id, baseline);
  }
};

}  // namespace

TEST_CASE("A new outbox is checked first, all outboxes of one database in one job", "[dispatch][tenants]") {
  Fixture f;
  f.schedule.add(0, 0);
  f.schedule.add(1, 0);
  f.schedule.add(2, 1);
  const auto plan = f.schedule.plan(1);
  REQUIRE(plan.checks.size() == 1);
  CHECK(plan.checks[0] == std::vector<TenantSchedule::Id>{0, 1});
  CHECK(f.schedule.contended());  // database 1's check found no worker
  CHECK(f.schedule.state(2) == State::unchecked);
  CHECK(f.schedule.plan(1).checks.size() == 1);
}

TEST_CASE("A first check wakes an outbox with waiting rows only", "[dispatch][tenants]") {
  Fixture f;
  f.schedule.add(0, 0);
  f.schedule.add(1, 0);
  const auto plan = f.schedule.plan(2);
  f.schedule.on_checked(0, kEmpty);
  f.schedule.on_checked(1, kBlocked);
  CHECK(f.schedule.state(0) == State::dormant);
  CHECK(f.schedule.state(1) == State::wanted);
  CHECK(f.schedule.plan(2).serve == std::vector<TenantSchedule::Id>{1});
}

TEST_CASE("A dormant outbox is checked every idle_check, or every listened_check where a listener hears it",
          "[dispatch][tenants]") {
  Fixture f;
  f.random.value = 0;  // checks at the whole interval
  f.dormant(2);
  f.schedule.set_listened(1, true);  // checked at once: registered for NOTIFY
  auto plan = f.schedule.plan(2);
  REQUIRE(plan.checks.size() == 1);
  CHECK(plan.checks[0] == std::vector<TenantSchedule::Id>{1});
  f.schedule.on_checked(1, kEmpty);
  f.clock.advance(4999ms);
  CHECK(f.schedule.plan(2).checks.empty());
  f.clock.advance(1ms);
  plan = f.schedule.plan(2);
  REQUIRE(plan.checks.size() == 1);
  CHECK(plan.checks[0] == std::vector<TenantSchedule::Id>{0});
  f.schedule.on_checked(0, kEmpty);
  f.clock.advance(25s);
  plan = f.schedule.plan(2);
  REQUIRE(plan.checks.size() == 1);
  CHECK(plan.checks[0] == std::vector<TenantSchedule::Id>{0, 1});  // 30 s after its check
}

TEST_CASE("An unchanged signature keeps a blocked outbox asleep, any change wakes it", "[dispatch][tenants]") {
  Fixture f;
  f.schedule.add(0, 0);
  f.schedule.plan(1);
  f.schedule.on_checked(0, kBlocked);
  REQUIRE(f.schedule.plan(1).serve.size() == 1);
  f.schedule.on_released(0, kBlocked);  // served: nothing claimable
  CHECK(f.schedule.state(0) == State::dormant);
  f.clock.advance(5s);
  f.schedule.plan(1);
  f.schedule.on_checked(0, kBlocked);
  CHECK(f.schedule.state(0) == State::dormant);
  f.clock.advance(5s);
  f.schedule.plan(1);
  f.schedule.on_checked(0, {"r:2:15 s:0:0 p:1:6", true, std::nullopt});
  CHECK(f.schedule.state(0) == State::wanted);
}

TEST_CASE("A dormant outbox wakes at its next due time without a check", "[dispatch][tenants]") {
  Fixture f;
  f.random.value = 0;  // checks at the whole interval
  f.dormant(1, {"r:0:0 s:0:0 p:0:0", false, 60'000ms});
  CHECK(f.schedule.next_deadline() == f.clock.now() + 5s);
  f.clock.advance(60s);
  const auto plan = f.schedule.plan(1);
  CHECK(plan.serve == std::vector<TenantSchedule::Id>{0});
  CHECK(plan.checks.empty());
}

TEST_CASE("NOTIFY wakes a dormant outbox, and one that began to release, once released", "[dispatch][tenants]") {
  Fixture f;
  f.dormant(2);
  f.schedule.on_notified(0);
  CHECK(f.schedule.state(0) == State::wanted);
  REQUIRE(f.schedule.plan(2).serve == std::vector<TenantSchedule::Id>{0});
  f.schedule.on_notified(0);  // its run loop hears this one itself
  f.schedule.on_released(0, kEmpty);
  CHECK(f.schedule.state(0) == State::dormant);
  f.schedule.on_notified(0);
  REQUIRE(f.schedule.plan(2).serve == std::vector<TenantSchedule::Id>{0});
  f.schedule.on_releasing(0);
  f.schedule.on_notified(0);  // after its last claim
  f.schedule.on_released(0, kEmpty);
  CHECK(f.schedule.state(0) == State::wanted);
}

TEST_CASE("Wanted outboxes get workers oldest first, past a slice the longest served yields to one waiting",
          "[dispatch][tenants]") {
  Fixture f;
  f.dormant(4);
  for (TenantSchedule::Id id = 0; id < 4; ++id) {
    f.schedule.on_notified(id);
    f.clock.advance(1ms);
  }
  auto plan = f.schedule.plan(2);
  CHECK(plan.serve == std::vector<TenantSchedule::Id>{0, 1});
  CHECK(plan.yield.empty());  // no one has served a slice yet
  CHECK(f.schedule.contended());
  f.clock.advance(1s);
  plan = f.schedule.plan(0);
  CHECK(plan.yield.empty());
  f.clock.advance(1s);
  plan = f.schedule.plan(0);
  CHECK(plan.yield == std::vector<TenantSchedule::Id>{0, 1});
  CHECK(f.schedule.plan(0).yield.empty());  // asked once
  f.schedule.on_yielded(0);
  plan = f.schedule.plan(1);
  CHECK(plan.serve == std::vector<TenantSchedule::Id>{2});  // 0 went to the back of the queue
  CHECK(f.schedule.state(0) == State::wanted);
}

TEST_CASE("Without waiters no one yields, however long it serves", "[dispatch][tenants]") {
  Fixture f;
  f.dormant(1);
  f.schedule.on_notified(0);
  f.schedule.plan(2);
  f.clock.advance(1h);
  CHECK(f.schedule.plan(1).yield.empty());
  CHECK_FALSE(f.schedule.contended());
}

TEST_CASE("A failed outbox is checked again after a growing backoff, and served once its rows show",
          "[dispatch][tenants]") {
  Fixture f;
  f.dormant(1);
  f.schedule.on_notified(0);
  f.schedule.plan(1);
  f.schedule.on_failed(0);
  CHECK(f.schedule.state(0) == State::broken);
  CHECK(f.schedule.next_deadline() == f.clock.now() + 100ms);
  f.clock.advance(100ms);
  auto plan = f.schedule.plan(1);
  REQUIRE(plan.checks.size() == 1);
  f.schedule.on_check_failed(0);
  CHECK(f.schedule.next_deadline() == f.clock.now() + 200ms);
  f.clock.advance(200ms);
  plan = f.schedule.plan(1);
  REQUIRE(plan.checks.size() == 1);
  f.schedule.on_checked(0, kBlocked);  // its baseline was dropped: waiting rows wake it
  CHECK(f.schedule.state(0) == State::wanted);
}

TEST_CASE("A removed outbox is forgotten at once, or when the job that holds it ends", "[dispatch][tenants]") {
  Fixture f;
  f.dormant(2);
  CHECK_FALSE(f.schedule.remove(1));
  CHECK_FALSE(f.schedule.known(1));
  f.schedule.on_notified(0);
  f.schedule.plan(1);
  CHECK(f.schedule.remove(0));  // served: its job must stop
  CHECK(f.schedule.known(0));
  CHECK(f.schedule.plan(1).serve.empty());
  f.schedule.on_yielded(0);
  CHECK_FALSE(f.schedule.known(0));
  CHECK(f.schedule.count(State::wanted) == 0);
}

TEST_CASE("A listener that comes while an outbox is being checked has it checked again at once",
          "[dispatch][tenants]") {
  Fixture f;
  f.random.value = 0;  // checks at the whole interval
  f.schedule.add(0, 0);
  REQUIRE(f.schedule.plan(1).checks.size() == 1);  // the check runs without the listener's registration
  f.schedule.set_listened(0, true);
  f.schedule.on_checked(0, kEmpty);
  const auto plan = f.schedule.plan(1);
  REQUIRE(plan.checks.size() == 1);  // not 30 s later: writers would not NOTIFY it until then
  CHECK(plan.checks[0] == std::vector<TenantSchedule::Id>{0});
  f.schedule.on_checked(0, kEmpty);
  CHECK(f.schedule.next_deadline() == f.clock.now() + 30s);
}

TEST_CASE("Checks come due at a random point of the interval's last fifth, never later", "[dispatch][tenants]") {
  Fixture f;
  f.random.value = 1;
  f.dormant(1);
  f.clock.advance(3999ms);
  CHECK(f.schedule.plan(1).checks.empty());
  f.clock.advance(1ms);
  CHECK(f.schedule.plan(1).checks.size() == 1);
  f.random.value = 0.5;
  f.schedule.on_checked(0, kEmpty);
  f.clock.advance(4499ms);
  CHECK(f.schedule.plan(1).checks.empty());
  f.clock.advance(1ms);
  CHECK(f.schedule.plan(1).checks.size() == 1);
}

TEST_CASE("A check job also takes the dormant outboxes of its database due within check_gather",
          "[dispatch][tenants]") {
  Fixture f;
  f.random.value = 0;  // checks at the whole interval: 5 s
  f.dormant(2);
  f.schedule.add(2, 1);  // another database
  f.schedule.plan(2);
  f.schedule.on_checked(2, kEmpty);
  f.clock.advance(500ms);
  f.schedule.check_now(0);  // due now; 1 falls due in 4.5 s, 2 in 5 s
  auto plan = f.schedule.plan(2);
  REQUIRE(plan.checks.size() == 1);
  CHECK(plan.checks[0] == std::vector<TenantSchedule::Id>{0});
  f.schedule.on_checked(0, kEmpty);
  f.clock.advance(3600ms);  // 1 due in 0.9 s: taken with 0's next check, 2 (its own database) not
  f.schedule.check_now(0);
  plan = f.schedule.plan(2);
  REQUIRE(plan.checks.size() == 1);
  CHECK(plan.checks[0] == std::vector<TenantSchedule::Id>{0, 1});
  CHECK(f.schedule.state(2) == State::dormant);
}

TEST_CASE("A check that finds another instance serving leaves the outbox elsewhere, deaf to NOTIFY, until that "
          "lease would expire",
          "[dispatch][tenants][elsewhere]") {
  Fixture f;
  f.dormant(1);
  f.schedule.on_notified(0);
  REQUIRE(f.schedule.plan(1).serve.size() == 1);
  f.schedule.on_released(0, kEmpty);
  f.clock.advance(5s);
  REQUIRE(f.schedule.plan(1).checks.size() == 1);
  f.schedule.on_checked(0, served_elsewhere(2500ms));
  CHECK(f.schedule.state(0) == State::elsewhere);
  CHECK(f.schedule.count(State::elsewhere) == 1);
  f.schedule.on_notified(0);  // its server hears it
  CHECK(f.schedule.state(0) == State::elsewhere);
  CHECK(f.schedule.next_deadline() == f.clock.now() + 2500ms);
  f.clock.advance(2499ms);
  auto plan = f.schedule.plan(1);
  CHECK(plan.serve.empty());
  CHECK(plan.checks.empty());
  f.clock.advance(1ms);
  plan = f.schedule.plan(1);
  REQUIRE(plan.checks.size() == 1);
  // The other died with rows left: the same signature as a blocked outbox's
  // baseline would keep it asleep, but what the other left is unknown.
  f.schedule.on_checked(0, kBlocked);
  CHECK(f.schedule.state(0) == State::wanted);
}

TEST_CASE("A serve job that looks first and finds another server ends elsewhere, looked at again within "
          "lease_ttl and not before a tenth of it",
          "[dispatch][tenants][elsewhere]") {
  Fixture f;
  f.dormant(1);
  f.schedule.on_notified(0);
  REQUIRE(f.schedule.plan(1).serve == std::vector<TenantSchedule::Id>{0});
  f.schedule.on_served_elsewhere(0, served_elsewhere(10ms));  // a lease about to be renewed
  CHECK(f.schedule.state(0) == State::elsewhere);
  CHECK(f.schedule.next_deadline() == f.clock.now() + 300ms);
  f.clock.advance(300ms);
  REQUIRE(f.schedule.plan(1).checks.size() == 1);
  f.schedule.on_checked(0, served_elsewhere(60s));  // the server's clock stepped: never past lease_ttl
  CHECK(f.schedule.next_deadline() == f.clock.now() + 3s);
  f.clock.advance(3s);
  REQUIRE(f.schedule.plan(1).checks.size() == 1);
  f.schedule.on_checked(0, kEmpty);  // the other let go, nothing left
  CHECK(f.schedule.state(0) == State::dormant);
}

TEST_CASE("An outbox served elsewhere with join_backlog rows ready is served here too, its partitions split",
          "[dispatch][tenants][elsewhere]") {
  CHECK(TenantSchedule::leave_to_other(served_elsewhere(1s, 999), 1000));
  CHECK_FALSE(TenantSchedule::leave_to_other(served_elsewhere(1s, 1000), 1000));
  CHECK_FALSE(TenantSchedule::leave_to_other(kBlocked, 1000));  // no one else serves it
  // Two that began at once: the one that leased later lets go.
  CHECK(TenantSchedule::let_go_joined(served_elsewhere(1s, 999, true), 1000));
  CHECK_FALSE(TenantSchedule::let_go_joined(served_elsewhere(1s, 999, false), 1000));
  CHECK_FALSE(TenantSchedule::let_go_joined(served_elsewhere(1s, 1000, true), 1000));
  Fixture f;
  f.dormant(1);
  f.clock.advance(5s);
  REQUIRE(f.schedule.plan(1).checks.size() == 1);
  f.schedule.on_checked(0, served_elsewhere(2s, 5000));
  CHECK(f.schedule.state(0) == State::wanted);
}

TEST_CASE("A served outbox that another instance serves as it lets go is left to it, and a removed one is "
          "forgotten",
          "[dispatch][tenants][elsewhere]") {
  Fixture f;
  f.dormant(2);
  f.schedule.on_notified(0);
  f.schedule.on_notified(1);
  REQUIRE(f.schedule.plan(2).serve.size() == 2);
  f.schedule.on_released(0, served_elsewhere(2s));  // both began at once: the other still holds its share
  CHECK(f.schedule.state(0) == State::elsewhere);
  f.schedule.on_released(1, served_elsewhere(2s, 0));
  CHECK(f.schedule.state(1) == State::elsewhere);
  CHECK_FALSE(f.schedule.remove(0));
  CHECK_FALSE(f.schedule.known(0));
  CHECK(f.schedule.count(State::elsewhere) == 1);
}

TEST_CASE("Outboxes wanted at the same moment are served in an order of the daemon's own", "[dispatch][tenants]") {
  struct Sequence final : outboxd::core::RandomSource {
    std::vector<double> values{0.9, 0.1, 0.5};
    std::size_t next = 0;
    double uniform() override { return values[next++ % values.size()]; }
  };
  ManualClock clock;
  Sequence random;
  TenantSchedule schedule{policy(3), clock, random};
  for (TenantSchedule::Id id = 0; id < 3; ++id) schedule.add(id, 0);
  REQUIRE(schedule.plan(1).checks.size() == 1);
  for (TenantSchedule::Id id = 0; id < 3; ++id) schedule.on_checked(id, kBlocked);  // one check wakes all three
  CHECK(schedule.plan(2).serve == std::vector<TenantSchedule::Id>{1, 2});
}
