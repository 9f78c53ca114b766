// The cost of the backlog measurement of /metrics: the daemon's own statement, timed, and its plan with buffers.
//
// usage: backlog_cost -c CONFIG [RUNS]   (default 11 runs)
// Give it the daemon's config: it connects as the dispatcher role and asks
// about every partition, as a single instance holding them all does. Prints
// the plan of one EXPLAIN (ANALYZE, BUFFERS) run, then one line:
// `backlog_cost runs=N median_ms=M min_ms=A max_ms=B destinations=D`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "config/loader.hpp"
#include "daemon/backlog_metrics.hpp"
#include "pg/connection.hpp"
#include "pg/outbox_sql.hpp"
#include "pg/outbox_store.hpp"
#include "pg/text_codec.hpp"

namespace {

using namespace outboxd;

int fail(const std::string& what) {
  std::fprintf(stderr, "backlog_cost: %s\n", what.c_str());
  return 1;
}

std::vector<int> every_partition(pg::Connection& connection, const std::string& schema) {
  auto rows = connection.exec("SELECT partition_count FROM " + pg::quote_ident(schema) + ".settings");
  std::vector<int> partitions;
  const auto count = rows ? rows.value().int64(0, 0) : 0;
  for (int p = 0; p < count; ++p) partitions.push_back(p);
  return partitions;
}

// The statement as OutboxStore runs it, with the same parameters.
int print_plan(pg::Connection& connection, const std::string& schema, const std::vector<int>& partitions) {
  const std::string sql = pg::outbox_sql::backlog(pg::quote_ident(schema), pg::quote_ident(schema) + ".messages");
  auto plan = connection.exec_params("EXPLAIN (ANALYZE, BUFFERS) " + sql,
                                     {pg::int_array_literal(partitions),
                                      std::to_string(daemon::BacklogMetrics::kCountCap),
                                      std::to_string(daemon::BacklogMetrics::kMaxDestinations)});
  if (!plan) return fail(plan.error().message);
  for (int i = 0; i < plan.value().size(); ++i) std::printf("%s\n", std::string(plan.value().text(i, 0)).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4 || std::string(argv[1]) != "-c") {
    std::fprintf(stderr, "usage: %s -c CONFIG [RUNS]\n", argv[0]);
    return 2;
  }
  const int runs = argc == 4 ? std::max(1, std::atoi(argv[3])) : 11;
  auto config = config::load_file(argv[2]);
  if (!config) return fail(config.error_text());
  const std::string& schema = config.value().outbox.schema;
  auto connection = pg::Connection::open(config.value().database, "outboxd backlog_cost");
  if (!connection) return fail(connection.error().message);
  pg::OutboxStore store(connection.value(), schema);
  const auto partitions = every_partition(connection.value(), schema);
  if (int failed = print_plan(connection.value(), schema, partitions)) return failed;
  std::vector<double> ms;
  std::size_t destinations = 0;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto report = store.backlog(partitions, daemon::BacklogMetrics::kCountCap, daemon::BacklogMetrics::kMaxDestinations);
    if (!report) return fail(report.error().message);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    destinations = report.value().destinations.size();
  }
  std::sort(ms.begin(), ms.end());
  std::printf("backlog_cost runs=%d median_ms=%.2f min_ms=%.2f max_ms=%.2f destinations=%zu\n", runs,
              ms[ms.size() / 2], ms.front(), ms.back(), destinations);
  return 0;
}
