// The console's list of every outbox it serves: each one's latest backlog reading, ranked and cut into pages; no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "console/pages.hpp"

namespace outboxd::console {

// What the console last read of one outbox.
struct OutboxReading {
  std::string name;      // [A-Za-z0-9_.-]: checked by the loader and the catalog
  std::string database;  // user@host:port/dbname as config::describe() gives it, never a password
  std::string schema;
  // "ok"; "unreachable" (no connection); "failed" (a statement failed: not
  // migrated, no privilege); "unread" (not read since the console started).
  std::string state = "unread";
  std::string reason;          // why not "ok"
  std::int64_t ready = 0;      // pending and due, not backing off: the backlog
  std::int64_t retrying = 0;   // pending, backing off after a failure
  std::int64_t scheduled = 0;  // pending with due_at ahead
  std::int64_t parked = 0;
  std::optional<std::int64_t> oldest_ready_ms;  // the oldest ready row's wait; none when none is ready
  std::optional<double> read_at;                // seconds on the monotonic clock of the samples
};

// Outboxes shown on one page of the list.
inline constexpr std::size_t kOutboxesPerPage = 50;

// Those that could not be read first (they need someone), then the largest
// backlog (ready rows) first, then the most parked rows, then by name.
void rank_outboxes(std::vector<OutboxReading>& readings);

// Page `page` (from 1; past the last: the last) of `ranked`, as a document
// for /api/status: {"outboxes": [...], "page": N, "pages": N, "count": N}.
nlohmann::json outboxes_json(const std::vector<OutboxReading>& ranked, std::size_t page, double now);

// The same page as HTML: a link to each outbox's pages, links to the pages before and after.
std::string outboxes_page(const Frame& frame, const std::vector<OutboxReading>& ranked, std::size_t page,
                          double now);

// The page number a ?page= value asks for: 1 when it is missing or not a number.
std::size_t page_number(const std::string& value);

}  // namespace outboxd::console
