// In-memory stand-ins for the run loop's ports: an outbox table, a broker, the events the loop sleeps on.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.hpp"
#include "core/session_stops.hpp"
#include "daemon/run/ports.hpp"

namespace outboxd::daemon::test {

using namespace std::chrono_literals;

// The outbox as the statements see it: a table of rows, the leases, the
// connection. Marks and failures are fenced as the SQL fences them: only rows
// of partitions whose lease the owner the statement names holds change.
class FakeDatabase final : public Database, public RowStore, public LeaseStore {
 public:
  enum class Status { pending, dispatched, parked };
  struct Row {
    core::OutboxMessage message;
    Status status = Status::pending;
    core::SteadyTime next_attempt{};
    std::string last_error;
  };

  explicit FakeDatabase(const core::ManualClock& clock) : clock_(clock) {}

  core::RowId insert(std::optional<std::string> session = std::nullopt, int partition = 0,
                     std::optional<std::string> writer = std::nullopt) {
    const core::RowId id = ++last_id_;
    Row row;
    row.message.id = id;
    row.message.message_id = "m" + std::to_string(id);
    row.message.destination = "orders";
    row.message.session_id = std::move(session);
    row.message.writer = std::move(writer);
    row.message.partition = partition;
    table[id] = std::move(row);
    wal += 100;  // its commit record
    if (armed) notified_ = true;  // the writer saw an armed instance and sent NOTIFY
    return id;
  }
  Status status(core::RowId id) const { return table.at(id).status; }
  std::size_t count(Status status) const {
    return static_cast<std::size_t>(
        std::count_if(table.begin(), table.end(), [status](const auto& row) { return row.second.status == status; }));
  }

  // Database
  core::Status ensure_connected() override {
    if (up_ || clock_.now() < retry_at_) return {};
    if (connect_error) return *connect_error;
    up_ = true;
    fresh_ = true;
    return {};
  }
  void lost(const core::Error&) override {
    ++losses;
    up_ = false;
    retry_at_ = clock_.now() + 100ms;
  }
  std::string privilege_fix() override { return "GRANT what is missing"; }
  bool login_refused() const override { return false; }
  bool up() const override { return up_; }
  bool just_connected() override { return std::exchange(fresh_, false); }
  std::optional<core::SteadyTime> next_attempt() const override {
    if (up_) return std::nullopt;
    return retry_at_;
  }
  bool notifications() const override { return true; }
  int socket() override { return -1; }
  bool drain_notifications() override { return std::exchange(notified_, false); }
  // Any login's pg_notify() on the wakeup channel: no row behind it.
  void notify() { notified_ = true; }
  RowStore& rows() override { return *this; }
  LeaseStore& leases() override { return *this; }

