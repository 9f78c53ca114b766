// A row's headers (a JSON object) -> AMQP application-properties, under the same rules as headers_problem() in SQL.
#include "amqp/detail/headers_mapping.hpp"

#include <array>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace outboxd::amqp {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxKeyCharacters = 128;
constexpr std::size_t kShownKeyCharacters = 64;
constexpr int kNumberOverflow = 406;  // nlohmann's out_of_range id

// AMQP 1.0 annotations, Artemis internals and management, JMS, RabbitMQ's
// own headers, outboxd's own (outboxd_writer, outboxd_outbox); compared without case. Also in
// headers_problem() (sql/029_writer_message_ids.sql).
constexpr std::array<std::string_view, 19> kReservedPrefixes{
    "x-opt-", "x-death", "x-delay", "x-received-from", "x-first-death-", "x-last-death-",
    "x-delivery-count", "x-stream-", "x-amqp-", "x-shovelled", "x-mqtt-", "_amq_",
    "__amq_", "__hdr_", "_hq_", "jms", "amqp:", "activemq.", "outboxd_"};
// RabbitMQ routes a message to the queues these name as well.
constexpr std::array<std::string_view, 2> kReservedKeys{"cc", "bcc"};

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

std::size_t characters(std::string_view text) {
  std::size_t count = 0;
  for (const char c : text) count += is_continuation(static_cast<unsigned char>(c)) ? 0 : 1;
  return count;
}

bool starts_with_folded(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    const char c = text[i];
    const char lower = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != prefix[i]) return false;
  }
  return true;
}

bool is_reserved(std::string_view key) {
  for (const auto prefix : kReservedPrefixes) {
    if (starts_with_folded(key, prefix)) return true;
  }
  for (const auto reserved : kReservedKeys) {
    if (key.size() == reserved.size() && starts_with_folded(key, reserved)) return true;
  }
  return false;
}

// Reads the object member by member: arrays and objects are refused where
// they start, and a number keeps its text, so that an integer too large for
// a long is told from a number with a point (jsonb prints no exponents).
class PropertyReader : public nlohmann::json_sax<json> {
 public:
  explicit PropertyReader(proton::message::property_map& properties) : properties_(properties) {}

  const std::string& problem() const { return problem_; }

  bool start_object(std::size_t) override {
    if (depth_++ == 0) return true;
    return refuse("arrays and objects are not supported");
  }
  bool end_object() override {
    --depth_;
    return true;
  }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return fail("headers: not a JSON object");
    return refuse("arrays and objects are not supported");
  }
  bool end_array() override { return true; }
  bool key(string_t& name) override {
    key_ = name;
    if (key_.empty() || characters(key_) > kMaxKeyCharacters || has_control(key_)) {
      return refuse("keys are 1..128 characters without control characters");
    }
    if (is_reserved(key_)) return refuse("reserved by the AMQP specification or a broker");
    return true;
  }
  bool null() override { return put(proton::scalar()); }
  bool boolean(bool value) override { return put(proton::scalar(value)); }
  bool number_integer(number_integer_t value) override { return put(proton::scalar(std::int64_t{value})); }
  bool number_unsigned(number_unsigned_t value) override {
    if (value > static_cast<number_unsigned_t>(INT64_MAX)) return refuse("integers must fit a signed 64-bit long");
    return put(proton::scalar(static_cast<std::int64_t>(value)));
  }
  bool number_float(number_float_t value, const string_t& text) override {
    if (!has_point(text)) return refuse("integers must fit a signed 64-bit long");
    return put(proton::scalar(double{value}));
  }
  bool string(string_t& value) override { return put(proton::scalar(value)); }
  bool binary(binary_t&) override { return refuse("binary values are not supported"); }
  bool parse_error(std::size_t, const std::string& token, const nlohmann::detail::exception& error) override {
    // A number beyond a double stops the parser (out_of_range.406) instead of becoming infinity.
    if (error.id == kNumberOverflow && depth_ == 1) return number_too_large(token);
    return fail("headers: not a JSON object");
  }

 private:
  bool put(const proton::scalar& value) {
    if (depth_ != 1) return fail("headers: not a JSON object");
    properties_.put(key_, value);
    return true;
  }
  // jsonb prints no exponents: a number without a point is an integer.
  static bool has_point(std::string_view text) { return text.find_first_of(".eE") != std::string_view::npos; }
  bool number_too_large(std::string_view text) {
    return refuse(has_point(text) ? "numbers must fit a double" : "integers must fit a signed 64-bit long");
  }
  bool refuse(const char* rule) { return fail("headers: key " + shown_key(key_) + ": " + rule); }
  bool fail(std::string problem) {
    problem_ = std::move(problem);
    return false;
  }

  proton::message::property_map& properties_;
  std::string key_;
  std::string problem_;
  int depth_ = 0;
};

}  // namespace

std::span<const std::string_view> reserved_header_prefixes() { return kReservedPrefixes; }
std::span<const std::string_view> reserved_header_keys() { return kReservedKeys; }

// C1 controls are 0xC2 0x80..0x9F in UTF-8.
bool has_control(std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x20 || byte == 0x7F) return true;
    if (byte == 0xC2 && i + 1 < text.size()) {
      const auto next = static_cast<unsigned char>(text[i + 1]);
      if (next >= 0x80 && next <= 0x9F) return true;
    }
  }
  return false;
}

std::string shown_key(std::string_view key) {
  std::size_t end = 0;
  for (std::size_t seen = 0; end < key.size(); ++end) {
    if (!is_continuation(static_cast<unsigned char>(key[end])) && seen++ == kShownKeyCharacters) break;
  }
  return json(std::string(key.substr(0, end))).dump(-1, ' ', false, json::error_handler_t::replace);
}

core::Status add_header_properties(std::string_view text, proton::message::property_map& properties) {
  // jsonb writes an empty object as "{}": most rows, and no parse needed.
  if (text.empty() || text == "{}") return {};
  PropertyReader reader(properties);
  if (!json::sax_parse(text.begin(), text.end(), &reader) || !reader.problem().empty()) {
    return core::rejected_error(reader.problem().empty() ? "headers: not a JSON object" : reader.problem());
  }
  return {};
}

}  // namespace outboxd::amqp
