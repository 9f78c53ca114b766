// The header rule shared with the SQL: every case of tests/acceptance/headers.tsv, through the daemon's mapper.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

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
