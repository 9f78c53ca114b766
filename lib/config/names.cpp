// The spellings of enum values and fixed word lists in the YAML file.
#include "config/names.hpp"

namespace outboxd::config {

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::string join_names(std::span<const std::string_view> names) {
  std::string out;
  for (const auto name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

// The tables hold string literals, so name.data() is NUL-terminated.
const char* to_string(BrokerProfile profile) { return name_of<BrokerProfile>(kBrokerProfiles, profile); }
const char* to_string(RetentionMode mode) { return name_of<RetentionMode>(kRetentionModes, mode); }
const char* to_string(LogFormat format) { return name_of<LogFormat>(kLogFormats, format); }
const char* to_string(Pooler pooler) { return name_of<Pooler>(kPoolers, pooler); }

}  // namespace outboxd::config
