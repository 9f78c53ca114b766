// order_key: the scope of a row's publication order, a session as one writer wrote it.
#include <catch2/catch.hpp>

#include <set>

#include "core/outbox_message.hpp"

using outboxd::core::order_key;
using outboxd::core::OutboxMessage;

TEST_CASE("order_key: one session id from two writers, or without writer, is three scopes", "[core][order_key]") {
  const std::set<std::string> keys{order_key("app_a", "order-42"), order_key("app_b", "order-42"),
                                   order_key(std::nullopt, "order-42"), order_key("app_a", "order-43")};
  CHECK(keys.size() == 4);
  CHECK(order_key("app_a", "order-42") == order_key(std::string("app_a"), "order-42"));
  // Neither part can be read into the other: a writer's name is not the end of a longer session id.
  CHECK(order_key("b", "a") != order_key(std::nullopt, "ab"));
  CHECK(order_key("", "a") != order_key(std::nullopt, "a"));
}

TEST_CASE("order_key of a row: none without a session, else its writer's session", "[core][order_key]") {
  OutboxMessage row;
  CHECK_FALSE(order_key(row).has_value());
  row.writer = "app_a";
  CHECK_FALSE(order_key(row).has_value());  // a row without session waits for nothing, whoever wrote it
  row.session_id = "order-42";
  CHECK(order_key(row) == order_key("app_a", "order-42"));
  row.writer.reset();
  CHECK(order_key(row) == order_key(std::nullopt, "order-42"));
}
