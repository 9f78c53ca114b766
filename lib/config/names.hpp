// The spellings of enum values and fixed word lists in the YAML file (internal).
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "config/config.hpp"

namespace outboxd::config {

template <class E>
struct Named {
  std::string_view name;
  E value;
};

inline constexpr Named<BrokerProfile> kBrokerProfiles[] = {
    {"generic", BrokerProfile::generic},   {"rabbitmq", BrokerProfile::rabbitmq},
    {"activemq", BrokerProfile::activemq}, {"artemis", BrokerProfile::artemis},
    {"azure-servicebus", BrokerProfile::azure_servicebus},
};

inline constexpr Named<RetentionMode> kRetentionModes[] = {
    {"delete", RetentionMode::delete_rows},
    {"keep", RetentionMode::keep},
};

inline constexpr Named<LogFormat> kLogFormats[] = {
    {"human", LogFormat::human},
    {"json", LogFormat::json},
};

inline constexpr Named<Pooler> kPoolers[] = {
    {"none", Pooler::none},
    {"session", Pooler::session},
    {"transaction", Pooler::transaction},
};

inline constexpr std::string_view kLogLevels[] = {"trace", "debug", "info", "warn", "error", "critical", "off"};

inline constexpr std::string_view kCloudEventsPrefixes[] = {"cloudEvents:", "cloudEvents_"};

inline constexpr std::string_view kSaslPlain = "PLAIN";
inline constexpr std::string_view kSaslExternal = "EXTERNAL";
inline constexpr std::string_view kSaslAnonymous = "ANONYMOUS";
inline constexpr std::string_view kSaslMechanisms[] = {kSaslPlain, kSaslExternal, kSaslAnonymous};

bool equals_ignoring_case(std::string_view a, std::string_view b);

// "a, b, c"
std::string join_names(std::span<const std::string_view> names);

template <class E>
std::string join_names(std::span<const Named<E>> names) {
  std::string out;
  for (const auto& named : names) {
    if (!out.empty()) out += ", ";
    out += named.name;
  }
  return out;
}

template <class E>
std::optional<E> find_named(std::span<const Named<E>> names, std::string_view text) {
  for (const auto& named : names) {
    if (equals_ignoring_case(named.name, text)) return named.value;
  }
  return std::nullopt;
}

template <class E>
const char* name_of(std::span<const Named<E>> names, E value) {
  for (const auto& named : names) {
    if (named.value == value) return named.name.data();
  }
  return "?";
}

}  // namespace outboxd::config
