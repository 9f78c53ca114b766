// The list of outboxes: ranked by backlog, in pages of kOutboxesPerPage, each linking to /o/<name>/.
#include "console/outbox_list.hpp"

#include <algorithm>
#include <charconv>
#include <tuple>

#include "console/page_parts.hpp"

namespace outboxd::console {

namespace {

struct PageSpan {
  std::size_t number = 1;  // from 1
  std::size_t pages = 1;
  std::size_t first = 0;  // index into the ranked list
  std::size_t end = 0;
};

PageSpan span_of(std::size_t count, std::size_t page) {
  PageSpan span;
  span.pages = std::max<std::size_t>(1, (count + kOutboxesPerPage - 1) / kOutboxesPerPage);
  span.number = std::clamp<std::size_t>(page, 1, span.pages);
  span.first = (span.number - 1) * kOutboxesPerPage;
  span.end = std::min(count, span.first + kOutboxesPerPage);
  return span;
}

std::string seconds_text(std::int64_t milliseconds) { return std::to_string(milliseconds / 1000) + " s"; }

// How long ago the reading was taken, or that it was not yet.
std::string read_ago(const OutboxReading& reading, double now) {
  if (!reading.read_at) return "not yet";
  return std::to_string(static_cast<std::int64_t>(std::max(0.0, now - *reading.read_at))) + " s ago";
}

std::vector<Html> outbox_row(const OutboxReading& r, double now) {
  const std::string base = "/o/" + url_segment(r.name) + "/";
  const bool read = r.state == "ok";
  const auto count = [&](std::int64_t n) { return read ? text(std::to_string(n)) : Html{"-"}; };
  Html state = text(r.state);
  if (!r.reason.empty()) state = concat({state, element("div", "problem", text(r.reason, 400))});
  return {link(base, "", r.name),
          text(r.database, 300),
          text(r.schema),
          count(r.ready),
          count(r.retrying),
          count(r.scheduled),
          count(r.parked),
          read && r.oldest_ready_ms ? text(seconds_text(*r.oldest_ready_ms)) : Html{"-"},
          state,
          text(read_ago(r, now))};
}

Html page_links(const PageSpan& span) {
  std::string out;
  if (span.number > 1) out += link("/?page=" + std::to_string(span.number - 1), "", "previous").markup + " ";
  if (span.number < span.pages) out += link("/?page=" + std::to_string(span.number + 1), "", "more").markup;
  return element("p", "pages", {out});
}

}  // namespace

void rank_outboxes(std::vector<OutboxReading>& readings) {
  std::sort(readings.begin(), readings.end(), [](const OutboxReading& a, const OutboxReading& b) {
    const bool a_ok = a.state == "ok";
    const bool b_ok = b.state == "ok";
    return std::tie(a_ok, b.ready, b.parked, a.name) < std::tie(b_ok, a.ready, a.parked, b.name);
  });
}

std::size_t page_number(const std::string& value) {
  std::size_t page = 1;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), page);
  if (error != std::errc() || end != value.data() + value.size() || page == 0) return 1;
  return page;
}

nlohmann::json outboxes_json(const std::vector<OutboxReading>& ranked, std::size_t page, double now) {
  const PageSpan span = span_of(ranked.size(), page);
  nlohmann::json outboxes = nlohmann::json::array();
  for (std::size_t i = span.first; i < span.end; ++i) {
    const auto& r = ranked[i];
    nlohmann::json item{{"name", r.name}, {"database", r.database}, {"schema", r.schema}, {"state", r.state}};
    if (r.state == "ok") {
      item["ready"] = r.ready;
      item["retrying"] = r.retrying;
      item["scheduled"] = r.scheduled;
      item["parked"] = r.parked;
      item["oldest_ready_age_ms"] = r.oldest_ready_ms ? nlohmann::json(*r.oldest_ready_ms) : nlohmann::json();
    } else if (!r.reason.empty()) {
      item["reason"] = r.reason;
    }
    item["read_seconds_ago"] = r.read_at ? nlohmann::json(std::max(0.0, now - *r.read_at)) : nlohmann::json();
    outboxes.push_back(std::move(item));
  }
  return {{"outboxes", outboxes}, {"page", span.number}, {"pages", span.pages}, {"count", ranked.size()}};
}

std::string outboxes_page(const Frame& frame, const std::vector<OutboxReading>& ranked, std::size_t page,
                          double now) {
  const PageSpan span = span_of(ranked.size(), page);
  std::vector<std::vector<Html>> rows;
  for (std::size_t i = span.first; i < span.end; ++i) rows.push_back(outbox_row(ranked[i], now));
  std::string shown = "outboxes " + std::to_string(span.first + (span.end > span.first ? 1 : 0)) + "-" +
                      std::to_string(span.end) + " of " + std::to_string(ranked.size()) +
                      ": those that could not be read first, then by backlog (ready rows)";
  const Html content = concat({element("p", "count", text(shown)),
                               table({"outbox", "database", "schema", "ready", "retrying", "scheduled", "parked",
                                      "oldest ready", "state", "read"},
                                     rows),
                               page_links(span)});
  return framed(frame, "Outboxes", content);
}

}  // namespace outboxd::console
