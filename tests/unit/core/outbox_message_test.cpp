// session_key: a row's session, its session id as one writer wrote it.
#include <catch2/catch.hpp>

#include <set>

#include "core/outbox_message.hpp"

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
