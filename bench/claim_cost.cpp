// The claim's cost in a backlog: the daemon's claim statements, timed, without and with the claim by destination.
//
// usage: claim_cost -c CONFIG [RUNS]   (default 11 runs of each)
// Give it the daemon's config: it connects as the dispatcher role and claims
// for every partition, as a single instance leasing them all does, and marks
// nothing, so every run reads the same rows. First the claim as the daemon
// makes it outside a backlog (1,000 rows in id order); then as it makes it
// in one (875 in id order, and up to 125 from the other destinations than
// the first claim's, in turn from the first name). One line each:
// `claim_cost claim=plain|lanes runs=N median_ms=M min_ms=A max_ms=B rows=R lane_rows=L`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dispatcher_tool.hpp"
#include "dispatch/claim_merge.hpp"
#include "pg/connection.hpp"
#include "pg/outbox_store.hpp"
#include "pg/text_codec.hpp"

namespace {

using namespace outboxd;

int fail(const std::string& what) {
  std::fprintf(stderr, "claim_cost: %s\n", what.c_str());
  return 1;
}

// Times `runs` claims; prints the summary line. False on a database error.
bool time_claims(pg::OutboxStore& store, const char* label, int runs, const std::vector<int>& partitions,
                 int limit, const core::LaneRequest& lanes) {
  std::vector<double> ms;
  std::size_t rows = 0, lane_rows = 0;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    auto sets = store.claim(partitions, limit, 0, {}, {}, lanes);
    if (!sets) {
      fail(sets.error().message);
      return false;
    }
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    rows = sets.value().immediate.rows.size();
    lane_rows = sets.value().lanes.rows.size();
  }
  std::sort(ms.begin(), ms.end());
  std::printf("claim_cost claim=%s runs=%d median_ms=%.2f min_ms=%.2f max_ms=%.2f rows=%zu lane_rows=%zu\n", label,
              runs, ms[ms.size() / 2], ms.front(), ms.back(), rows, lane_rows);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int exit_code = 0;
  auto tool = bench::open_dispatcher_tool(argc, argv, "claim_cost", exit_code);
  if (!tool) return exit_code;
  const int runs = tool->runs;
  const auto& partitions = tool->partitions;
  pg::OutboxStore store(tool->connection, tool->schema);
  if (auto prepared = store.prepare(); !prepared) return fail(prepared.error().message);

  constexpr int kBatch = 1000;
  if (!time_claims(store, "plain", runs, partitions, kBatch, {})) return 1;
  // The backlog's destinations, as the daemon learns them from a full claim.
  auto first = store.claim(partitions, kBatch);
  if (!first) return fail(first.error().message);
  const auto claim = dispatch::merge_claim(std::move(first).value(), kBatch);
  const core::LaneRequest lanes{kBatch / 8, kBatch / 16, "", claim.backlog_destinations};
  return time_claims(store, "lanes", runs, partitions, kBatch - kBatch / 8, lanes) ? 0 : 1;
}
