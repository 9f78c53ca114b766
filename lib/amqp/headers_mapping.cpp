// A row's headers (a JSON object) -> AMQP application-properties: strings, booleans, longs and doubles only.
#include "amqp/detail/headers_mapping.hpp"

#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace outboxd::amqp {
namespace {

using nlohmann::json;

const char* kAllowed = "application properties take strings, numbers and booleans";

std::string unsupported(const std::string& key, const char* what) {
  return "headers." + key + ": " + what + " are not supported; " + kAllowed;
}

core::Result<proton::scalar> to_scalar(const std::string& key, const json& value) {
  switch (value.type()) {
    case json::value_t::string:
      return proton::scalar(value.get<std::string>());
    case json::value_t::boolean:
      return proton::scalar(value.get<bool>());
    case json::value_t::number_integer:
      return proton::scalar(value.get<std::int64_t>());
    case json::value_t::number_unsigned: {
      const auto number = value.get<std::uint64_t>();
      if (number > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        return core::rejected_error("headers." + key + ": integer " + std::to_string(number) +
                                    " does not fit a signed 64-bit long");
      }
      return proton::scalar(static_cast<std::int64_t>(number));
    }
    case json::value_t::number_float:
      return proton::scalar(value.get<double>());
    case json::value_t::null:
      return core::rejected_error(unsupported(key, "null values"));
    case json::value_t::array:
    case json::value_t::object:
    case json::value_t::binary:
    case json::value_t::discarded:
      break;
  }
  return core::rejected_error(unsupported(key, "nested values"));
}

const char* type_name(const json& value) {
  return value.is_discarded() ? "invalid JSON" : value.type_name();
}

}  // namespace

core::Status add_header_properties(std::string_view text, proton::message::property_map& properties) {
  // jsonb writes an empty object as "{}": most rows, and no parse needed.
  if (text.empty() || text == "{}") return {};
  const json parsed = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    return core::rejected_error(std::string("headers: expected a JSON object, got ") + type_name(parsed) +
                                "; " + kAllowed);
  }
  for (const auto& [key, value] : parsed.items()) {
    auto scalar = to_scalar(key, value);
    if (!scalar) return scalar.error();
    properties.put(key, scalar.value());
  }
  return {};
}

}  // namespace outboxd::amqp
