// Unit tests of the JSON log formatter: valid JSON for any message text.
#include <catch2/catch.hpp>

#include <spdlog/details/log_msg.h>

#include <string>

#include "log/json_formatter.hpp"
#include "log/log.hpp"

using outboxd::log::JsonFormatter;

namespace {

std::string render(std::string_view text) {
  spdlog::details::log_msg msg(spdlog::source_loc{}, "outboxd", spdlog::level::warn, text);
  msg.time = spdlog::log_clock::time_point(std::chrono::milliseconds(1700000000123));
  spdlog::memory_buf_t out;
  JsonFormatter().format(msg, out);
  return std::string(out.data(), out.size());
}

}  // namespace

TEST_CASE("JSON log lines carry time, level and an escaped message", "[log]") {
  REQUIRE(render("parked row 7") ==
          "{\"ts\":\"2023-11-14T22:13:20.123Z\",\"level\":\"warning\",\"msg\":\"parked row 7\"}\n");
}

TEST_CASE("JSON log lines escape quotes, backslashes and control characters", "[log]") {
  const std::string line = render("a\"b\\c\nd\x01");
  REQUIRE(line.find(R"("msg":"a\"b\\c\nd\u0001")") != std::string::npos);
}

TEST_CASE("log::init refuses an unknown level", "[log]") {
  REQUIRE_FALSE(outboxd::log::init("chatty", outboxd::log::Format::human).ok());
  REQUIRE(outboxd::log::init("off", outboxd::log::Format::json).ok());
}

TEST_CASE("JSON log lines stay valid JSON for invalid UTF-8 and escape line breakers", "[log]") {
  const std::string line = render("bad \xFF\xC0 caf\xC3\xA9 \xC2\x85 \xE2\x80\xA8 \xE2\x80\xAE");
  REQUIRE(line.find(R"("msg":"bad \ufffd\ufffd café \u0085 \u2028 \u202e")") != std::string::npos);
}

TEST_CASE("Human log lines escape what could forge a line or repaint the terminal", "[log]") {
  spdlog::details::log_msg msg(spdlog::source_loc{}, "outboxd", spdlog::level::warn,
                               "parked row 7 (message_id a\nFAKE error) headers.\x1b[2Jk: \xFF ok");
  msg.time = spdlog::log_clock::time_point(std::chrono::milliseconds(1700000000123));
  spdlog::memory_buf_t out;
  outboxd::log::human_formatter()->format(msg, out);
  REQUIRE(std::string(out.data(), out.size()) ==
          "2023-11-14T22:13:20.123Z warning parked row 7 (message_id a\\nFAKE error) headers.\\x1b[2Jk: \\xff ok\n");
}
