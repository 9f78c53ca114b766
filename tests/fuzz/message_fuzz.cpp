// libFuzzer target: arbitrary bytes as an outbox row, encoded as an AMQP message for every broker profile, plain and as a CloudEvent.
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "amqp/message_mapping.hpp"

namespace {

using outboxd::config::BrokerProfile;
using outboxd::config::CloudEventsConfig;

// Input layout (readable seeds): one field per line in the order of the row
// below, then the body (every byte that is left, newlines included). A field
// that is exactly "~" is SQL NULL; a missing line counts as NULL too.
class Fields {
 public:
  explicit Fields(std::string_view input) : rest_(input) {}

  std::optional<std::string> next() {
    if (done_) return std::nullopt;
    const auto end = rest_.find('\n');
    if (end == std::string_view::npos) done_ = true;
    const std::string_view field = rest_.substr(0, end);
    rest_ = done_ ? std::string_view() : rest_.substr(end + 1);
    if (field == "~") return std::nullopt;
    return std::string(field);
  }
  std::string required() { return next().value_or(""); }
  std::string body() const { return std::string(rest_); }

 private:
  std::string_view rest_;
  bool done_ = false;
};

// Any integer text, however large or negative: the mapping must refuse what AMQP cannot carry.
std::optional<std::chrono::milliseconds> ttl_of(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  std::int64_t value = 0;
  for (const char c : *text) {
    if (c < '0' || c > '9') continue;
    value = static_cast<std::int64_t>(static_cast<std::uint64_t>(value) * 10 + static_cast<std::uint64_t>(c - '0'));
  }
  if (!text->empty() && text->front() == '-') value = -value;
  return std::chrono::milliseconds(value);
}

outboxd::core::OutboxMessage row_of(std::string_view input) {
  Fields fields(input);
  outboxd::core::OutboxMessage row;
  row.id = 1;
  row.message_id = fields.required();
  row.destination = fields.required();
  row.session_id = fields.next();
  row.correlation_id = fields.next();
  row.parent_message_id = fields.next();
  row.originating_message_id = fields.next();
  row.subject = fields.next();
  row.content_type = fields.next();
  row.traceparent = fields.next();
  row.headers_json = fields.required();
  row.ttl = ttl_of(fields.next());
  row.created_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000000));
  row.body = fields.body();
  return row;
}

// CloudEvents for every destination; rows without subject are refused, so
// the error path is fuzzed too.
CloudEventsConfig cloudevents_on() {
  CloudEventsConfig cloudevents;
  cloudevents.enabled = true;
  cloudevents.source = "/fuzz";
  return cloudevents;
}

constexpr std::array kProfiles = {BrokerProfile::generic, BrokerProfile::rabbitmq, BrokerProfile::activemq,
                                  BrokerProfile::artemis, BrokerProfile::azure_servicebus};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // One encoder for the whole run, as the daemon keeps one per thread: a row
  // must not see anything of the row before it.
  static outboxd::amqp::MessageEncoder plain;
  static outboxd::amqp::MessageEncoder events(cloudevents_on());
  const auto row = row_of(std::string_view(reinterpret_cast<const char*>(data), size));
  for (const auto profile : kProfiles) {
    (void)plain.encode(row, profile);
    (void)events.encode(row, profile);
  }
  return 0;
}
