// session_key: a row's session, its session id as one writer wrote it; DeliveryKey: a row among many outboxes.
#include <catch2/catch.hpp>

#include <set>
#include <unordered_set>

#include "core/outbox_message.hpp"

using outboxd::core::DeliveryKey;
using outboxd::core::OutboxMessage;
using outboxd::core::session_key;

TEST_CASE("session_key: one session id from two writers, or without writer, is three sessions",
          "[core][session_key]") {
  const std::set<std::string> keys{session_key("app_a", "order-42"), session_key("app_b", "order-42"),
                                   session_key(std::nullopt, "order-42"), session_key("app_a", "order-43")};
  CHECK(keys.size() == 4);
  CHECK(session_key("app_a", "order-42") == session_key(std::string("app_a"), "order-42"));
  // Neither part can be read into the other: a writer's name is not the end of a longer session id.
  CHECK(session_key("b", "a") != session_key(std::nullopt, "ab"));
  CHECK(session_key("", "a") != session_key(std::nullopt, "a"));
}

TEST_CASE("session_key of a row: none without a session, else its writer's session", "[core][session_key]") {
  OutboxMessage row;
  CHECK_FALSE(session_key(row).has_value());
  row.writer = "app_a";
  CHECK_FALSE(session_key(row).has_value());  // a row without session waits for nothing, whoever wrote it
  row.session_id = "order-42";
  CHECK(session_key(row) == session_key("app_a", "order-42"));
  row.writer.reset();
  CHECK(session_key(row) == session_key(std::nullopt, "order-42"));
}

TEST_CASE("DeliveryKey: the same row id in two outboxes is two deliveries", "[core][delivery_key]") {
  OutboxMessage row;
  row.id = 7;
  CHECK(outboxd::core::delivery_key(row) == DeliveryKey{0, 7});
  row.outbox = 2;
  CHECK(outboxd::core::delivery_key(row) == DeliveryKey{2, 7});
  const std::unordered_set<DeliveryKey> keys{{0, 7}, {1, 7}, {2, 7}, {1, 8}, {1, 7}};
  CHECK(keys.size() == 4);
  CHECK(outboxd::core::describe({0, 42}) == "row 42");
  CHECK(outboxd::core::describe({3, 42}) == "row 42 of outbox 3");
}
