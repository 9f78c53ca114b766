// LeaseStore: taking every partition, fair sharing by balance(), epochs, expiry, release.
#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

#include "pg/lease_store.hpp"
#include "scratch_database.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;
using std::chrono::milliseconds;

namespace {

std::vector<Lease> must_acquire(LeaseStore& store, const std::string& instance, milliseconds ttl) {
  auto leases = store.acquire_all(instance, ttl);
  if (!leases) FAIL("acquire_all: " << leases.error().message);
  return leases.value();
}

}  // namespace

TEST_CASE("one instance takes every partition and keeps its epochs while it holds them", "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");
  REQUIRE(store.register_instance("a").ok());

  const auto first = must_acquire(store, "a", milliseconds(15000));
  REQUIRE(first.size() == 8);
  for (int p = 0; p < 8; ++p) {
    CHECK(first[static_cast<std::size_t>(p)].partition == p);
    CHECK(first[static_cast<std::size_t>(p)].epoch == 1);
    CHECK(first[static_cast<std::size_t>(p)].expires_in == milliseconds(15000));
  }
  const auto again = must_acquire(store, "a", milliseconds(15000));
  REQUIRE(again.size() == 8);
  CHECK(again[0].epoch == 1);

  auto renewed = store.renew("a", milliseconds(20000));
  REQUIRE(renewed.ok());
  REQUIRE(renewed.value().size() == 8);
  CHECK(renewed.value()[3].expires_in == milliseconds(20000));
  CHECK(must(connection, "SELECT count(*) FROM outbox.leases WHERE owner = 'a' AND renewed_at IS NOT NULL")
            .int64(0, 0) == 8);

  // Someone else gets nothing while the leases are alive.
  CHECK(must_acquire(store, "b", milliseconds(15000)).empty());
  auto not_ours = store.renew("b", milliseconds(15000));
  REQUIRE(not_ours.ok());
  CHECK(not_ours.value().empty());
}

TEST_CASE("expired or released leases go to the next taker with a higher epoch", "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");
  REQUIRE(store.register_instance("a").ok());
  REQUIRE(store.register_instance("b").ok());

  SECTION("expiry") {
    REQUIRE(must_acquire(store, "a", milliseconds(50)).size() == 8);
    std::this_thread::sleep_for(milliseconds(100));
    auto late = store.renew("a", milliseconds(15000));
    REQUIRE(late.ok());
    CHECK(late.value().empty());  // expired leases are not renewed, only re-acquired
    const auto taken = must_acquire(store, "b", milliseconds(15000));
    REQUIRE(taken.size() == 8);
    CHECK(taken[0].epoch == 2);
  }
  SECTION("release") {
    REQUIRE(must_acquire(store, "a", milliseconds(15000)).size() == 8);
    REQUIRE(store.release_all("a").ok());
    CHECK(must(connection, "SELECT count(*) FROM outbox.leases WHERE owner IS NOT NULL").int64(0, 0) == 0);
    const auto taken = must_acquire(store, "b", milliseconds(15000));
    REQUIRE(taken.size() == 8);
    CHECK(taken[5].epoch == 2);
    // Back to the first owner: ownership changed again.
    REQUIRE(store.release_all("b").ok());
    CHECK(must_acquire(store, "a", milliseconds(15000))[0].epoch == 3);
  }
}

TEST_CASE("instances register, beat with each lease call, and deregister", "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");
  REQUIRE(store.register_instance("a").ok());
  must(connection, "UPDATE outbox.instances SET heartbeat_at = now() - interval '1 hour', idle = true");
  REQUIRE(store.register_instance("a").ok());  // a restart under the same id
  CHECK_FALSE(must(connection, "SELECT idle FROM outbox.instances").boolean(0, 0));
  must(connection, "UPDATE outbox.instances SET heartbeat_at = now() - interval '1 hour'");
  must_acquire(store, "a", milliseconds(15000));
  CHECK(must(connection, "SELECT heartbeat_at > now() - interval '1 minute' FROM outbox.instances").boolean(0, 0));
  REQUIRE(store.deregister("a").ok());
  CHECK(must(connection, "SELECT count(*) FROM outbox.instances").int64(0, 0) == 0);
}

