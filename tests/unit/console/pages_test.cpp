// Unit tests of the console's pages and charts: rows shown escaped, bodies as JSON, text or hex, forms with CSRF.
#include <catch2/catch.hpp>

#include "console/chart.hpp"
#include "console/pages.hpp"
#include "console/samples.hpp"

using namespace outboxd::console;
using nlohmann::json;

namespace {

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

const Frame kFrame{"alice", "csrf-token"};

}  // namespace

TEST_CASE("The parked page escapes every field of a row and offers requeue and skip forms", "[console]") {
  const json listing = {{"rows",
                         {{{"message_id", "m<1>"},
                           {"status", "parked"},
                           {"destination", "orders"},
                           {"session_id", "s/1"},
                           {"attempts", 5},
                           {"first_failed_at", "2026-12-01T13:20:05.123+00:00"},
                           {"last_failed_at", nullptr},
                           {"waiting_behind", 2},
                           {"last_error", "<script>alert(1)</script>"}}}},
                        {"matched", 1}};
  const std::string page = parked_page(kFrame, listing);
  CHECK_FALSE(contains(page, "<script>"));
  CHECK(contains(page, "&lt;script&gt;alert(1)&lt;/script&gt;"));
  CHECK(contains(page, "<a href=\"/rows/m%3C1%3E\">m&lt;1&gt;</a>"));
  CHECK(contains(page, "action=\"/parked/m%3C1%3E/requeue\""));
  CHECK(contains(page, "action=\"/parked/m%3C1%3E/skip\""));
  CHECK(contains(page, "action=\"/sessions/s%2F1/skip\""));
  CHECK(contains(page, "name=\"csrf\" value=\"csrf-token\""));
  CHECK(contains(page, "2026-12-01 13:20:05Z"));
  CHECK(contains(page, "1 row</p>"));
}

TEST_CASE("A retrying row gets no requeue or skip form", "[console]") {
  const json listing = {{"rows", {{{"message_id", "m2"}, {"status", "pending"}, {"session_id", "s"}}}}, {"matched", 1}};
  CHECK_FALSE(contains(parked_page(kFrame, listing), "/requeue"));
}

TEST_CASE("A body is shown as pretty JSON, text or hex, escaped", "[console]") {
  const std::string as_json = body_html({"{\"a\":\"<b>\",\"n\":[1,2]}", 22, "application/json"}).markup;
  CHECK(contains(as_json, "shown as JSON"));
  CHECK(contains(as_json, "{\n  &quot;a&quot;: &quot;&lt;b&gt;&quot;,\n  &quot;n&quot;: [\n    1,"));

  const std::string as_text = body_html({"hello <world>\nline 2", 20, "text/plain"}).markup;
  CHECK(contains(as_text, "shown as text"));
  CHECK(contains(as_text, "<pre>hello &lt;world&gt;\nline 2</pre>"));

  const std::string as_hex = body_html({std::string("\x00\x01<\xff", 4), 100, "application/octet-stream"}).markup;
  CHECK(contains(as_hex, "100 bytes, shown as bytes (the first 4)"));
  CHECK(contains(as_hex, "00000000  00 01 3c ff"));
  CHECK(contains(as_hex, "..&lt;."));
}

TEST_CASE("The row page lists columns and history, with actions only for a parked row", "[console]") {
  const json row = {{"message_id", "m1"}, {"status", "parked"}, {"session_id", "s1"}, {"body_bytes", 2},
                    {"body_head", "6869"}, {"last_error", "\"><img>"}};
  const std::vector<json> events = {{{"at", "2026-12-01T13:20:05+00:00"}, {"action", "parked"},
                                     {"db_role", "d"}, {"os_user", nullptr}, {"detail", "x"}}};
  const std::string page = row_page(kFrame, "m1", row, events, {"hi", 2, "text/plain"});
  CHECK(contains(page, "&quot;&gt;&lt;img&gt;"));
  CHECK(contains(page, "action=\"/parked/m1/skip\""));
  CHECK(contains(page, "<a href=\"/sessions/s1\">"));
  CHECK_FALSE(contains(page, "body_head"));
  CHECK(contains(row_page(kFrame, "gone", json(), {}, {}), "No row has this message id"));
}

TEST_CASE("A message id is its writer's: links and actions name the writer, and a shared id lists them", "[console]") {
  const json row = {{"message_id", "m 1"}, {"status", "parked"}, {"writer", "app&b"}, {"session_id", nullptr}};
  const std::string page = row_page(kFrame, "m 1", row, {}, {});
  CHECK(contains(page, "action=\"/parked/m%201/skip\"><input type=\"hidden\" name=\"csrf\" value=\"csrf-token\">"
                       "<input type=\"hidden\" name=\"writer\" value=\"app&amp;b\">"));
  const std::string parked = parked_page(kFrame, {{"rows", {row}}, {"matched", 1}});
  CHECK(contains(parked, "<a href=\"/rows/m%201?writer=app%26b\">m 1</a>"));
  CHECK(contains(parked, "name=\"writer\" value=\"app&amp;b\"><button type=\"submit\">skip</button>"));
  const std::string shared = writers_page(kFrame, "m 1", {"app_a", "app&b", ""});
  CHECK(contains(shared, "<a href=\"/rows/m%201?writer=app_a\">app_a</a>"));
  CHECK(contains(shared, "<a href=\"/rows/m%201?writer=app%26b\">app&amp;b</a>"));
  CHECK(contains(shared, "<a href=\"/rows/m%201\">(no writer)</a>"));
}

