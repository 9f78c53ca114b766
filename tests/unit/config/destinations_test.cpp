// destinations: the operator's delivery policy by destination, read and checked all at once.
#include <catch2/catch.hpp>

#include "config/loader.hpp"

using namespace outboxd::config;

namespace {

using Strings = std::vector<std::string>;

const std::string kBase =
    "database:\n  url: postgresql://outboxd@db/app\n"
    "broker:\n  url: amqp://127.0.0.1:5672\n";

Strings messages_of(const std::string& yaml) {
  const auto result = load_string(yaml, "policy.yaml");
  Strings out;
  for (const auto& diagnostic : result.diagnostics()) out.push_back(diagnostic.to_string_without_file());
  return out;
}

}  // namespace

TEST_CASE("destinations: each item's priority, rate, burst and in-flight limit", "[config][destinations]") {
  auto result = load_string(kBase +
                                "destinations:\n"
                                "  - name: payments\n"
                                "    priority: 10\n"
                                "  - name: partner-api\n"
                                "    max_rate: 200\n"
                                "    burst: 5\n"
                                "    max_in_flight: 50\n",
                            "policy.yaml");
  INFO(result.error_text());
  REQUIRE(result.ok());
  const auto& destinations = result.value().destinations;
  REQUIRE(destinations.size() == 2);
  CHECK(destinations[0] == DestinationEntry{"payments", 10, 0, 0, 0});
  CHECK(destinations[1] == DestinationEntry{"partner-api", 0, 200, 5, 50});
}

TEST_CASE("destinations: mistakes are reported at their place, all at once", "[config][destinations]") {
  CHECK(messages_of(kBase +
                    "destinations:\n"
                    "  - name: a\n"
                    "    priority: 5000\n"
                    "  - name: a\n"
                    "    priority: 1\n"
                    "  - name: b\n"
                    "    burst: 10\n"
                    "  - name: c\n"
                    "  - priority: 2\n"
                    "  - name: d\n"
                    "    max_rate: 0\n"
                    "    max_in_flight: 0\n"
                    "    max_rat: 5\n") ==
        Strings{
            "7:15: destinations[0].priority: must be between -1000 and 1000, got 5000",
            "8:11: destinations[1].name: names a destination listed before: one item per destination",
            "11:12: destinations[2].burst: goes with max_rate, which is not set",
            "12:11: destinations[3].name: sets nothing: give priority, max_rate or max_in_flight",
            "13:5: destinations[4]: missing required key \"name\"",
            "15:15: destinations[5].max_rate: must be between 0.001 and 1000000, got 0",
            "16:20: destinations[5].max_in_flight: must be between 1 and 1000000, got 0",
            "17:5: destinations[5].max_rat: unknown key \"max_rat\" (did you mean \"max_rate\"?)"});
}
