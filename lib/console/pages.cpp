// The login, overview, parked, audit and problem pages of the console.
#include "console/pages.hpp"

#include <cmath>

#include "console/chart.hpp"
#include "console/page_parts.hpp"

namespace outboxd::console {

namespace {

constexpr std::string_view kStylesheet =
    "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1f2328}"
    "header{display:flex;gap:1em;align-items:center;padding:.5em 1em;background:#f6f8fa;border-bottom:1px solid #d0d7de}"
    "nav a{margin-right:1em}.who{margin-left:auto;color:#57606a}main{padding:0 1em 2em}"
    "table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #d0d7de;padding:2px 6px;text-align:left;"
    "vertical-align:top;max-width:24em;overflow-wrap:break-word}th{background:#f6f8fa}form{display:inline}button{margin:1px}"
    "pre{background:#f6f8fa;padding:.5em;overflow:auto;max-height:40em}.problem{color:#cf222e}"
    ".count{color:#57606a}.charts{display:flex;flex-wrap:wrap;gap:1em}label{margin-right:1em}"
    ".login form{display:block}.login input{display:block;margin:.3em 0 .8em}.search{display:block;margin:.8em 0}"
    ".wide{overflow-x:auto}.who-did{color:#57606a}"
    ".timeline{list-style:none;margin:.5em 0 1em .4em;padding:0 0 0 1em;border-left:3px solid #d0d7de}"
    ".timeline li{position:relative;margin:0 0 .5em;overflow-wrap:anywhere}"
    ".timeline li::before{content:'';position:absolute;left:-1.5em;top:.35em;width:.7em;height:.7em;"
    "border-radius:50%;background:#8c959f}"
    ".timeline .dispatched::before,.timeline .received::before{background:#1a7f37}"
    ".timeline .parked::before,.timeline .skipped::before,.timeline .cancelled::before{background:#cf222e}"
    ".timeline .requeued::before,.timeline .replayed::before,.timeline .fired::before,"
    ".timeline .rescheduled::before{background:#9a6700}"
    ".timeline time{font-family:ui-monospace,monospace;color:#57606a;margin-right:.3em}";

std::vector<Html> destination_row(const std::string& name, const nlohmann::json& counts, const SampleHistory& samples,
                                  double now) {
  const auto& age = field(counts, "oldest_pending_age_ms");
  return {text(name),
          cell(field(counts, "due")),
          cell(field(counts, "scheduled")),
          cell(field(counts, "retrying")),
          cell(field(counts, "parked")),
          age.is_number() ? text(std::to_string(age.get<std::int64_t>() / 1000) + " s") : Html{"-"},
          line_chart("waiting, last hour", {samples.destination_backlog(name, now)}, samples.window(), 200, 50)};
}

// destinations: as policy_json() gives it: a row per destination named, "-" for a setting left out.
Html policy_table(const nlohmann::json& policy) {
  // Whole numbers without a fraction: 200, not 200.0.
  const auto setting = [](const nlohmann::json& item, const char* key) {
    const auto& value = field(item, key);
    if (!value.is_number() || value.get<double>() == 0) return Html{"-"};
    const double number = value.get<double>();
    return number == std::floor(number) ? text(std::to_string(static_cast<long long>(number))) : cell(value);
  };
  std::vector<std::vector<Html>> rows;
  for (const auto& item : policy) {
    rows.push_back({cell(field(item, "destination"), 256), cell(field(item, "priority")), setting(item, "max_rate"),
                    setting(item, "burst"), setting(item, "max_in_flight")});
  }
  return table({"destination", "priority", "max rows/s", "burst", "max in flight"}, rows);
}

std::string count_of(const nlohmann::json& counts, const char* key) {
  const auto& value = field(counts, key);
  return value.is_number() ? std::to_string(value.get<std::int64_t>()) : "0";
}

std::string filter_input(const char* name, const char* label, const std::string& value) {
  return "<label>" + escape(label) + " <input name=\"" + escape(name) + "\" value=\"" + escape(value, 300) +
         "\"></label>";
}

}  // namespace

std::string_view stylesheet() { return kStylesheet; }

std::string login_page(std::string_view problem) {
  std::string content = "<div class=\"login\">";
  if (!problem.empty()) content += "<p class=\"problem\">" + escape(problem) + "</p>";
  content +=
      "<form method=\"post\" action=\"/login\"><label>Token <input type=\"password\" name=\"token\" "
      "autocomplete=\"current-password\" required></label><label>Your name (recorded with every action) "
      "<input name=\"name\" maxlength=\"64\" required></label><button type=\"submit\">Log in</button></form></div>";
  return framed({}, "Log in", {content});
}

std::string overview_page(const Frame& frame, const nlohmann::json& status, const SampleHistory& samples, double now) {
  std::string content = "<form method=\"get\" action=\"" + escape(frame.base + "/search") +
                        "\" class=\"search\"><label>Message, session or conversation id <input name=\"q\" "
                        "maxlength=\"128\" required></label><button type=\"submit\">Find</button></form>"
                        "<div class=\"charts\">" +
                        line_chart("backlog (rows)", samples.backlog(now), samples.window()).markup +
                        line_chart("rows leaving the backlog per second", {samples.departures(now)}, samples.window())
                            .markup +
                        "</div>";
  std::vector<std::vector<Html>> rows;
  for (const auto& [name, counts] : field(status, "destinations").items()) {
    rows.push_back(destination_row(name, counts, samples, now));
  }
  content += table({"destination", "due", "scheduled", "retrying", "parked", "oldest due", "waiting, last hour"}, rows)
                 .markup;
  if (const auto left_out = samples.left_out(); left_out > 0) {
    content += element("p", "count",
                       text("charts: the " + std::to_string(kMaxSampledDestinations) +
                            " destinations owing the most rows are sampled; " + std::to_string(left_out) +
                            " more were left out of the latest sample, their charts have gaps"))
                   .markup;
  }
  if (const auto& policy = field(status, "policy"); policy.is_array() && !policy.empty()) {
    content += "<h2>Delivery policy</h2>" + policy_table(policy).markup;
  }
  const auto& total = field(status, "total");
  content += element("p", "count", text("in all: " + count_of(total, "due") + " due, " + count_of(total, "scheduled") +
                                        " scheduled, " + count_of(total, "retrying") + " retrying, " +
                                        count_of(total, "parked") + " parked"))
                 .markup;
  return framed(frame, "Overview", {content});
}

std::string parked_page(const Frame& frame, const nlohmann::json& listing) {
  std::vector<std::vector<Html>> rows;
  std::size_t listed = 0;
  for (const auto& r : field(listing, "rows")) {
    ++listed;
    const std::string id = text_of(field(r, "message_id"));
    const std::string session = text_of(field(r, "session_id"));
    const std::string parked_path = frame.base + "/parked/" + url_segment(id);
    // The row's writer names it: another writer's row with the same message id is not touched.
    const std::string whose = writer_of(r);
    Html actions{link(row_path(frame.base, id, whose), "", "show").markup};
    if (field(r, "status") == "parked") {
      actions.markup += action_form(parked_path + "/requeue", "requeue", frame.csrf, "writer", whose).markup +
                        action_form(parked_path + "/skip", "skip", frame.csrf, "writer", whose).markup;
    }
    Html session_cell = session_link(frame.base, r);
    if (!session.empty() && field(r, "status") == "parked") {
      const std::string session_path = frame.base + "/sessions/" + url_segment(session);
      // The row's writer's session: another writer's rows of the session id are not touched.
      session_cell.markup +=
          "<br>" + action_form(session_path + "/requeue", "requeue session", frame.csrf, "writer", whose).markup +
          action_form(session_path + "/skip", "skip session", frame.csrf, "writer", whose).markup;
    }
    rows.push_back({row_link(frame.base, r), cell(field(r, "status")), cell(field(r, "destination")), session_cell,
                    conversation_link(frame.base, r), cell(field(r, "attempts")), when(field(r, "first_failed_at")), when(field(r, "last_failed_at")),
                    cell(field(r, "waiting_behind")), cell(field(r, "last_error"), 400), actions});
  }
  const Html content = concat({count_line(listed, field(listing, "matched").is_number()
                                                      ? field(listing, "matched").get<std::int64_t>() : 0,
                                          "row"),
                               table({"message id", "status", "destination", "session", "conversation", "attempts", "first failed",
                                      "last failed", "waiting behind", "last error", "actions"},
                                     rows)});
  return framed(frame, "Parked and retrying rows", content);
}

std::string audit_page(const Frame& frame, const AuditFilter& filter, const nlohmann::json& listing) {
  std::string form = "<form method=\"get\" action=\"" + escape(frame.base, 4096) + "/audit\">" +
                     filter_input("message_id", "row", filter.message_id) +
                     filter_input("session_id", "session", filter.session_id) +
                     filter_input("role", "database role", filter.role) + filter_input("since", "since", filter.since) +
                     filter_input("until", "until", filter.until) + "<button type=\"submit\">Filter</button></form>";
  std::vector<std::vector<Html>> rows;
  std::size_t listed = 0;
  for (const auto& e : field(listing, "events")) {
    ++listed;
    rows.push_back({when(field(e, "at")), cell(field(e, "action")), row_link(frame.base, e),
                    field(e, "session_id").is_string()
                        ? link(frame.base + "/sessions/", field(e, "session_id").get<std::string>(),
                               field(e, "session_id").get<std::string>())
                        : cell(field(e, "session_id")),
                    cell(field(e, "db_role")), cell(field(e, "os_user")), cell(field(e, "detail"), 400)});
  }
  const auto& matched = field(listing, "matched");
  const Html content = concat({Html{form}, count_line(listed, matched.is_number() ? matched.get<std::int64_t>() : 0, "event"),
                               table({"at", "action", "row", "session", "database role", "operator", "detail"}, rows)});
  return framed(frame, "Audit trail", content);
}

std::string problem_page(const Frame& frame, std::string_view title, std::string_view text_shown) {
  return framed(frame, title, element("p", "problem", text(text_shown)));
}

}  // namespace outboxd::console
