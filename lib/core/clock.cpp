// Implementations of the small core value types that need a translation unit.
#include "core/clock.hpp"
#include "core/result.hpp"

namespace outboxd::core {

SteadyTime saturating_add(SteadyTime from, std::chrono::milliseconds wait) {
  if (wait <= std::chrono::milliseconds::zero()) return from;
  // What is left of the clock's range after `from`, in whole milliseconds
  // (rounded down, so the sum below cannot overflow). Before the epoch, the
  // whole range of a duration is left, and more.
  const auto left = std::chrono::floor<std::chrono::milliseconds>(
      from.time_since_epoch() < Duration::zero() ? Duration::max() : SteadyTime::max() - from);
  if (wait >= left) return SteadyTime::max();
  return from + wait;
}

const char* to_string(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::transient: return "transient";
    case ErrorKind::rejected: return "rejected";
    case ErrorKind::fatal: return "fatal";
    case ErrorKind::forbidden: return "forbidden";
  }
  return "unknown";
}

FastRandom::FastRandom(std::uint64_t seed) : state_(seed == 0 ? 0x9E3779B97F4A7C15ULL : seed) {}

double FastRandom::uniform() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  const std::uint64_t mixed = state_ * 0x2545F4914F6CDD1DULL;
  return static_cast<double>(mixed >> 11) * (1.0 / 9007199254740992.0);  // 2^53
}

}  // namespace outboxd::core