TEST_CASE("The login page posts the token and a name, and carries no script", "[console]") {
  const std::string page = login_page("wrong <token>");
  CHECK(contains(page, "<form method=\"post\" action=\"/login\">"));
  CHECK(contains(page, "name=\"token\""));
  CHECK(contains(page, "wrong &lt;token&gt;"));
  CHECK_FALSE(contains(page, "<script"));
}

TEST_CASE("Backlog samples become series over the last hour, and departures per second", "[console]") {
  SampleHistory history(3600);
  history.add({0, {10, 0, 1}, {{"orders", {10, 0, 1}}}, 100});
  history.add({10, {5, 0, 1}, {{"orders", {5, 0, 1}}}, 120});   // 20 inserted, backlog -5: 25 left in 10 s
  history.add({20, {5, 0, 1}, {{"orders", {5, 0, 1}}}, 110});   // counter went back: no point
  history.add({30, {5, 0, 1}, {}, std::nullopt});
  const auto backlog = history.backlog(30);
  REQUIRE(backlog.size() == 2);
  CHECK(backlog[0].points.front() == std::pair<double, double>(-30, 10));
  CHECK(backlog[1].points.back() == std::pair<double, double>(0, 1));
  const Series departures = history.departures(30);
  REQUIRE(departures.points.size() == 1);
  CHECK(departures.points[0] == std::pair<double, double>(-20, 2.5));
  CHECK(history.destination_backlog("orders", 30).points.back().second == 0);

  history.add({3700, {1, 0, 0}, {}, 130});  // an hour later: older samples are gone
  CHECK(history.size() == 1);
}

TEST_CASE("A chart is one inline SVG with escaped title and a polyline per series", "[console]") {
  const std::string svg = line_chart("<rows>", {{"waiting", "#1f6feb", {{-3600, 0}, {-1800, 50}, {0, 100}}}}, 3600).markup;
  CHECK(svg.rfind("<svg xmlns=\"http://www.w3.org/2000/svg\"", 0) == 0);
  CHECK(contains(svg, "<title>&lt;rows&gt;</title>"));
  CHECK(contains(svg, "<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"#1f6feb\" points=\"40.0,"));
  CHECK(contains(svg, ">100</text>"));
  CHECK_FALSE(contains(svg, "<script"));
}

TEST_CASE("Past 50 destinations the samples keep those owing the most rows, and the overview says so",
          "[console]") {
  SampleHistory history(3600);
  Sample sample{0, {}, {}, std::nullopt};
  for (int i = 0; i < 60; ++i) sample.destinations["!hide-" + std::to_string(100 + i)] = {1, 0, 0};
  for (int i = 0; i < 3; ++i) sample.destinations["orders-" + std::to_string(i)] = {100 + i, 0, 0};
  history.add(sample);
  const auto orders = history.destination_backlog("orders-0", 0);
  REQUIRE(orders.points.size() == 1);
  CHECK(orders.points[0].second == 100);
  CHECK(history.left_out() == 13);
  // A destination left out of a sample has no point there, rather than a 0 that flattens its chart.
  CHECK(history.destination_backlog("!hide-159", 0).points.empty());
  const json status = {{"destinations", json::object()}, {"total", json::object()}};
  CHECK(contains(overview_page(kFrame, status, history, 0), "13 more were left out"));
}

TEST_CASE("The overview shows each destination's delivery policy, escaped, '-' for what is not set", "[console]") {
  SampleHistory history(3600);
  const json status = {{"destinations", json::object()},
                       {"total", json::object()},
                       {"policy", json::array({{{"destination", "<b>pay</b>"}, {"priority", 10}, {"max_rate", 0},
                                                {"burst", 0}, {"max_in_flight", 0}},
                                               {{"destination", "partner"}, {"priority", 0}, {"max_rate", 200.0},
                                                {"burst", 20.0}, {"max_in_flight", 50}}})}};
  const std::string page = overview_page(kFrame, status, history, 0);
  CHECK(contains(page, "<h2>Delivery policy</h2>"));
  CHECK(contains(page, "<td>&lt;b&gt;pay&lt;/b&gt;</td><td>10</td><td>-</td><td>-</td><td>-</td>"));
  CHECK(contains(page, "<td>partner</td><td>0</td><td>200</td><td>20</td><td>50</td>"));
  CHECK_FALSE(contains(page, "<b>pay"));
  const json without = {{"destinations", json::object()}, {"total", json::object()}, {"policy", json::array()}};
  CHECK_FALSE(contains(overview_page(kFrame, without, history, 0), "Delivery policy"));
}
