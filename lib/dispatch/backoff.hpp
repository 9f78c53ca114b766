// Exponential backoff with jitter: a pure function of the attempt number and one random draw.
#pragma once

#include "core/clock.hpp"

namespace outboxd::dispatch {

struct BackoffPolicy {
  core::Duration initial;  // delay before the first retry
  core::Duration max;      // cap applied before the jitter
  double multiplier;       // growth per attempt; values below 1 count as 1
  double jitter;           // 0..1: the capped delay is scaled by a factor in [1 - jitter, 1 + jitter]
};

class Backoff {
 public:
  explicit Backoff(BackoffPolicy policy);

  // initial * multiplier^(attempt - 1), capped at max, then scaled by
  // 1 + jitter * (2u - 1) with u drawn from `random`. Attempts below 1 count
  // as 1. The result is never negative and never above max * (1 + jitter).
  core::Duration delay(int attempt, core::RandomSource& random) const;

  // delay() kept within [initial, max]: for reconnects, which should come
  // neither faster than the configured minimum nor later than the maximum.
  core::Duration bounded_delay(int attempt, core::RandomSource& random) const;

  const BackoffPolicy& policy() const { return policy_; }

 private:
  BackoffPolicy policy_;
};

}  // namespace outboxd::dispatch
