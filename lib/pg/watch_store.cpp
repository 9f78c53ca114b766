// A watcher's registration and its look at a dormant outbox: upsert, removal, and the one statement of check().
#include "pg/watch_store.hpp"

#include <algorithm>
#include <cstdint>

#include "pg/outbox_sql.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

core::Error in_context(const char* context, const core::Error& error) {
  return {error.kind, std::string(context) + ": " + error.message};
}

// Rows each part of the signature reads at most: a blocked backlog of
// millions costs a dormant outbox's look what 100,000 index entries cost.
constexpr int kSignatureCap = 100000;

// "tag:count:sum(id)" over the first kSignatureCap rows of `where` in `order`.
std::string part(const std::string& t, const char* tag, const std::string& where, const std::string& order) {
  return std::string("(SELECT '") + tag + ":' || count(*) || ':' || coalesce(sum(g.id), 0) FROM (SELECT m.id FROM " +
         t + " m WHERE " + where + order + " LIMIT " + std::to_string(kSignatureCap) + ") g)";
}

// The signature is the count and the sum of the ids of three sets of rows,
// each read through its partial index and capped: (r) immediate pending rows,
// messages_ready_idx, newest first; (s) scheduled pending rows already due,
// messages_scheduled_idx from the latest due time back; (p) parked rows,
// messages_parked_idx. EXPLAIN shows those three index scans and none of
// messages (the daemon's connections plan no sequential scan, see
// connect_params.cpp; tests/integration/pg/watch_store_test.cpp checks it).
//
// Why these: a row is claimable when it is one of (r) or (s) and nothing
// holds its session back. A dormant outbox whose rows are all blocked
// (behind a parked row) keeps the same signature and is not woken again; a
// new row, a late commit (a row with an id below others already seen), a
// requeue or a skip of a parked row, a scheduled row that falls due or is
// fired each change a count or a sum. Newest first, so that beyond the cap
// a new row or a row just due still enters what is counted; a change below
// the newest 100,000 rows of a part (a late commit that far behind, a
// requeue beyond the first 100,000 parked rows) goes unseen until the next
// change that is seen. A cancel changes no part: cancel() takes only rows
// not yet due, which block no one; their due time is next_due's.
//
// next_due reads every partition (a watcher holds none) with
// time_to_next_due's expression: the first due_at of messages_scheduled_idx,
// min(next_attempt_at) through a partial index of the rows backing off,
// which it reads whole: rows back off only while a daemon serves the outbox.
//
// other_lease reads leases (one row per partition): another instance that
// holds an unexpired lease serves the outbox now, and until the last of them
// expires a daemon sharing the outbox need not (TenantSchedule: elsewhere).
// A lease, not an instances row: a registered instance that holds no lease
// (more instances than partitions) moves no row, and a dead one's leases
// stop counting exactly when another may take them. `first` settles two
// daemons that began to serve at the same moment, each before the other's
// leases were there: the one whose first live lease was taken later (or
// that holds none, all taken by the other) lets go; equal times, the id
// that sorts later. Both read the same rows, so exactly one of them goes.
std::string check_sql(const std::string& s) {
  const std::string t = s + ".messages";
  const std::string ready = part(t, "r", "m.status = 'pending' AND m.due_at <= m.created_at", " ORDER BY m.id DESC");
  const std::string due = part(t, "s", "m.status = 'pending' AND m.due_at > m.created_at AND m.due_at <= now()",
                               " ORDER BY m.due_at DESC, m.id DESC");
  const std::string parked = part(t, "p", "m.status = 'parked'", "");
  const std::string others =
      "(SELECT ceil(extract(epoch FROM max(l.expires_at) - now()) * 1000)::bigint AS left_ms, "
      "coalesce(bool_or(m.since IS NULL OR (l.acquired_at, l.owner) < (m.since, $1)), false) AS first FROM " + s +
      ".leases l, (SELECT min(acquired_at) AS since FROM " + s + ".leases WHERE owner = $1 AND expires_at > now()) m "
      "WHERE l.owner <> $1 AND l.expires_at > now()) o";
  return "SELECT " + ready + " || ' ' || " + due + " || ' ' || " + parked + ", " +
         outbox_sql::next_due_ms(t, nullptr) + ", o.left_ms, o.first FROM " + others;
}

}  // namespace

WatchStore::WatchStore(Connection& connection, std::string schema)
    : connection_(connection), prefix_("outboxd." + schema + "."), channel_(outbox_sql::wakeup_channel(schema)) {
  for (const auto& [name, text] : statements(schema)) connection_.define(name, text);
}

NamedStatements WatchStore::statements(const std::string& schema) {
  const std::string s = quote_ident(schema);
  const std::string prefix = "outboxd." + schema + ".";
  return {
      {prefix + "watch",
       "INSERT INTO " + s + ".instances (instance_id, idle, watching, heartbeat_at) VALUES ($1, true, true, now()) "
       "ON CONFLICT (instance_id) DO UPDATE SET idle = true, watching = true, heartbeat_at = now()"},
      // A security definer (028_dispatcher_locks.sql): DELETE on the table would let the dispatcher lock it.
      {prefix + "unwatch", "SELECT " + s + ".deregister_instance($1)"},
      {prefix + "watch_check", check_sql(s)},
  };
}

core::Status WatchStore::watch(std::string_view watcher_id) {
  auto done = connection_.exec_prepared(prefix_ + "watch", {std::string(watcher_id)});
  if (!done) return in_context("watching the outbox", done.error());
  return {};
}

core::Status WatchStore::unwatch(std::string_view watcher_id) {
  auto done = connection_.exec_prepared(prefix_ + "unwatch", {std::string(watcher_id)});
  if (!done) return in_context("no longer watching the outbox", done.error());
  return {};
}

core::Result<WatchCheck> WatchStore::check(std::string_view instance_id) {
  auto rows = connection_.exec_prepared(prefix_ + "watch_check", {std::string(instance_id)});
  if (!rows) return in_context("looking for work in a dormant outbox", rows.error());
  WatchCheck seen{std::string(rows.value().text(0, 0)), std::nullopt, std::nullopt, rows.value().boolean(0, 3)};
  // A clock step on the server can make it negative: then it is due now.
  if (const auto ms = rows.value().optional_int64(0, 1)) {
    seen.next_due = std::chrono::milliseconds(std::max<std::int64_t>(0, *ms));
  }
  if (const auto ms = rows.value().optional_int64(0, 2)) seen.other_lease = std::chrono::milliseconds(*ms);
  return seen;
}

}  // namespace outboxd::pg
