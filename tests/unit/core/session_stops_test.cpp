// SessionStops: a row waits behind a lower row of its session that stops it.
#include <catch2/catch.hpp>

#include "core/session_stops.hpp"

using outboxd::core::OutboxMessage;
using outboxd::core::RowId;
using outboxd::core::session_key;
using outboxd::core::SessionStops;

namespace {

OutboxMessage row(RowId id, std::optional<std::string> session, std::optional<std::string> writer = std::nullopt) {
  OutboxMessage m;
  m.id = id;
  m.session_id = std::move(session);
  m.writer = std::move(writer);
  return m;
}

}  // namespace

TEST_CASE("SessionStops: a stop holds the later rows of its session only", "[core][session_stops]") {
  SessionStops stops;
  CHECK(stops.empty());
  CHECK_FALSE(stops.waits(row(6, "a")));
  stops.stop(5, session_key(std::nullopt, "a"));
  CHECK_FALSE(stops.empty());
  CHECK(stops.waits(row(6, "a")));
  CHECK_FALSE(stops.waits(row(5, "a")));  // the row that stops is not behind itself
  CHECK_FALSE(stops.waits(row(4, "a")));
  CHECK_FALSE(stops.waits(row(6, "b")));
}

TEST_CASE("SessionStops: another writer's rows of the session id are not stopped", "[core][session_stops]") {
  SessionStops stops;
  stops.stop(5, session_key("app_a", "order-42"));
  CHECK(stops.waits(row(6, "order-42", "app_a")));
  CHECK_FALSE(stops.waits(row(6, "order-42", "app_b")));
  CHECK_FALSE(stops.waits(row(6, "order-42")));  // no writer (written before 009): a writer of its own
}

TEST_CASE("SessionStops: a row without session never waits", "[core][session_stops]") {
  SessionStops stops;
  stops.stop(5, session_key(std::nullopt, "a"));
  CHECK_FALSE(stops.waits(row(6, std::nullopt)));
  CHECK_FALSE(stops.waits(row(6, "")));
  CHECK_FALSE(stops.waits(row(6, std::nullopt, "app_a")));
}

TEST_CASE("SessionStops: the lowest of a session's stops counts", "[core][session_stops]") {
  SessionStops stops;
  stops.stop(7, session_key(std::nullopt, "a"));
  stops.stop(5, session_key(std::nullopt, "a"));
  stops.stop(9, session_key(std::nullopt, "a"));
  CHECK(stops.waits(row(6, "a")));
  CHECK_FALSE(stops.waits(row(4, "a")));
}

TEST_CASE("SessionStops: clear lets every row go", "[core][session_stops]") {
  SessionStops stops;
  stops.stop(5, session_key(std::nullopt, "a"));
  stops.clear();
  CHECK(stops.empty());
  CHECK_FALSE(stops.waits(row(6, "a")));
}
