// Shared set-up for the planner tests: a manual clock, a pinned random source, short helpers.
#pragma once

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/clock.hpp"
#include "core/outbox_message.hpp"
#include "dispatch/planner.hpp"

namespace outboxd::dispatch::test {

using namespace std::chrono_literals;
using Ids = std::vector<core::RowId>;

// Jitter 0.2; with the default draw of 0.5 the factor is exactly 1, so the
// delays are 100ms, 200ms, 400ms, ...
inline PlannerPolicy test_policy() {
  PlannerPolicy policy;
  policy.window = 100;
  policy.per_session_in_flight = 1;
  policy.max_buffered = 1000;
  policy.max_attempts = 5;
  policy.backoff = {100ms, 10s, 2.0, 0.2};
  policy.release_retry = 50ms;
  policy.releases_per_attempt = 3;
  return policy;
}

// "s" + std::to_string(n) trips a false -Wrestrict in g++ 12 at -O3; appending does not.
inline std::string numbered(const char* prefix, long long n) {
  std::string text(prefix);
  text += std::to_string(n);
  return text;
}

// What the planner tests say about a row: its id, session ("" for none), persisted attempts, partition and writer.
struct RowRef {
  core::RowId id = 0;
  std::string session;
  int attempts = 0;
  int partition = 0;
  std::optional<std::string> writer = std::nullopt;
  std::string destination;
};

inline RowRef row(core::RowId id, std::string session = "", int attempts = 0, int partition = 0) {
  return {id, std::move(session), attempts, partition, std::nullopt, ""};
}

// A row of `destination`.
inline RowRef to(const char* destination, core::RowId id, std::string session = "") {
  RowRef ref = row(id, std::move(session));
  ref.destination = destination;
  return ref;
}

// The row as `writer` wrote it; row() alone is a row without writer (written before 009).
inline RowRef written_by(std::string writer, RowRef ref) {
  ref.writer = std::move(writer);
  return ref;
}

// The rows as the planner holds them, without payload.
inline std::vector<HeldRow> held(const std::vector<RowRef>& rows) {
  std::vector<HeldRow> out;
  out.reserve(rows.size());
  for (const RowRef& ref : rows) {
    HeldRow h;
    h.message.id = ref.id;
    if (!ref.session.empty()) h.message.session_id = ref.session;
    h.message.writer = ref.writer;
    h.message.attempts = ref.attempts;
    h.message.partition = ref.partition;
    h.message.destination = ref.destination;
    out.push_back(std::move(h));
  }
  return out;
}

struct PlannerFixture {
  explicit PlannerFixture(PlannerPolicy with = test_policy()) : policy(with), planner(with, clock, random) {}

  std::size_t add(std::initializer_list<RowRef> rows) { return planner.add(held(std::vector<RowRef>(rows))); }
  Ids take() { return planner.take_ready(); }
  void accept(core::RowId id) { planner.on_outcome(id, core::DeliveryOutcome::accepted, ""); }
  void reject(core::RowId id, std::string_view reason = "rejected by test") {
    planner.on_outcome(id, core::DeliveryOutcome::rejected, reason);
  }
  void release(core::RowId id, std::string_view reason = "") {
    planner.on_outcome(id, core::DeliveryOutcome::released, reason);
  }
  void lose(core::RowId id, std::string_view reason = "") {
    planner.on_outcome(id, core::DeliveryOutcome::unknown, reason);
  }
  const std::vector<FailureWrite>& failures() const { return planner.pending_writes().failures; }
  const Ids& dispatched() const { return planner.pending_writes().dispatched; }

  core::ManualClock clock;
  core::FixedRandom random{0.5};
  PlannerPolicy policy;
  Planner planner;
};

}  // namespace outboxd::dispatch::test
