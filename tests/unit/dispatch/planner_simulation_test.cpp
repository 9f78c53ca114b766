// Randomised runs of the planner against a reference model of its rules and a simulated outbox table.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/clock.hpp"
#include "dispatch/planner.hpp"
#include "planner_fixture.hpp"

namespace {

using namespace std::chrono_literals;
using outboxd::core::DeliveryOutcome;
using outboxd::core::Duration;
using outboxd::core::RowId;
using outboxd::core::SteadyTime;
using outboxd::dispatch::Planner;
using outboxd::dispatch::PlannerPolicy;
using outboxd::dispatch::test::RowRef;
using outboxd::dispatch::test::numbered;

struct Scenario {
  std::size_t per_session;
  bool late_commits;   // rows become visible out of id order, within blocks of 50
  int max_attempts;
  double poison_share;  // rows the broker always rejects
  std::uint64_t seed;
  // Each session id's rows dealt among two writers and none (written before
  // 009), three sessions to the rules; otherwise no row has a writer.
  bool shared_session_ids;
};

constexpr int kSessions = 200;
constexpr int kRowsPerSession = 20;
constexpr int kLooseRows = 200;  // rows without a session
constexpr std::size_t kWindow = 64;

enum class Status { pending, dispatched, parked };

// The outbox table as the claim sees it.
struct DbRow {
  std::string session;
  std::optional<std::string> writer;
  std::string scope;  // the session as the rules see it: session id and writer; empty without session id
  Status status = Status::pending;
  int attempts = 0;
  SteadyTime next_attempt{};
  bool poison = false;
};

// The session as the rules see it: one writer's (or no writer's) rows of a session id.
std::string scope_of(const std::string& session, const std::optional<std::string>& writer) {
  if (session.empty()) return session;
  return session + "|" + writer.value_or("(none)");
}

// What the planner should hold, derived from the rules alone.
struct ModelRow {
  std::string session;  // scope_of()
  int attempts = 0;
  int releases = 0;
  SteadyTime retry_at{};
  bool in_flight = false;
  bool orphan = false;
};

struct ModelSession {
  std::set<RowId> returned;  // back from the broker: go first
  std::set<RowId> fresh;
  std::size_t in_flight = 0;
  bool parked = false;
};

class Simulation {
 public:
  explicit Simulation(const Scenario& scenario)
      : scenario_(scenario), gen_(scenario.seed), jitter_(scenario.seed + 1), planner_(policy(), clock_, jitter_) {
    build_table();
  }

  void run() {
    for (int step = 0; step < 50'000 && !finished(); ++step) {
      commit_some();
      if (chance(0.3) || planner_.buffered() == 0) claim();
      const bool took = take();
      resolve_some();
      if (chance(0.5)) persist();
      advance_time(took);
    }
    persist();
    REQUIRE(finished());
    check_final();
  }

 private:
  PlannerPolicy policy() const {
    PlannerPolicy p;
    p.window = kWindow;
    p.per_session_in_flight = scenario_.per_session;
    p.max_buffered = 100'000;
    p.max_attempts = scenario_.max_attempts;
    p.backoff = {10ms, 200ms, 2.0, 0.5};
    p.release_retry = 5ms;
    p.releases_per_attempt = 4;
    return p;
  }

  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(gen_) < p; }
  std::size_t below(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(gen_); }

  void build_table() {
    std::vector<std::string> labels;
    for (int s = 0; s < kSessions; ++s) {
      for (int i = 0; i < kRowsPerSession; ++i) labels.push_back(numbered("s", s));
    }
    labels.resize(labels.size() + kLooseRows);
    std::shuffle(labels.begin(), labels.end(), gen_);
    const std::optional<std::string> writers[] = {std::nullopt, "app_a", "app_b"};
    for (std::size_t i = 0; i < labels.size(); ++i) {
      const RowId id = static_cast<RowId>(i + 1);
      std::optional<std::string> writer;
      if (scenario_.shared_session_ids && !labels[i].empty()) writer = writers[below(3)];
      const std::string scope = scope_of(labels[i], writer);
      db_[id] = DbRow{labels[i], writer, scope, Status::pending, 0, {}, chance(scenario_.poison_share)};
      commit_order_.push_back(id);
    }
    if (scenario_.late_commits) {
      for (std::size_t at = 0; at < commit_order_.size(); at += 50) {
        const auto end = std::min(at + 50, commit_order_.size());
        std::shuffle(commit_order_.begin() + static_cast<long>(at), commit_order_.begin() + static_cast<long>(end),
                     gen_);
      }
    }
  }

  void commit_some() {
    const std::size_t n = below(40);
    for (std::size_t i = 0; i < n && committed_ < commit_order_.size(); ++i) {
      visible_.insert(commit_order_[committed_++]);
    }
  }

