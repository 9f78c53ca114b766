// CloudEvents binary content mode: every attribute, the extensions, the errors, and "disabled changes nothing".
#include <catch2/catch.hpp>

#include <proton/binary.hpp>
#include <proton/message_id.hpp>
#include <proton/scalar.hpp>

#include <chrono>
#include <string>

#include "amqp/message_mapping.hpp"

using outboxd::amqp::MessageEncoder;
using outboxd::config::BrokerProfile;
using outboxd::config::CloudEventsConfig;
using outboxd::core::ErrorKind;
using outboxd::core::OutboxMessage;

namespace {

OutboxMessage row() {
  OutboxMessage row;
  row.id = 7;
  row.message_id = "order-17-created";
  row.destination = "orders";
  row.session_id = "order-17";
  row.subject = "com.shop.order.created";
  row.content_type = "application/json";
  row.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  row.headers_json =
      R"({"tenant":"acme","priority":7,"vip":true,"weight":2.5,"big":4294967296,"Region":"eu","tenant_id":"t1",)"
      R"("note":"two\nlines","small":-2147483648,"large":2147483648})";
  row.body = R"({"id":17})";
  row.created_at = std::chrono::system_clock::time_point(std::chrono::microseconds(1700000000123456));
  return row;
}

CloudEventsConfig enabled() {
  CloudEventsConfig cloudevents;
  cloudevents.enabled = true;
  cloudevents.source = "https://shop.example/orders";
  return cloudevents;
}

proton::message publish(const OutboxMessage& row, const CloudEventsConfig& cloudevents,
                        BrokerProfile profile = BrokerProfile::generic) {
  MessageEncoder encoder(cloudevents);
  const auto encoded = encoder.encode(row, profile);
  INFO((encoded ? "" : encoded.error().message));
  REQUIRE(encoded.ok());
  proton::message decoded;
  decoded.decode(encoded.value());
  return decoded;
}

std::string text(const proton::message& msg, const std::string& key) {
  REQUIRE(msg.properties().exists(key));
  return proton::get<std::string>(msg.properties().get(key));
}

std::string refusal(const OutboxMessage& row, const CloudEventsConfig& cloudevents) {
  MessageEncoder encoder(cloudevents);
  const auto encoded = encoder.encode(row, BrokerProfile::generic);
  REQUIRE_FALSE(encoded.ok());
  CHECK(encoded.error().kind == ErrorKind::rejected);
  return encoded.error().message;
}

}  // namespace

TEST_CASE("every context attribute of a CloudEvent", "[amqp][cloudevents]") {
  const auto msg = publish(row(), enabled());
  CHECK(text(msg, "cloudEvents:id") == "order-17-created");
  CHECK(text(msg, "cloudEvents:source") == "https://shop.example/orders");
  CHECK(text(msg, "cloudEvents:specversion") == "1.0");
  CHECK(text(msg, "cloudEvents:type") == "com.shop.order.created");
  CHECK(text(msg, "cloudEvents:time") == "2023-11-14T22:13:20.123456Z");
  CHECK(text(msg, "cloudEvents:subject") == "order-17");
  // datacontenttype is the AMQP content-type, never an application property.
  CHECK(msg.content_type() == "application/json");
  CHECK_FALSE(msg.properties().exists("cloudEvents:datacontenttype"));
  // The AMQP fields the row always maps stay as they are.
  CHECK(proton::get<std::string>(msg.id()) == "order-17-created");
  CHECK(msg.subject() == "com.shop.order.created");
  CHECK(msg.group_id() == "order-17");
  CHECK(proton::get<proton::binary>(msg.body()) == proton::binary(std::string(R"({"id":17})")));
}

