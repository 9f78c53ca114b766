// Publisher against real RabbitMQ 3.10 and Artemis: every mapped field read back by a consumer.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <set>
#include <unistd.h>

#include <proton/binary.hpp>
#include <proton/message_id.hpp>
#include <proton/scalar.hpp>
#include <proton/timestamp.hpp>

#include "amqp/destination.hpp"
#include "amqp/publisher.hpp"
#include "amqp_consumer.hpp"
#include "recording_sink.hpp"
#include "test_rows.hpp"

using namespace std::chrono_literals;
using outboxd::amqp::Publisher;
using outboxd::config::BrokerProfile;
using outboxd::core::DeliveryOutcome;
using namespace outboxd::test;

namespace {

constexpr int kSkipped = 77;  // ctest SKIP_RETURN_CODE

struct Broker {
  std::string name;  // RABBITMQ or ARTEMIS
  BrokerProfile profile;
  std::string url, user, password;
};

std::string env(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value ? value : "";
}

// The broker from scripts/services.sh's environment. Without it the test is
// skipped (exit code 77, which ctest reports as skipped), or fails when
// OUTBOXD_REQUIRE_SERVICES=1.
Broker broker_under_test(const std::string& name, BrokerProfile profile) {
  Broker broker{name, profile, env("OUTBOXD_TEST_" + name + "_URL"), env("OUTBOXD_TEST_" + name + "_USER"),
                env("OUTBOXD_TEST_" + name + "_PASSWORD")};
  if (broker.url.empty()) {
    const std::string why = "OUTBOXD_TEST_" + name + "_URL is not set: start scripts/services.sh and source its env file";
    if (env("OUTBOXD_REQUIRE_SERVICES") == "1") FAIL(why);
    std::cerr << "SKIPPED: " << why << "\n";
    std::exit(kSkipped);
  }
  return broker;
}

outboxd::config::BrokerConfig config_for(const Broker& broker) {
  auto config = peer_broker(broker.url);
  config.profile = broker.profile;
  config.username = broker.user;
  config.password = broker.password;
  config.outcome_timeout = 30s;
  return config;
}

// A queue name no earlier run used.
std::string fresh_queue(const std::string& what) {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return "outboxd-test-" + what + "-" + std::to_string(::getpid()) + "-" +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now).count());
}

Consumed read_back(const Broker& broker, const std::string& queue, std::size_t count,
                   std::chrono::milliseconds timeout = 30s) {
  ConsumeRequest request;
  request.url = broker.url;
  request.user = broker.user;
  request.password = broker.password;
  const auto target = outboxd::amqp::target_for(queue, broker.profile);
  request.address = target.address;
  request.source_capabilities = target.capabilities;
  request.durable_source = target.durable_target;
  request.count = count;
  request.timeout = timeout;
  return consume(request);
}

Broker rabbitmq() { return broker_under_test("RABBITMQ", BrokerProfile::rabbitmq); }
Broker artemis() { return broker_under_test("ARTEMIS", BrokerProfile::artemis); }

// Rows that exercise every column: all optional columns set, typed headers,
// bodies that are empty, binary and large.
std::vector<outboxd::core::OutboxMessage> varied_rows(const std::string& queue) {
  std::vector<outboxd::core::OutboxMessage> batch;
  for (outboxd::core::RowId id = 1; id <= 4; ++id) {
    auto message = row(id, queue);
    message.correlation_id = "corr-" + std::to_string(id);
    message.parent_message_id = "parent-" + std::to_string(id);
    message.originating_message_id = "origin";
    message.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    message.headers_json = R"({"tenant":"acme","count":)" + std::to_string(id * 1000000000000LL) +
                           R"(,"ratio":0.25,"flag":true})";
    message.ttl = std::chrono::milliseconds(600000 + id);
    message.created_at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1700000000000 + id));
    batch.push_back(message);
  }
  batch[0].body = std::string("\x00\xff\xfe\x80 not utf-8 \xc3\x28", 18);
  batch[1].body.clear();
  batch[2].body = std::string(300000, 'x');
  batch[3].body = R"({"json":"text"})";
  batch[3].content_type = "application/json";
  return batch;
}

