// ConnectionSuspects: what is blamed for a lost connection, and when it is convicted.
#include <catch2/catch.hpp>

#include "dispatch/connection_suspects.hpp"

using outboxd::core::DeliveryKey;
using outboxd::core::RowId;
using outboxd::dispatch::ConnectionSuspects;
using Keys = std::vector<DeliveryKey>;

namespace {

// Rows of the first outbox (0), the only one of a daemon of one outbox.
DeliveryKey row(RowId id) { return {0, id}; }
Keys rows(std::initializer_list<RowId> ids) {
  Keys keys;
  for (const RowId id : ids) keys.push_back(row(id));
  return keys;
}

}  // namespace

TEST_CASE("a destination whose link attach alone ends the connection is convicted after three times",
          "[dispatch][suspects]") {
  ConnectionSuspects s;
  // The first loss: two links were being attached and rows were in flight.
  s.on_connection_lost({"orders", "заказы"}, rows({1, 2}), "connection aborted");
  CHECK(s.suspect("orders"));
  CHECK(s.suspect("заказы"));
  CHECK_FALSE(s.suspect(row(1)));  // an attach under way is blamed before any row
  CHECK_FALSE(s.conviction("заказы"));
  s.on_link_open("orders");  // tried alone, it opened: cleared
  CHECK_FALSE(s.suspect("orders"));
  for (int i = 1; i <= ConnectionSuspects::kMaxBlame; ++i) {
    CHECK_FALSE(s.conviction("заказы"));
    s.on_connection_lost({"заказы"}, rows({7, 8}), "connection aborted");
  }
  const auto why = s.conviction("заказы");
  REQUIRE(why);
  CHECK(*why == "the connection ended each of the 3 times a link to this destination was attached alone: "
                "connection aborted");
  CHECK_FALSE(s.suspect(row(7)));
  CHECK_FALSE(s.conviction("orders"));
}

TEST_CASE("a row that alone among suspects ends the connection is convicted; the others in flight are cleared",
          "[dispatch][suspects]") {
  ConnectionSuspects s;
  s.on_connection_lost({}, rows({1, 2, 3}), "killed");  // no attach under way: the rows in flight are suspects
  for (const RowId id : {1, 2, 3}) CHECK(s.suspect(row(id)));
  s.on_settled(row(1));
  s.on_settled(row(3));
  CHECK_FALSE(s.suspect(row(1)));
  // 2 goes alone among suspects; innocent rows in flight beside it become suspects but take no blame.
  s.on_connection_lost({}, rows({2, 10, 11}), "killed");
  s.on_settled(row(10));
  s.on_settled(row(11));
  s.on_connection_lost({}, rows({2, 12}), "killed");
  s.on_settled(row(12));
  CHECK_FALSE(s.conviction(row(2)));
  s.on_connection_lost({}, rows({2}), "killed by row 2");
  const auto why = s.conviction(row(2));
  REQUIRE(why);
  CHECK(*why == "the connection ended each of the 3 times this row was sent alone: killed by row 2");
  CHECK(s.suspects() == 1);
}

TEST_CASE("two suspects in flight together share no blame", "[dispatch][suspects]") {
  ConnectionSuspects s;
  s.on_connection_lost({}, rows({1, 2}), "killed");
  for (int i = 0; i < 5; ++i) s.on_connection_lost({}, rows({1, 2}), "killed");
  CHECK_FALSE(s.conviction(row(1)));
  CHECK_FALSE(s.conviction(row(2)));
}

TEST_CASE("suspect rows that never come back are dropped past the bound, the blamed ones kept",
          "[dispatch][suspects]") {
  ConnectionSuspects s;
  s.on_connection_lost({}, rows({1}), "killed");
  s.on_connection_lost({}, rows({1}), "killed");  // blamed once
  Keys many;
  for (RowId id = 100; id < 100 + static_cast<RowId>(ConnectionSuspects::kMaxRows); ++id) many.push_back(row(id));
  s.on_connection_lost({}, many, "killed");
  CHECK(s.suspect(row(1)));
  CHECK_FALSE(s.suspect(row(100)));
  CHECK(s.suspects() == 1);
}

TEST_CASE("suspects go to the probe connection and come back to the main one once cleared", "[dispatch][suspects]") {
  ConnectionSuspects s;
  CHECK_FALSE(s.on_probe("orders", row(1)));
  // The main connection ended while two links were being attached: both go to the probe.
  s.on_connection_lost({"orders", "заказы"}, rows({1, 2}), "connection aborted");
  CHECK(s.on_probe("orders", row(1)));
  CHECK(s.on_probe("заказы", row(3)));
  CHECK_FALSE(s.on_probe("invoices", row(1)));  // the rows in flight beside them stay on the main connection
  s.on_link_open("orders");  // opened on the probe: back to the main connection
  CHECK_FALSE(s.on_probe("orders", row(1)));
  // The main connection ended with rows in flight and no attach: those rows go to the probe, alone.
  s.on_connection_lost({}, rows({5, 6}), "killed");
  CHECK(s.on_probe("invoices", row(5)));
  CHECK_FALSE(s.on_probe("invoices", row(7)));
  s.on_settled(row(5));
  CHECK_FALSE(s.on_probe("invoices", row(5)));
  // The probe ended while заказы was attached alone on it: blamed, and still tried on the probe.
  s.on_connection_lost({"заказы"}, {}, "connection aborted");
  CHECK(s.on_probe("заказы", row(8)));
  CHECK_FALSE(s.conviction("заказы"));
}

// One publisher serves every outbox of the daemon, and row ids are each outbox's own.
TEST_CASE("a suspect row is its outbox's: the same id of another outbox is neither held back nor convicted",
          "[dispatch][suspects]") {
  ConnectionSuspects s;
  const DeliveryKey mine{1, 7};
  const DeliveryKey theirs{2, 7};
  s.on_connection_lost({}, {mine}, "killed");
  CHECK(s.suspect(mine));
  CHECK_FALSE(s.suspect(theirs));
  CHECK_FALSE(s.on_probe("orders", theirs));  // it stays on the main connection
  // The only suspect in flight takes the blame; the other outbox's row 7 beside it becomes a suspect of its own.
  s.on_connection_lost({}, {mine, theirs}, "killed");
  CHECK(s.suspect(theirs));
  s.on_settled(theirs);
  CHECK(s.suspect(mine));  // settling the other outbox's row clears that row only
  CHECK_FALSE(s.suspect(theirs));
  for (int i = 1; i < ConnectionSuspects::kMaxBlame; ++i) {
    CHECK_FALSE(s.conviction(mine));
    s.on_connection_lost({}, {mine}, "killed by 7");
  }
  CHECK(s.conviction(mine));
  CHECK_FALSE(s.conviction(theirs));
  CHECK_FALSE(s.suspect(theirs));
  CHECK_FALSE(s.conviction(DeliveryKey{0, 7}));
}
