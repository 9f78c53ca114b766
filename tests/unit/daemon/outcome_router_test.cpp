// OutcomeRouter: one publisher's outcomes back to the loop whose row it was; a job that ended gets none.
#include <catch2/catch.hpp>

#include "daemon/run/event_loop.hpp"
#include "daemon/run/outcome_queue.hpp"
#include "daemon/tenants/outcome_router.hpp"

using outboxd::amqp::Outcome;
using outboxd::core::DeliveryOutcome;
using outboxd::daemon::EventFd;
using outboxd::daemon::OutcomeQueue;
using outboxd::daemon::tenants::OutcomeRouter;

namespace {

Outcome accepted(std::uint32_t route, outboxd::core::RowId id) {
  Outcome outcome;
  outcome.id = id;
  outcome.outcome = DeliveryOutcome::accepted;
  outcome.outbox = route;
  return outcome;
}

}  // namespace

TEST_CASE("Each outcome goes to the queue of its row's route, equal row ids of two routes stay apart",
          "[tenants][router]") {
  EventFd wake_a, wake_b;
  OutcomeQueue a(wake_a), b(wake_b);
  OutcomeRouter router;
  router.attach(1, a);
  router.attach(2, b);
  router.on_outcome(accepted(1, 7));
  router.on_outcome(accepted(2, 7));
  router.on_outcome(accepted(2, 8));
  const auto to_a = a.take().outcomes;
  const auto to_b = b.take().outcomes;
  REQUIRE(to_a.size() == 1);
  CHECK((to_a[0].outbox == 1 && to_a[0].id == 7));
  REQUIRE(to_b.size() == 2);
  CHECK((to_b[0].outbox == 2 && to_b[1].id == 8));
}

TEST_CASE("An outcome whose job ended is dropped, never handed to the route's next user", "[tenants][router]") {
  EventFd wake;
  OutcomeQueue queue(wake);
  OutcomeRouter router;
  router.attach(3, queue);
  router.detach(3);
  router.on_outcome(accepted(3, 1));
  CHECK(queue.take().outcomes.empty());
  CHECK(router.dropped() == 1);
}

TEST_CASE("A queue that joins while the connection is up is told so as a replay, and news goes to every queue",
          "[tenants][router]") {
  EventFd wake_a, wake_b;
  OutcomeQueue a(wake_a), b(wake_b);
  OutcomeRouter router;
  router.attach(1, a);
  CHECK(a.take().connection_events.empty());  // down: nothing to tell
  router.on_connection(true, "broker:5672", "connected");
  router.attach(2, b);
  const auto told_a = a.take().connection_events;
  const auto told_b = b.take().connection_events;
  REQUIRE(told_a.size() == 1);
  CHECK_FALSE(told_a[0].replay);
  REQUIRE(told_b.size() == 1);
  CHECK((told_b[0].up && told_b[0].replay && told_b[0].node == "broker:5672"));
  router.on_connection(false, "broker:5672", "lost");
  CHECK(a.take().connection_events.size() == 1);
  CHECK(b.take().connection_events.size() == 1);
  CHECK_FALSE(router.up());
}