void check_fields(const ReceivedMessage& received, const outboxd::core::OutboxMessage& sent, const Broker& broker) {
  INFO(broker.name << " row " << sent.id);
  const auto got = received.decode();
  CHECK(got.id().type() == proton::STRING);
  CHECK(proton::get<std::string>(got.id()) == sent.message_id);
  CHECK(got.group_id() == *sent.session_id);
  CHECK(proton::get<std::string>(got.correlation_id()) == *sent.correlation_id);
  CHECK(got.subject() == *sent.subject);
  CHECK(got.content_type() == *sent.content_type);
  CHECK(got.creation_time() == proton::timestamp(1700000000000 + sent.id));
  CHECK(got.ttl() == proton::duration(sent.ttl->count()));
  CHECK(got.durable());
  CHECK(got.inferred());  // a data section, not an amqp-value
  REQUIRE(got.body().type() == proton::BINARY);
  const auto body = proton::get<proton::binary>(got.body());
  CHECK(body.size() == sent.body.size());
  CHECK(std::string(body.begin(), body.end()) == sent.body);

  const auto& properties = got.properties();
  CHECK(proton::get<std::string>(properties.get("tenant")) == "acme");
  CHECK(properties.get("count").type() == proton::LONG);
  CHECK(proton::get<std::int64_t>(properties.get("count")) == sent.id * 1000000000000LL);
  CHECK(properties.get("ratio").type() == proton::DOUBLE);
  CHECK(proton::get<double>(properties.get("ratio")) == 0.25);
  CHECK(properties.get("flag").type() == proton::BOOLEAN);
  CHECK(proton::get<bool>(properties.get("flag")));
  CHECK(proton::get<std::string>(properties.get("parent_message_id")) == *sent.parent_message_id);
  CHECK(proton::get<std::string>(properties.get("originating_message_id")) == "origin");
  CHECK(proton::get<std::string>(properties.get("traceparent")) == *sent.traceparent);
  if (broker.profile == BrokerProfile::artemis) {
    CHECK(proton::get<std::string>(properties.get("_AMQ_DUPL_ID")) == sent.message_id);
  }
}