  // The claim: due pending rows in id order, none behind a parked or backing-off row of its session.
  void claim() {
    std::set<std::string> blocked;
    std::vector<RowRef> rows;
    const SteadyTime now = clock_.now();
    for (const RowId id : visible_) {
      const DbRow& r = db_.at(id);
      if (!r.scope.empty() && blocked.contains(r.scope)) continue;
      if (r.next_attempt > now) {
        if (!r.scope.empty()) blocked.insert(r.scope);
        continue;
      }
      if (behind_park(id, r)) continue;
      rows.push_back({id, r.session, r.attempts, 0, r.writer, ""});
    }
    std::size_t expected = 0;
    for (const RowRef& ref : rows) {
      const std::string& scope = db_.at(ref.id).scope;
      if (model_.contains(ref.id) || settled_.contains(ref.id)) continue;
      if (!scope.empty() && sessions_[scope].parked) continue;
      model_[ref.id] = ModelRow{scope, ref.attempts};
      if (scope.empty()) {
        loose_.insert(ref.id);
      } else {
        sessions_[scope].fresh.insert(ref.id);
      }
      ++expected;
    }
    REQUIRE(planner_.add(outboxd::dispatch::test::held(rows)) == expected);
  }

  std::optional<RowId> head(const ModelSession& s) const {
    if (!s.returned.empty()) return *s.returned.begin();
    if (!s.fresh.empty()) return *s.fresh.begin();
    return std::nullopt;
  }

  bool take() {
    const SteadyTime now = clock_.now();
    const auto ids = planner_.take_ready();
    for (const RowId id : ids) {
      REQUIRE(model_.contains(id));
      ModelRow& r = model_.at(id);
      REQUIRE_FALSE(r.in_flight);
      REQUIRE(r.retry_at <= now);
      if (r.session.empty()) {
        REQUIRE(loose_.erase(id) == 1);
      } else {
        ModelSession& s = sessions_.at(r.session);
        REQUIRE_FALSE(s.parked);
        REQUIRE(s.in_flight < scenario_.per_session);
        REQUIRE(head(s) == id);  // id order within the session, returned rows first
        s.returned.erase(id);
        s.fresh.erase(id);
        ++s.in_flight;
      }
      r.in_flight = true;
      pool_.push_back(id);
    }
    REQUIRE(planner_.in_flight() == pool_.size());
    REQUIRE(pool_.size() <= kWindow);
    check_ready_and_wakeup(now);
    return !ids.empty();
  }

  // Below the window, nothing publishable is left behind; next_retry is the
  // earliest retry time of a row that could go out then.
  void check_ready_and_wakeup(SteadyTime now) {
    std::optional<SteadyTime> earliest;
    auto consider = [&](const ModelRow& r) {
      if (r.retry_at <= now) {
        REQUIRE(pool_.size() == kWindow);
      } else if (!earliest || r.retry_at < *earliest) {
        earliest = r.retry_at;
      }
    };
    for (const RowId id : loose_) consider(model_.at(id));
    for (const auto& [name, s] : sessions_) {
      const auto h = head(s);
      if (s.parked || !h || s.in_flight >= scenario_.per_session) continue;
      consider(model_.at(*h));
    }
    REQUIRE(planner_.next_retry() == earliest);
  }

  void resolve_some() {
    std::size_t n = pool_.empty() ? 0 : below(pool_.size() + 1);
    while (n-- > 0) {
      const std::size_t at = below(pool_.size());
      const RowId id = pool_[at];
      pool_.erase(pool_.begin() + static_cast<long>(at));
      resolve(id, outcome_for(id));
    }
  }

  DeliveryOutcome outcome_for(RowId id) {
    if (db_.at(id).poison) return DeliveryOutcome::rejected;
    const double u = std::uniform_real_distribution<double>(0, 1)(gen_);
    if (u < 0.75) return DeliveryOutcome::accepted;
    if (u < 0.82) return DeliveryOutcome::rejected;
    if (u < 0.94) return DeliveryOutcome::released;
    return DeliveryOutcome::unknown;
  }

  const outboxd::dispatch::FailureWrite* failure_of(RowId id) const {
    for (const auto& write : planner_.pending_writes().failures) {
      if (write.id == id) return &write;
    }
    return nullptr;
  }

