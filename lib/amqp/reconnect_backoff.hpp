// Delays between connection attempts: doubling from reconnect_min to reconnect_max, with jitter.
#pragma once

#include <chrono>

#include "core/clock.hpp"

namespace outboxd::amqp {

class ReconnectBackoff {
 public:
  // The base delay starts at `min` and doubles per failed attempt up to
  // `max`; each delay is the base scaled by a factor in [0.8, 1.2) drawn from
  // `random`, clamped to [min, max], so several instances do not reconnect in
  // lockstep after a broker restart.
  ReconnectBackoff(std::chrono::milliseconds min, std::chrono::milliseconds max, core::RandomSource& random);

  std::chrono::milliseconds next();
  void reset() { base_ = min_; }

 private:
  std::chrono::milliseconds min_;
  std::chrono::milliseconds max_;
  std::chrono::milliseconds base_;
  core::RandomSource& random_;
};

}  // namespace outboxd::amqp
