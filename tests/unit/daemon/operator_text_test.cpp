// What the operator commands print of rows, brokers and the config: harmless text, times with their era.
#include <catch2/catch.hpp>

#include "daemon/operator_text.hpp"

using outboxd::daemon::cell;
using outboxd::daemon::id_list;
using outboxd::daemon::shown;
using outboxd::daemon::when;

TEST_CASE("Operator text: a time is shown to the second in UTC, with its era and every digit of its year",
          "[daemon][operator_text]") {
  CHECK(when("2026-12-01T13:20:05.123456+00:00") == "2026-12-01 13:20:05Z");
  CHECK(when("2026-12-01T13:20:05+00:00") == "2026-12-01 13:20:05Z");
  CHECK(when("4713-11-24T00:00:00+00:00 BC") == "4713-11-24 00:00:00Z BC");
  CHECK(when("0001-12-31T23:59:59.5+00:00 BC") == "0001-12-31 23:59:59Z BC");
  CHECK(when("294276-12-31T23:59:59.999999+00:00") == "294276-12-31 23:59:59Z");
  CHECK(when("infinity") == "infinity");
  CHECK(when(nullptr) == "-");
  CHECK(when(nlohmann::json::object()) == "-");
  CHECK(when("2026-12-01T13:20:05\xE2\x80\xAE+00:00") == "2026-12-01 13:20:05Z");
  CHECK(when("\xE2\x80\xAE\x1b[2J") == "  [2J");
}

TEST_CASE("Operator text: line separators, bidirectional overrides and controls never reach the terminal",
          "[daemon][operator_text]") {
  const std::string hostile = "orders\xE2\x80\xAEsredro\xE2\x80\xA8next\x1b[2J\xff";
  const std::string harmless = "orders sredro next [2J\xEF\xBF\xBD";
  CHECK(shown(hostile) == harmless);
  CHECK(cell(hostile) == harmless);
  CHECK(id_list({hostile, "plain"}) == harmless + ", plain");
  CHECK(shown("destination-" + std::string(40, 'x'), 20) == "destination-xxxxxxxx...");
  CHECK(cell(nullptr) == "-");
  CHECK(cell(42) == "42");
}
