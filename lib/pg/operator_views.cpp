// The statements of `outboxd parked`, `show` and `timeline` and the console's pages: every value bound, each answer built as JSON by PostgreSQL.
#include "pg/operator_views.hpp"

#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

// Pending rows of the row's session after it: they wait while it is parked or backing off. A session
// is its writer's, as the claim sees it (outbox_sql.cpp): another writer's rows of the session id do not wait.
std::string waiting_behind(const std::string& t) {
  return "(SELECT count(*) FROM " + t + " b WHERE b.session_id = m.session_id AND b.id > m.id "
         "AND b.writer IS NOT DISTINCT FROM m.writer AND b.status = 'pending')";
}

std::string parked_sql(const std::string& t) {
  return "SELECT jsonb_build_object('message_id', m.message_id, 'destination', m.destination, "
         "'session_id', m.session_id, 'writer', m.writer, 'correlation_id', m.correlation_id, "
         "'status', m.status, 'attempts', m.attempts, "
         "'first_failed_at', m.first_failed_at, 'last_failed_at', m.last_failed_at, "
         "'next_attempt_at', m.next_attempt_at, 'last_error', m.last_error, "
         "'waiting_behind', " + waiting_behind(t) + ")::text, count(*) OVER () "
         "FROM " + t + " m "
         "WHERE (m.status = 'parked' OR ($1::boolean AND m.status = 'pending' AND m.attempts > 0)) "
         "AND ($2::text IS NULL OR m.destination = $2) AND ($3::text IS NULL OR m.session_id = $3) "
         "AND ($4::bigint IS NULL OR coalesce(m.first_failed_at, m.created_at) "
         "<= now() - $4::bigint * interval '1 millisecond') "
         "ORDER BY m.id LIMIT $5";
}

// One row per writer that has the id (a writer has it once), of one writer when named.
std::string show_sql(const std::string& t) {
  return "SELECT (to_jsonb(m) - 'body' || jsonb_build_object('body_bytes', octet_length(m.body), "
         "'body_head', encode(substring(m.body FROM 1 FOR 96), 'hex')))::text, m.id, coalesce(m.writer, '') "
         "FROM " + t + " m WHERE m.message_id = $1 AND ($2::text IS NULL OR m.writer = $2) ORDER BY m.writer LIMIT 100";
}

// The row's events; a purged row's by its message id.
std::string events_sql(const std::string& schema) {
  return "SELECT to_jsonb(e)::text FROM " + schema + ".row_events e "
         "WHERE CASE WHEN $1::bigint IS NULL THEN e.message_id = $2 ELSE e.row_id = $1 END ORDER BY e.id LIMIT 1000";
}

// A row of a timeline, as a JSON object: what an operator calls its state
// (pending split by why it waits), its place and its lineage.
std::string timeline_row() {
  return "jsonb_build_object('id', m.id, 'message_id', m.message_id, 'state', CASE m.status "
         "WHEN 'pending' THEN CASE WHEN m.next_attempt_at > now() THEN 'retrying' "
         "WHEN m.due_at > now() THEN 'scheduled' ELSE 'pending' END "
         "WHEN 'cancelled' THEN CASE WHEN m.last_error LIKE 'skipped by operator%' THEN 'skipped' "
         "ELSE 'cancelled' END ELSE m.status END, "
         "'writer', m.writer, 'destination', m.destination, 'session_id', m.session_id, 'subject', m.subject, "
         "'created_at', m.created_at, 'due_at', m.due_at, "
         "'dispatched_at', m.dispatched_at, 'cancelled_at', m.cancelled_at, 'attempts', m.attempts, "
         "'last_error', m.last_error, 'correlation_id', m.correlation_id, "
         "'parent_message_id', m.parent_message_id, 'originating_message_id', m.originating_message_id)";
}

std::string timeline_sql(const std::string& t) {
  return "SELECT " + timeline_row() + "::text, count(*) OVER () FROM " + t +
         " m WHERE m.session_id = $1 ORDER BY m.id LIMIT $2";
}

