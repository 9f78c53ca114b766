// Walking the key table: the loader's reading of every key, section by section, and the docs' Markdown table.
#include <cmath>
#include <cstdio>
#include <memory>
#include <utility>

#include "config/key_table.hpp"

namespace outboxd::config {
namespace {

// "broker.tls" and "verify_host" of "broker.tls.verify_host"; "" and "outboxes" of "outboxes".
std::pair<std::string_view, std::string_view> split_path(std::string_view path) {
  const auto dot = path.rfind('.');
  if (dot == std::string_view::npos) return {{}, path};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

bool inside(std::string_view section, std::string_view open) {
  return open.empty() || section == open || (section.size() > open.size() && section.starts_with(open) &&
                                             section[open.size()] == '.');
}

// The sections open on the way from the root to the current row's section.
// A section is closed (its unknown keys noted) once a row outside it comes:
// the table keeps each section's rows together, so none is opened twice.
class OpenSections {
 public:
  explicit OpenSections(MapReader& root) { open_.push_back({"", &root}); }

  MapReader& at(std::string_view section) {
    while (!inside(section, open_.back().path)) {
      open_.pop_back();
      owned_.pop_back();
    }
    while (open_.back().path != section) {
      const std::string& parent = open_.back().path;
      const std::size_t from = parent.empty() ? 0 : parent.size() + 1;
      const std::size_t end = section.find('.', from);
      const std::string_view name = section.substr(from, end == std::string_view::npos ? section.npos : end - from);
      owned_.emplace_back(new MapReader(open_.back().reader->section(name)));
      open_.push_back({std::string(section.substr(0, from + name.size())), owned_.back().get()});
    }
    return *open_.back().reader;
  }

  ~OpenSections() {
    while (!owned_.empty()) owned_.pop_back();  // innermost first, as nested readers would end
  }

 private:
  struct Open {
    std::string path;
    MapReader* reader;
  };
  std::vector<Open> open_;
  std::vector<std::unique_ptr<MapReader>> owned_;
};

std::string cell(const std::string& text) { return text.empty() ? "" : "`" + text + "`"; }

}  // namespace

namespace key_detail {

std::string range_text(std::int64_t min, std::int64_t max) {
  if (max == INT32_MAX) return "at least " + std::to_string(min);
  return std::to_string(min) + ".." + std::to_string(max);
}

std::string describe(int value) { return std::to_string(value); }

// As the file writes it: 2.0, 0.2.
std::string describe(double value) {
  char text[32];
  std::snprintf(text, sizeof text, value == std::floor(value) ? "%.1f" : "%g", value);
  return text;
}

std::string describe(bool value) { return value ? "true" : "false"; }
std::string describe(const std::string& value) { return value; }

std::string describe(const std::vector<std::string>& value) {
  std::string out = "[";
  for (const auto& item : value) out += (out.size() > 1 ? ", " : "") + item;
  return out + "]";
}

std::string describe(const StandbyWait& value) {
  switch (value.mode) {
    case StandbyWait::Mode::none: return "none";
    case StandbyWait::Mode::any: return "any";
    case StandbyWait::Mode::named: return value.application_name;
  }
  return "?";
}

// No outbox listed: the one of database: and outbox:.
std::string describe(const std::vector<OutboxEntry>& value) { return value.empty() ? "[]" : "(a list)"; }
std::string describe(const std::vector<DestinationEntry>& value) { return value.empty() ? "[]" : "(a list)"; }

// A section of database:'s keys over database:, which is its default: none to write.
std::string describe(const DatabaseConfig&) { return ""; }

std::string shape_of(const Real& rule) { return "number " + describe(rule.min) + ".." + describe(rule.max); }

}  // namespace key_detail

void read_keys(MapReader& root, Config& config) {
  OpenSections sections(root);
  for (const auto& key : key_table()) {
    if (!key.read) continue;
    const auto [section, name] = split_path(key.path);
    key.read(sections.at(section), name, config);
  }
}

void read_section_keys(MapReader& section, std::string_view name, Config& config) {
  const std::string prefix = std::string(name) + ".";
  OpenSections sections(section);
  for (const auto& key : key_table()) {
    if (!key.read || !key.path.starts_with(prefix)) continue;
    const auto [inner, leaf] = split_path(std::string_view(key.path).substr(prefix.size()));
    key.read(sections.at(inner), leaf, config);
  }
}

std::string key_table_markdown() {
  std::string out =
      "| key | value | default | on SIGHUP | what |\n"
      "| --- | --- | --- | --- | --- |\n";
  for (const auto& key : key_table()) {
    out += "| `" + key.path + "` | " + key.shape + " | " + cell(key.fallback) + " | " + key.on_reload + " | " +
           key.help + " |\n";
  }
  return out;
}

}  // namespace outboxd::config
