// Unit tests of the console's list of outboxes and of an outbox's pages among many: ranking, pages, links, escaping.
#include <catch2/catch.hpp>

#include "console/outbox_list.hpp"
#include "console/pages.hpp"

using namespace outboxd::console;
using nlohmann::json;

namespace {

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

OutboxReading read_one(std::string name, std::int64_t ready, std::int64_t parked = 0) {
  OutboxReading r;
  r.name = std::move(name);
  r.database = "outboxd@db:5432/app";
  r.schema = "outbox";
  r.state = "ok";
  r.ready = ready;
  r.parked = parked;
  r.read_at = 10;
  return r;
}

std::vector<std::string> names(const std::vector<OutboxReading>& readings) {
  std::vector<std::string> out;
  for (const auto& r : readings) out.push_back(r.name);
  return out;
}

}  // namespace

TEST_CASE("Outboxes rank those not read first, then by backlog, parked rows and name", "[console]") {
  std::vector<OutboxReading> readings{read_one("small", 1), read_one("big", 500), read_one("b-tie", 7, 3),
                                      read_one("a-tie", 7, 3), read_one("parked", 7, 9)};
  OutboxReading down = read_one("down", 0);
  down.state = "unreachable";
  down.reason = "cannot connect to outboxd@db:5432/app: refused";
  readings.push_back(down);
  rank_outboxes(readings);
  CHECK(names(readings) == std::vector<std::string>{"down", "big", "parked", "a-tie", "b-tie", "small"});
}

TEST_CASE("The list of outboxes shows one page of 50 with links to the pages around it", "[console]") {
  std::vector<OutboxReading> readings;
  for (int i = 0; i < 120; ++i) {
    std::string name = std::to_string(i);  // not "o" + ...: g++ 12 -O3 warns of a false -Wrestrict on the insert
    readings.push_back(read_one(name.insert(0, 1, 'o'), 1000 - i));
  }
  rank_outboxes(readings);
  const Frame frame{"alice", "csrf-token"};

  const std::string first = outboxes_page(frame, readings, 1, 12);
  CHECK(contains(first, "<a href=\"/o/o0/\">o0</a>"));
  CHECK(contains(first, "<a href=\"/o/o49/\">o49</a>"));
  CHECK_FALSE(contains(first, "/o/o50/"));
  CHECK(contains(first, "<a href=\"/?page=2\">more</a>"));
  CHECK_FALSE(contains(first, "previous"));
  CHECK(contains(first, "outboxes 1-50 of 120"));
  CHECK(contains(first, "<td>2 s ago</td>"));

  const std::string last = outboxes_page(frame, readings, 99, 12);  // past the end: the last page
  CHECK(contains(last, "outboxes 101-120 of 120"));
  CHECK(contains(last, "<a href=\"/?page=2\">previous</a>"));
  CHECK_FALSE(contains(last, ">more<"));

  const json document = outboxes_json(readings, 2, 12);
  CHECK(document["page"] == 2);
  CHECK(document["pages"] == 3);
  CHECK(document["count"] == 120);
  REQUIRE(document["outboxes"].size() == 50);
  CHECK(document["outboxes"][0]["name"] == "o50");
  CHECK(document["outboxes"][0]["ready"] == 950);
}

TEST_CASE("An outbox that could not be read shows its state and reason escaped, and no counts", "[console]") {
  OutboxReading down = read_one("down", 0);
  down.state = "failed";
  down.reason = "relation \"<script>x</script>\" does not exist";
  down.database = "outboxd@db:5432/<b>app</b>";
  const std::string page = outboxes_page({"alice", "csrf-token"}, {down}, 1, 12);
  CHECK(contains(page, "relation &quot;&lt;script&gt;x&lt;/script&gt;&quot; does not exist"));
  CHECK(contains(page, "outboxd@db:5432/&lt;b&gt;app&lt;/b&gt;"));
  CHECK_FALSE(contains(page, "<script"));
  CHECK_FALSE(contains(page, "<b>"));
  const json document = outboxes_json({down}, 1, 12);
  CHECK(document["outboxes"][0]["state"] == "failed");
  CHECK_FALSE(document["outboxes"][0].contains("ready"));
}

TEST_CASE("A page number is read from ?page=, 1 when it is not one", "[console]") {
  CHECK(page_number("3") == 3);
  CHECK(page_number("") == 1);
  CHECK(page_number("0") == 1);
  CHECK(page_number("2x") == 1);
  CHECK(page_number("-1") == 1);
}

TEST_CASE("The pages of one outbox of many link under its path and name it", "[console]") {
  const Frame frame{"alice", "csrf-token", "acme", "/o/acme"};
  const json listing = {{"rows",
                         {{{"message_id", "m1"}, {"status", "parked"}, {"session_id", "s1"}, {"writer", "app"}}}},
                        {"matched", 1}};
  const std::string page = parked_page(frame, listing);
  CHECK(contains(page, "<a href=\"/\">All outboxes</a>"));
  CHECK(contains(page, "outbox acme"));
  CHECK(contains(page, "<a href=\"/o/acme/parked\">Parked</a>"));
  CHECK(contains(page, "<a href=\"/o/acme/rows/m1?writer=app\">m1</a>"));
  CHECK(contains(page, "action=\"/o/acme/parked/m1/requeue\""));
  CHECK(contains(page, "action=\"/o/acme/sessions/s1/skip\""));
  CHECK(contains(page, "<title>Parked and retrying rows - acme - outboxd console</title>"));
  CHECK(contains(audit_page(frame, {}, json::object()), "action=\"/o/acme/audit\""));

  const std::string alone = parked_page({"alice", "csrf-token"}, listing);
  CHECK(contains(alone, "<a href=\"/parked\">Parked</a>"));
  CHECK(contains(alone, "action=\"/parked/m1/requeue\""));
  CHECK_FALSE(contains(alone, "All outboxes"));
}