// The newest $2 + 1 rows of conversation $1 below id $3 (messages_correlation_idx
// read backwards), returned oldest first; the extra row only says that there
// are more. A row's events come by message id (row_events_message_idx), the
// row's own by row id; its receipts are of its message id sent by its writer.
std::string conversation_sql(const std::string& schema, const std::string& t) {
  return "SELECT (" + timeline_row() + " || jsonb_build_object("
         "'events', coalesce((SELECT jsonb_agg(to_jsonb(e) - 'row_id' ORDER BY e.id) FROM (SELECT * FROM " + schema +
         ".row_events e WHERE e.message_id = m.message_id AND e.row_id = m.id ORDER BY e.id LIMIT " +
         std::to_string(OperatorViews::kEventsPerRow) + ") e), '[]'::jsonb), "
         "'receipts', coalesce((SELECT jsonb_agg(to_jsonb(r)) FROM " + schema +
         ".message_receipts(m.message_id, coalesce(m.writer, '')) r), '[]'::jsonb)))::text "
         "FROM (SELECT * FROM " + t + " m WHERE m.correlation_id = $1 AND ($3::bigint = 0 OR m.id < $3::bigint) "
         "ORDER BY m.id DESC LIMIT $2::int + 1) m ORDER BY m.id";
}

std::string conversation_states_sql(const std::string& schema) {
  return "SELECT to_jsonb(w)::text FROM " + schema + ".conversation_states($1) w";
}

std::string workflow_sql(const std::string& schema) {
  return "SELECT to_jsonb(w)::text FROM " + schema + ".workflow_states($1) w";
}

// Newest first over row_events_at_idx; the session comes from the row, which may be gone.
std::string audit_sql(const std::string& schema, const std::string& t) {
  return "SELECT (to_jsonb(e) || jsonb_build_object('session_id', m.session_id))::text, count(*) OVER () "
         "FROM " + schema + ".row_events e LEFT JOIN " + t + " m ON m.id = e.row_id "
         "WHERE ($1::text IS NULL OR e.message_id = $1) AND ($2::text IS NULL OR m.session_id = $2) "
         "AND ($3::text IS NULL OR e.db_role = $3) AND ($4::timestamptz IS NULL OR e.at >= $4::timestamptz) "
         "AND ($5::timestamptz IS NULL OR e.at < $5::timestamptz) ORDER BY e.at DESC, e.id DESC LIMIT $6";
}

std::string body_sql(const std::string& t) {
  return "SELECT encode(substring(m.body FROM 1 FOR $2::int), 'hex'), octet_length(m.body), m.content_type "
         "FROM " + t + " m WHERE m.id = $1";
}

std::string from_hex(std::string_view hex) {
  const auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  std::string bytes;
  bytes.reserve(hex.size() / 2);
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) bytes += static_cast<char>(nibble(hex[i]) * 16 + nibble(hex[i + 1]));
  return bytes;
}

core::Error in_context(const char* context, const core::Error& error) {
  return {error.kind, std::string(context) + ": " + error.message};
}

std::vector<std::string> first_column(const Rows& rows) {
  std::vector<std::string> out;
  for (int i = 0; i < rows.size(); ++i) out.emplace_back(rows.text(i, 0));
  return out;
}

Listing listing(const Rows& rows) {
  return {first_column(rows), rows.size() > 0 ? rows.int64(0, 1) : 0};
}

}  // namespace

OperatorViews::OperatorViews(Connection& connection, const std::string& schema)
    : connection_(connection), schema_(quote_ident(schema)), table_(schema_ + ".messages") {}

template <class Read>
auto OperatorViews::in_utc(const char* context, Read read) -> decltype(read()) {
  if (auto begun = connection_.exec("BEGIN READ ONLY"); !begun) return in_context(context, begun.error());
  auto done = connection_.exec("SET LOCAL TimeZone = 'UTC'");
  auto result = done ? read() : decltype(read())(in_context(context, done.error()));
  // A failed read left the transaction aborted: ROLLBACK ends it either way.
  if (auto ended = connection_.exec("ROLLBACK"); !ended && result) return in_context(context, ended.error());
  return result;
}

core::Result<Listing> OperatorViews::parked(const ParkedFilter& filter) {
  return in_utc("listing failed rows", [&]() -> core::Result<Listing> {
    std::optional<std::string> older;
    if (filter.older_than) older = std::to_string(filter.older_than->count());
    auto rows = connection_.exec_params(parked_sql(table_), {filter.retrying ? "t" : "f", unless_empty(filter.destination),
                                                             unless_empty(filter.session_id), older,
                                                             std::to_string(filter.limit)});
    if (!rows) return in_context("listing failed rows", rows.error());
    return listing(rows.value());
  });
}

