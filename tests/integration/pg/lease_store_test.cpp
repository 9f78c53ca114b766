// LeaseStore: balance() takes, renews and shares partitions for a time; expiry, hand-back, registration.
#include <catch2/catch.hpp>

#include <algorithm>
#include <thread>

#include "pg/lease_store.hpp"
#include "pg/watch_store.hpp"
#include "scratch_database.hpp"

using namespace outboxd;
using namespace outboxd::pg;
using namespace outboxd::pg::testing;
using std::chrono::milliseconds;

namespace {

std::vector<Lease> must_balance(LeaseStore& store, const std::string& instance, milliseconds ttl) {
  auto leases = store.balance(instance, ttl);
  if (!leases) FAIL("balance: " << leases.error().message);
  return leases.value();
}

std::size_t over_share(const std::vector<Lease>& leases) {
  return static_cast<std::size_t>(std::count_if(leases.begin(), leases.end(), [](const Lease& l) { return l.over_share; }));
}

// The lease time each of `owner`'s partitions was given at its last balance, in ms, as the database counts it.
std::vector<std::int64_t> granted_ms(Connection& connection, const std::string& owner) {
  auto rows = must(connection, "SELECT (extract(epoch FROM expires_at - renewed_at) * 1000)::bigint FROM outbox.leases "
                               "WHERE owner = '" + owner + "' ORDER BY partition");
  std::vector<std::int64_t> ms;
  for (int r = 0; r < rows.size(); ++r) ms.push_back(rows.int64(r, 0));
  return ms;
}

std::int64_t epoch_of(Connection& connection, int partition) {
  return must(connection, "SELECT epoch FROM outbox.leases WHERE partition = " + std::to_string(partition)).int64(0, 0);
}

}  // namespace

TEST_CASE("one instance takes every partition for the lease time, renews them, and keeps them from others",
          "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");

  const auto first = must_balance(store, "a", milliseconds(15000));
  REQUIRE(first.size() == 8);
  for (int p = 0; p < 8; ++p) CHECK(first[static_cast<std::size_t>(p)].partition == p);
  CHECK(granted_ms(connection, "a") == std::vector<std::int64_t>(8, 15000));
  CHECK(epoch_of(connection, 0) == 1);

  // A renewal extends every lease by the new time, and keeps the owner (its epoch too).
  REQUIRE(must_balance(store, "a", milliseconds(20000)).size() == 8);
  CHECK(granted_ms(connection, "a") == std::vector<std::int64_t>(8, 20000));
  CHECK(epoch_of(connection, 3) == 1);

  // Someone else gets nothing while the leases are alive, and changes none of them.
  CHECK(must_balance(store, "b", milliseconds(15000)).empty());
  CHECK(must(connection, "SELECT count(*) FROM outbox.leases WHERE owner = 'a' AND expires_at > now()").int64(0, 0) == 8);
}

TEST_CASE("expired or handed back leases go to the next taker", "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");

  SECTION("expiry: a late renewal takes nothing back from the next owner") {
    REQUIRE(must_balance(store, "a", milliseconds(50)).size() == 8);
    std::this_thread::sleep_for(milliseconds(100));
    // a is live (its heartbeat is fresh) and every lease of it has run out: b takes its share, half.
    const auto taken = must_balance(store, "b", milliseconds(15000));
    REQUIRE(taken.size() == 4);
    CHECK(taken[0].partition == 0);
    CHECK(epoch_of(connection, 0) == 2);
    // a's renewal comes late: it gets the other half back, none of b's.
    const auto late = must_balance(store, "a", milliseconds(15000));
    REQUIRE(late.size() == 4);
    CHECK(late[0].partition == 4);
    CHECK(epoch_of(connection, 4) == 1);  // still a's: no change of owner
    CHECK(must(connection, "SELECT string_agg(owner, '' ORDER BY partition) FROM outbox.leases").text(0, 0) ==
          "bbbbaaaa");
  }
  SECTION("hand back") {
    REQUIRE(must_balance(store, "a", milliseconds(15000)).size() == 8);
    REQUIRE(store.hand_back_all("a").ok());
    CHECK(must(connection, "SELECT count(*) FROM outbox.leases WHERE owner IS NOT NULL").int64(0, 0) == 0);
    REQUIRE(store.deregister("a").ok());  // as at shutdown: b is alone
    REQUIRE(must_balance(store, "b", milliseconds(15000)).size() == 8);
    CHECK(epoch_of(connection, 5) == 2);
    // Back to the first owner: ownership changed again.
    REQUIRE(store.hand_back_all("b").ok());
    REQUIRE(store.deregister("b").ok());
    REQUIRE(must_balance(store, "a", milliseconds(15000)).size() == 8);
    CHECK(epoch_of(connection, 0) == 3);
  }
}

TEST_CASE("instances register, beat with each balance, and deregister", "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");
  REQUIRE(store.register_instance("a").ok());
  must(connection, "UPDATE outbox.instances SET heartbeat_at = now() - interval '1 hour', idle = true");
  REQUIRE(store.register_instance("a").ok());  // a restart under the same id
  CHECK_FALSE(must(connection, "SELECT idle FROM outbox.instances").boolean(0, 0));
  must(connection, "UPDATE outbox.instances SET heartbeat_at = now() - interval '1 hour'");
  must_balance(store, "a", milliseconds(15000));
  CHECK(must(connection, "SELECT heartbeat_at > now() - interval '1 minute' FROM outbox.instances").boolean(0, 0));
  REQUIRE(store.deregister("a").ok());
  CHECK(must(connection, "SELECT count(*) FROM outbox.instances").int64(0, 0) == 0);
}

TEST_CASE("balance shares partitions among live instances; the surplus drains, then is handed back", "[pg][lease]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");
  const milliseconds ttl(15000);

  const auto alone = must_balance(store, "a", ttl);
  REQUIRE(alone.size() == 8);
  CHECK(over_share(alone) == 0);
  CHECK(epoch_of(connection, 0) == 1);
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
  REQUIRE(store.hand_back("a", surplus).ok());
  const auto taken = must_balance(store, "b", ttl);
  REQUIRE(taken.size() == 4);
  CHECK(taken[0].partition == 4);
  CHECK(epoch_of(connection, 4) == 2);
  CHECK(over_share(must_balance(store, "a", ttl)) == 0);

  // A third instance: shares of ceil(8 / 3) = 3.
  CHECK(must_balance(store, "c", ttl).empty());
  CHECK(over_share(must_balance(store, "a", ttl)) == 1);
  CHECK(over_share(must_balance(store, "b", ttl)) == 1);
}

TEST_CASE("a watcher takes no share: an instance beside it leases every partition", "[pg][lease][watch]") {
  ScratchDatabase db;
  Connection connection = db.migrated();
  Connection daemon = db.dispatcher();
  LeaseStore store(daemon, "outbox");
  WatchStore watcher(daemon, "outbox");
  const milliseconds ttl(15000);

  REQUIRE(watcher.watch("w").ok());  // live: its heartbeat is fresh
  const auto alone = must_balance(store, "a", ttl);
  REQUIRE(alone.size() == 8);
  CHECK(over_share(alone) == 0);
  CHECK(over_share(must_balance(store, "a", ttl)) == 0);

  // Serving under the same id, it is a full instance again: half each.
  REQUIRE(store.register_instance("w").ok());
  CHECK(must(connection, "SELECT watching OR idle FROM outbox.instances WHERE instance_id = 'w'").text(0, 0) == "f");
  CHECK(over_share(must_balance(store, "a", ttl)) == 4);
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
  CHECK(epoch_of(connection, 7) == 2);
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
