// The statements of `outboxd requeue`, `skip` and `replay`: one call of a security-definer function each, every value bound.
#include "pg/operator_actions.hpp"

#include <map>

#include "pg/text_codec.hpp"

namespace outboxd::pg {
namespace {

core::Error in_context(const char* context, const core::Error& error) {
  return {error.kind, std::string(context) + ": " + error.message};
}

std::optional<std::string> array_unless_empty(const std::vector<std::string>& values) {
  if (values.empty()) return std::nullopt;
  return text_array_literal(values);
}

std::optional<std::string> ago_ms(const TimeBound& bound) {
  if (!bound.ago) return std::nullopt;
  return std::to_string(bound.ago->count());
}

// A bound given as a time, or as a span before now(); NULL when neither.
std::string bound_sql(int at, int ago) {
  return "coalesce($" + std::to_string(at) + "::timestamptz, now() - $" + std::to_string(ago) +
         "::bigint * interval '1 millisecond')";
}

ReplayReport replay_report(const Rows& rows) {
  ReplayReport report;
  std::map<std::string, std::int64_t> behind;  // per session: the most behind any of its rows
  for (int i = 0; i < rows.size(); ++i) {
    report.message_ids.emplace_back(rows.text(i, 0));
    report.matched = rows.int64(i, 2);
    if (!rows.is_null(i, 1)) {
      auto& most = behind[std::string(rows.text(i, 1))];
      most = std::max(most, rows.int64(i, 3));
    }
  }
  for (const auto& [session, count] : behind) report.waiting_behind += count;
  return report;
}

}  // namespace

OperatorActions::OperatorActions(Connection& connection, const std::string& schema, std::string os_user)
    : connection_(connection), schema_(quote_ident(schema)), os_user_(unless_empty(os_user)) {}

core::Result<std::vector<std::string>> OperatorActions::act_on_parked(const char* function,
                                                                      const ParkedTarget& target,
                                                                      const char* context) {
  auto rows = connection_.exec_params(
      "SELECT * FROM " + schema_ + "." + function + "($1::text[], $2, $3::boolean, $4, $5)",
      {array_unless_empty(target.message_ids), unless_empty(target.session_id), target.all_parked ? "t" : "f",
       os_user_, unless_empty(target.writer)});
  if (!rows) return in_context(context, rows.error());
  std::vector<std::string> ids;
  for (int i = 0; i < rows.value().size(); ++i) ids.emplace_back(rows.value().text(i, 0));
  return ids;
}

core::Result<std::vector<std::string>> OperatorActions::requeue(const ParkedTarget& target) {
  return act_on_parked("requeue_parked", target, "requeueing parked rows");
}

core::Result<std::vector<std::string>> OperatorActions::skip(const ParkedTarget& target) {
  return act_on_parked("skip_parked", target, "skipping parked rows");
}

core::Result<ReplayReport> OperatorActions::replay(const ReplaySelection& s, bool dry_run) {
  auto rows = connection_.exec_params(
      "SELECT message_id, row_session, matched, waiting_behind FROM " + schema_ +
          ".replay($1::text[], $2, $3, " + bound_sql(4, 5) + ", " + bound_sql(6, 7) + ", $8::int, $9::boolean, $10, $11)",
      {array_unless_empty(s.message_ids), unless_empty(s.session_id), unless_empty(s.destination), s.since.at,
       ago_ms(s.since), s.until.at, ago_ms(s.until), std::to_string(s.limit), dry_run ? "t" : "f", os_user_,
       unless_empty(s.writer)});
  if (!rows) return in_context(dry_run ? "counting rows to replay" : "replaying rows", rows.error());
  return replay_report(rows.value());
}

}  // namespace outboxd::pg
