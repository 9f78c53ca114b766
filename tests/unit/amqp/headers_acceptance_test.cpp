// The header rule shared with the SQL: every case of tests/acceptance/headers.tsv, through the daemon's mapper.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include "amqp/detail/headers_mapping.hpp"
#include "amqp/message_mapping.hpp"

namespace {

struct Case {
  bool accept = false;
  std::string headers;
  std::string why;
};

std::vector<Case> read_cases() {
  std::ifstream in(std::string(OUTBOXD_SOURCE_DIR) + "/tests/acceptance/headers.tsv");
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line.front() == '#') continue;
    const auto first = line.find('\t');
    const auto second = line.find('\t', first + 1);
    cases.push_back({line.substr(0, first) == "accept", line.substr(first + 1, second - first - 1),
                     line.substr(second + 1)});
  }
  return cases;
}

// The first key of a case's document, ASCII lower-cased: {"X-Death": 1} -> x-death.
std::string folded_key(const std::string& headers) {
  const auto open = headers.find('"');
  const auto close = open == std::string::npos ? open : headers.find('"', open + 1);
  std::string key = close == std::string::npos ? std::string() : headers.substr(open + 1, close - open - 1);
  for (char& c : key) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  return key;
}

// How many reserved entries refuse `key`.
int reserved_matches(const std::string& key) {
  int matches = 0;
  for (const auto prefix : outboxd::amqp::reserved_header_prefixes()) matches += key.starts_with(prefix) ? 1 : 0;
  for (const auto whole : outboxd::amqp::reserved_header_keys()) matches += key == whole ? 1 : 0;
  return matches;
}

}  // namespace

TEST_CASE("headers: the mapper accepts exactly the documents the SQL accepts", "[amqp]") {
  const auto cases = read_cases();
  REQUIRE(cases.size() > 30);
  outboxd::amqp::MessageEncoder encoder;
  for (const auto& c : cases) {
    outboxd::core::OutboxMessage row;
    row.message_id = "m";
    row.destination = "orders";
    row.headers_json = c.headers;
    const auto encoded = encoder.encode(row, outboxd::config::BrokerProfile::generic);
    INFO(c.headers << " (" << c.why << ")" << (encoded ? "" : ": " + encoded.error().message));
    CHECK(encoded.ok() == c.accept);
    if (!encoded) {
      // Keys are shown escaped: no raw control character reaches a log line.
      for (const char ch : encoded.error().message) CHECK(static_cast<unsigned char>(ch) >= 0x20);
    }
  }
}

// A reserved prefix without a case would go untested on one side (the SQL
// keeps its own list): each gets a refused case that it alone refuses.
TEST_CASE("headers: every reserved prefix and key has a case of its own", "[amqp]") {
  const auto cases = read_cases();
  const auto has_case = [&cases](std::string_view reserved, bool whole) {
    for (const auto& c : cases) {
      const std::string key = folded_key(c.headers);
      const bool matches = whole ? key == reserved : key.starts_with(reserved);
      if (!c.accept && matches && reserved_matches(key) == 1) return true;
    }
    return false;
  };
  for (const auto prefix : outboxd::amqp::reserved_header_prefixes()) {
    INFO("prefix " << prefix);
    CHECK(has_case(prefix, false));
  }
  for (const auto key : outboxd::amqp::reserved_header_keys()) {
    INFO("key " << key);
    CHECK(has_case(key, true));
  }
}
