// SessionQueue: returned rows ahead of fresh ones, id order within each run, late inserts, removal.
#include <catch2/catch.hpp>

#include <vector>

#include "dispatch/session_queue.hpp"

using outboxd::core::RowId;
using outboxd::dispatch::SessionQueue;
using Ids = std::vector<RowId>;

TEST_CASE("SessionQueue keeps fresh rows in id order, late lower ids included", "[dispatch][session_queue]") {
  SessionQueue queue;
  REQUIRE(queue.empty());
  queue.push_fresh(3);
  queue.push_fresh(7);
  queue.push_fresh(5);  // a late commit lands between
  queue.push_fresh(1);  // and before everything
  CHECK(queue.ids() == Ids{1, 3, 5, 7});
  CHECK(queue.size() == 4);
  CHECK(queue.front() == 1);
  queue.pop_front();
  CHECK(queue.front() == 3);
}

TEST_CASE("SessionQueue puts returned rows ahead of every fresh row", "[dispatch][session_queue]") {
  SessionQueue queue;
  for (RowId id : {1, 2, 3, 4, 5}) queue.push_fresh(id);
  queue.pop_front();  // 1 out
  queue.pop_front();  // 2 out
  queue.pop_front();  // 3 out
  queue.push_returned(3);
  queue.push_returned(1);
  queue.push_returned(2);
  CHECK(queue.ids() == Ids{1, 2, 3, 4, 5});
  CHECK(queue.returned() == 3);

  SECTION("a late fresh row with a lower id still waits behind the returned rows") {
    queue.push_fresh(0);
    CHECK(queue.ids() == Ids{1, 2, 3, 0, 4, 5});
  }
  SECTION("popping consumes the returned run first") {
    queue.pop_front();
    queue.pop_front();
    CHECK(queue.returned() == 1);
    queue.pop_front();
    CHECK(queue.returned() == 0);
    CHECK(queue.front() == 4);
  }
}

TEST_CASE("SessionQueue returns a row into a queue whose front slot is taken", "[dispatch][session_queue]") {
  SessionQueue queue;
  queue.push_fresh(10);
  queue.push_returned(12);  // no free slot before the head: an insert
  queue.push_returned(11);
  CHECK(queue.ids() == Ids{11, 12, 10});
  CHECK(queue.returned() == 2);
}

TEST_CASE("SessionQueue removes rows and keeps both runs consistent", "[dispatch][session_queue]") {
  SessionQueue queue;
  for (RowId id : {1, 2, 3, 4, 5, 6}) queue.push_fresh(id);
  queue.pop_front();
  queue.pop_front();
  queue.push_returned(2);
  queue.push_returned(1);
  REQUIRE(queue.ids() == Ids{1, 2, 3, 4, 5, 6});
  CHECK(queue.remove_if([](RowId id) { return id % 2 == 0; }) == 3);
  CHECK(queue.ids() == Ids{1, 3, 5});
  CHECK(queue.returned() == 1);
  CHECK(queue.remove_if([](RowId) { return true; }) == 3);
  CHECK(queue.empty());
  CHECK(queue.returned() == 0);
}

TEST_CASE("SessionQueue survives long runs of push and pop", "[dispatch][session_queue]") {
  SessionQueue queue;
  RowId next = 1;
  RowId expected = 1;
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 3; ++i) queue.push_fresh(next++);
    for (int i = 0; i < 2; ++i) {
      REQUIRE(queue.front() == expected++);
      queue.pop_front();
    }
  }
  CHECK(queue.size() == 1000);
  while (!queue.empty()) {
    REQUIRE(queue.front() == expected++);
    queue.pop_front();
  }
  CHECK(expected == next);
  queue.clear();
  CHECK(queue.empty());
}
