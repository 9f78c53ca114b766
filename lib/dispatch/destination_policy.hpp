// What an operator sets per destination: a priority class, a rate limit, a limit on rows in flight.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>

#include "core/clock.hpp"

namespace outboxd::dispatch {

// Set in the daemon's configuration (`destinations:`), never by a writer: a
// row names its destination, and the destination's policy is the operator's.
struct DestinationPolicy {
  int priority = 0;              // a higher class goes first; within a class, fair share
  double max_rate = 0;           // rows per second; 0: no limit
  double burst = 0;              // rows the rate lets out at once after a quiet spell; 0: kDefaultBurst
  std::size_t max_in_flight = 0; // 0: only the window
  bool limited() const { return max_rate > 0 || max_in_flight > 0; }
  bool operator==(const DestinationPolicy&) const = default;
};

// By destination name, as rows write it. A destination not named has the
// default policy: priority 0, no limits.
using DestinationPolicies = std::map<std::string, DestinationPolicy, std::less<>>;

// The burst of a rate limit with none set: a tenth of a second of its rate,
// at least one row.
double effective_burst(const DestinationPolicy& policy);

// A token bucket: `rate` tokens a second up to `burst`, full at the start.
// A row takes one token as it goes out.
class TokenBucket {
 public:
  TokenBucket(double rate, double burst, core::SteadyTime now);

  bool ready(core::SteadyTime now) const { return tokens_at(now) >= 1.0; }
  void take(core::SteadyTime now);
  // Whole tokens available at `now`: the rows that may go out.
  std::size_t available(core::SteadyTime now) const;
  // When the next whole token is there; `now` or earlier when one is.
  core::SteadyTime next_token() const;
  // A new rate or burst keeps the tokens saved, up to the new burst.
  void change(double rate, double burst, core::SteadyTime now);

 private:
  double tokens_at(core::SteadyTime now) const;

  double rate_;
  double burst_;
  double tokens_;
  core::SteadyTime at_;  // tokens_ as of this time
};

}  // namespace outboxd::dispatch
