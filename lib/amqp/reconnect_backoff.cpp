// Reconnect delay arithmetic.
#include "amqp/reconnect_backoff.hpp"

#include <algorithm>

namespace outboxd::amqp {

ReconnectBackoff::ReconnectBackoff(std::chrono::milliseconds min, std::chrono::milliseconds max,
                                   core::RandomSource& random)
    : min_(std::max(min, std::chrono::milliseconds(1))),
      max_(std::max(max, min_)),
      base_(min_),
      random_(random) {}

std::chrono::milliseconds ReconnectBackoff::next() {
  const double factor = 0.8 + 0.4 * random_.uniform();
  const auto scaled = std::chrono::milliseconds(static_cast<std::int64_t>(static_cast<double>(base_.count()) * factor));
  base_ = std::min(base_ * 2, max_);
  return std::clamp(scaled, min_, max_);
}

}  // namespace outboxd::amqp
