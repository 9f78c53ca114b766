// Lease statements: compare-and-set on owner and expiry, the two the fence of every writing statement checks.
#include "pg/lease_store.hpp"

#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

core::Error in_context(const char* context, const core::Error& error) {
  return {error.kind, std::string(context) + ": " + error.message};
}

std::string ms(const char* param) { return std::string(param) + "::bigint * interval '1 millisecond'"; }

// `free` skips rows another balancer has locked, and the UPDATE re-checks
// ownership on the row version it changes (READ COMMITTED), so a partition
// taken meanwhile by someone else is left alone. The instance's own
// heartbeat is counted as live even before the upsert is visible. The beat
// first removes the instances silent for kDeadAfterTtls lease times, through
// a security definer (028_dispatcher_locks.sql; DELETE on the table would let
// the dispatcher lock it): its one row is the beat's source, so it runs once
// on every balance, whatever plan the rest of the statement gets. The share
// counts serving instances only: a watcher (030_watchers.sql) holds no
// lease, so counting it would leave its share of the partitions unleased.
std::string balance_sql(const std::string& s) {
  const std::string live_since = "now() - " + ms("$2");
  return "WITH beat AS (INSERT INTO " + s + ".instances (instance_id) SELECT $1 FROM " + s +
         ".forget_silent_instances($1, " + std::to_string(LeaseStore::kDeadAfterTtls) + " * " + ms("$2") + ") "
         "ON CONFLICT (instance_id) DO UPDATE SET heartbeat_at = now()), "
         "share AS (SELECT ceil((SELECT count(*) FROM " + s + ".leases)::numeric / (1 + (SELECT count(*) FROM " + s +
         ".instances WHERE instance_id <> $1 AND NOT watching AND heartbeat_at > " + live_since + ")))::bigint AS n), "
         "mine AS (SELECT partition, row_number() OVER (ORDER BY partition) AS rank FROM " + s +
         ".leases WHERE owner = $1 AND expires_at > now()), "
         "free AS (SELECT partition FROM " + s + ".leases "
         "WHERE owner IS NULL OR expires_at IS NULL OR expires_at <= now() ORDER BY partition "
         "LIMIT greatest(0, (SELECT n FROM share) - (SELECT count(*) FROM mine)) FOR UPDATE SKIP LOCKED), "
         "taken AS (UPDATE " + s + ".leases l SET "
         "epoch = CASE WHEN l.owner IS DISTINCT FROM $1 THEN l.epoch + 1 ELSE l.epoch END, "
         "acquired_at = CASE WHEN l.owner IS DISTINCT FROM $1 THEN now() ELSE l.acquired_at END, "
         "owner = $1, renewed_at = now(), expires_at = now() + " + ms("$2") + " "
         "WHERE l.partition IN (SELECT partition FROM mine UNION ALL SELECT partition FROM free) "
         "AND ((l.owner = $1 AND l.expires_at > now()) OR l.owner IS NULL OR l.expires_at IS NULL "
         "OR l.expires_at <= now()) RETURNING l.partition) "
         "SELECT t.partition, coalesce(m.rank > (SELECT n FROM share), false), "
         "pg_current_xact_id_if_assigned()::text::bigint FROM taken t "
         "LEFT JOIN mine m USING (partition) ORDER BY t.partition";
}

}  // namespace

LeaseStore::LeaseStore(Connection& connection, std::string schema)
    : connection_(connection), prefix_("outboxd." + schema + ".") {
  for (const auto& [name, text] : statements(schema)) connection_.define(name, text);
}

NamedStatements LeaseStore::statements(const std::string& schema) {
  const std::string s = quote_ident(schema);
  const std::string prefix = "outboxd." + schema + ".";
  return {
      // An instance that serves again after watching is a full instance.
      {prefix + "register_instance",
       "INSERT INTO " + s + ".instances (instance_id) VALUES ($1) ON CONFLICT (instance_id) "
       "DO UPDATE SET started_at = now(), heartbeat_at = now(), idle = false, watching = false"},
      {prefix + "deregister", "SELECT " + s + ".deregister_instance($1)"},
      // Owner NULL: the next taker raises the epoch, even if it is us again.
      {prefix + "hand_back_all", "UPDATE " + s + ".leases SET owner = NULL, expires_at = NULL WHERE owner = $1"},
      {prefix + "balance", balance_sql(s)},
      {prefix + "hand_back", "UPDATE " + s + ".leases SET owner = NULL, expires_at = NULL "
                             "WHERE owner = $1 AND partition = ANY($2::int[])"},
  };
}

core::Status LeaseStore::register_instance(std::string_view instance_id) {
  auto done = connection_.exec_prepared(prefix_ + "register_instance", {std::string(instance_id)});
  if (!done) return in_context("registering this instance", done.error());
  return {};
}

core::Status LeaseStore::deregister(std::string_view instance_id) {
  auto done = connection_.exec_prepared(prefix_ + "deregister", {std::string(instance_id)});
  if (!done) return in_context("deregistering this instance", done.error());
  return {};
}

core::Status LeaseStore::hand_back_all(std::string_view instance_id) {
  auto done = connection_.exec_prepared(prefix_ + "hand_back_all", {std::string(instance_id)});
  if (!done) return in_context("handing back leases", done.error());
  return {};
}

core::Result<std::vector<Lease>> LeaseStore::balance(std::string_view instance_id, std::chrono::milliseconds ttl) {
  auto rows = connection_.exec_prepared(prefix_ + "balance", {std::string(instance_id), std::to_string(ttl.count())});
  if (!rows) return in_context("balancing leases", rows.error());
  // A renewal is a write of the daemon's own, not a writer's commit (Connection::note_own_transaction).
  if (rows.value().size() > 0) {
    if (const auto transaction = rows.value().optional_int64(0, 2)) connection_.note_own_transaction(*transaction);
  }
  std::vector<Lease> leased;
  leased.reserve(static_cast<std::size_t>(rows.value().size()));
  for (int r = 0; r < rows.value().size(); ++r) {
    leased.push_back({static_cast<int>(rows.value().int64(r, 0)), rows.value().boolean(r, 1)});
  }
  return leased;
}

core::Status LeaseStore::hand_back(std::string_view instance_id, const std::vector<int>& partitions) {
  if (partitions.empty()) return {};
  auto done = connection_.exec_prepared(prefix_ + "hand_back", {std::string(instance_id), int_array_literal(partitions)});
  if (!done) return in_context("handing back leases over the share", done.error());
  return {};
}

}  // namespace outboxd::pg
