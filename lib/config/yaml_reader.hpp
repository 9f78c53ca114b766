// Typed, position-aware reading of one YAML mapping; every problem becomes a diagnostic (internal).
#pragma once

#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/diagnostics.hpp"
#include "config/names.hpp"

namespace outboxd::config {

// Where yaml-cpp says a node is, 1-based; `otherwise` for a node it has no mark for.
Position position_of(const YAML::Mark& mark, Position otherwise = {});

// State shared by all readers of one document.
class ReadContext {
 public:
  ReadContext(Diagnostics& sink, KeyPositions& where, EnvLookup lookup, std::filesystem::path directory)
      : diagnostics(sink), positions(where), env(std::move(lookup)), base_dir(std::move(directory)) {}

  Diagnostics& diagnostics;
  KeyPositions& positions;
  const EnvLookup env;
  const std::filesystem::path base_dir;  // for relative file paths; empty: the working directory
  // The file has outboxes: or tenants.catalog.query, known before the walk
  // (which reads database: first): database: then holds the outboxes' defaults.
  bool many_outboxes = false;

  void note_known(std::string path) { known_.push_back(std::move(path)); }
  void note_unknown(std::string parent, std::string key, Position at);
  // Reports the unknown keys, each with the closest known key when one is
  // near; call after every section was read, so that all keys are known.
  void report_unknown_keys();
  // Every key path a reader asked for, in the order asked, without repeats.
  std::vector<std::string> known_paths() const;

 private:
  struct Unknown {
    std::string parent;
    std::string key;
    Position at;
  };
  std::vector<std::string> siblings_of(const Unknown& unknown) const;
  std::optional<std::string> suggestion_for(const Unknown& unknown) const;

  std::vector<std::string> known_;
  std::vector<Unknown> unknown_;
};

struct IntRange {
  std::int64_t min = 0;
  std::int64_t max = INT32_MAX;
};

// Reads the keys of one mapping. Each getter marks its key as known, leaves
// `out` untouched and returns false when the key is absent or null, and
// reports a diagnostic (also returning false) when the value is unusable.
// Keys that no getter asked for are reported as unknown when the reader dies.
class MapReader {
 public:
  // `node` is a mapping, or null/undefined for a section left out or empty;
  // `at` is where the section's key is (for "missing required key").
  MapReader(ReadContext& context, const YAML::Node& node, std::string path, Position at);
  ~MapReader();
  MapReader(const MapReader&) = delete;
  MapReader& operator=(const MapReader&) = delete;

  MapReader section(std::string_view key);

  // Whether the key is written with a value (not null); reads nothing, marks nothing.
  bool given(std::string_view key) const;

  bool text(std::string_view key, std::string& out);
  bool nonempty_text(std::string_view key, std::string& out);  // "" is an error: leave the key out instead
  bool required_text(std::string_view key, std::string& out);
  bool secret(std::string_view key, std::string& out);     // never echoed in messages
  // Relative paths are resolved against the config's directory; `written`
  // receives the path as the file gives it, for messages.
  bool file_path(std::string_view key, std::string& out, std::string* written = nullptr);
  bool integer(std::string_view key, int& out, IntRange range);
  bool millis(std::string_view key, std::chrono::milliseconds& out, IntRange range);
  bool seconds(std::string_view key, std::chrono::milliseconds& out, IntRange range);
  bool number(std::string_view key, double& out, double min, double max);
  bool boolean(std::string_view key, bool& out);
  bool word(std::string_view key, std::string& out, std::span<const std::string_view> allowed);

  template <class E>
  bool choice(std::string_view key, E& out, std::span<const Named<E>> names) {
    std::string value;
    if (!text(key, value)) return false;
    const auto found = find_named(names, value);
    if (!found) return report(key, "must be one of: " + join_names(names) + " (got " + quote(value) + ")");
    out = *found;
    return true;
  }

  struct Item {
    std::string text;
    Position at;
    std::string path;  // e.g. broker.sasl_mechanisms[1]
  };
  // A list of scalars; nullopt when absent, null or unusable.
  std::optional<std::vector<Item>> list(std::string_view key);
  // A list of mappings, each item read by `read` through a reader of its own
  // at key[i] (an item that is no mapping is reported by that reader). The
  // number of items; nullopt when absent, null or not a list.
  std::optional<std::size_t> maps(std::string_view key, const std::function<void(MapReader& item)>& read);

  // A diagnostic at the key's value; always returns false.
  bool report(std::string_view key, const std::string& message);
  void report_at(Position at, std::string path, std::string message);
  std::string child_path(std::string_view key) const;
  const std::string& path() const { return path_; }
  Position position() const { return at_; }
  bool many_outboxes() const { return context_.many_outboxes; }

 private:
  struct Entry {
    std::string key;
    YAML::Node value;
    Position key_at;
    Position value_at;
    bool used = false;
  };

  void index_entries(const YAML::Node& node);
  Entry* find(std::string_view key);
  Entry* use(std::string_view key);  // find + mark known; nullptr when absent or null
  std::optional<std::string> scalar(const YAML::Node& node, Position at, const std::string& path,
                                    std::string_view expected);
  std::optional<std::string> scalar(Entry& entry, std::string_view key, std::string_view expected);
  std::optional<std::int64_t> integer_in(std::string_view key, IntRange range);
  std::string quote(std::string_view value) const;

  ReadContext& context_;
  std::string path_;
  Position at_;
  bool broken_ = false;  // the node was not a mapping (reported once)
  std::vector<Entry> entries_;
};

}  // namespace outboxd::config
