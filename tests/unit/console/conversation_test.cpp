// A conversation as one timeline: entries in time order, times to the millisecond, the page escaped and bounded.
#include <catch2/catch.hpp>

#include "console/conversation.hpp"

using namespace outboxd::console;
using nlohmann::json;

namespace {

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

const Frame kFrame{"alice", "csrf-token"};

// Two rows: an order's, dispatched and received, and a payment's, parked and requeued, written in between.
json two_rows() {
  return json::array(
      {{{"id", 7},
        {"message_id", "order-42:placed:1"},
        {"writer", "shop"},
        {"destination", "orders"},
        {"session_id", "order-42"},
        {"state", "dispatched"},
        {"created_at", "2026-12-07T08:00:00+00:00"},
        {"due_at", "2026-12-07T08:00:00+00:00"},
        {"dispatched_at", "2026-12-07T08:00:00.5+00:00"},
        {"attempts", 0},
        {"events", json::array()},
        {"receipts", {{{"consumer", "billing"}, {"writer", "billing_app"}, {"received_at", "2026-12-07T08:00:01+00:00"}}}}},
       {{"id", 9},
        {"message_id", "payment-42:authorise:1"},
        {"writer", "payments"},
        {"destination", "payments"},
        {"session_id", "payment-42"},
        {"state", "pending"},
        {"created_at", "2026-12-07T08:00:00.25+00:00"},
        {"due_at", "2026-12-07T08:00:00.25+00:00"},
        {"dispatched_at", nullptr},
        {"attempts", 3},
        {"events",
         {{{"action", "parked"}, {"db_role", "outboxd"}, {"os_user", nullptr}, {"at", "2026-12-07T08:00:00.75+00:00"},
           {"detail", "rejected: declined"}},
          {{"action", "requeued"}, {"db_role", "ops"}, {"os_user", "alice"}, {"at", "2026-12-07T08:00:02+00:00"},
           {"detail", "rejected: declined"}}}},
        {"receipts", json::array()}}});
}

}  // namespace

TEST_CASE("A conversation's entries come in time order, each row's life in its own order at the same time",
          "[console][conversation]") {
  const auto entries = conversation_entries(two_rows());
  std::vector<std::string> seen;
  for (const auto& entry : entries) seen.push_back(std::to_string(entry.row) + " " + entry.what);
  CHECK(seen == std::vector<std::string>{"0 written", "1 written", "0 dispatched", "1 parked", "0 received",
                                         "1 requeued"});
  CHECK(entries[1].detail == "to payments, session payment-42");
  CHECK(entries[4].who == "billing");
  CHECK(entries[4].detail == "recorded by billing_app");
  CHECK(entries[5].who == "ops (alice)");
  CHECK(entries[2].detail.empty());  // dispatched at the first attempt
}

TEST_CASE("A conversation's entry says when a row was scheduled and how many attempts failed before it went",
          "[console][conversation]") {
  json rows = two_rows();
  rows[0]["due_at"] = "2026-12-07T09:00:00+00:00";
  rows[0]["attempts"] = 2;
  const auto entries = conversation_entries(rows);
  CHECK(entries[0].detail == "to orders, session order-42, due 2026-12-07 09:00:00.000Z");
  CHECK(entries[2].detail == "after 2 failed attempts");
  CHECK(conversation_entries(json()).empty());
}

TEST_CASE("Times of the timeline read to the millisecond", "[console][conversation]") {
  CHECK(instant("2026-12-07T08:52:04.123456+00:00") == "2026-12-07 08:52:04.123Z");
  CHECK(instant("2026-12-07T08:52:04.12+00:00") == "2026-12-07 08:52:04.120Z");
  CHECK(instant("2026-12-07T08:52:04+00:00") == "2026-12-07 08:52:04.000Z");
  CHECK(instant("infinity") == "infinity");
}

TEST_CASE("The conversation page draws the timeline, links rows and sessions, escapes every id and pages back",
          "[console][conversation]") {
  json rows = two_rows();
  rows[1]["message_id"] = "<img src=x onerror=alert(1)>";
  rows[1]["session_id"] = "s/<b>";
  rows[1]["events"][0]["action"] = "something\"new";
  const json conversation{{"rows", rows},
                          {"more", true},
                          {"workflow_states",
                           {{{"id", "order-42"}, {"writer", "shop"}, {"kind", "order"}, {"status", "<Paid>"},
                             {"version", 2}, {"timeout_message_id", nullptr}, {"timeout_due_at", nullptr},
                             {"updated_at", "2026-12-07T08:00:02+00:00"}}}}};
  const std::string page = conversation_page(kFrame, "c<42>/x", conversation);
  CHECK_FALSE(contains(page, "<img"));
  CHECK_FALSE(contains(page, "s/<b>"));
  CHECK_FALSE(contains(page, "<script"));
  CHECK(contains(page, "Conversation c&lt;42&gt;/x"));
  CHECK(contains(page, "<ol class=\"timeline\"><li class=\"written\"><time>2026-12-07 08:00:00.000Z</time> <b>written</b> "
                       "<a href=\"/rows/order-42%3Aplaced%3A1?writer=shop\">order-42:placed:1</a>"));
  CHECK(contains(page, "<li class=\"other\">"));  // an action the stylesheet does not know gets no mark of its own
  CHECK(contains(page, "<b>something&quot;new</b>"));
  CHECK(contains(page, "<a href=\"/sessions/s%2F%3Cb%3E\">s/&lt;b&gt;</a>"));
  CHECK(contains(page, "&lt;Paid&gt;"));
  CHECK(contains(page, "2 newest rows"));
  CHECK(contains(page, "<a href=\"/conversations/c%3C42%3E%2Fx?before=7\">older rows</a>"));

  const std::string none = conversation_page(kFrame, "nobody", json{{"rows", json::array()}, {"more", false}});
  CHECK(contains(none, "No row carries this correlation id"));
  CHECK_FALSE(contains(none, "older rows"));
}
