// Unit tests of the metric registry: exact Prometheus text, families, label sets, concurrency.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "metrics/registry.hpp"

using namespace outboxd::metrics;

TEST_CASE("Counters and gauges render as HELP, TYPE and one sample line", "[metrics]") {
  Registry registry;
  Counter& published = registry.counter("outboxd_published_total", "Messages the broker accepted.");
  Gauge& in_flight = registry.gauge("outboxd_in_flight", "Messages sent and not yet settled.");
  published.inc();
  published.inc(41);
  in_flight.set(7);
  in_flight.add(-10);

  REQUIRE(published.value() == 42);
  REQUIRE(in_flight.value() == -3);
  REQUIRE(registry.render() ==
          "# HELP outboxd_published_total Messages the broker accepted.\n"
          "# TYPE outboxd_published_total counter\n"
          "outboxd_published_total 42\n"
          "# HELP outboxd_in_flight Messages sent and not yet settled.\n"
          "# TYPE outboxd_in_flight gauge\n"
          "outboxd_in_flight -3\n");
}

TEST_CASE("An empty registry renders nothing", "[metrics]") {
  Registry registry;
  REQUIRE(registry.render().empty());
}

TEST_CASE("One name with several label sets is one family", "[metrics]") {
  Registry registry;
  Counter& orders = registry.counter("outboxd_failed_total", "Failed publishes.",
                                     {{"destination", "orders"}, {"reason", "rejected"}});
  Counter& invoices = registry.counter("outboxd_failed_total", "Failed publishes.",
                                       {{"destination", "invoices"}, {"reason", "released"}});
  orders.inc(2);
  invoices.inc(5);

  REQUIRE(&orders != &invoices);
  REQUIRE(registry.render() ==
          "# HELP outboxd_failed_total Failed publishes.\n"
          "# TYPE outboxd_failed_total counter\n"
          "outboxd_failed_total{destination=\"orders\",reason=\"rejected\"} 2\n"
          "outboxd_failed_total{destination=\"invoices\",reason=\"released\"} 5\n");
}

TEST_CASE("Asking again for a registered series returns the same object", "[metrics]") {
  Registry registry;
  Gauge& first = registry.gauge("outboxd_leases", "Partitions leased.", {{"instance", "a"}});
  first.set(3);
  Gauge& again = registry.gauge("outboxd_leases", "Partitions leased.", {{"instance", "a"}});
  REQUIRE(&first == &again);
  REQUIRE(again.value() == 3);
  Counter& plain = registry.counter("outboxd_claims_total", "Claims.");
  REQUIRE(&plain == &registry.counter("outboxd_claims_total", "Claims."));
}

TEST_CASE("References stay valid while many more metrics are registered", "[metrics]") {
  Registry registry;
  Counter& early = registry.counter("outboxd_early_total", "First.");
  for (int i = 0; i < 500; ++i) {
    registry.counter("outboxd_series_total", "Many.", {{"n", std::to_string(i)}}).inc();
    registry.gauge("outboxd_g" + std::to_string(i), "Many families.").set(i);
  }
  early.inc(9);
  REQUIRE(early.value() == 9);
  REQUIRE(registry.render().rfind("outboxd_early_total 9\n", 200) != std::string::npos);
}

TEST_CASE("Label values and help text are escaped", "[metrics]") {
  Registry registry;
  registry.counter("outboxd_odd_total", "Back\\slash and\nnewline, \"quotes\" kept.",
                   {{"path", "C:\\dir"}, {"text", "say \"hi\"\nbye"}})
      .inc();
  REQUIRE(registry.render() ==
          "# HELP outboxd_odd_total Back\\\\slash and\\nnewline, \"quotes\" kept.\n"
          "# TYPE outboxd_odd_total counter\n"
          "outboxd_odd_total{path=\"C:\\\\dir\",text=\"say \\\"hi\\\"\\nbye\"} 1\n");
}

TEST_CASE("Counter values use the full unsigned 64-bit range", "[metrics]") {
  Registry registry;
  Counter& big = registry.counter("outboxd_bytes_total", "Bytes.");
  big.inc(18446744073709551615ULL);
  REQUIRE(registry.render().find("outboxd_bytes_total 18446744073709551615\n") != std::string::npos);
}

TEST_CASE("Histogram renders cumulative buckets, sum and count", "[metrics]") {
  Registry registry;
  Histogram& latency = registry.histogram("outboxd_publish_seconds", "Publish to settlement.",
                                          {{"destination", "orders"}}, {0.01, 0.1, 1});
  latency.observe(0.005);
  latency.observe(0.01);  // on the bound: counts in that bucket
  latency.observe(0.25);
  latency.observe(3);

  REQUIRE(latency.count() == 4);
  REQUIRE(latency.sum() == Approx(3.265));
  REQUIRE(registry.render() ==
          "# HELP outboxd_publish_seconds Publish to settlement.\n"
          "# TYPE outboxd_publish_seconds histogram\n"
          "outboxd_publish_seconds_bucket{destination=\"orders\",le=\"0.01\"} 2\n"
          "outboxd_publish_seconds_bucket{destination=\"orders\",le=\"0.1\"} 2\n"
          "outboxd_publish_seconds_bucket{destination=\"orders\",le=\"1\"} 3\n"
          "outboxd_publish_seconds_bucket{destination=\"orders\",le=\"+Inf\"} 4\n"
          "outboxd_publish_seconds_sum{destination=\"orders\"} 3.265\n"
          "outboxd_publish_seconds_count{destination=\"orders\"} 4\n");
}