TEST_CASE("two instances racing for free partitions never both win one", "[pg][lease]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection first = db.dispatcher("first");
  Connection second = db.dispatcher("second");
  LeaseStore a(first, "outbox");
  LeaseStore b(second, "outbox");
  std::vector<Lease> won_a;
  std::vector<Lease> won_b;
  std::thread one([&] { won_a = must_acquire(a, "a", milliseconds(15000)); });
  std::thread two([&] { won_b = must_acquire(b, "b", milliseconds(15000)); });
  one.join();
  two.join();
  CHECK(won_a.size() + won_b.size() == 8);
  CHECK(must(first, "SELECT count(DISTINCT owner) FROM outbox.leases").int64(0, 0) >= 1);
}

namespace {

std::vector<Lease> must_balance(LeaseStore& store, const std::string& instance, milliseconds ttl) {
  auto leases = store.balance(instance, ttl);
  if (!leases) FAIL("balance: " << leases.error().message);
  return leases.value();
}

std::size_t over_share(const std::vector<Lease>& leases) {
  return static_cast<std::size_t>(std::count_if(leases.begin(), leases.end(), [](const Lease& l) { return l.over_share; }));
}

}  // namespace

TEST_CASE("balance shares partitions among live instances; the surplus drains, then is released", "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");
  const milliseconds ttl(15000);

  const auto alone = must_balance(store, "a", ttl);
  REQUIRE(alone.size() == 8);
  CHECK(over_share(alone) == 0);
  CHECK(alone[0].epoch == 1);
  // b is live now (its heartbeat), but a holds everything.
  CHECK(must_balance(store, "b", ttl).empty());
  const auto shared = must_balance(store, "a", ttl);
  REQUIRE(shared.size() == 8);
  CHECK(over_share(shared) == 4);
  CHECK_FALSE(shared[3].over_share);  // the lowest partitions stay
  CHECK(shared[4].over_share);
  std::vector<int> surplus;
  for (const auto& lease : shared) {
    if (lease.over_share) surplus.push_back(lease.partition);
  }
  REQUIRE(store.release("a", surplus).ok());
  const auto taken = must_balance(store, "b", ttl);
  REQUIRE(taken.size() == 4);
  CHECK(taken[0].partition == 4);
  CHECK(taken[0].epoch == 2);
  CHECK(over_share(must_balance(store, "a", ttl)) == 0);

  // A third instance: shares of ceil(8 / 3) = 3.
  CHECK(must_balance(store, "c", ttl).empty());
  CHECK(over_share(must_balance(store, "a", ttl)) == 1);
  CHECK(over_share(must_balance(store, "b", ttl)) == 1);
}

TEST_CASE("balance takes over expired leases and forgets long-silent instances", "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");
  REQUIRE(must_balance(store, "a", milliseconds(15000)).size() == 8);
  // a stops beating and its leases run out.
  must(connection, "UPDATE outbox.leases SET expires_at = now() - interval '1 second'");
  must(connection, "UPDATE outbox.instances SET heartbeat_at = now() - interval '1 minute', idle = true");
  const auto taken = must_balance(store, "b", milliseconds(15000));
  REQUIRE(taken.size() == 8);  // a is not live: b's share is everything
  CHECK(taken[7].epoch == 2);
  CHECK(must(connection, "SELECT count(*) FROM outbox.instances").int64(0, 0) == 2);
  must(connection, "UPDATE outbox.instances SET heartbeat_at = now() - interval '1 hour' WHERE instance_id = 'a'");
  must_balance(store, "b", milliseconds(15000));
  CHECK(must(connection, "SELECT string_agg(instance_id, ',') FROM outbox.instances").text(0, 0) == "b");
}

TEST_CASE("two instances balancing at once never both take a partition", "[pg][lease]") {
  ScratchDatabase db;
  Connection setup = db.migrated();
  Connection first = db.dispatcher("first");
  Connection second = db.dispatcher("second");
  LeaseStore a(first, "outbox");
  LeaseStore b(second, "outbox");
  for (int round = 0; round < 20; ++round) {
    std::vector<Lease> won_a;
    std::vector<Lease> won_b;
    std::thread one([&] { won_a = must_balance(a, "a", milliseconds(15000)); });
    std::thread two([&] { won_b = must_balance(b, "b", milliseconds(15000)); });
    one.join();
    two.join();
    std::vector<int> both;
    for (const auto& l : won_a) both.push_back(l.partition);
    for (const auto& l : won_b) both.push_back(l.partition);
    std::sort(both.begin(), both.end());
    CHECK(std::adjacent_find(both.begin(), both.end()) == both.end());
    CHECK(must(first, "SELECT count(*) FROM outbox.leases WHERE owner IS NOT NULL").int64(0, 0) ==
          static_cast<std::int64_t>(both.size()));
  }
}
