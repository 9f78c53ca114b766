// CloudEvents binary content mode: the context attributes and the extensions as application properties.
#include "amqp/detail/cloudevents_mapping.hpp"

#include <cstdint>
#include <limits>
#include <map>
#include <string>

#include <proton/codec/map.hpp>
#include <proton/scalar.hpp>

#include "amqp/detail/headers_mapping.hpp"
#include "core/cloud_event.hpp"

namespace outboxd::amqp {
namespace {

constexpr std::string_view kSpecVersion = "1.0";

bool starts_with_prefix(std::string_view key) {
  constexpr std::string_view kStem = "cloudevents";
  if (key.size() <= kStem.size() || (key[kStem.size()] != ':' && key[kStem.size()] != '_')) return false;
  for (std::size_t i = 0; i < kStem.size(); ++i) {
    const char c = key[i];
    if ((c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c) != kStem[i]) return false;
  }
  return true;
}

// The CloudEvents types a header can carry: String (no control characters), Boolean, Integer (32 bits).
bool is_extension_value(const proton::scalar& value) {
  switch (value.type()) {
    case proton::STRING: return !has_control(proton::get<std::string>(value));
    case proton::BOOLEAN: return true;
    case proton::LONG: {
      const auto number = proton::get<std::int64_t>(value);
      return number >= std::numeric_limits<std::int32_t>::min() && number <= std::numeric_limits<std::int32_t>::max();
    }
    default: return false;
  }
}

core::Status move_extensions(const std::string& prefix, proton::message::property_map& properties) {
  if (properties.empty()) return {};
  std::map<std::string, proton::scalar> headers;
  proton::get(properties.value(), headers);
  for (const auto& [key, value] : headers) {
    if (starts_with_prefix(key)) {
      return core::rejected_error("headers: key " + shown_key(key) +
                                 ": the cloudEvents prefix belongs to the CloudEvents attributes; give an extension "
                                 "without it");
    }
    if (!core::is_extension_name(key) || !is_extension_value(value)) continue;
    properties.erase(key);
    properties.put(prefix + key, value);
  }
  return {};
}

core::Result<std::string> event_type(const core::OutboxMessage& row, const config::CloudEventsConfig& cloudevents) {
  if (row.subject) return *row.subject;
  if (!cloudevents.default_type.empty()) return cloudevents.default_type;
  return core::rejected_error(
      "cloudevents: the row has no subject to be the event type and broker.cloudevents.default_type is not set");
}

}  // namespace

core::Status add_cloud_event(const core::OutboxMessage& row, const config::CloudEventsConfig& cloudevents,
                             proton::message& msg) {
  auto type = event_type(row, cloudevents);
  if (!type) return type.error();
  auto& properties = msg.properties();
  if (auto moved = move_extensions(cloudevents.property_prefix, properties); !moved) return moved;
  const auto& prefix = cloudevents.property_prefix;
  properties.put(prefix + "id", row.message_id);
  properties.put(prefix + "source", cloudevents.source);
  properties.put(prefix + "specversion", std::string(kSpecVersion));
  properties.put(prefix + "type", type.value());
  properties.put(prefix + "time", core::rfc3339_utc(row.created_at));
  if (row.session_id) properties.put(prefix + "subject", *row.session_id);
  return {};
}

}  // namespace outboxd::amqp