void round_trip(const Broker& broker) {
  const auto queue = fresh_queue("fields");
  RecordingSink sink;
  Publisher publisher(config_for(broker), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  const auto sent = varied_rows(queue);
  publisher.publish(sent);
  REQUIRE(sink.wait_for_outcomes(sent.size(), 30s));
  for (const auto& outcome : sink.outcomes()) {
    INFO("row " << outcome.id << ": " << outcome.reason);
    CHECK(outcome.outcome == DeliveryOutcome::accepted);
  }
  publisher.stop();

  const auto consumed = read_back(broker, queue, sent.size());
  REQUIRE(consumed.error.empty());
  REQUIRE(consumed.messages.size() == sent.size());
  for (std::size_t i = 0; i < sent.size(); ++i) check_fields(consumed.messages[i], sent[i], broker);
}

void throughput(const Broker& broker) {
  constexpr int kMessages = 10000;
  const auto queue = fresh_queue("bulk");
  RecordingSink sink;
  Publisher publisher(config_for(broker), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  REQUIRE(wait_until([&] { return publisher.connected(); }, 30s));
  const auto started = std::chrono::steady_clock::now();
  for (int first = 1; first <= kMessages; first += 500) publisher.publish(rows(first, first + 499, queue));
  REQUIRE(sink.wait_for_outcomes(kMessages, 120s));
  const auto elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cerr << broker.name << ": " << kMessages << " messages accepted in " << static_cast<int>(elapsed * 1000)
            << " ms = " << static_cast<int>(kMessages / elapsed) << " msg/s (batches of 500, broker credit)\n";
  std::size_t accepted = 0;
  for (const auto& outcome : sink.outcomes()) accepted += outcome.outcome == DeliveryOutcome::accepted;
  CHECK(accepted == static_cast<std::size_t>(kMessages));

  const auto consumed = read_back(broker, queue, kMessages);
  CHECK(consumed.error.empty());
  REQUIRE(consumed.messages.size() == static_cast<std::size_t>(kMessages));
  for (std::size_t i = 0; i < consumed.messages.size(); ++i) {
    if (consumed.messages[i].message_id() != "msg-" + std::to_string(i + 1)) FAIL("out of order at " << i);
  }
}

// A row of the outbox `name` (index `outbox`) of a daemon that serves several.
outboxd::core::OutboxMessage of_outbox(outboxd::core::OutboxMessage message, std::uint32_t outbox,
                                       const std::string& name) {
  message.outbox = outbox;
  message.outbox_name = std::make_shared<const std::string>(name);
  return message;
}

std::string outbox_of(const ReceivedMessage& message) {
  return proton::get<std::string>(message.decode().properties().get("outboxd_outbox"));
}

}  // namespace

TEST_CASE("RabbitMQ: every mapped field and the exact body bytes come back", "[amqp][broker][rabbitmq]") {
  round_trip(rabbitmq());
}

TEST_CASE("Artemis: every mapped field and the exact body bytes come back", "[amqp][broker][artemis]") {
  round_trip(artemis());
}

TEST_CASE("RabbitMQ: 10k messages", "[amqp][broker][rabbitmq]") { throughput(rabbitmq()); }

TEST_CASE("Artemis: 10k messages", "[amqp][broker][artemis]") { throughput(artemis()); }

TEST_CASE("RabbitMQ: an existing queue of other durability is refused for its rows only",
          "[amqp][broker][rabbitmq]") {
  const auto broker = rabbitmq();
  const auto queue = fresh_queue("transient");
  // A consumer with a non-durable source declares the queue non-durable.
  ConsumeRequest declare;
  declare.url = broker.url;
  declare.user = broker.user;
  declare.password = broker.password;
  declare.address = "/queue/" + queue;
  declare.timeout = 300ms;
  CHECK(consume(declare).messages.empty());

  RecordingSink sink;
  Publisher publisher(config_for(broker), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 3, queue));
  publisher.publish(rows(4, 6, fresh_queue("fine")));
  REQUIRE(sink.wait_for_outcomes(6, 30s));
  for (const auto& [id, reported] : sink.by_id()) {
    INFO("row " << id << ": " << reported.front().reason);
    REQUIRE(reported.size() == 1);
    if (id <= 3) {
      CHECK(reported.front().outcome == DeliveryOutcome::rejected);
      CHECK(reported.front().reason.find("amqp:precondition-failed") != std::string::npos);
    } else {
      CHECK(reported.front().outcome == DeliveryOutcome::accepted);
    }
  }
  CHECK(publisher.connected());
  CHECK(sink.connection_events().size() == 1);  // up once, never down
}

