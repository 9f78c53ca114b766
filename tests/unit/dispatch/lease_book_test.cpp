// LeaseBook: the fencing deadline, claimable and draining partitions, with a manual clock.
#include <catch2/catch.hpp>

#include "dispatch/lease_book.hpp"

using namespace std::chrono_literals;
using outboxd::core::ManualClock;
using outboxd::dispatch::LeaseBook;
using Ints = std::vector<int>;

namespace {

std::vector<LeaseBook::Leased> leased(std::initializer_list<int> claimable, std::initializer_list<int> over_share = {}) {
  std::vector<LeaseBook::Leased> out;
  for (const int p : claimable) out.push_back({p, false});
  for (const int p : over_share) out.push_back({p, true});
  return out;
}

}  // namespace

TEST_CASE("Nothing is published before the first renewal or without leases", "[dispatch][lease]") {
  ManualClock clock;
  LeaseBook book(30s, 10s, 5s);
  CHECK(book.renewal_due(clock.now()));
  CHECK_FALSE(book.may_publish(clock.now()));
  book.renewed({}, clock.now());
  CHECK_FALSE(book.may_publish(clock.now()));  // valid, but nothing leased
}

TEST_CASE("The fence runs from the moment the balance was sent, minus the margin", "[dispatch][lease]") {
  ManualClock clock;
  LeaseBook book(30s, 10s, 5s);
  const auto sent = clock.now();
  clock.advance(2s);  // a slow statement: the answer comes later than it was sent
  book.renewed(leased({1, 2}), sent);
  CHECK(book.valid_until() == sent + 25s);
  CHECK(book.next_renewal() == sent + 10s);
  CHECK_FALSE(book.renewal_due(sent + 9s));
  CHECK(book.renewal_due(sent + 10s));
  CHECK(book.may_publish(sent + 25s - 1ns));
  CHECK_FALSE(book.may_publish(sent + 25s));  // renewals failed meanwhile: stop, the lease may be gone

  book.renewed(leased({1, 2}), sent + 20s);  // a later renewal moves the fence
  CHECK(book.may_publish(sent + 40s));
}

TEST_CASE("Lost and gained partitions are reported; draining ones stop and stay draining", "[dispatch][lease]") {
  ManualClock clock;
  LeaseBook book(30s, 10s, 5s);
  auto first = book.renewed(leased({3, 1, 2}), clock.now());
  CHECK(first.gained == Ints{1, 2, 3});
  CHECK(first.stopped.empty());
  CHECK(first.changed);
  CHECK(book.partitions() == Ints{1, 2, 3});

  auto same = book.renewed(leased({1, 2, 3}), clock.now());
  CHECK_FALSE(same.changed);
  CHECK(same.gained.empty());

  // Another instance joined: 3 is over the share now, 2 was lost.
  auto shrunk = book.renewed(leased({1}, {3}), clock.now());
  CHECK(shrunk.stopped == Ints{2, 3});
  CHECK(shrunk.gained.empty());
  CHECK(book.partitions() == Ints{1});
  CHECK(book.draining() == Ints{3});

  // The share grows back before 3 was handed back: 3 keeps draining.
  auto regrown = book.renewed(leased({1, 3, 4}), clock.now());
  CHECK(regrown.gained == Ints{4});
  CHECK(book.partitions() == Ints{1, 4});
  CHECK(book.draining() == Ints{3});

  book.handed_back({3});
  CHECK(book.draining().empty());
  CHECK(book.may_publish(clock.now()));
  book.handed_back_all();
  CHECK_FALSE(book.holds_any());
  CHECK_FALSE(book.may_publish(clock.now()));
}

TEST_CASE("Only draining partitions left: in-flight rows may still go out until the fence", "[dispatch][lease]") {
  ManualClock clock;
  LeaseBook book(30s, 10s, 5s);
  book.renewed(leased({}, {7}), clock.now());
  CHECK(book.partitions().empty());
  CHECK(book.may_publish(clock.now()));
  clock.advance(25s);
  CHECK_FALSE(book.may_publish(clock.now()));
}
