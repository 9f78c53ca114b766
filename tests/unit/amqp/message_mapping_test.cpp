// Outbox row -> encoded AMQP message, checked by decoding every field.
#include <catch2/catch.hpp>

#include <proton/binary.hpp>
#include <proton/message_id.hpp>
#include <proton/scalar.hpp>
#include <proton/timestamp.hpp>
#include <proton/types_fwd.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "amqp/message_mapping.hpp"

using outboxd::amqp::EncodedMessage;
using outboxd::amqp::MessageEncoder;
using outboxd::config::BrokerProfile;
using outboxd::core::ErrorKind;
using outboxd::core::OutboxMessage;

namespace {

OutboxMessage full_row() {
  OutboxMessage row;
  row.id = 42;
  row.message_id = "order-17-created";
  row.destination = "orders";
  row.session_id = "order-17";
  row.correlation_id = "corr-9";
  row.parent_message_id = "cmd-3";
  row.originating_message_id = "req-1";
  row.subject = "OrderCreated";
  row.content_type = "application/json";
  row.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  row.headers_json = R"({"tenant":"acme","priority":7,"weight":2.5,"vip":true})";
  row.body = R"({"id":17})";
  row.ttl = std::chrono::milliseconds(60000);
  row.created_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000123));
  return row;
}

// A fresh encoder per message: a fresh proton::message, as every row once had.
outboxd::core::Result<EncodedMessage> encode_fresh(const OutboxMessage& row, BrokerProfile profile) {
  MessageEncoder encoder;
  return encoder.encode(row, profile);
}

proton::message round_trip(const EncodedMessage& bytes) {
  proton::message decoded;
  decoded.decode(bytes);
  return decoded;
}

std::size_t count(const std::vector<char>& haystack, const std::string& needle) {
  std::size_t n = 0;
  for (auto it = haystack.begin();; ++it) {
    it = std::search(it, haystack.end(), needle.begin(), needle.end());
    if (it == haystack.end()) return n;
    ++n;
  }
}

// The body section exactly as AMQP encodes `data`: descriptor 0x75, then vbin8
// or vbin32. It is the message's last section (no footer is written).
std::string data_section(std::string_view body) {
  std::string out("\x00\x53\x75", 3);
  if (body.size() < 256) {
    out += '\xa0';
    out += static_cast<char>(body.size());
  } else {
    out += '\xb0';
    for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>((body.size() >> shift) & 0xff);
  }
  return out.append(body);
}

void check_single_data_section(const EncodedMessage& bytes, std::string_view body) {
  const auto tail = data_section(body);
  REQUIRE(bytes.size() >= tail.size());
  CHECK(std::string(bytes.end() - static_cast<std::ptrdiff_t>(tail.size()), bytes.end()) == tail);
  CHECK(count(bytes, std::string("\x00\x53\x75", 3)) == 1);  // one data section
  CHECK(count(bytes, std::string("\x00\x53\x77", 3)) == 0);  // no amqp-value
  const auto decoded = round_trip(bytes);
  CHECK(decoded.inferred());
  REQUIRE(decoded.body().type() == proton::BINARY);
  const auto got = proton::get<proton::binary>(decoded.body());
  CHECK(std::string(got.begin(), got.end()) == body);
}

EncodedMessage mapped(const OutboxMessage& row, BrokerProfile profile = BrokerProfile::generic) {
  auto result = encode_fresh(row, profile);
  REQUIRE(result.ok());
  return result.value();
}

}  // namespace