  // RowStore: immediate rows only, in id order; a row waits behind an earlier
  // row of its session (core::SessionStops, the daemon's own rule) that is
  // parked or backing off.
  core::Result<core::ClaimedSets> claim(const std::vector<int>& partitions, int limit, core::RowId after_id,
                                        std::span<const core::RowId> known, const core::ClaimBytes& bytes,
                                        const core::LaneRequest&, const std::optional<std::string>&) override {
    ++claims;
    last_claim_bytes = bytes;
    if (auto error = take(fail_claim)) return *error;
    core::ClaimedSets sets;
    std::int64_t read_bytes = 0;
    core::SessionStops stops;
    const auto now = clock_.now();
    for (const auto& [id, row] : table) {
      if (row.status == Status::parked || (row.status == Status::pending && row.next_attempt > now)) {
        if (auto session = core::session_key(row.message)) stops.stop(id, *session);
      }
      if (row.status != Status::pending || row.next_attempt > now || id <= after_id) continue;
      if (std::find(partitions.begin(), partitions.end(), row.message.partition) == partitions.end()) continue;
      if (std::find(known.begin(), known.end(), id) != known.end()) continue;
      if (stops.waits(row.message)) continue;
      if (sets.immediate.read == static_cast<std::size_t>(limit)) break;
      // Payload is body and headers. Which rows are too large, and what their
      // reason says, is the real claim's to decide (claim_bytes_test): here
      // the test sets a row's `unsendable`, and it comes back without a body.
      const bool unsendable = row.message.unsendable.has_value();
      if (!unsendable && read_bytes >= bytes.budget) {
        sets.immediate.budget_used = true;
        break;
      }
      core::OutboxMessage message = row.message;
      message.attempts = attempts_of(id);
      if (unsendable) message.body.clear();
      else read_bytes += static_cast<std::int64_t>(message.body.size() + message.headers_json.size());
      sets.immediate.rows.push_back(std::move(message));
      ++sets.immediate.read;
      sets.immediate.last_id = id;
    }
    if (sets.immediate.read < static_cast<std::size_t>(limit)) sets.next_due = next_due;
    return sets;
  }
  core::Result<int> mark_dispatched(const std::vector<core::RowId>& ids, config::RetentionMode,
                                    std::string_view owner) override {
    if (auto error = take(fail_mark)) return *error;
    marks.push_back({ids, std::string(owner)});
    int changed = 0;
    for (const auto id : ids) {
      Row& row = table.at(id);
      if (row.status != Status::pending || !leased_by(row.message.partition, owner)) continue;
      row.status = Status::dispatched;
      marked_at[id] = clock_.now();
      ++changed;
    }
    return changed;
  }
  core::Result<int> record_failures(const std::vector<pg::FailureRecord>& failures,
                                    std::string_view owner) override {
    if (auto error = take(fail_failures)) return *error;
    int changed = 0;
    for (const auto& failure : failures) {
      Row& row = table.at(failure.id);
      if (row.status != Status::pending || !leased_by(row.message.partition, owner)) continue;
      attempts[failure.id] = failure.attempts;
      row.last_error = failure.error;
      if (failure.park) row.status = Status::parked;
      else row.next_attempt = clock_.now() + failure.retry_in;
      ++changed;
    }
    return changed;
  }
  core::Result<int> purge(std::chrono::milliseconds keep_for, int) override {
    purged_dispatched.push_back(keep_for);
    return 0;
  }
  core::Result<pg::FailedPurge> purge_failed(std::chrono::milliseconds keep_for, int) override {
    purged_failed.push_back(keep_for);
    return pg::FailedPurge{};
  }
  core::Result<pg::BacklogReport> backlog(const std::vector<int>&, int, int) override {
    ++backlogs;
    if (auto error = take(fail_backlog)) return *error;
    return pg::BacklogReport{};
  }
  core::Result<pg::BacklogReport> backlog_of(const std::vector<int>&, int, int,
                                             const std::vector<std::string>&) override {
    ++backlogs;
    return pg::BacklogReport{};
  }
  core::Status refresh_statistics() override {
    ++statistics_refreshes;
    return {};
  }
  core::Status arm_notify(std::string_view, bool on) override {
    armed = on;
    return {};
  }
  core::Result<std::vector<std::string>> open_transactions() override { return std::vector<std::string>(); }
  core::Result<std::vector<std::string>> still_open(const std::vector<std::string>&) override {
    return std::vector<std::string>();
  }
  // The primary's WAL grows with every insert; the standby has flushed what the test says.
  core::Result<pg::StandbyPosition> standby_position(const std::optional<std::string>& standby) override {
    ++standby_reads;
    standby_asked = standby;
    return pg::StandbyPosition{wal, standby_flushed};
  }

  // LeaseStore: grants `leased` to the caller at every balance, those in
  // `over_share` flagged so.
  core::Result<std::vector<pg::Lease>> balance(std::string_view instance_id,
                                               std::chrono::milliseconds) override {
    std::vector<pg::Lease> leases;
    for (const int partition : leased) {
      owners[partition] = std::string(instance_id);
      leases.push_back({partition, over_share.contains(partition)});
    }
    return leases;
  }
  core::Status hand_back(std::string_view instance_id, const std::vector<int>& partitions) override {
    for (const int partition : partitions) {
      std::erase(leased, partition);
      if (leased_by(partition, instance_id)) owners.erase(partition);
      handed_back.push_back(partition);
    }
    return {};
  }
  // Another instance took `partition`: the next balance no longer grants it.
  void take_over(int partition, std::string other) {
    std::erase(leased, partition);
    owners[partition] = std::move(other);
  }
  core::Status hand_back_all(std::string_view) override {
    handed_back_all = true;
    return {};
  }
  core::Status deregister(std::string_view) override {
    deregistered = true;
    return {};
  }

