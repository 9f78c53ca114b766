// Destination -> link target per broker profile.
#include <catch2/catch.hpp>

#include "amqp/destination.hpp"

using outboxd::amqp::is_full_address;
using outboxd::amqp::Target;
using outboxd::amqp::target_for;
using outboxd::config::BrokerProfile;

TEST_CASE("rabbitmq maps a name to a durable /queue/ target", "[amqp]") {
  CHECK(target_for("orders", BrokerProfile::rabbitmq) == Target{"/queue/orders", true, {}});
}

TEST_CASE("artemis keeps the name and asks for the queue capability", "[amqp]") {
  CHECK(target_for("orders", BrokerProfile::artemis) == Target{"orders", false, {"queue"}});
}

TEST_CASE("activemq uses the queue:// prefix", "[amqp]") {
  CHECK(target_for("orders", BrokerProfile::activemq) == Target{"queue://orders", false, {}});
}

TEST_CASE("generic and azure-servicebus use the name as it is", "[amqp]") {
  CHECK(target_for("orders", BrokerProfile::generic) == Target{"orders", false, {}});
  CHECK(target_for("orders", BrokerProfile::azure_servicebus) == Target{"orders", false, {}});
}

TEST_CASE("a full address is used as it is", "[amqp]") {
  CHECK(is_full_address("/queue/x"));
  CHECK(is_full_address("/exchange/amq.topic/a.b"));
  CHECK(is_full_address("topic://prices"));
  CHECK_FALSE(is_full_address("orders"));
  CHECK_FALSE(is_full_address("orders/eu"));
  CHECK_FALSE(is_full_address("a:b"));

  SECTION("rabbitmq keeps the durable target, so /queue/NAME is still declared durable") {
    CHECK(target_for("/exchange/amq.topic/a.b", BrokerProfile::rabbitmq) ==
          Target{"/exchange/amq.topic/a.b", true, {}});
    CHECK(target_for("/queue/orders", BrokerProfile::rabbitmq) == Target{"/queue/orders", true, {}});
  }
  SECTION("artemis adds no capability to an address someone chose") {
    CHECK(target_for("/orders", BrokerProfile::artemis) == Target{"/orders", false, {}});
  }
  SECTION("activemq does not prefix twice") {
    CHECK(target_for("topic://prices", BrokerProfile::activemq) == Target{"topic://prices", false, {}});
    CHECK(target_for("queue://orders", BrokerProfile::activemq) == Target{"queue://orders", false, {}});
  }
  SECTION("generic") {
    CHECK(target_for("amqp://other/x", BrokerProfile::generic) == Target{"amqp://other/x", false, {}});
  }
}

TEST_CASE("rabbitmq cannot carry an address beyond Latin-1, the other profiles can", "[amqp]") {
  using outboxd::amqp::carry_problem;
  for (const char* fine : {"orders", "café", "/queue/ÿ-ñ", "billing.x"}) {
    INFO(fine);
    CHECK_FALSE(carry_problem(target_for(fine, BrokerProfile::rabbitmq), BrokerProfile::rabbitmq));
  }
  for (const char* refused : {"заказы", "billing.ж", "/queue/ĀA", "orders-€", "q\xF0\x9F\x90\x87"}) {
    INFO(refused);
    const auto why = carry_problem(target_for(refused, BrokerProfile::rabbitmq), BrokerProfile::rabbitmq);
    REQUIRE(why);
    CHECK(why->find("Latin-1") != std::string::npos);
  }
  for (const auto profile : {BrokerProfile::generic, BrokerProfile::artemis, BrokerProfile::activemq,
                             BrokerProfile::azure_servicebus}) {
    CHECK_FALSE(carry_problem(target_for("заказы", profile), profile));
  }
}

TEST_CASE("activemq cannot carry an address with a comma (a composite destination), the other profiles can",
          "[amqp]") {
  using outboxd::amqp::carry_problem;
  for (const char* fine : {"orders", "orders.eu", "queue://orders", "topic://prices"}) {
    INFO(fine);
    CHECK_FALSE(carry_problem(target_for(fine, BrokerProfile::activemq), BrokerProfile::activemq));
  }
  for (const char* refused : {"orders,audit", ",", "orders,", "queue://a,topic://b", "topic://prices,queue://x"}) {
    INFO(refused);
    const auto why = carry_problem(target_for(refused, BrokerProfile::activemq), BrokerProfile::activemq);
    REQUIRE(why);
    CHECK(why->find("composite destination") != std::string::npos);
    CHECK(why->find("without a comma") != std::string::npos);
  }
  for (const auto profile : {BrokerProfile::generic, BrokerProfile::artemis, BrokerProfile::rabbitmq,
                             BrokerProfile::azure_servicebus}) {
    CHECK_FALSE(carry_problem(target_for("orders,audit", profile), profile));
  }
}