core::Result<RowHistory> OperatorViews::show(const std::string& message_id, const std::string& writer) {
  return in_utc("reading a row", [&]() -> core::Result<RowHistory> {
    auto found = connection_.exec_params(show_sql(table_), {message_id, unless_empty(writer)});
    if (!found) return in_context("reading a row", found.error());
    const Rows& rows = found.value();
    RowHistory history;
    if (rows.size() > 1) {
      for (int i = 0; i < rows.size(); ++i) history.writers.emplace_back(rows.text(i, 2));
      return history;
    }
    std::optional<std::string> row_id;
    if (rows.size() == 1) {
      history.row = std::string(rows.text(0, 0));
      history.row_id = rows.int64(0, 1);
      row_id = std::to_string(history.row_id);
    }
    auto events = connection_.exec_params(events_sql(schema_), {row_id, message_id});
    if (!events) return in_context("reading a row's events", events.error());
    history.events = first_column(events.value());
    return history;
  });
}

core::Result<SessionTimeline> OperatorViews::timeline(const std::string& session_id, int limit) {
  return in_utc("reading a session", [&]() -> core::Result<SessionTimeline> {
    auto rows = connection_.exec_params(timeline_sql(table_), {session_id, std::to_string(limit)});
    if (!rows) return in_context("reading a session", rows.error());
    auto states = connection_.exec_params(workflow_sql(schema_), {session_id});
    if (!states) return in_context("reading a session's workflow state", states.error());
    return SessionTimeline{listing(rows.value()), first_column(states.value())};
  });
}

core::Result<Conversation> OperatorViews::conversation(const std::string& correlation_id, int limit,
                                                       std::int64_t before) {
  return in_utc("reading a conversation", [&]() -> core::Result<Conversation> {
    auto rows = connection_.exec_params(conversation_sql(schema_, table_),
                                        {correlation_id, std::to_string(limit), std::to_string(before)});
    if (!rows) return in_context("reading a conversation", rows.error());
    auto states = connection_.exec_params(conversation_states_sql(schema_), {correlation_id});
    if (!states) return in_context("reading a conversation's workflow state", states.error());
    Conversation conversation{first_column(rows.value()), false, first_column(states.value())};
    // The extra row read is the oldest: it only says that there are more.
    if (conversation.rows.size() > static_cast<std::size_t>(limit)) {
      conversation.rows.erase(conversation.rows.begin());
      conversation.more = true;
    }
    return conversation;
  });
}

core::Result<OperatorViews::IdKind> OperatorViews::kind_of(const std::string& id) {
  // messages_message_id_key, then messages_correlation_idx: one index probe each.
  auto rows = connection_.exec_params("SELECT EXISTS (SELECT 1 FROM " + table_ + " m WHERE m.message_id = $1), "
                                      "EXISTS (SELECT 1 FROM " + table_ + " m WHERE m.correlation_id = $1)",
                                      {id});
  if (!rows) return in_context("looking an id up", rows.error());
  if (rows.value().boolean(0, 0)) return IdKind::message;
  return rows.value().boolean(0, 1) ? IdKind::conversation : IdKind::session;
}

core::Result<Listing> OperatorViews::audit(const AuditFilter& filter) {
  return in_utc("reading the audit trail", [&]() -> core::Result<Listing> {
    auto rows = connection_.exec_params(
        audit_sql(schema_, table_), {unless_empty(filter.message_id), unless_empty(filter.session_id),
                                     unless_empty(filter.db_role), unless_empty(filter.since),
                                     unless_empty(filter.until), std::to_string(filter.limit)});
    if (!rows) return in_context("reading the audit trail", rows.error());
    return listing(rows.value());
  });
}

core::Result<std::int64_t> OperatorViews::inserted_total() {
  auto rows = connection_.exec_params("SELECT coalesce(pg_stat_get_tuples_inserted($1::regclass), 0)", {table_});
  if (!rows) return in_context("reading the outbox's insert count", rows.error());
  return rows.value().int64(0, 0);
}

core::Result<std::optional<BodyPrefix>> OperatorViews::body(std::int64_t row_id, int max_bytes) {
  auto rows = connection_.exec_params(body_sql(table_), {std::to_string(row_id), std::to_string(max_bytes)});
  if (!rows) return in_context("reading a row's body", rows.error());
  if (rows.value().size() == 0) return std::optional<BodyPrefix>();
  const Rows& r = rows.value();
  return std::optional<BodyPrefix>(BodyPrefix{from_hex(r.text(0, 0)), r.int64(0, 1),
                                              r.is_null(0, 2) ? std::string() : std::string(r.text(0, 2))});
}

}  // namespace outboxd::pg
