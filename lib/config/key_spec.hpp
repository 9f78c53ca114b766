// One config key as a row of the key table: its member, reading, reload and docs line (internal).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "config/config.hpp"
#include "config/names.hpp"
#include "config/sections.hpp"
#include "config/yaml_reader.hpp"

namespace outboxd::config {

enum class Change { none, applied, needs_restart };

struct KeySpec {
  std::string path;       // "dispatch.batch_size"
  std::string shape;      // what the value may be, for the docs: "integer 1..10000"
  std::string fallback;   // the default as the file writes it (from Config{}); empty: none
  std::string on_reload;  // for the docs: "applied", "restart", or what a secret does
  std::string help;       // one line for the docs
  // Reads the key from its open section into the config. Empty when the row
  // before it reads both (password with password_file, url with urls).
  std::function<void(MapReader& section, std::string_view key, Config& config)> read;
  std::function<Change(const Config& running, const Config& loaded)> compare;
  std::function<void(Config& to, const Config& from)> adopt;  // for Change::applied
};

enum class Reload { applied, restart };

// The rules a row's value follows; each reads, checks and describes one kind.
struct Int {
  std::int64_t min;
  std::int64_t max;
};
struct Millis {  // a key named *_ms
  std::int64_t min;
  std::int64_t max;
};
struct Seconds {  // a key named *_s
  std::int64_t min;
  std::int64_t max;
};
struct Real {
  double min;
  double max;
};
struct Flag {};
struct Words {
  std::span<const std::string_view> allowed;
};
template <class E>
struct Choice {
  std::span<const Named<E>> names;
};
// Code of its own (sections_*.cpp), for a key that needs more than a range.
template <class T>
struct Custom {
  void (*read)(MapReader& section, std::string_view key, T& out, Config& config);
  const char* shape;
};
// Read by the row before it; the shape is for the docs.
struct ReadBefore {
  const char* shape;
};

namespace key_detail {

template <auto... Members>
auto& field(Config& config) {
  return (config.*....*Members);
}
template <auto... Members>
const auto& field(const Config& config) {
  return (config.*....*Members);
}

std::string range_text(std::int64_t min, std::int64_t max);
std::string describe(int value);
std::string describe(double value);
std::string describe(bool value);
std::string describe(const std::string& value);
std::string describe(const std::vector<std::string>& value);
std::string describe(const StandbyWait& value);
std::string describe(const std::vector<OutboxEntry>& value);
std::string describe(const std::vector<DestinationEntry>& value);
std::string describe(const DatabaseConfig& value);
template <class E>
  requires std::is_enum_v<E>
std::string describe(E value) {
  return to_string(value);
}

inline void read_rule(const Int& rule, MapReader& section, std::string_view key, int& out, Config&) {
  section.integer(key, out, IntRange{rule.min, rule.max});
}
inline void read_rule(const Millis& rule, MapReader& section, std::string_view key, std::chrono::milliseconds& out,
                      Config&) {
  section.millis(key, out, IntRange{rule.min, rule.max});
}
inline void read_rule(const Seconds& rule, MapReader& section, std::string_view key, std::chrono::milliseconds& out,
                      Config&) {
  section.seconds(key, out, IntRange{rule.min, rule.max});
}
inline void read_rule(const Real& rule, MapReader& section, std::string_view key, double& out, Config&) {
  section.number(key, out, rule.min, rule.max);
}
inline void read_rule(const Flag&, MapReader& section, std::string_view key, bool& out, Config&) {
  section.boolean(key, out);
}
inline void read_rule(const Words& rule, MapReader& section, std::string_view key, std::string& out, Config&) {
  section.word(key, out, rule.allowed);
}
template <class E>
void read_rule(const Choice<E>& rule, MapReader& section, std::string_view key, E& out, Config&) {
  section.choice<E>(key, out, rule.names);
}
template <class T>
void read_rule(const Custom<T>& rule, MapReader& section, std::string_view key, T& out, Config& config) {
  rule.read(section, key, out, config);
}

inline std::string shape_of(const Int& rule) { return "integer " + range_text(rule.min, rule.max); }
inline std::string shape_of(const Millis& rule) { return "ms " + range_text(rule.min, rule.max); }
inline std::string shape_of(const Seconds& rule) { return "s " + range_text(rule.min, rule.max); }
std::string shape_of(const Real& rule);
inline std::string shape_of(const Flag&) { return "true or false"; }
inline std::string shape_of(const Words& rule) { return join_names(rule.allowed); }
template <class E>
std::string shape_of(const Choice<E>& rule) {
  return join_names(rule.names);
}
template <class T>
std::string shape_of(const Custom<T>& rule) {
  return rule.shape;
}
inline std::string shape_of(const ReadBefore& rule) { return rule.shape; }

template <class Rule, class T>
std::string fallback_of(const Rule&, const T& value) {
  return describe(value);
}
// A default below the range is a member's "not set" (max_message_bytes 0): no default to write.
inline std::string fallback_of(const Int& rule, int value) { return value < rule.min ? "" : describe(value); }
inline std::string fallback_of(const Millis&, std::chrono::milliseconds value) { return describe(int(value.count())); }
inline std::string fallback_of(const Seconds&, std::chrono::milliseconds value) {
  return describe(int(std::chrono::duration_cast<std::chrono::seconds>(value).count()));
}

}  // namespace key_detail

// A row for the member Config.*Members..., read by `rule`, compared on reload
// as a whole value: `applied` adopts a change at run time, `restart` reports it.
template <auto... Members, class Rule>
KeySpec key(std::string path, Reload reload, Rule rule, std::string help) {
  using key_detail::field;
  KeySpec spec{std::move(path),
               key_detail::shape_of(rule),
               key_detail::fallback_of(rule, field<Members...>(Config{})),
               reload == Reload::applied ? "applied" : "restart",
               std::move(help),
               {},
               [reload](const Config& running, const Config& loaded) {
                 if (field<Members...>(running) == field<Members...>(loaded)) return Change::none;
                 return reload == Reload::applied ? Change::applied : Change::needs_restart;
               },
               [](Config& to, const Config& from) { field<Members...>(to) = field<Members...>(from); }};
  if constexpr (!std::is_same_v<Rule, ReadBefore>) {
    spec.read = [rule](MapReader& section, std::string_view name, Config& config) {
      key_detail::read_rule(rule, section, name, field<Members...>(config), config);
    };
  }
  return spec;
}

// `password` of a section (database, broker), read together with its
// password_file. An inline password lives in the running process only: a
// change needs a restart.
template <auto Section>
KeySpec password_key(std::string path, std::string help) {
  return {std::move(path), "text (a secret, never shown)", "", "restart", std::move(help),
          [](MapReader& section, std::string_view, Config& config) {
            read_password(section, (config.*Section).password, (config.*Section).password_file);
          },
          [](const Config& running, const Config& loaded) {
            const auto& was = running.*Section;
            const auto& now = loaded.*Section;
            const bool inline_both = was.password_file.empty() && now.password_file.empty();
            return inline_both && was.password != now.password ? Change::needs_restart : Change::none;
          },
          [](Config&, const Config&) {}};
}

// `password_file`: read again at every connect, so new contents at the same
// path apply by themselves (adopted here only to keep the copy current); a
// new path needs a restart.
template <auto Section>
KeySpec password_file_key(std::string path, std::string help) {
  return {std::move(path), "path of a file (not open to group or others)", "",
          "new contents: applied at the next connect; a new path: restart", std::move(help), {},
          [](const Config& running, const Config& loaded) {
            const auto& was = running.*Section;
            const auto& now = loaded.*Section;
            if (was.password_file != now.password_file) return Change::needs_restart;
            return !now.password_file.empty() && was.password != now.password ? Change::applied : Change::none;
          },
          [](Config& to, const Config& from) { (to.*Section).password = (from.*Section).password; }};
}

}  // namespace outboxd::config
