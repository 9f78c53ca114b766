// Typed, position-aware reading of one YAML mapping; every problem becomes a diagnostic.
#include "config/yaml_reader.hpp"

#include <algorithm>
#include <charconv>

#include "config/env_substitution.hpp"
#include "config/scalar.hpp"

namespace outboxd::config {
namespace {

std::string describe(const YAML::Node& node) {
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  if (node.IsScalar()) return quote_value(node.Scalar());
  return "nothing";
}

bool is_digits(std::string_view text) {
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) text.remove_prefix(1);
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// Fixed notation, as the file writes its bounds (1000000, not 1e+06); the
// shortest form where that does not fit.
std::string format_number(double value) {
  char buffer[64];
  auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed);
  if (result.ec != std::errc()) result = std::to_chars(buffer, buffer + sizeof buffer, value);
  return std::string(buffer, result.ptr);
}

std::string range_message(IntRange range, std::string_view got) {
  if (range.max >= INT32_MAX) return "must be at least " + std::to_string(range.min) + ", got " + std::string(got);
  return "must be between " + std::to_string(range.min) + " and " + std::to_string(range.max) + ", got " +
         std::string(got);
}

}  // namespace

Position position_of(const YAML::Mark& mark, Position otherwise) {
  if (mark.line < 0 || mark.column < 0) return otherwise;
  return Position{mark.line + 1, mark.column + 1};
}

MapReader::MapReader(ReadContext& context, const YAML::Node& node, std::string path, Position at)
    : context_(context), path_(std::move(path)), at_(at) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    broken_ = true;
    context_.diagnostics.add(position_of(node.Mark(), at_), path_, "expected a mapping, got " + describe(node));
    return;
  }
  index_entries(node);
}

MapReader::~MapReader() {
  for (const auto& entry : entries_) {
    if (!entry.used) context_.note_unknown(path_, entry.key, entry.key_at);
  }
}

void MapReader::index_entries(const YAML::Node& node) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    // Copies: the iterator's pair is a temporary proxy.
    const YAML::Node key = it->first;
    const YAML::Node value = it->second;
    const Position key_at = position_of(key.Mark());
    if (!key.IsScalar()) {
      context_.diagnostics.add(key_at, path_, "keys must be plain names, got " + describe(key));
      continue;
    }
    const std::string& name = key.Scalar();
    if (const Entry* first = find(name)) {
      context_.diagnostics.add(key_at, child_path(name),
                               "duplicate key " + quote_value(name) + " (first given on line " +
                                   std::to_string(first->key_at.line) + ")");
      continue;
    }
    // yaml-cpp places an empty value at the start of the next line; the key is a better place.
    const Position value_at = value.IsNull() ? key_at : position_of(value.Mark(), key_at);
    entries_.push_back(Entry{name, value, key_at, value_at});
  }
}

std::string MapReader::child_path(std::string_view key) const {
  if (path_.empty()) return std::string(key);
  return path_ + "." + std::string(key);
}

