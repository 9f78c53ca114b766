// The console's pages as HTML, from the JSON documents the operator views return; no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "console/html.hpp"
#include "console/samples.hpp"

namespace outboxd::console {

// The Content-Security-Policy of every response: nothing but the page itself
// and its stylesheet; no script at all; forms post only to the console.
inline constexpr const char* kContentSecurityPolicy =
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; "
    "base-uri 'none'";

// The stylesheet, served at /console.css.
std::string_view stylesheet();

// What every page shows around its content: who is logged in, the CSRF
// token its forms carry, and, when the console serves many outboxes, which
// one the page is of and the path its links start with.
struct Frame {
  // A constructor, not an aggregate: a frame of one outbox leaves the last two out.
  Frame(std::string who = {}, std::string csrf_token = {}, std::string outbox_name = {}, std::string base_path = {})
      : operator_name(std::move(who)), csrf(std::move(csrf_token)), outbox(std::move(outbox_name)),
        base(std::move(base_path)) {}

  std::string operator_name;
  std::string csrf;
  std::string outbox;  // empty: the console serves one outbox
  std::string base;    // "" or "/o/<name>": every link and form of an outbox's page starts with it
};

std::string login_page(std::string_view problem);

// `status`: {"total": {...}, "destinations": {name: {pending, due, scheduled,
// retrying, parked, oldest_pending_age_ms}}, "policy": [...]} as `outboxd status --json`.
std::string overview_page(const Frame& frame, const nlohmann::json& status, const SampleHistory& samples, double now);

// `listing`: {"rows": [...], "matched": N} as `outboxd parked --json`.
std::string parked_page(const Frame& frame, const nlohmann::json& listing);

// The row's body, up to what the console reads of it.
struct BodyView {
  std::string bytes;
  std::int64_t size = 0;  // the whole body's
  std::string content_type;
};

// `row`: the row as `outboxd show --json` gives it (null when none has the id).
std::string row_page(const Frame& frame, std::string_view message_id, const nlohmann::json& row,
                     const std::vector<nlohmann::json>& events, const BodyView& body);

// A message id that rows of several writers have, none named: a link to each writer's row.
std::string writers_page(const Frame& frame, std::string_view message_id, const std::vector<std::string>& writers);

// The body for people: pretty JSON when it parses as JSON, text when it is
// UTF-8 without control characters (newlines and tabs aside), else a hex dump;
// escaped whichever.
Html body_html(const BodyView& body);

// `timeline`: {"rows": [...], "matched": N, "workflow": [...]} as `outboxd timeline --json`.
std::string session_page(const Frame& frame, std::string_view session_id, const nlohmann::json& timeline);

// The filter the audit page was asked with, shown back in its form.
struct AuditFilter {
  std::string message_id;
  std::string session_id;
  std::string role;
  std::string since;  // a time PostgreSQL reads
  std::string until;
};

std::string audit_page(const Frame& frame, const AuditFilter& filter, const nlohmann::json& listing);

// A page saying what went wrong (a database error, a row not found).
std::string problem_page(const Frame& frame, std::string_view title, std::string_view text);

}  // namespace outboxd::console
