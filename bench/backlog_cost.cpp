// The cost of the backlog measurement of /metrics: the daemon's two statements, timed, and their plans with buffers.
//
// usage: backlog_cost -c CONFIG [RUNS]   (default 11 runs of each)
// Give it the daemon's config: it connects as the dispatcher role and asks
// about every partition, as a single instance leasing them all does. For
// each statement, prints the plan of one EXPLAIN (ANALYZE, BUFFERS) run of
// the generic plan the daemon runs (the daemon's connection settings), then one
// line: `backlog_cost statement=S runs=N median_ms=M min_ms=A max_ms=B
// destinations=D left_out=L beyond_bound=0|1`. First `backlog`, which ranks
// the destinations past 20; then `backlog_of`, the measurement between two
// rankings, of the destinations the ranking chose (the daemon runs it only
// past 20 destinations; with fewer it lists them all, as `backlog` does).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "dispatcher_tool.hpp"
#include "daemon/run/backlog_metrics.hpp"
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

// 'text' for EXECUTE, which takes no bound parameters (standard_conforming_strings: only quotes are doubled).
std::string literal(const std::string& text) {
  std::string out = "'";
  for (const char c : text) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// The statement as OutboxStore runs it: prepared, with the same parameters.
int print_plan(pg::Connection& connection, const std::string& name, const std::string& sql,
               const std::vector<std::string>& params) {
  if (auto prepared = connection.exec("PREPARE " + name + " AS " + sql); !prepared) {
    return fail(prepared.error().message);
  }
  std::string args;
  for (const auto& param : params) args += (args.empty() ? "" : ", ") + literal(param);
  auto plan = connection.exec("EXPLAIN (ANALYZE, BUFFERS) EXECUTE " + name + "(" + args + ")");
  if (!plan) return fail(plan.error().message);
  for (int i = 0; i < plan.value().size(); ++i) std::printf("%s\n", std::string(plan.value().text(i, 0)).c_str());
  return 0;
}

// Times `runs` calls of `measure`; prints the summary line and returns the last report.
core::Result<pg::BacklogReport> time_runs(const char* statement, int runs,
                                          const std::function<core::Result<pg::BacklogReport>()>& measure) {
  std::vector<double> ms;
  pg::BacklogReport last;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto report = measure();
    if (!report) return report.error();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    last = std::move(report).value();
  }
  std::sort(ms.begin(), ms.end());
  std::printf("backlog_cost statement=%s runs=%d median_ms=%.2f min_ms=%.2f max_ms=%.2f destinations=%zu "
              "left_out=%lld beyond_bound=%d\n",
              statement, runs, ms[ms.size() / 2], ms.front(), ms.back(), last.destinations.size(),
              static_cast<long long>(last.left_out), last.beyond_bound ? 1 : 0);
  return last;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  auto tool = bench::open_dispatcher_tool(argc, argv, "backlog_cost", exit_code);
  if (!tool) return exit_code;
  const std::string& schema = tool->schema;
  const int runs = tool->runs;
  const auto& partitions = tool->partitions;
  pg::Connection& connection = tool->connection;
  pg::OutboxStore store(connection, schema);
  const std::string table = pg::quote_ident(schema) + ".messages";
  const int cap = daemon::BacklogMetrics::kCountCap;
  const int max = daemon::BacklogMetrics::kMaxDestinations;
  const std::vector<std::string> params = {pg::int_array_literal(partitions), std::to_string(cap),
                                           std::to_string(max)};

  if (int failed = print_plan(connection, "backlog_cost_backlog",
                              pg::outbox_sql::backlog(pg::quote_ident(schema), table), params)) {
    return failed;
  }
  auto ranked = time_runs("backlog", runs, [&] { return store.backlog(partitions, cap, max); });
  if (!ranked) return fail(ranked.error().message);

  std::vector<std::string> chosen;
  for (const auto& d : ranked.value().destinations) chosen.push_back(d.destination);
  auto with_chosen = params;
  with_chosen.push_back(pg::text_array_literal(chosen));
  if (int failed = print_plan(connection, "backlog_cost_backlog_of", pg::outbox_sql::backlog_of(table),
                              with_chosen)) {
    return failed;
  }
  auto between = time_runs("backlog_of", runs, [&] { return store.backlog_of(partitions, cap, max, chosen); });
  if (!between) return fail(between.error().message);
  return 0;
}
