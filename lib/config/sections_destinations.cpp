// The reader of destinations:, the operator's delivery policy by destination name.
#include <set>

#include "config/sections.hpp"

namespace outboxd::config {
namespace {

// As the outbox accepts a destination (001_outbox.sql): 1 to 256 characters, no control characters.
bool destination_name_ok(const std::string& name) {
  if (name.empty() || name.size() > 256) return false;
  for (const unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

constexpr double kMaxRate = 1'000'000;  // rows per second: far above what one daemon publishes

DestinationEntry read_destination_item(MapReader& item) {
  DestinationEntry entry;
  if (item.required_text("name", entry.name) && !destination_name_ok(entry.name)) {
    item.report("name", "must be a destination as rows write it: 1 to 256 characters, no control characters");
  }
  (void)item.integer("priority", entry.priority, {-1000, 1000});
  (void)item.number("max_rate", entry.max_rate, 0.001, kMaxRate);
  if (item.number("burst", entry.burst, 1, kMaxRate) && !item.given("max_rate")) {
    item.report("burst", "goes with max_rate, which is not set");
  }
  (void)item.integer("max_in_flight", entry.max_in_flight, {1, 1'000'000});
  if (!item.given("priority") && !item.given("max_rate") && !item.given("max_in_flight") && !item.given("burst")) {
    item.report("name", "sets nothing: give priority, max_rate or max_in_flight");
  }
  return entry;
}

}  // namespace

void read_destinations(MapReader& root, std::string_view key, std::vector<DestinationEntry>& out, Config&) {
  std::set<std::string, std::less<>> seen;
  root.maps(key, [&](MapReader& item) {
    DestinationEntry entry = read_destination_item(item);
    if (entry.name.empty()) return;
    if (!seen.insert(entry.name).second) {
      item.report("name", "names a destination listed before: one item per destination");
      return;
    }
    out.push_back(std::move(entry));
  });
}

}  // namespace outboxd::config