MapReader::Entry* MapReader::find(std::string_view key) {
  for (auto& entry : entries_) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

bool MapReader::given(std::string_view key) const {
  return std::any_of(entries_.begin(), entries_.end(),
                     [key](const Entry& entry) { return entry.key == key && !entry.value.IsNull(); });
}

MapReader::Entry* MapReader::use(std::string_view key) {
  context_.note_known(child_path(key));
  Entry* entry = find(key);
  if (entry == nullptr) return nullptr;
  entry->used = true;
  if (entry->value.IsNull()) return nullptr;
  context_.positions.record(child_path(key), entry->value_at);
  return entry;
}

bool MapReader::report(std::string_view key, const std::string& message) {
  const Entry* entry = find(key);
  context_.diagnostics.add(entry != nullptr ? entry->value_at : at_, child_path(key), message);
  return false;
}

void MapReader::report_at(Position at, std::string path, std::string message) {
  context_.diagnostics.add(at, std::move(path), std::move(message));
}

std::string MapReader::quote(std::string_view value) const { return quote_value(value); }

// The one place ${...} is replaced: every value any getter reads passes here, after the YAML was
// parsed, so the value of a variable is never parsed as YAML and its errors point at this scalar.
std::optional<std::string> MapReader::scalar(const YAML::Node& node, Position at, const std::string& path,
                                             std::string_view expected) {
  if (!node.IsScalar()) {
    report_at(at, path, "expected " + std::string(expected) + ", got " + describe(node));
    return std::nullopt;
  }
  auto substituted = substitute_env(node.Scalar(), context_.env);
  if (!substituted) {
    report_at(at, path, substituted.error().message);
    return std::nullopt;
  }
  return std::move(substituted).value();
}

std::optional<std::string> MapReader::scalar(Entry& entry, std::string_view key, std::string_view expected) {
  return scalar(entry.value, entry.value_at, child_path(key), expected);
}

MapReader MapReader::section(std::string_view key) {
  context_.note_known(child_path(key));
  Entry* entry = find(key);
  if (entry == nullptr) return MapReader(context_, YAML::Node(), child_path(key), at_);
  entry->used = true;
  context_.positions.record(child_path(key), entry->key_at);
  return MapReader(context_, entry->value, child_path(key), entry->key_at);
}

bool MapReader::text(std::string_view key, std::string& out) {
  Entry* entry = use(key);
  if (entry == nullptr) return false;
  auto value = scalar(*entry, key, "a string");
  if (!value) return false;
  out = std::move(*value);
  return true;
}

bool MapReader::required_text(std::string_view key, std::string& out) {
  const Entry* entry = find(key);
  if (entry == nullptr) {
    context_.note_known(child_path(key));
    // A section that is not a mapping was reported already; its keys are not "missing".
    if (!broken_) context_.diagnostics.add(at_, path_, "missing required key " + quote_value(key));
    return false;
  }
  const bool is_null = entry->value.IsNull();
  std::string value;
  if (!text(key, value)) return is_null ? report(key, "must not be empty") : false;
  if (value.empty()) return report(key, "must not be empty");
  out = std::move(value);
  return true;
}

bool MapReader::secret(std::string_view key, std::string& out) {
  // nonempty_text() never repeats the value in a message; this name says that callers rely on it.
  return nonempty_text(key, out);
}

bool MapReader::nonempty_text(std::string_view key, std::string& out) {
  std::string value;
  if (!text(key, value)) return false;
  if (value.empty()) return report(key, "must not be empty (leave the key out instead)");
  out = std::move(value);
  return true;
}

bool MapReader::file_path(std::string_view key, std::string& out, std::string* written) {
  std::string value;
  if (!text(key, value)) return false;
  if (value.empty()) return report(key, "must not be empty (leave the key out instead)");
  if (written != nullptr) *written = value;
  std::filesystem::path path(value);
  if (path.is_relative() && !context_.base_dir.empty()) path = (context_.base_dir / path).lexically_normal();
  out = path.string();
  return true;
}

std::optional<std::int64_t> MapReader::integer_in(std::string_view key, IntRange range) {
  Entry* entry = use(key);
  if (entry == nullptr) return std::nullopt;
  const auto text_value = scalar(*entry, key, "an integer");
  if (!text_value) return std::nullopt;
  const auto value = parse_integer(*text_value);
  if (!value) {
    if (is_digits(*text_value)) report(key, range_message(range, *text_value));
    else report(key, "expected an integer, got " + quote(*text_value));
    return std::nullopt;
  }
  if (*value < range.min || *value > range.max) {
    report(key, range_message(range, std::to_string(*value)));
    return std::nullopt;
  }
  return value;
}

bool MapReader::integer(std::string_view key, int& out, IntRange range) {
  const auto value = integer_in(key, range);
  if (!value) return false;
  out = static_cast<int>(*value);
  return true;
}

bool MapReader::millis(std::string_view key, std::chrono::milliseconds& out, IntRange range) {
  const auto value = integer_in(key, range);
  if (!value) return false;
  out = std::chrono::milliseconds(*value);
  return true;
}

bool MapReader::seconds(std::string_view key, std::chrono::milliseconds& out, IntRange range) {
  const auto value = integer_in(key, range);
  if (!value) return false;
  out = std::chrono::seconds(*value);
  return true;
}

bool MapReader::number(std::string_view key, double& out, double min, double max) {
  Entry* entry = use(key);
  if (entry == nullptr) return false;
  const auto text_value = scalar(*entry, key, "a number");
  if (!text_value) return false;
  const auto value = parse_number(*text_value);
  if (!value) return report(key, "expected a number, got " + quote(*text_value));
  if (*value < min || *value > max) {
    return report(key, "must be between " + format_number(min) + " and " + format_number(max) + ", got " + *text_value);
  }
  out = *value;
  return true;
}

bool MapReader::boolean(std::string_view key, bool& out) {
  Entry* entry = use(key);
  if (entry == nullptr) return false;
  const auto text_value = scalar(*entry, key, "true or false");
  if (!text_value) return false;
  const auto value = parse_bool(*text_value);
  if (!value) return report(key, "expected true or false, got " + quote(*text_value));
  out = *value;
  return true;
}

bool MapReader::word(std::string_view key, std::string& out, std::span<const std::string_view> allowed) {
  std::string value;
  if (!text(key, value)) return false;
  for (const auto name : allowed) {
    if (equals_ignoring_case(name, value)) {
      out = std::string(name);
      return true;
    }
  }
  return report(key, "must be one of: " + join_names(allowed) + " (got " + quote(value) + ")");
}

std::optional<std::vector<MapReader::Item>> MapReader::list(std::string_view key) {
  Entry* entry = use(key);
  if (entry == nullptr) return std::nullopt;
  if (!entry->value.IsSequence()) {
    report(key, "expected a list, got " + describe(entry->value));
    return std::nullopt;
  }
  std::vector<Item> items;
  bool usable = true;
  std::size_t index = 0;
  for (const auto& node : entry->value) {
    const std::string item_path = child_path(key) + "[" + std::to_string(index++) + "]";
    const Position item_at = position_of(node.Mark(), entry->value_at);
    auto text = scalar(node, item_at, item_path, "a string");
    if (!text) {
      usable = false;
      continue;
    }
    items.push_back(Item{std::move(*text), item_at, item_path});
  }
  if (!usable) return std::nullopt;
  return items;
}

std::optional<std::size_t> MapReader::maps(std::string_view key, const std::function<void(MapReader& item)>& read) {
  Entry* entry = use(key);
  if (entry == nullptr) return std::nullopt;
  if (!entry->value.IsSequence()) {
    report(key, "expected a list, got " + describe(entry->value));
    return std::nullopt;
  }
  std::size_t index = 0;
  for (const auto& node : entry->value) {
    const std::string item_path = child_path(key) + "[" + std::to_string(index++) + "]";
    const Position item_at = position_of(node.Mark(), entry->value_at);
    context_.positions.record(item_path, item_at);
    MapReader item(context_, node, item_path, item_at);
    read(item);
  }
  return index;
}

}  // namespace outboxd::config
