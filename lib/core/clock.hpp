// Time and randomness as injected dependencies, so the pure core is testable exactly.
#pragma once

#include <chrono>
#include <cstdint>

namespace outboxd::core {

using SteadyTime = std::chrono::steady_clock::time_point;
using Duration = std::chrono::steady_clock::duration;

// `from` + `wait`, or SteadyTime::max() where that lies beyond the clock's
// range. Waits come from the database, where a due time may be any finite
// timestamptz (up to the year 294276, about 9.2e15 ms away) and a nanosecond
// steady_clock ends 292 years after boot: added plainly, such a time
// overflowed into the past and the loop claimed again at once, forever.
SteadyTime saturating_add(SteadyTime from, std::chrono::milliseconds wait);

class Clock {
 public:
  virtual ~Clock() = default;
  virtual SteadyTime now() const = 0;
};

class SteadyClock final : public Clock {
 public:
  SteadyTime now() const override { return std::chrono::steady_clock::now(); }
};

// A clock that moves only when told to: the unit tests' notion of time.
class ManualClock final : public Clock {
 public:
  SteadyTime now() const override { return now_; }
  void advance(Duration by) { now_ += by; }

 private:
  SteadyTime now_{std::chrono::hours(1)};
};

// Uniform doubles in [0, 1). Jitter comes from here so tests can pin it.
class RandomSource {
 public:
  virtual ~RandomSource() = default;
  virtual double uniform() = 0;
};

// xorshift64*: fast and good enough for jitter; not for anything secret.
class FastRandom final : public RandomSource {
 public:
  explicit FastRandom(std::uint64_t seed);
  double uniform() override;

 private:
  std::uint64_t state_;
};

class FixedRandom final : public RandomSource {
 public:
  explicit FixedRandom(double value) : value_(value) {}
  double uniform() override { return value_; }
  void set(double value) { value_ = value; }

 private:
  double value_;
};

}  // namespace outboxd::core
