// `outboxd console`'s pages and actions: each reads through the operator views or acts through the operator functions.
#include <charconv>

#include <spdlog/spdlog.h>

#include "console/conversation.hpp"
#include "console/html.hpp"
#include "console/page_parts.hpp"
#include "console/pages.hpp"
#include "daemon/console/console_app.hpp"
#include "daemon/operator_text.hpp"
#include "pg/operator_actions.hpp"
#include "pg/operator_views.hpp"
#include "pg/outbox_store.hpp"

namespace outboxd::daemon {

namespace {

// A writer's parked rows of one session id acted on at once, at most: a
// parked row blocks its session's later rows, so there are few.
constexpr int kSessionRowsActedOn = 10000;

constexpr int kBodyBytesShown = 64 * 1024;
constexpr int kTimelineRows = 1000;

void send(const httplib::Request& request, httplib::Response& response, const nlohmann::json& document,
          const std::function<std::string()>& html) {
  if (wants_json(request)) {
    response.set_content(document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace),
                         "application/json; charset=utf-8");
  } else {
    response.set_content(html(), "text/html; charset=utf-8");
  }
}

void failed(const httplib::Request& request, httplib::Response& response, const console::Frame& frame,
            const core::Error& error) {
  response.status = error.kind == core::ErrorKind::rejected ? 400 : 503;
  send(request, response, {{"error", error.message}},
       [&] { return console::problem_page(frame, "Database error", error.message); });
}

}  // namespace

void ConsoleApp::overview(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                          OutboxSite& site) {
  const console::Frame frame = frame_of(caller, site);
  const std::string& schema = site.config.outbox.schema;
  auto report = with_database(site, [&](pg::Connection& c) { return pg::OutboxStore(c, schema).status(); });
  if (!report) return failed(request, response, frame, report.error());
  nlohmann::json status = status_json(report.value());
  status["policy"] = policy_json(site.config.destinations);
  send(request, response, status, [&] {
    std::lock_guard lock(site.mutex);
    return console::overview_page(frame, status, site.samples, monotonic_seconds());
  });
}

void ConsoleApp::parked(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                        OutboxSite& site) {
  const console::Frame frame = frame_of(caller, site);
  pg::ParkedFilter filter{true, request.get_param_value("destination"), request.get_param_value("session"),
                          std::nullopt, 500};
  const std::string& schema = site.config.outbox.schema;
  auto listed = with_database(site, [&](pg::Connection& c) { return pg::OperatorViews(c, schema).parked(filter); });
  if (!listed) return failed(request, response, frame, listed.error());
  const nlohmann::json document{{"rows", parsed(listed.value().rows)}, {"matched", listed.value().matched}};
  send(request, response, document, [&] { return console::parked_page(frame, document); });
}

void ConsoleApp::row(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                     OutboxSite& site) {
  const console::Frame frame = frame_of(caller, site);
  const std::string message_id = part(request, 2);
  // A message id is its writer's own: ?writer= names whose, and an id that
  // several writers use without it gets the list to choose from.
  const std::string writer = request.get_param_value("writer");
  pg::RowHistory history;
  std::optional<pg::BodyPrefix> body;
  const auto read = with_database(site, [&](pg::Connection& c) -> core::Status {
    pg::OperatorViews views(c, site.config.outbox.schema);
    auto shown = views.show(message_id, writer);
    if (!shown) return shown.error();
    history = std::move(shown).value();
    if (!history.row) return {};
    auto prefix = views.body(history.row_id, kBodyBytesShown);
    if (!prefix) return prefix.error();
    body = std::move(prefix).value();
    return {};
  });
  if (!read) return failed(request, response, frame, read.error());
  if (!history.writers.empty()) {
    response.status = 300;
    send(request, response, {{"message_id", message_id}, {"writers", history.writers}},
         [&] { return console::writers_page(frame, message_id, history.writers); });
    return;
  }
  const nlohmann::json row = history.row ? nlohmann::json::parse(*history.row) : nlohmann::json();
  const auto events = parsed(history.events);
  if (!history.row) response.status = 404;
  send(request, response, {{"row", row}, {"events", events}}, [&] {
    const console::BodyView view = body ? console::BodyView{body->bytes, body->size, body->content_type}
                                        : console::BodyView{};
    return console::row_page(frame, message_id, row, events, view);
  });
}

void ConsoleApp::session(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                         OutboxSite& site) {
  const console::Frame frame = frame_of(caller, site);
  const std::string session_id = part(request, 2);
  auto timeline = with_database(
      site, [&](pg::Connection& c) { return pg::OperatorViews(c, site.config.outbox.schema).timeline(session_id, kTimelineRows); });
  if (!timeline) return failed(request, response, frame, timeline.error());
  const nlohmann::json document{{"session_id", session_id},
                                {"rows", parsed(timeline.value().rows.rows)},
                                {"matched", timeline.value().rows.matched},
                                {"limit", kTimelineRows},
                                {"workflow_states", parsed(timeline.value().workflow_states)}};
  send(request, response, document, [&] { return console::session_page(frame, session_id, document); });
}

