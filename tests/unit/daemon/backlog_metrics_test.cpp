// Unit tests of the backlog series: what a measurement shows, drained destinations ending at 0, the bound on series.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "daemon/run/backlog_metrics.hpp"

using namespace outboxd;
using daemon::BacklogMetrics;

namespace {

pg::DestinationBacklog destination(std::string name, std::int64_t due = 0) {
  pg::DestinationBacklog d;
  d.destination = std::move(name);
  d.due = due;
  return d;
}

std::vector<std::string> names(const std::vector<pg::DestinationBacklog>& list) {
  std::vector<std::string> out;
  for (const auto& d : list) out.push_back(d.destination);
  return out;
}

bool contains(const std::string& text, const std::string& line) { return text.find(line + "\n") != std::string::npos; }

}  // namespace

TEST_CASE("Backlog: destinations shown before and drained since stay, at zero, while there is room",
          "[daemon][backlog]") {
  const auto shown = daemon::with_drained({destination("orders", 3)}, {"billing", "orders", "audit"}, 3);
  REQUIRE(names(shown) == std::vector<std::string>{"audit", "billing", "orders"});
  CHECK(shown[0].due == 0);
  CHECK(shown[2].due == 3);
  CHECK_FALSE(shown[0].next_due_in.has_value());

  const auto bounded = daemon::with_drained({destination("b"), destination("c")}, {"a", "d"}, 3);
  CHECK(names(bounded) == std::vector<std::string>{"a", "b", "c"});
  const auto measured_first = daemon::with_drained({destination("b"), destination("c")}, {"a"}, 2);
  CHECK(names(measured_first) == std::vector<std::string>{"b", "c"});
}

TEST_CASE("Backlog: a measurement becomes series per destination and state", "[daemon][backlog]") {
  metrics::Registry registry;
  BacklogMetrics backlog(registry);
  pg::BacklogReport report;
  auto orders = destination("orders", 7);
  orders.scheduled = 2;
  orders.retrying = 1;
  orders.parked = 4;
  orders.oldest_due_age = 12.5;
  orders.next_due_in = 60;
  report.destinations = {orders, destination("audit")};
  report.left_out = 3;
  backlog.publish(report);

  const auto text = registry.render();
  CHECK(contains(text, "outboxd_backlog_rows{destination=\"orders\",state=\"due\"} 7"));
  CHECK(contains(text, "outboxd_backlog_rows{destination=\"orders\",state=\"scheduled\"} 2"));
  CHECK(contains(text, "outboxd_backlog_rows{destination=\"orders\",state=\"retrying\"} 1"));
  CHECK(contains(text, "outboxd_backlog_rows{destination=\"orders\",state=\"parked\"} 4"));
  CHECK(contains(text, "outboxd_backlog_oldest_due_age_seconds{destination=\"orders\"} 12.5"));
  CHECK(contains(text, "outboxd_backlog_next_due_seconds{destination=\"orders\"} 60"));
  CHECK_FALSE(contains(text, "outboxd_backlog_next_due_seconds{destination=\"audit\"} 0"));
  CHECK(contains(text, "outboxd_backlog_destinations_truncated 3"));

  SECTION("drained, they read 0 at the next measurement") {
    backlog.publish({});
    const auto drained = registry.render();
    CHECK(contains(drained, "outboxd_backlog_rows{destination=\"orders\",state=\"due\"} 0"));
    CHECK(contains(drained, "outboxd_backlog_oldest_due_age_seconds{destination=\"orders\"} 0"));
    CHECK_FALSE(contains(drained, "outboxd_backlog_next_due_seconds{destination=\"orders\"} 60"));
    CHECK(contains(drained, "outboxd_backlog_destinations_truncated 0"));
  }
  SECTION("turned off, no series remain") {
    backlog.clear();
    CHECK(registry.render().find("destination=") == std::string::npos);
  }
}

TEST_CASE("Backlog: never more destinations than the bound, whatever was shown before", "[daemon][backlog]") {
  metrics::Registry registry;
  BacklogMetrics backlog(registry);
  for (int round = 0; round < 3; ++round) {
    pg::BacklogReport report;
    for (int i = 0; i < BacklogMetrics::kMaxDestinations; ++i) {
      report.destinations.push_back(destination(std::string("d").append(std::to_string(round)).append("-").append(std::to_string(i)), 1));
    }
    backlog.publish(report);
  }
  const auto text = registry.render();
  std::size_t series = 0;
  for (auto at = text.find("outboxd_backlog_oldest_due_age_seconds{"); at != std::string::npos;
       at = text.find("outboxd_backlog_oldest_due_age_seconds{", at + 1)) {
    ++series;
  }
  CHECK(series == static_cast<std::size_t>(BacklogMetrics::kMaxDestinations));
  CHECK(contains(text, "outboxd_backlog_rows{destination=\"d2-0\",state=\"due\"} 1"));
  CHECK_FALSE(contains(text, "outboxd_backlog_rows{destination=\"d1-0\",state=\"due\"} 0"));
}
