// Reading the outbox, dispatch, retention, leases, log and http sections.
#include <optional>
#include <string>

#include "config/listen_address.hpp"
#include "config/scalar.hpp"
#include "config/schema_name.hpp"
#include "config/sections.hpp"

namespace outboxd::config {
namespace {

constexpr IntRange kPartitions{1, 4096};
constexpr IntRange kBatchSize{1, 10'000};
constexpr IntRange kInFlight{1, 100'000};
constexpr IntRange kPerSessionInFlight{1, 100'000};
constexpr IntRange kAtLeastOne{1, INT32_MAX};
constexpr IntRange kBackoffMs{1, 86'400'000};
constexpr IntRange kReleaseRetryMs{0, 3'600'000};
constexpr IntRange kPollIntervalMs{10, 3'600'000};
constexpr IntRange kNotifyMaxRate{1, 1'000'000};
constexpr IntRange kBusyPollMs{1, 1000};
constexpr IntRange kShutdownTimeoutMs{0, 3'600'000};
constexpr IntRange kStatsIntervalMs{0, 86'400'000};   // 0: no stats lines
constexpr IntRange kBacklogIntervalMs{0, 86'400'000}; // 0: no backlog figures
constexpr IntRange kKeepForS{0, 315'360'000};         // up to ten years
// At least an hour: outbox.purge_row_events() keeps that much of the trail.
constexpr IntRange kFailedKeepForS{3600, 315'360'000};
constexpr IntRange kPurgeBatch{1, 100'000};
constexpr IntRange kPurgeIntervalMs{100, 86'400'000};
constexpr IntRange kLeaseTtlMs{1000, 3'600'000};
constexpr IntRange kRenewIntervalMs{100, 3'600'000};
constexpr IntRange kSafetyMarginMs{0, 3'600'000};
constexpr IntRange kMessageBytes{16 << 10, 1 << 30};  // above the 8 KiB kept for properties; up to 1 GiB
constexpr IntRange kBudgetBytes{64 << 10, 1 << 30};
constexpr std::size_t kMaxInstanceIdBytes = 128;      // the SQL bound on identifiers

void read_schema_name(MapReader& outbox, std::string_view key, SchemaKind kind, std::string& out) {
  std::string name;
  if (!outbox.text(key, name)) return;
  if (const auto problem = schema_name_problem(name, kind)) {
    outbox.report(key, *problem);
    return;
  }
  out = std::move(name);
}

// Empty turns HTTP off; anything else goes through the server's own parser.
std::optional<std::string> listen_problem(std::string_view listen) {
  if (listen.empty()) return std::nullopt;
  const auto address = parse_listen_address(listen);
  if (!address) {
    return address.error().message + "; write \"host:port\" such as 127.0.0.1:9187, or leave it empty to turn "
                                     "HTTP off";
  }
  // The server would bind it, but to a port no scraper or healthcheck can know.
  if (address.value().port == 0) return "port 0 would be chosen anew at every start; give a fixed port such as 9187";
  return std::nullopt;
}

}  // namespace

void read_outbox(MapReader& root, OutboxConfig& out) {
  MapReader outbox = root.section("outbox");
  read_schema_name(outbox, "schema", SchemaKind::outbox, out.schema);
  read_schema_name(outbox, "workflow_schema", SchemaKind::workflow, out.workflow_schema);
  outbox.integer("partitions", out.partitions, kPartitions);
}

void read_dispatch(MapReader& root, DispatchConfig& out) {
  MapReader dispatch = root.section("dispatch");
  dispatch.integer("batch_size", out.batch_size, kBatchSize);
  dispatch.integer("in_flight", out.in_flight, kInFlight);
  dispatch.integer("per_session_in_flight", out.per_session_in_flight, kPerSessionInFlight);
  dispatch.integer("max_attempts", out.max_attempts, kAtLeastOne);
  dispatch.millis("backoff_initial_ms", out.backoff_initial, kBackoffMs);
  dispatch.millis("backoff_max_ms", out.backoff_max, kBackoffMs);
  dispatch.number("backoff_multiplier", out.backoff_multiplier, 1.0, 100.0);
  dispatch.number("backoff_jitter", out.backoff_jitter, 0.0, 1.0);
  dispatch.millis("release_retry_ms", out.release_retry, kReleaseRetryMs);
  dispatch.integer("releases_per_attempt", out.releases_per_attempt, kAtLeastOne);
  dispatch.millis("poll_interval_ms", out.poll_interval, kPollIntervalMs);
  dispatch.integer("notify_max_rate", out.notify_max_rate, kNotifyMaxRate);
  dispatch.millis("busy_poll_ms", out.busy_poll, kBusyPollMs);
  dispatch.millis("shutdown_timeout_ms", out.shutdown_timeout, kShutdownTimeoutMs);
  dispatch.millis("stats_interval_ms", out.stats_interval, kStatsIntervalMs);
  dispatch.integer("max_message_bytes", out.max_message_bytes, kMessageBytes);
  dispatch.integer("claim_bytes", out.claim_bytes, kBudgetBytes);
  dispatch.integer("in_flight_bytes", out.in_flight_bytes, kBudgetBytes);
}

void read_retention(MapReader& root, RetentionConfig& out) {
  MapReader retention = root.section("retention");
  retention.choice<RetentionMode>("mode", out.mode, kRetentionModes);
  retention.seconds("keep_for_s", out.keep_for, kKeepForS);
  retention.seconds("failed_keep_for_s", out.failed_keep_for, kFailedKeepForS);
  retention.integer("purge_batch", out.purge_batch, kPurgeBatch);
  retention.millis("purge_interval_ms", out.purge_interval, kPurgeIntervalMs);
}

void read_leases(MapReader& root, LeaseConfig& out) {
  MapReader leases = root.section("leases");
  if (leases.nonempty_text("instance_id", out.instance_id) &&
      (out.instance_id.size() > kMaxInstanceIdBytes || has_control_characters(out.instance_id))) {
    leases.report("instance_id", "must be at most 128 bytes without control characters");
    out.instance_id.clear();
  }
  leases.millis("lease_ttl_ms", out.lease_ttl, kLeaseTtlMs);
  leases.millis("renew_interval_ms", out.renew_interval, kRenewIntervalMs);
  leases.millis("safety_margin_ms", out.safety_margin, kSafetyMarginMs);
}

void read_log(MapReader& root, LogConfig& out) {
  MapReader log = root.section("log");
  log.word("level", out.level, kLogLevels);
  log.choice<LogFormat>("format", out.format, kLogFormats);
}

void read_http(MapReader& root, HttpConfig& out) {
  MapReader http = root.section("http");
  http.millis("backlog_interval_ms", out.backlog_interval, kBacklogIntervalMs);
  std::string listen;
  if (!http.text("listen", listen)) return;
  if (const auto problem = listen_problem(listen)) {
    http.report("listen", *problem);
    return;
  }
  out.listen = std::move(listen);
}

}  // namespace outboxd::config