  std::map<core::RowId, Row> table;
  std::map<core::RowId, int> attempts;  // as recorded by record_failures
  std::map<core::RowId, core::SteadyTime> marked_at;
  struct Mark {
    std::vector<core::RowId> ids;
    std::string owner;
    friend bool operator==(const Mark&, const Mark&) = default;
  };
  std::vector<Mark> marks;  // each mark_dispatched() as the loop called it
  int statistics_refreshes = 0;
  std::vector<std::chrono::milliseconds> purged_dispatched;  // keep_for of each purge()
  std::vector<std::chrono::milliseconds> purged_failed;      // keep_for of each purge_failed()
  std::vector<int> leased{0};
  std::map<int, std::string> owners;  // the lease table: each partition's holder
  std::set<int> over_share;
  std::vector<int> handed_back;  // by hand_back()
  bool armed = false;
  bool handed_back_all = false;
  bool deregistered = false;
  int claims = 0;
  int backlogs = 0;  // backlog measurements
  std::optional<std::chrono::milliseconds> next_due;  // what a short claim says of the next scheduled row
  core::ClaimBytes last_claim_bytes;
  int losses = 0;
  std::int64_t wal = 0;                           // the primary's WAL position
  std::optional<std::int64_t> standby_flushed;    // none: no standby reports
  std::optional<std::string> standby_asked;       // the standby the last read named
  int standby_reads = 0;
  std::optional<core::Error> connect_error;
  // One-shot failures of the next statement of that kind.
  std::optional<core::Error> fail_claim, fail_mark, fail_failures, fail_backlog;

 private:
  static std::optional<core::Error> take(std::optional<core::Error>& failure) { return std::exchange(failure, {}); }
  bool leased_by(int partition, std::string_view owner) const {
    const auto it = owners.find(partition);
    return it != owners.end() && it->second == owner;
  }
  int attempts_of(core::RowId id) const {
    const auto it = attempts.find(id);
    return it == attempts.end() ? 0 : it->second;
  }

  const core::ManualClock& clock_;
  core::RowId last_id_ = 0;
  bool up_ = false;
  bool fresh_ = false;
  bool notified_ = false;
  core::SteadyTime retry_at_{};
};

// The broker: answers every row sent with answer(row) at once, or keeps them
// all unanswered (silent = true) until the test answers.
class FakeBroker final : public Broker {
 public:
  core::Status start() override {
    news_.connection_events.push_back({true, "127.0.0.1:5672", "fake broker"});
    return {};
  }
  void send(std::vector<core::OutboxMessage> rows, core::SteadyTime) override {
    for (auto& row : rows) {
      sent.push_back(row.id);
      if (silent) unanswered.push_back(row.id);
      else news_.outcomes.push_back({row.id, answer(row), "by the fake broker"});
    }
  }
  BrokerNews take_news() override { return std::exchange(news_, {}); }
  void stop() override { stopped = true; }
  bool plain_over_cleartext() const override { return false; }
  bool has_news() const { return !news_.outcomes.empty() || !news_.connection_events.empty(); }
  // The publisher's thread reports its connection to `node` up or down.
  void connection(bool up, std::string reason, std::string node = "127.0.0.1:5672") {
    news_.connection_events.push_back({up, std::move(node), std::move(reason)});
  }

  // Answers every unanswered row with `outcome`.
  void answer_all(core::DeliveryOutcome outcome) {
    for (const auto id : unanswered) news_.outcomes.push_back({id, outcome, "by the test"});
    unanswered.clear();
  }
  std::size_t times_sent(core::RowId id) const {
    return static_cast<std::size_t>(std::count(sent.begin(), sent.end(), id));
  }

  std::function<core::DeliveryOutcome(const core::OutboxMessage&)> answer = [](const core::OutboxMessage&) {
    return core::DeliveryOutcome::accepted;
  };
  bool silent = false;
  std::vector<core::RowId> sent;
  std::vector<core::RowId> unanswered;
  bool stopped = false;

 private:
  BrokerNews news_;
};

// Sleeping moves the manual clock by the whole timeout, unless the broker
// has news: then the wake-up is readable at once, as the eventfd would be.
class FakeEvents final : public Events {
 public:
  FakeEvents(core::ManualClock& clock, const FakeBroker& broker) : clock_(clock), broker_(broker) {}

  std::vector<int> take_signals() override { return std::exchange(signals, {}); }
  Readiness wait(int, std::chrono::milliseconds timeout) override {
    if (broker_.has_news()) return {.news = true};
    ++sleeps;
    slept += timeout;
    clock_.advance(timeout);
    return {};
  }

  std::vector<int> signals;
  int sleeps = 0;
  std::chrono::milliseconds slept{0};

 private:
  core::ManualClock& clock_;
  const FakeBroker& broker_;
};

}  // namespace outboxd::daemon::test