  void resolve(RowId id, DeliveryOutcome outcome) {
    const std::size_t failures_before = planner_.pending_writes().failures.size();
    const std::size_t dispatched_before = planner_.pending_writes().dispatched.size();
    const bool had_failure = failure_of(id) != nullptr;
    planner_.on_outcome(id, outcome, "test");
    const SteadyTime now = clock_.now();

    ModelRow& r = model_.at(id);
    r.in_flight = false;
    if (!r.session.empty()) --sessions_.at(r.session).in_flight;

    bool counts = outcome == DeliveryOutcome::rejected;
    if (outcome == DeliveryOutcome::rejected) {
      r.releases = 0;
    } else if (outcome != DeliveryOutcome::accepted) {
      counts = ++r.releases % 4 == 0;
    }

    if (outcome == DeliveryOutcome::accepted) {
      REQUIRE(planner_.pending_writes().dispatched.size() == dispatched_before + 1);
      REQUIRE(planner_.pending_writes().dispatched.back() == id);
      REQUIRE(failure_of(id) == nullptr);
      unpersisted_failures_.erase(id);
      REQUIRE(planner_.pending_writes().failures.size() == failures_before - (had_failure ? 1 : 0));
      settled_.insert(id);
      if (!r.session.empty()) accepted_[r.session].push_back(id);
      forget(id);
    } else if (counts) {
      REQUIRE(planner_.pending_writes().failures.size() == failures_before + (had_failure ? 0 : 1));
      REQUIRE(failure_of(id) != nullptr);
      fail(id, *failure_of(id), now);
    } else {
      REQUIRE(planner_.pending_writes().failures.size() == failures_before);
      if (r.orphan) {
        forget(id);
      } else {
        r.retry_at = now + 5ms;
        requeue(id);
      }
    }
  }

  void fail(RowId id, const outboxd::dispatch::FailureWrite& write, SteadyTime now) {
    ModelRow& r = model_.at(id);
    const int attempts = r.attempts + 1;
    REQUIRE(write.id == id);
    REQUIRE(write.attempts == attempts);
    settled_.insert(id);
    ++unpersisted_failures_[id];
    if (attempts >= scenario_.max_attempts) {
      REQUIRE(write.park);
      const std::string session = r.session;
      model_.erase(id);
      if (!session.empty()) park_session(session);
      return;
    }
    REQUIRE_FALSE(write.park);
    const Duration base = std::min<Duration>(10ms * (1 << std::min(attempts - 1, 20)), 200ms);
    REQUIRE(write.retry_in >= base / 2);
    REQUIRE(write.retry_in <= base + base / 2);
    r.attempts = attempts;
    if (r.orphan) {
      forget(id);
    } else {
      r.retry_at = now + write.retry_in;
      requeue(id);
    }
  }

  void park_session(const std::string& name) {
    ModelSession& s = sessions_.at(name);
    s.parked = true;
    for (const auto* run : {&s.returned, &s.fresh}) {
      for (const RowId id : *run) model_.erase(id);
    }
    s.returned.clear();
    s.fresh.clear();
    for (const RowId id : pool_) {
      if (model_.at(id).session == name) model_.at(id).orphan = true;
    }
  }

  void requeue(RowId id) {
    const ModelRow& r = model_.at(id);
    if (r.session.empty()) {
      loose_.insert(id);
    } else {
      sessions_.at(r.session).returned.insert(id);
    }
  }

  void forget(RowId id) {
    const std::string session = model_.at(id).session;
    model_.erase(id);
    if (!session.empty()) erase_if_idle(session);
  }

  void erase_if_idle(const std::string& name) {
    const ModelSession& s = sessions_.at(name);
    if (!s.parked && s.in_flight == 0 && s.returned.empty() && s.fresh.empty()) sessions_.erase(name);
  }

  // Applies the writes dispatched first, then failures: the planner promises
  // that the order does not matter because a row appears at most once.
  void persist() {
    const SteadyTime now = clock_.now();
    for (const RowId id : planner_.pending_writes().dispatched) {
      DbRow& r = db_.at(id);
      REQUIRE(r.status == Status::pending);  // never dispatched twice
      r.status = Status::dispatched;
      visible_.erase(id);
    }
    for (const auto& write : planner_.pending_writes().failures) {
      DbRow& r = db_.at(write.id);
      REQUIRE(r.status == Status::pending);
      // Attempts are never counted from a stale value, even for rows forgotten and claimed again.
      REQUIRE(write.attempts == r.attempts + unpersisted_failures_.at(write.id));
      r.attempts = write.attempts;
      if (write.park) {
        r.status = Status::parked;
        visible_.erase(write.id);
        if (!r.scope.empty()) {
          auto [it, inserted] = parked_min_.try_emplace(r.scope, write.id);
          if (!inserted) it->second = std::min(it->second, write.id);
        }
      } else {
        r.next_attempt = now + write.retry_in;
      }
    }
    planner_.on_persisted();
    settled_.clear();
    unpersisted_failures_.clear();
    std::vector<std::string> unparked;
    for (auto& [name, s] : sessions_) {
      if (s.parked) unparked.push_back(name);
      s.parked = false;
    }
    for (const auto& name : unparked) erase_if_idle(name);
  }