// The newest kTimelineRows rows of a conversation, or those below ?before=.
void ConsoleApp::conversation(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                              OutboxSite& site) {
  const console::Frame frame = frame_of(caller, site);
  const std::string correlation_id = part(request, 2);
  std::int64_t before = 0;
  if (const auto asked = request.get_param_value("before"); !asked.empty()) {
    const auto [end, problem] = std::from_chars(asked.data(), asked.data() + asked.size(), before);
    if (problem != std::errc() || end != asked.data() + asked.size() || before < 1) {
      return failed(request, response, frame, {core::ErrorKind::rejected, "before: not a row id: " + asked});
    }
  }
  auto read = with_database(site, [&](pg::Connection& c) {
    return pg::OperatorViews(c, site.config.outbox.schema).conversation(correlation_id, kTimelineRows, before);
  });
  if (!read) return failed(request, response, frame, read.error());
  const nlohmann::json document = conversation_json(correlation_id, read.value(), kTimelineRows);
  if (document["rows"].empty() && document["workflow_states"].empty()) response.status = 404;
  send(request, response, document, [&] { return console::conversation_page(frame, correlation_id, document); });
}

// The overview's search box: to the row, the conversation or the session the id names.
void ConsoleApp::search(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                        OutboxSite& site) {
  const console::Frame frame = frame_of(caller, site);
  const std::string id = request.get_param_value("q");
  if (id.empty()) return response.set_redirect(site.base + "/", 303);
  auto kind = with_database(site, [&](pg::Connection& c) { return pg::OperatorViews(c, site.config.outbox.schema).kind_of(id); });
  if (!kind) return failed(request, response, frame, kind.error());
  switch (kind.value()) {
    case pg::OperatorViews::IdKind::message:
      return response.set_redirect(console::row_path(site.base, id, ""), 303);
    case pg::OperatorViews::IdKind::conversation:
      return response.set_redirect(site.base + "/conversations/" + console::url_segment(id), 303);
    case pg::OperatorViews::IdKind::session:
      return response.set_redirect(site.base + "/sessions/" + console::url_segment(id), 303);
  }
}

void ConsoleApp::audit(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                       OutboxSite& site) {
  const console::Frame frame = frame_of(caller, site);
  const console::AuditFilter shown{request.get_param_value("message_id"), request.get_param_value("session_id"),
                                   request.get_param_value("role"), request.get_param_value("since"),
                                   request.get_param_value("until")};
  const pg::AuditFilter filter{shown.message_id, shown.session_id, shown.role, shown.since, shown.until, 500};
  const std::string& schema = site.config.outbox.schema;
  auto listed = with_database(site, [&](pg::Connection& c) { return pg::OperatorViews(c, schema).audit(filter); });
  if (!listed) return failed(request, response, frame, listed.error());
  const nlohmann::json document{{"events", parsed(listed.value().rows)}, {"matched", listed.value().matched}};
  send(request, response, document, [&] { return console::audit_page(frame, shown, document); });
}

// The same functions as `outboxd requeue` and `skip`: each changed row gets a
// row_events entry with the console's database role and "console:<login name>".
void ConsoleApp::act(const httplib::Request& request, httplib::Response& response, const Caller& caller,
                     OutboxSite& site) {
  const console::Frame frame = frame_of(caller, site);
  const std::string kind = part(request, 2);
  const std::string id = part(request, 3);
  const std::string action = part(request, 4);
  // A session is its writer's: a session-wide action names one writer (the
  // form's `writer`; empty: rows written before there were writers) and acts
  // on that writer's parked rows of the session id, by their message ids.
  const std::string writer = form_field(request, "writer");
  auto changed = with_database(site, [&](pg::Connection& c) -> core::Result<std::vector<std::string>> {
    pg::ParkedTarget target;
    target.writer = writer;
    if (kind == "parked") {
      target.message_ids = {id};
    } else {
      pg::ParkedFilter filter;
      filter.session_id = id;
      filter.limit = kSessionRowsActedOn;
      auto listed = pg::OperatorViews(c, site.config.outbox.schema).parked(filter);
      if (!listed) return listed.error();
      for (const auto& text : listed.value().rows) {
        const auto row = nlohmann::json::parse(text);
        const auto& row_writer = row.value("writer", nlohmann::json());
        if ((row_writer.is_string() ? row_writer.get<std::string>() : "") == writer) {
          target.message_ids.push_back(row.at("message_id").get<std::string>());
        }
      }
      if (target.message_ids.empty()) return std::vector<std::string>{};
    }
    pg::OperatorActions actions(c, site.config.outbox.schema, "console:" + caller.name);
    return action == "requeue" ? actions.requeue(target) : actions.skip(target);
  });
  if (!changed) return failed(request, response, frame, changed.error());
  const auto& ids = changed.value();
  spdlog::info("console: {}{} by {}: {} parked row{}: {}", site.name.empty() ? "" : "outbox " + site.name + ": ", action,
               caller.name, ids.size(), ids.size() == 1 ? "" : "s", id_list(ids));
  if (wants_json(request)) {
    send(request, response, {{"action", action}, {"changed", ids}}, [] { return std::string(); });
  } else {
    response.set_redirect(site.base + (kind == "parked" ? "/parked" : "/sessions/" + console::url_segment(id)), 303);
  }
}

}  // namespace outboxd::daemon
