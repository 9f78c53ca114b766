// The broker nodes' reconnect plan: the next node at once, the backoff once per round of failures.
#include "dispatch/node_rotation.hpp"

#include <algorithm>

namespace outboxd::dispatch {
namespace {

// The backoff is at its cap long before this many rounds; counting further
// would only overflow in an outage of months.
constexpr int kMaxRounds = 64;

}  // namespace

NodeRotation::NodeRotation(std::size_t nodes, BackoffPolicy policy, core::Duration stable_after)
    : nodes_(std::max<std::size_t>(nodes, 1)), backoff_(policy), stable_after_(stable_after) {}

void NodeRotation::connected(core::SteadyTime at) {
  up_ = true;
  up_since_ = at;
}

core::SteadyTime NodeRotation::failed(core::SteadyTime at, core::RandomSource& random) {
  if (up_ && at - up_since_ >= stable_after_) failures_ = 0;
  up_ = false;
  ++failures_;
  if (failures_ > kMaxRounds * static_cast<int>(nodes_)) failures_ -= static_cast<int>(nodes_);
  current_ = (current_ + 1) % nodes_;
  const auto round = static_cast<std::size_t>(failures_) % nodes_;
  if (round != 0) return at;
  return at + backoff_.bounded_delay(static_cast<int>(static_cast<std::size_t>(failures_) / nodes_), random);
}

}  // namespace outboxd::dispatch
