// Which broker node the publisher tries next, and when: in order, the next one at once, a backoff per failed round.
#pragma once

#include <cstddef>

#include "core/clock.hpp"
#include "dispatch/backoff.hpp"

namespace outboxd::dispatch {

// The reconnect plan over the ordered nodes of broker.urls (one node for
// broker.url). A failed attempt or a lost connection moves on to the next
// node, wrapping around; the publisher stays on whichever node works and never
// moves back by itself.
//
// The backoff (reconnect_min..reconnect_max) applies per round, not per
// attempt: after a failure the next node is tried at once, and only when every
// node has failed in a row does the publisher wait, longer for each further
// round. A dead node says nothing about the others, so a survivor is reached
// without a wait; a cluster that is down as a whole is still tried no more
// often per node than a single broker is. With one node every failure ends a
// round, which is exactly the single-URL backoff.
//
// A connection that stayed up for `stable_after` starts the count afresh when
// it ends; one that ends sooner counts as a failure, so nodes that accept and
// then drop at once cannot make the publisher spin.
class NodeRotation {
 public:
  // `nodes` below 1 counts as 1.
  NodeRotation(std::size_t nodes, BackoffPolicy policy, core::Duration stable_after);

  std::size_t current() const { return current_; }

  // The connection to current() opened at `at`.
  void connected(core::SteadyTime at);

  // The attempt at current() failed, or its open connection ended, at `at`:
  // moves to the next node and returns when to try it.
  core::SteadyTime failed(core::SteadyTime at, core::RandomSource& random);

 private:
  std::size_t nodes_;
  Backoff backoff_;
  core::Duration stable_after_;
  std::size_t current_ = 0;
  int failures_ = 0;  // attempts failed in a row since the last stable connection
  bool up_ = false;
  core::SteadyTime up_since_{};
};

}  // namespace outboxd::dispatch