  void advance_time(bool took) {
    if (took || !pool_.empty()) {
      clock_.advance(std::chrono::milliseconds(below(4)));
      return;
    }
    // Idle: sleep until the planner or the table has something due.
    std::optional<SteadyTime> next = planner_.next_retry();
    for (const RowId id : visible_) {
      const SteadyTime at = db_.at(id).next_attempt;
      if (at > clock_.now() && (!next || at < *next)) next = at;
    }
    if (next && *next > clock_.now()) {
      clock_.advance(*next - clock_.now());
    } else {
      clock_.advance(1ms);
    }
  }

  bool behind_park(RowId id, const DbRow& r) const {
    const auto p = parked_min_.find(r.scope);
    return !r.scope.empty() && p != parked_min_.end() && p->second < id;
  }

  bool finished() const {
    if (committed_ < commit_order_.size() || !pool_.empty() || !model_.empty()) return false;
    if (!planner_.pending_writes().empty()) return false;
    return std::all_of(visible_.begin(), visible_.end(), [this](RowId id) { return behind_park(id, db_.at(id)); });
  }

  void check_final() const {
    CHECK(planner_.in_flight() == 0);
    CHECK(planner_.buffered() == 0);
    std::size_t dispatched = 0, parked = 0;
    for (const auto& [id, r] : db_) {
      if (r.status == Status::dispatched) ++dispatched;
      if (r.status == Status::parked) ++parked;
      REQUIRE((r.status != Status::pending || behind_park(id, r)));
    }
    CHECK(planner_.counters().accepted == dispatched);
    CHECK(planner_.counters().parked == parked);
    CHECK(planner_.counters().stale == 0);
    if (scenario_.max_attempts > 1000) CHECK(dispatched == db_.size());
    if (scenario_.poison_share > 0) CHECK(parked > 0);
    // Strict order without late commits: each session accepted in id order, every row of it.
    if (scenario_.per_session == 1 && !scenario_.late_commits) {
      std::size_t rows = 0;
      for (const auto& [name, ids] : accepted_) {
        REQUIRE(std::is_sorted(ids.begin(), ids.end()));
        rows += ids.size();
      }
      CHECK(rows == static_cast<std::size_t>(kSessions * kRowsPerSession));
      if (!scenario_.shared_session_ids) CHECK(accepted_.size() == static_cast<std::size_t>(kSessions));
    }
  }

  Scenario scenario_;
  std::mt19937_64 gen_;
  outboxd::core::ManualClock clock_;
  outboxd::core::FastRandom jitter_;
  Planner planner_;

  std::map<RowId, DbRow> db_;
  std::vector<RowId> commit_order_;
  std::size_t committed_ = 0;
  std::set<RowId> visible_;  // committed and pending
  std::map<std::string, RowId> parked_min_;  // by scope

  std::unordered_map<RowId, ModelRow> model_;
  std::map<std::string, ModelSession> sessions_;  // by scope
  std::set<RowId> loose_;
  std::set<RowId> settled_;
  std::map<RowId, int> unpersisted_failures_;
  std::vector<RowId> pool_;  // in flight
  std::map<std::string, std::vector<RowId>> accepted_;
};

}  // namespace

TEST_CASE("Strict order holds for 200 sessions x 20 rows under random outcomes", "[dispatch][planner][simulation]") {
  const auto seed = GENERATE(1u, 2u);
  Simulation({1, false, 1'000'000, 0.0, seed, false}).run();
}

TEST_CASE("per_session_in_flight = 3 under random outcomes", "[dispatch][planner][simulation]") {
  const auto seed = GENERATE(4u);
  Simulation({3, false, 1'000'000, 0.0, seed, false}).run();
}

TEST_CASE("Late commits and parks under random outcomes in strict mode", "[dispatch][planner][simulation]") {
  const auto seed = GENERATE(6u, 7u);
  Simulation({1, true, 3, 0.01, seed, false}).run();
}

TEST_CASE("Late commits and parks under random outcomes with 3 per session", "[dispatch][planner][simulation]") {
  const auto seed = GENERATE(9u);
  Simulation({3, true, 3, 0.01, seed, false}).run();
}

TEST_CASE("Writers sharing session ids: each writer's rows in order, apart from the others'",
          "[dispatch][planner][simulation]") {
  const auto seed = GENERATE(11u);
  Simulation({1, false, 1'000'000, 0.0, seed, true}).run();
}

TEST_CASE("Writers sharing session ids: one writer's parks block none of another's rows",
          "[dispatch][planner][simulation]") {
  const auto seed = GENERATE(12u, 13u);
  Simulation({1, true, 3, 0.01, seed, true}).run();
}
