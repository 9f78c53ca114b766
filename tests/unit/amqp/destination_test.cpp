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

namespace {

// The profile carries each of `fine` and refuses each of `refused` with a
// reason that says `why`; every other profile carries `refused[0]`.
void check_carried(BrokerProfile profile, std::initializer_list<const char*> fine,
                   std::initializer_list<const char*> refused, const char* why) {
  using outboxd::amqp::carry_problem;
  for (const char* destination : fine) {
    INFO(destination);
    CHECK_FALSE(carry_problem(target_for(destination, profile), profile));
  }
  for (const char* destination : refused) {
    INFO(destination);
    const auto problem = carry_problem(target_for(destination, profile), profile);
    REQUIRE(problem);
    CHECK(problem->find(why) != std::string::npos);
  }
  for (const auto other : {BrokerProfile::generic, BrokerProfile::rabbitmq, BrokerProfile::artemis,
                           BrokerProfile::activemq, BrokerProfile::azure_servicebus}) {
    if (other != profile) CHECK_FALSE(carry_problem(target_for(*refused.begin(), other), other));
  }
}

}  // namespace

TEST_CASE("rabbitmq cannot carry an address beyond Latin-1, the other profiles can", "[amqp]") {
  check_carried(BrokerProfile::rabbitmq, {"orders", "café", "/queue/ÿ-ñ", "billing.x"},
                {"заказы", "billing.ж", "/queue/ĀA", "orders-€", "q\xF0\x9F\x90\x87"}, "Latin-1");
}

TEST_CASE("activemq cannot carry an address with a comma (a composite destination), the other profiles can",
          "[amqp]") {
  check_carried(BrokerProfile::activemq, {"orders", "orders.eu", "queue://orders", "topic://prices"},
                {"orders,audit", ",", "orders,", "queue://a,topic://b", "topic://prices,queue://x"},
                "composite destination");
}