TEST_CASE("every column reaches its AMQP field", "[amqp]") {
  const auto msg = round_trip(mapped(full_row()));

  CHECK(msg.id().type() == proton::STRING);
  CHECK(proton::get<std::string>(msg.id()) == "order-17-created");
  CHECK(msg.group_id() == "order-17");
  CHECK(msg.correlation_id().type() == proton::STRING);
  CHECK(proton::get<std::string>(msg.correlation_id()) == "corr-9");
  CHECK(msg.subject() == "OrderCreated");
  CHECK(msg.content_type() == "application/json");
  CHECK(msg.creation_time() == proton::timestamp(1700000000123));
  CHECK(msg.ttl() == proton::duration(60000));
  CHECK(msg.durable());
  CHECK(msg.to().empty());  // the link target carries the address

  const auto& props = msg.properties();
  CHECK(props.size() == 7);
  CHECK(proton::get<std::string>(props.get("tenant")) == "acme");
  CHECK(props.get("priority").type() == proton::LONG);
  CHECK(proton::get<std::int64_t>(props.get("priority")) == 7);
  CHECK(props.get("weight").type() == proton::DOUBLE);
  CHECK(proton::get<double>(props.get("weight")) == 2.5);
  CHECK(props.get("vip").type() == proton::BOOLEAN);
  CHECK(proton::get<bool>(props.get("vip")));
  CHECK(proton::get<std::string>(props.get("parent_message_id")) == "cmd-3");
  CHECK(proton::get<std::string>(props.get("originating_message_id")) == "req-1");
  CHECK(proton::get<std::string>(props.get("traceparent")) ==
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  CHECK_FALSE(props.exists("_AMQ_DUPL_ID"));

  check_single_data_section(mapped(full_row()), full_row().body.view());
}

TEST_CASE("optional columns left NULL stay absent", "[amqp]") {
  OutboxMessage row;
  row.message_id = "m1";
  row.destination = "orders";
  row.body = "x";
  const auto msg = round_trip(mapped(row));
  CHECK(proton::get<std::string>(msg.id()) == "m1");
  CHECK(msg.group_id().empty());
  CHECK(msg.correlation_id().empty());
  CHECK(msg.subject().empty());
  CHECK(msg.content_type().empty());
  CHECK(msg.ttl() == proton::duration(0));
  CHECK(msg.durable());
  CHECK(msg.properties().empty());
}

TEST_CASE("the body goes out byte for byte as one data section", "[amqp]") {
  OutboxMessage row = full_row();

  SECTION("bytes that are not UTF-8, including NUL") {
    row.body = std::string("\xff\xfe\x00\x01\x80\xc3\x28 tail", 11);
    check_single_data_section(mapped(row), row.body.view());
  }
  SECTION("an empty body is an empty data section, not a missing body") {
    row.body.clear();
    check_single_data_section(mapped(row), row.body.view());
  }
  SECTION("a body longer than 255 bytes uses vbin32") {
    row.body = std::string(70000, '\x7f');
    check_single_data_section(mapped(row), row.body.view());
  }
}

TEST_CASE("headers type rules", "[amqp]") {
  OutboxMessage row = full_row();
  row.parent_message_id.reset();
  row.originating_message_id.reset();
  row.traceparent.reset();

  SECTION("integers are long, non-integers double, also at the edges") {
    row.headers_json = R"({"a":-9223372036854775808,"b":9223372036854775807,"c":1.0,"d":1.5e300,"e":-0.5})";
    const auto props = round_trip(mapped(row)).properties();
    CHECK(proton::get<std::int64_t>(props.get("a")) == INT64_MIN);
    CHECK(proton::get<std::int64_t>(props.get("b")) == INT64_MAX);
    CHECK(props.get("c").type() == proton::DOUBLE);
    CHECK(proton::get<double>(props.get("d")) == 1.5e300);
    CHECK(proton::get<double>(props.get("e")) == -0.5);
  }
  SECTION("null is an AMQP null") {
    row.headers_json = R"({"gone":null})";
    const auto props = round_trip(mapped(row)).properties();
    CHECK(props.get("gone").empty());
    CHECK(props.size() == 1);
  }
  SECTION("empty object, empty text and unicode keys") {
    row.headers_json = "{}";
    CHECK(round_trip(mapped(row)).properties().empty());
    row.headers_json = "";
    CHECK(round_trip(mapped(row)).properties().empty());
    row.headers_json = R"({"région":"é"})";
    const auto props = round_trip(mapped(row)).properties();
    CHECK(proton::get<std::string>(props.get("région")) == "é");
  }
}

TEST_CASE("headers that cannot be application properties are rejected", "[amqp]") {
  OutboxMessage row = full_row();
  auto reason = [&](const std::string& json) {
    row.headers_json = json;
    auto result = encode_fresh(row, BrokerProfile::generic);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().kind == ErrorKind::rejected);
    return result.error().message;
  };

  // tests/acceptance/headers.tsv has the cases; these are the words.
  CHECK(reason(R"({"a":1,"tags":["x"]})") == R"(headers: key "tags": arrays and objects are not supported)");
  CHECK(reason(R"({"inner":{"x":1}})") == R"(headers: key "inner": arrays and objects are not supported)");
  CHECK(reason(R"({"big":18446744073709551615})") == R"(headers: key "big": integers must fit a signed 64-bit long)");
  CHECK(reason(R"({"huge":1e400})") == R"(headers: key "huge": numbers must fit a double)");
  // How jsonb prints 1e400: an integer, too large.
  CHECK(reason(R"({"huge":1)" + std::string(400, '0') + "}") ==
        R"(headers: key "huge": integers must fit a signed 64-bit long)");
  CHECK(reason("{\"a\\u001b[2J\\nb\":1}") ==
        R"(headers: key "a\u001b[2J\nb": keys are 1..128 characters without control characters)");
  CHECK(reason(R"({"x-opt-to":"q"})") == R"(headers: key "x-opt-to": reserved by the AMQP specification or a broker)");
  CHECK(reason(R"(["a"])") == "headers: not a JSON object");
  CHECK(reason(R"("text")") == "headers: not a JSON object");
  CHECK(reason("{not json") == "headers: not a JSON object");
}

TEST_CASE("a set column wins over a header of the same name; a NULL column lets it through", "[amqp]") {
  OutboxMessage row = full_row();
  row.headers_json = R"({"traceparent":"from-header","parent_message_id":"from-header"})";
  row.parent_message_id.reset();
  const auto props = round_trip(mapped(row)).properties();
  CHECK(proton::get<std::string>(props.get("traceparent")) == row.traceparent.value());
  CHECK(proton::get<std::string>(props.get("parent_message_id")) == "from-header");
}

TEST_CASE("ttl limits", "[amqp]") {
  OutboxMessage row = full_row();
  auto error_for = [&](std::int64_t ms) {
    row.ttl = std::chrono::milliseconds(ms);
    auto result = encode_fresh(row, BrokerProfile::generic);
    REQUIRE_FALSE(result.ok());
    CHECK(result.error().kind == ErrorKind::rejected);
    return result.error().message;
  };
  CHECK(error_for(0) == "ttl: 0 ms is not positive");
  CHECK(error_for(-5) == "ttl: -5 ms is not positive");
  CHECK(error_for(4294967296) == "ttl: 4294967296 ms exceeds the AMQP maximum of 4294967295 ms");
  row.ttl = std::chrono::milliseconds(4294967295);
  CHECK(round_trip(mapped(row)).ttl() == proton::duration(4294967295));
}

TEST_CASE("profile extras: Artemis gets _AMQ_DUPL_ID = message-id, others do not", "[amqp]") {
  OutboxMessage row = full_row();
  const auto artemis = round_trip(mapped(row, BrokerProfile::artemis)).properties();
  CHECK(proton::get<std::string>(artemis.get("_AMQ_DUPL_ID")) == "order-17-created");
  for (auto profile : {BrokerProfile::generic, BrokerProfile::rabbitmq, BrokerProfile::activemq,
                       BrokerProfile::azure_servicebus}) {
    CHECK_FALSE(round_trip(mapped(row, profile)).properties().exists("_AMQ_DUPL_ID"));
  }
}

TEST_CASE("a message id is its writer's: outboxd_writer names it, and Artemis dedupes on both", "[amqp]") {
  OutboxMessage row = full_row();
  row.writer = "orders_app";
  const auto props = round_trip(mapped(row, BrokerProfile::artemis)).properties();
  CHECK(proton::get<std::string>(props.get("outboxd_writer")) == "orders_app");
  CHECK(proton::get<std::string>(props.get("_AMQ_DUPL_ID")) == std::string("order-17-created\x1f") + "orders_app");
  OutboxMessage other = row;
  other.writer = "billing_app";
  CHECK(outboxd::amqp::duplicate_id(other) != outboxd::amqp::duplicate_id(row));
  // The id ends at the first U+001F, which no message id holds: no other split gives the same text.
  OutboxMessage shifted = row;
  shifted.message_id = "order-17-created\x1forders";
  shifted.writer = "_app";
  CHECK(outboxd::amqp::duplicate_id(shifted) != outboxd::amqp::duplicate_id(row));
  row.writer.reset();  // written before writers were recorded
  const auto legacy = round_trip(mapped(row, BrokerProfile::artemis)).properties();
  CHECK_FALSE(legacy.exists("outboxd_writer"));
  CHECK(proton::get<std::string>(legacy.get("_AMQ_DUPL_ID")) == "order-17-created");
}

TEST_CASE("a daemon of many outboxes names each message's outbox, and Artemis dedupes per outbox", "[amqp]") {
  OutboxMessage row = full_row();
  row.writer = "orders_app";
  row.outbox = 3;
  row.outbox_name = std::make_shared<const std::string>("acme");
  const auto props = round_trip(mapped(row, BrokerProfile::artemis)).properties();
  CHECK(proton::get<std::string>(props.get("outboxd_outbox")) == "acme");
  CHECK(proton::get<std::string>(props.get("outboxd_writer")) == "orders_app");
  CHECK(proton::get<std::string>(props.get("_AMQ_DUPL_ID")) ==
        std::string("acme\x1f") + "order-17-created\x1f" + "orders_app");
  // Another tenant's row with the same message id and writer is no duplicate of this one.
  OutboxMessage other = row;
  other.outbox = 4;
  other.outbox_name = std::make_shared<const std::string>("globex");
  CHECK(outboxd::amqp::duplicate_id(other) != outboxd::amqp::duplicate_id(row));
  // The name ends at the first U+001F, which no outbox name holds.
  OutboxMessage shifted = row;
  shifted.outbox_name = std::make_shared<const std::string>("acme\x1forder");
  shifted.message_id = "-17-created";
  CHECK(outboxd::amqp::duplicate_id(shifted) != outboxd::amqp::duplicate_id(row));
  row.writer.reset();
  CHECK(outboxd::amqp::duplicate_id(row) == std::string("acme\x1f") + "order-17-created");
  // The property goes out with every profile; only Artemis gets a duplicate id.
  const auto rabbitmq = round_trip(mapped(row, BrokerProfile::rabbitmq)).properties();
  CHECK(proton::get<std::string>(rabbitmq.get("outboxd_outbox")) == "acme");
  CHECK_FALSE(rabbitmq.exists("_AMQ_DUPL_ID"));
}

TEST_CASE("a daemon of one outbox (no outbox name) sends no outboxd_outbox and the plain duplicate id", "[amqp]") {
  OutboxMessage row = full_row();
  row.writer = "orders_app";
  const auto props = round_trip(mapped(row, BrokerProfile::artemis)).properties();
  CHECK_FALSE(props.exists("outboxd_outbox"));
  CHECK(proton::get<std::string>(props.get("_AMQ_DUPL_ID")) == std::string("order-17-created\x1f") + "orders_app");
  // The outbox's index routes outcomes back; it never reaches the message.
  OutboxMessage indexed = row;
  indexed.outbox = 5;
  CHECK(mapped(indexed, BrokerProfile::artemis) == mapped(row, BrokerProfile::artemis));
}

TEST_CASE("an encoder used for many rows writes the bytes a fresh one writes", "[amqp]") {
  // Each row leaves fields unset that the one before set, and a rejected row
  // stops half-way: nothing may carry over into the next message.
  OutboxMessage bare;
  bare.message_id = "bare";
  bare.destination = "orders";
  OutboxMessage no_headers = full_row();
  no_headers.headers_json = "{}";
  no_headers.ttl.reset();
  OutboxMessage bad_ttl = full_row();
  bad_ttl.ttl = std::chrono::milliseconds(0);
  OutboxMessage bad_headers = full_row();
  bad_headers.headers_json = R"({"ok":"x","nested":{"y":1}})";
  OutboxMessage long_body = full_row();
  long_body.body = std::string(70000, 'b');
  OutboxMessage named = full_row();
  named.outbox_name = std::make_shared<const std::string>("acme");

  const std::vector<OutboxMessage> rows{full_row(), bare, bad_ttl, full_row(), bad_headers, bare,
                                        long_body,  bare, named,     bare,       no_headers};
  MessageEncoder reused;
  for (const auto profile : {BrokerProfile::artemis, BrokerProfile::rabbitmq}) {
    for (std::size_t i = 0; i < rows.size(); ++i) {
      INFO("row " << i);
      const auto again = reused.encode(rows[i], profile);
      const auto fresh = encode_fresh(rows[i], profile);
      REQUIRE(again.ok() == fresh.ok());
      if (fresh.ok()) {
        CHECK(again.value() == fresh.value());
      } else {
        CHECK(again.error().message == fresh.error().message);
      }
    }
  }
}