TEST_CASE("headers with extension names and CloudEvents types become extensions, the rest stay plain",
          "[amqp][cloudevents]") {
  const auto msg = publish(row(), enabled());
  const auto& properties = msg.properties();
  CHECK(text(msg, "cloudEvents:tenant") == "acme");
  CHECK(proton::get<std::int64_t>(properties.get("cloudEvents:priority")) == 7);
  CHECK(proton::get<bool>(properties.get("cloudEvents:vip")));
  CHECK(proton::get<std::int64_t>(properties.get("cloudEvents:small")) == -2147483648LL);
  for (const char* moved : {"tenant", "priority", "vip", "small"}) CHECK_FALSE(properties.exists(moved));
  // A double and an integer beyond 32 bits are no CloudEvents type; upper case and '_' are no extension names.
  CHECK(proton::get<double>(properties.get("weight")) == 2.5);
  CHECK(proton::get<std::int64_t>(properties.get("big")) == 4294967296LL);
  CHECK(text(msg, "Region") == "eu");
  CHECK(text(msg, "tenant_id") == "t1");
  // A CloudEvents String holds no control characters.
  CHECK(text(msg, "note") == "two\nlines");
  CHECK(proton::get<std::int64_t>(properties.get("large")) == 2147483648LL);
  for (const char* plain : {"weight", "big", "Region", "tenant_id", "note", "large"}) {
    CHECK_FALSE(properties.exists(std::string("cloudEvents:") + plain));
  }
  // The columns keep their plain names: tracing tools read traceparent there.
  CHECK(text(msg, "traceparent") == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  CHECK_FALSE(properties.exists("cloudEvents:traceparent"));
}

TEST_CASE("the prefix can be cloudEvents_ for JMS consumers", "[amqp][cloudevents]") {
  auto cloudevents = enabled();
  cloudevents.property_prefix = "cloudEvents_";
  const auto msg = publish(row(), cloudevents);
  for (const char* name : {"id", "source", "specversion", "type", "time", "subject", "tenant"}) {
    INFO(name);
    CHECK(msg.properties().exists(std::string("cloudEvents_") + name));
    CHECK_FALSE(msg.properties().exists(std::string("cloudEvents:") + name));
  }
}

TEST_CASE("without a session_id there is no subject attribute, without a content_type no content-type",
          "[amqp][cloudevents]") {
  auto bare = row();
  bare.session_id.reset();
  bare.content_type.reset();
  bare.headers_json = "{}";
  const auto msg = publish(bare, enabled());
  CHECK_FALSE(msg.properties().exists("cloudEvents:subject"));
  CHECK(msg.content_type().empty());
  CHECK(text(msg, "cloudEvents:type") == "com.shop.order.created");
}

TEST_CASE("a row without subject takes default_type, or is refused without one", "[amqp][cloudevents]") {
  auto untyped = row();
  untyped.subject.reset();
  CHECK(refusal(untyped, enabled()) ==
        "cloudevents: the row has no subject to be the event type and broker.cloudevents.default_type is not set");
  auto cloudevents = enabled();
  cloudevents.default_type = "com.shop.event";
  CHECK(text(publish(untyped, cloudevents), "cloudEvents:type") == "com.shop.event");
}

TEST_CASE("a header key with a CloudEvents prefix is refused", "[amqp][cloudevents]") {
  for (const char* key : {"cloudEvents:type", "cloudEvents_time", "CLOUDEVENTS:x", "cloudevents_id"}) {
    INFO(key);
    auto forged = row();
    forged.headers_json = std::string(R"({")") + key + R"(":"x"})";
    CHECK(refusal(forged, enabled()).find(std::string("headers: key \"") + key + "\"") == 0);
  }
  auto near = row();
  near.headers_json = R"({"cloudEvents":"x","cloudEventsy":"y"})";
  CHECK(text(publish(near, enabled()), "cloudEvents") == "x");
}

TEST_CASE("disabled, or for another destination, the message is byte for byte the plain one", "[amqp][cloudevents]") {
  auto other = enabled();
  other.destinations = {"invoices"};
  auto off = enabled();
  off.enabled = false;
  for (const auto profile : {BrokerProfile::generic, BrokerProfile::artemis}) {
    MessageEncoder plain;
    const auto expected = plain.encode(row(), profile);
    REQUIRE(expected.ok());
    for (const auto& cloudevents : {other, off}) {
      MessageEncoder encoder(cloudevents);
      const auto encoded = encoder.encode(row(), profile);
      REQUIRE(encoded.ok());
      CHECK(encoded.value() == expected.value());
    }
  }
  other.destinations = {"invoices", "orders"};
  CHECK(publish(row(), other).properties().exists("cloudEvents:id"));
}

TEST_CASE("Artemis keeps its duplicate-detection id next to the CloudEvent", "[amqp][cloudevents]") {
  const auto msg = publish(row(), enabled(), BrokerProfile::artemis);
  CHECK(text(msg, "_AMQ_DUPL_ID") == "order-17-created");
  CHECK(text(msg, "cloudEvents:id") == "order-17-created");
}
