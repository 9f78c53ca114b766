// The custom readers of broker.cloudevents: the source, the destinations, the default type (binary content mode).
#include <algorithm>

#include "core/cloud_event.hpp"
#include "config/scalar.hpp"
#include "config/sections.hpp"

namespace outboxd::config {

bool CloudEventsConfig::applies_to(std::string_view destination) const {
  return enabled && (destinations.empty() ||
                     std::find(destinations.begin(), destinations.end(), destination) != destinations.end());
}

void read_cloudevents_source(MapReader& cloudevents, std::string_view key, std::string& out, Config&) {
  std::string source;
  if (!cloudevents.nonempty_text(key, source)) return;
  if (!core::is_uri_reference(source)) {
    cloudevents.report(key, "must be a URI-reference (RFC 3986) such as \"/orders\" or "
                                 "\"https://shop.example/orders\", got " + quote_value(source));
    return;
  }
  out = std::move(source);
}

void read_cloudevents_default_type(MapReader& cloudevents, std::string_view key, std::string& out, Config&) {
  std::string type;
  if (!cloudevents.nonempty_text(key, type)) return;
  if (has_control_characters(type)) {
    cloudevents.report(key, "must not contain control characters");
    return;
  }
  out = std::move(type);
}

void read_cloudevents_destinations(MapReader& cloudevents, std::string_view key, std::vector<std::string>& out,
                                   Config&) {
  const auto items = cloudevents.list(key);
  if (!items) return;
  std::vector<std::string> destinations;
  for (const auto& item : *items) {
    if (item.text.empty() || has_control_characters(item.text)) {
      cloudevents.report_at(item.at, item.path, "must be a non-empty destination name without control characters");
    } else if (std::find(destinations.begin(), destinations.end(), item.text) != destinations.end()) {
      cloudevents.report_at(item.at, item.path, quote_value(item.text) + " is listed twice");
    } else {
      destinations.push_back(item.text);
    }
  }
  out = std::move(destinations);
}

}  // namespace outboxd::config
