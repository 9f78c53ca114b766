// Text output of the operator commands: what a terminal shows of rows other people wrote.
#include "daemon/operator_text.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "core/safe_text.hpp"
#include "dispatch/destination_policy.hpp"

namespace outboxd::daemon {
namespace {

constexpr std::size_t kListedIds = 10;

// Cuts at a UTF-8 character boundary.
std::string cut(const std::string& text, std::size_t width) {
  if (text.size() <= width) return text;
  std::size_t end = width;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "...";
}

}  // namespace

std::string shown(std::string_view text, std::size_t width) { return cut(core::safe_text(text), width); }

std::string cell(const nlohmann::json& value, std::size_t width) {
  if (value.is_null()) return "-";
  return shown(value.is_string() ? value.get<std::string>() : value.dump(), width);
}

// The date before the 'T' (four digits or more), the time's first eight
// characters after it; the fraction and the offset (+00:00) dropped.
std::string when(const nlohmann::json& value) {
  if (!value.is_string()) return "-";
  const std::string text = value.get<std::string>();
  const std::size_t t = text.find('T');
  if (t == std::string::npos || text.size() < t + 9) return shown(text);
  const char* era = text.ends_with(" BC") ? " BC" : "";
  return shown(text.substr(0, t) + ' ' + text.substr(t + 1, 8) + 'Z' + era);
}

void print_json(const nlohmann::json& document) {
  std::cout << document.dump(2, ' ', true, nlohmann::json::error_handler_t::replace) << '\n';
}

void print_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths(header.size());
  auto widen = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  };
  widen(header);
  for (const auto& row : rows) widen(row);
  auto print = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    std::cout << line << '\n';
  };
  print(header);
  for (const auto& row : rows) print(row);
}

void print_count(const char* noun, std::size_t listed, std::int64_t matched) {
  std::cout << matched << ' ' << noun << (matched == 1 ? "" : "s");
  const auto more = matched - static_cast<std::int64_t>(listed);
  if (more > 0) std::cout << ", " << listed << " shown: " << more << " more (raise --limit to see them)";
  std::cout << '\n';
}

std::string id_list(const std::vector<std::string>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size() && i < kListedIds; ++i) out += (i == 0 ? "" : ", ") + shown(ids[i], 200);
  if (ids.size() > kListedIds) out += " and " + std::to_string(ids.size() - kListedIds) + " more";
  return out;
}

std::vector<nlohmann::json> parsed(const std::vector<std::string>& documents) {
  std::vector<nlohmann::json> out;
  out.reserve(documents.size());
  for (const auto& document : documents) out.push_back(nlohmann::json::parse(document));
  return out;
}

namespace {

nlohmann::json counts_json(const pg::DestinationStatus& s) {
  nlohmann::json j{{"pending", s.pending}, {"due", s.due},       {"scheduled", s.scheduled},
                   {"retrying", s.retrying}, {"parked", s.parked}, {"oldest_pending_age_ms", nullptr}};
  if (s.oldest_pending_age) j["oldest_pending_age_ms"] = s.oldest_pending_age->count();
  return j;
}

}  // namespace

nlohmann::json conversation_json(const std::string& correlation_id, const pg::Conversation& conversation, int limit) {
  const nlohmann::json rows = parsed(conversation.rows);
  return {{"correlation_id", correlation_id},
          {"rows", rows},
          {"more", conversation.more},
          {"older_before", conversation.more ? rows.front()["id"] : nlohmann::json()},
          {"limit", limit},
          {"workflow_states", parsed(conversation.workflow_states)}};
}

nlohmann::json policy_json(const std::vector<config::DestinationEntry>& destinations) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& entry : destinations) {
    const dispatch::DestinationPolicy policy{entry.priority, entry.max_rate, entry.burst, 0};
    out.push_back({{"destination", entry.name},
                   {"priority", entry.priority},
                   {"max_rate", entry.max_rate},
                   {"burst", entry.max_rate > 0 ? dispatch::effective_burst(policy) : 0.0},
                   {"max_in_flight", entry.max_in_flight}});
  }
  return out;
}

nlohmann::json status_json(const pg::StatusReport& report) {
  nlohmann::json out{{"total", counts_json(report.total)}, {"destinations", nlohmann::json::object()}};
  for (const auto& d : report.destinations) out["destinations"][d.destination] = counts_json(d);
  return out;
}

}  // namespace outboxd::daemon