TEST_CASE("Histogram without labels and with default buckets", "[metrics]") {
  Registry registry;
  Histogram& claim = registry.histogram("outboxd_claim_seconds", "Claim statement.");
  REQUIRE(claim.bounds() == default_duration_buckets());
  claim.observe(0.5);
  claim.observe(std::numeric_limits<double>::quiet_NaN());  // ignored
  REQUIRE(registry.render() ==
          "# HELP outboxd_claim_seconds Claim statement.\n"
          "# TYPE outboxd_claim_seconds histogram\n"
          "outboxd_claim_seconds_bucket{le=\"0.005\"} 0\n"
          "outboxd_claim_seconds_bucket{le=\"0.01\"} 0\n"
          "outboxd_claim_seconds_bucket{le=\"0.025\"} 0\n"
          "outboxd_claim_seconds_bucket{le=\"0.05\"} 0\n"
          "outboxd_claim_seconds_bucket{le=\"0.1\"} 0\n"
          "outboxd_claim_seconds_bucket{le=\"0.25\"} 0\n"
          "outboxd_claim_seconds_bucket{le=\"0.5\"} 1\n"
          "outboxd_claim_seconds_bucket{le=\"1\"} 1\n"
          "outboxd_claim_seconds_bucket{le=\"2.5\"} 1\n"
          "outboxd_claim_seconds_bucket{le=\"5\"} 1\n"
          "outboxd_claim_seconds_bucket{le=\"10\"} 1\n"
          "outboxd_claim_seconds_bucket{le=\"+Inf\"} 1\n"
          "outboxd_claim_seconds_sum 0.5\n"
          "outboxd_claim_seconds_count 1\n");
}

TEST_CASE("Metric and label names are checked against the Prometheus grammar", "[metrics]") {
  CHECK(valid_metric_name("outboxd_published_total"));
  CHECK(valid_metric_name("job:rate5m"));
  CHECK(valid_metric_name("_x"));
  CHECK(valid_metric_name(":x"));
  CHECK_FALSE(valid_metric_name(""));
  CHECK_FALSE(valid_metric_name("1x"));
  CHECK_FALSE(valid_metric_name("outboxd-published"));
  CHECK_FALSE(valid_metric_name("outboxd published"));
  CHECK_FALSE(valid_metric_name("caf\xc3\xa9"));

  CHECK(valid_label_name("destination"));
  CHECK(valid_label_name("_x9"));
  CHECK_FALSE(valid_label_name(""));
  CHECK_FALSE(valid_label_name("a:b"));
  CHECK_FALSE(valid_label_name("9a"));
  CHECK_FALSE(valid_label_name("__name__"));
  CHECK_FALSE(valid_label_name("dest-name"));
}

TEST_CASE("Concurrent increments of one counter are all counted", "[metrics]") {
  Registry registry;
  constexpr int kThreads = 8;
  constexpr int kIncrements = 20000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&registry] {
      // Registration races too: every thread must get the same counter.
      Counter& shared = registry.counter("outboxd_race_total", "Raced.", {{"k", "v"}});
      Gauge& level = registry.gauge("outboxd_race_level", "Raced.");
      Histogram& seen = registry.histogram("outboxd_race_seconds", "Raced.", {}, {1});
      for (int i = 0; i < kIncrements; ++i) {
        shared.inc();
        level.add(1);
        seen.observe(0.5);
        if (i % 1000 == 0) (void)registry.render();
      }
    });
  }
  for (auto& thread : threads) thread.join();

  const auto total = static_cast<std::uint64_t>(kThreads) * kIncrements;
  REQUIRE(registry.counter("outboxd_race_total", "Raced.", {{"k", "v"}}).value() == total);
  REQUIRE(registry.gauge("outboxd_race_level", "Raced.").value() == static_cast<std::int64_t>(total));
  Histogram& seen = registry.histogram("outboxd_race_seconds", "Raced.", {}, {1});
  REQUIRE(seen.count() == total);
  REQUIRE(seen.sum() == Approx(0.5 * static_cast<double>(total)));
  REQUIRE(registry.render().find("outboxd_race_total{k=\"v\"} 160000\n") != std::string::npos);
}

TEST_CASE("A gauge set renders the samples of its last replace, label values escaped", "[metrics]") {
  Registry registry;
  GaugeSet& lag = registry.gauge_set("outboxd_lag_seconds", "Lag per destination.");
  REQUIRE(registry.render() ==
          "# HELP outboxd_lag_seconds Lag per destination.\n"
          "# TYPE outboxd_lag_seconds gauge\n");
  lag.replace({{{{"destination", "orders"}}, 1.5}, {{{"destination", "a\"b\\c\nd"}}, 0}});
  REQUIRE(registry.render() ==
          "# HELP outboxd_lag_seconds Lag per destination.\n"
          "# TYPE outboxd_lag_seconds gauge\n"
          "outboxd_lag_seconds{destination=\"orders\"} 1.5\n"
          "outboxd_lag_seconds{destination=\"a\\\"b\\\\c\\nd\"} 0\n");
  lag.replace({{{{"destination", "invoices"}}, 2}});
  REQUIRE(registry.render() ==
          "# HELP outboxd_lag_seconds Lag per destination.\n"
          "# TYPE outboxd_lag_seconds gauge\n"
          "outboxd_lag_seconds{destination=\"invoices\"} 2\n");
  REQUIRE(&registry.gauge_set("outboxd_lag_seconds", "Lag per destination.") == &lag);
}
