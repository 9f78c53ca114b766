// Reading broker.cloudevents: whether and how rows are published as CloudEvents (binary content mode).
#include <algorithm>

#include "core/cloud_event.hpp"
#include "config/scalar.hpp"
#include "config/sections.hpp"

namespace outboxd::config {
namespace {

void read_source(MapReader& cloudevents, std::string& out) {
  std::string source;
  if (!cloudevents.nonempty_text("source", source)) return;
  if (!core::is_uri_reference(source)) {
    cloudevents.report("source", "must be a URI-reference (RFC 3986) such as \"/orders\" or "
                                 "\"https://shop.example/orders\", got " + quote_value(source));
    return;
  }
  out = std::move(source);
}

void read_default_type(MapReader& cloudevents, std::string& out) {
  std::string type;
  if (!cloudevents.nonempty_text("default_type", type)) return;
  if (has_control_characters(type)) {
    cloudevents.report("default_type", "must not contain control characters");
    return;
  }
  out = std::move(type);
}

void read_destinations(MapReader& cloudevents, std::vector<std::string>& out) {
  const auto items = cloudevents.list("destinations");
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

}  // namespace

bool CloudEventsConfig::applies_to(std::string_view destination) const {
  return enabled && (destinations.empty() ||
                     std::find(destinations.begin(), destinations.end(), destination) != destinations.end());
}

void read_cloudevents(MapReader& broker, CloudEventsConfig& out) {
  MapReader cloudevents = broker.section("cloudevents");
  cloudevents.boolean("enabled", out.enabled);
  read_source(cloudevents, out.source);
  read_destinations(cloudevents, out.destinations);
  read_default_type(cloudevents, out.default_type);
  cloudevents.word("property_prefix", out.property_prefix, kCloudEventsPrefixes);
}

}  // namespace outboxd::config
