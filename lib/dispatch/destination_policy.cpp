// Token bucket arithmetic for the per-destination rate limit.
#include "dispatch/destination_policy.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace outboxd::dispatch {

double effective_burst(const DestinationPolicy& policy) {
  if (policy.burst > 0) return std::max(policy.burst, 1.0);
  return std::max(policy.max_rate / 10.0, 1.0);
}

TokenBucket::TokenBucket(double rate, double burst, core::SteadyTime now)
    : rate_(rate), burst_(std::max(burst, 1.0)), tokens_(burst_), at_(now) {}

double TokenBucket::tokens_at(core::SteadyTime now) const {
  if (now <= at_) return tokens_;
  const double seconds = std::chrono::duration<double>(now - at_).count();
  return std::min(burst_, tokens_ + seconds * rate_);
}

void TokenBucket::take(core::SteadyTime now) {
  tokens_ = tokens_at(now) - 1.0;
  at_ = std::max(at_, now);
}

std::size_t TokenBucket::available(core::SteadyTime now) const {
  const double tokens = tokens_at(now);
  return tokens < 1.0 ? 0 : static_cast<std::size_t>(std::floor(tokens));
}

core::SteadyTime TokenBucket::next_token() const {
  if (tokens_ >= 1.0) return at_;
  const auto wait = std::chrono::duration<double>((1.0 - tokens_) / rate_);
  // Rounded up: woken a nanosecond early, the loop would find no token and sleep again.
  return at_ + std::chrono::ceil<core::Duration>(wait);
}

void TokenBucket::change(double rate, double burst, core::SteadyTime now) {
  tokens_ = std::min(tokens_at(now), std::max(burst, 1.0));
  at_ = std::max(at_, now);
  rate_ = rate;
  burst_ = std::max(burst, 1.0);
}

}  // namespace outboxd::dispatch
