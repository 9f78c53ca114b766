// LeaseStore: one instance takes every partition; epochs change with owners; expiry frees them.
#include <catch2/catch.hpp>

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
  LeaseStore store(connection, "outbox");
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
  LeaseStore store(connection, "outbox");
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
  LeaseStore store(connection, "outbox");
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
  Connection first = db.migrated();
  Connection second = db.connect("second");
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