TEST_CASE("Artemis: a re-published message-id is accepted and dropped by duplicate detection",
          "[amqp][broker][artemis]") {
  const auto broker = artemis();
  const auto queue = fresh_queue("dupes");
  RecordingSink sink;
  Publisher publisher(config_for(broker), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  auto first = row(1, queue);
  auto again = row(2, queue);  // another row id, the same message-id: a re-publish after "unknown"
  again.message_id = first.message_id;
  publisher.publish({first});
  REQUIRE(sink.wait_for_outcomes(1, 30s));
  publisher.publish({again, row(3, queue)});
  REQUIRE(sink.wait_for_outcomes(3, 30s));
  for (const auto& outcome : sink.outcomes()) CHECK(outcome.outcome == DeliveryOutcome::accepted);

  const auto consumed = read_back(broker, queue, 3, 3s);
  REQUIRE(consumed.messages.size() == 2);  // the consumer times out waiting for a third
  CHECK(consumed.messages[0].message_id() == "msg-1");
  CHECK(consumed.messages[1].message_id() == "msg-3");
}

TEST_CASE("RabbitMQ: two outboxes' rows of the same ids all arrive, each naming its outbox",
          "[amqp][broker][rabbitmq]") {
  const auto broker = rabbitmq();
  const auto queue = fresh_queue("outboxes");
  RecordingSink sink;
  Publisher publisher(config_for(broker), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish({of_outbox(row(1, queue), 1, "acme"), of_outbox(row(1, queue), 2, "globex")});
  REQUIRE(sink.wait_for_outcomes(2, 30s));
  std::set<std::uint32_t> outboxes;
  for (const auto& outcome : sink.outcomes()) {
    INFO("row " << outcome.id << " of outbox " << outcome.outbox << ": " << outcome.reason);
    CHECK(outcome.id == 1);
    CHECK(outcome.outcome == DeliveryOutcome::accepted);
    outboxes.insert(outcome.outbox);
  }
  CHECK(outboxes == std::set<std::uint32_t>{1, 2});

  const auto consumed = read_back(broker, queue, 2);
  REQUIRE(consumed.messages.size() == 2);
  CHECK(consumed.messages[0].message_id() == consumed.messages[1].message_id());
  CHECK(outbox_of(consumed.messages[0]) == "acme");
  CHECK(outbox_of(consumed.messages[1]) == "globex");
}

TEST_CASE("Artemis: two outboxes' equal message ids are no duplicates of each other, a re-publish in one is",
          "[amqp][broker][artemis]") {
  const auto broker = artemis();
  const auto queue = fresh_queue("outbox-dupes");
  RecordingSink sink;
  Publisher publisher(config_for(broker), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish({of_outbox(row(1, queue), 1, "acme"), of_outbox(row(1, queue), 2, "globex")});
  REQUIRE(sink.wait_for_outcomes(2, 30s));
  auto again = of_outbox(row(2, queue), 1, "acme");  // acme's re-publish of msg-1 after "unknown"
  again.message_id = "msg-1";
  publisher.publish({again, of_outbox(row(3, queue), 2, "globex")});
  REQUIRE(sink.wait_for_outcomes(4, 30s));
  for (const auto& outcome : sink.outcomes()) CHECK(outcome.outcome == DeliveryOutcome::accepted);

  const auto consumed = read_back(broker, queue, 4, 3s);
  REQUIRE(consumed.messages.size() == 3);  // the consumer times out waiting for a fourth
  CHECK(consumed.messages[0].message_id() == "msg-1");
  CHECK(outbox_of(consumed.messages[0]) == "acme");
  CHECK(consumed.messages[1].message_id() == "msg-1");
  CHECK(outbox_of(consumed.messages[1]) == "globex");
  CHECK(consumed.messages[2].message_id() == "msg-3");
}

TEST_CASE("a wrong password is a connection failure with a reason, and rows are connection_lost", "[amqp][broker]") {
  auto broker = rabbitmq();
  broker.password = "wrong";
  RecordingSink sink;
  Publisher publisher(config_for(broker), "outboxd-test", sink);
  REQUIRE(publisher.start().ok());
  publisher.publish(rows(1, 2, fresh_queue("auth")));
  REQUIRE(sink.wait_for_outcomes(2, 30s));
  for (const auto& outcome : sink.outcomes()) CHECK(outcome.outcome == DeliveryOutcome::connection_lost);
  REQUIRE(sink.wait_for_connection_events(1));
  const auto [up, reason] = sink.connection_events().front();
  CHECK_FALSE(up);
  CHECK(reason.find("amqp:unauthorized-access") != std::string::npos);
  CHECK(reason.find("check broker.username and broker.password") != std::string::npos);
  CHECK(reason.find("wrong") == std::string::npos);  // the password never shows
}

TEST_CASE("ANONYMOUS where the broker allows it", "[amqp][broker]") {
  for (auto broker : {rabbitmq(), artemis()}) {
    INFO(broker.name);
    const auto queue = fresh_queue("anonymous");
    auto config = config_for(broker);
    config.username.clear();
    config.password.clear();
    RecordingSink sink;
    Publisher publisher(config, "outboxd-test", sink);
    REQUIRE(publisher.start().ok());
    publisher.publish(rows(1, 1, queue));
    REQUIRE(sink.wait_for_outcomes(1, 30s));
    CHECK(sink.outcomes().front().outcome == DeliveryOutcome::accepted);
    CHECK(read_back(broker, queue, 1).messages.size() == 1);
  }
}
