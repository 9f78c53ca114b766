// ConnectionSuspects: what is blamed for a lost connection, and when it is convicted.
#include <catch2/catch.hpp>

#include "dispatch/connection_suspects.hpp"

using outboxd::dispatch::ConnectionSuspects;
using Ids = std::vector<outboxd::core::RowId>;
using Names = std::vector<std::string>;

TEST_CASE("a destination whose link attach alone ends the connection is convicted after three times",
          "[dispatch][suspects]") {
  ConnectionSuspects s;
  // The first loss: two links were being attached and rows were in flight.
  s.on_connection_lost({"orders", "заказы"}, {1, 2}, "connection aborted");
  CHECK(s.suspect("orders"));
  CHECK(s.suspect("заказы"));
  CHECK_FALSE(s.suspect(1));  // an attach under way is blamed before any row
  CHECK_FALSE(s.conviction("заказы"));
  s.on_link_open("orders");  // tried alone, it opened: cleared
  CHECK_FALSE(s.suspect("orders"));
  for (int i = 1; i <= ConnectionSuspects::kMaxBlame; ++i) {
    CHECK_FALSE(s.conviction("заказы"));
    s.on_connection_lost({"заказы"}, {7, 8}, "connection aborted");
  }
  const auto why = s.conviction("заказы");
  REQUIRE(why);
  CHECK(*why == "the connection ended each of the 3 times a link to this destination was attached alone: "
                "connection aborted");
  CHECK_FALSE(s.suspect(7));
  CHECK_FALSE(s.conviction("orders"));
}

TEST_CASE("a row that alone among suspects ends the connection is convicted; the others in flight are cleared",
          "[dispatch][suspects]") {
  ConnectionSuspects s;
  s.on_connection_lost({}, {1, 2, 3}, "killed");  // no attach under way: the rows in flight are suspects
  for (const outboxd::core::RowId id : {1, 2, 3}) CHECK(s.suspect(id));
  s.on_settled(1);
  s.on_settled(3);
  CHECK_FALSE(s.suspect(1));
  // 2 goes alone among suspects; innocent rows in flight beside it become suspects but take no blame.
  s.on_connection_lost({}, {2, 10, 11}, "killed");
  s.on_settled(10);
  s.on_settled(11);
  s.on_connection_lost({}, {2, 12}, "killed");
  s.on_settled(12);
  CHECK_FALSE(s.conviction(2));
  s.on_connection_lost({}, {2}, "killed by row 2");
  const auto why = s.conviction(2);
  REQUIRE(why);
  CHECK(*why == "the connection ended each of the 3 times this row was sent alone: killed by row 2");
  CHECK(s.suspects() == 1);
}

TEST_CASE("two suspects in flight together share no blame", "[dispatch][suspects]") {
  ConnectionSuspects s;
  s.on_connection_lost({}, {1, 2}, "killed");
  for (int i = 0; i < 5; ++i) s.on_connection_lost({}, {1, 2}, "killed");
  CHECK_FALSE(s.conviction(1));
  CHECK_FALSE(s.conviction(2));
}

TEST_CASE("suspect rows that never come back are dropped past the bound, the blamed ones kept",
          "[dispatch][suspects]") {
  ConnectionSuspects s;
  s.on_connection_lost({}, {1}, "killed");
  s.on_connection_lost({}, {1}, "killed");  // blamed once
  Ids many;
  for (outboxd::core::RowId id = 100; id < 100 + static_cast<outboxd::core::RowId>(ConnectionSuspects::kMaxRows); ++id) {
    many.push_back(id);
  }
  s.on_connection_lost({}, many, "killed");
  CHECK(s.suspect(1));
  CHECK_FALSE(s.suspect(100));
  CHECK(s.suspects() == 1);
}

TEST_CASE("suspects go to the probe connection and come back to the main one once cleared", "[dispatch][suspects]") {
  ConnectionSuspects s;
  CHECK_FALSE(s.on_probe("orders", 1));
  // The main connection ended while two links were being attached: both go to the probe.
  s.on_connection_lost({"orders", "заказы"}, {1, 2}, "connection aborted");
  CHECK(s.on_probe("orders", 1));
  CHECK(s.on_probe("заказы", 3));
  CHECK_FALSE(s.on_probe("invoices", 1));  // the rows in flight beside them stay on the main connection
  s.on_link_open("orders");                // opened on the probe: back to the main connection
  CHECK_FALSE(s.on_probe("orders", 1));
  // The main connection ended with rows in flight and no attach: those rows go to the probe, alone.
  s.on_connection_lost({}, {5, 6}, "killed");
  CHECK(s.on_probe("invoices", 5));
  CHECK_FALSE(s.on_probe("invoices", 7));
  s.on_settled(5);
  CHECK_FALSE(s.on_probe("invoices", 5));
  // The probe ended while заказы was attached alone on it: blamed, and still tried on the probe.
  s.on_connection_lost({"заказы"}, {}, "connection aborted");
  CHECK(s.on_probe("заказы", 8));
  CHECK_FALSE(s.conviction("заказы"));
}
