// Exponential backoff with jitter, computed in double nanoseconds and clamped before converting back.
#include "dispatch/backoff.hpp"

#include <algorithm>
#include <cmath>

namespace outboxd::dispatch {

namespace {

double clamp_unit(double value) { return std::isnan(value) ? 0.0 : std::clamp(value, 0.0, 1.0); }

// Policies come from configuration; a nonsensical value is bent into the
// nearest sensible one rather than producing negative or exploding delays.
BackoffPolicy sanitized(BackoffPolicy policy) {
  policy.initial = std::max(policy.initial, core::Duration::zero());
  policy.max = std::max(policy.max, core::Duration::zero());
  if (!(policy.multiplier >= 1.0)) policy.multiplier = 1.0;  // also catches NaN
  policy.jitter = clamp_unit(policy.jitter);
  return policy;
}

}  // namespace

Backoff::Backoff(BackoffPolicy policy) : policy_(sanitized(policy)) {}

core::Duration Backoff::delay(int attempt, core::RandomSource& random) const {
  const double max_ns = static_cast<double>(policy_.max.count());
  const double initial_ns = static_cast<double>(policy_.initial.count());
  const int steps = std::max(attempt, 1) - 1;

  // initial == 0 stays 0 even when multiplier^steps overflows to infinity.
  double base = 0.0;
  if (initial_ns > 0.0) {
    base = initial_ns * std::pow(policy_.multiplier, steps);
    if (!(base < max_ns)) base = max_ns;
  }

  const double u = clamp_unit(random.uniform());
  const double upper = max_ns * (1.0 + policy_.jitter);
  const double jittered = std::clamp(base * (1.0 + policy_.jitter * (2.0 * u - 1.0)), 0.0, upper);

  // 2^63 ns is beyond any sane configuration, but must not overflow.
  constexpr double kLimit = 9.2e18;
  if (jittered >= kLimit) return core::Duration::max();
  return core::Duration(static_cast<core::Duration::rep>(std::llround(jittered)));
}

core::Duration Backoff::bounded_delay(int attempt, core::RandomSource& random) const {
  return std::clamp(delay(attempt, random), policy_.initial, std::max(policy_.initial, policy_.max));
}

}  // namespace outboxd::dispatch
