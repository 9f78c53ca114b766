// Wake-up policy: arrival rate over fixed windows, with hysteresis between NOTIFY and polling.
#include "dispatch/notify_policy.hpp"

namespace outboxd::dispatch {

NotifyPolicy::NotifyPolicy(Settings settings, core::SteadyTime now) : settings_(settings), window_start_(now) {}

void NotifyPolicy::on_claim(std::size_t rows, core::SteadyTime now) {
  window_rows_ += rows;
  const auto elapsed = now - window_start_;
  if (elapsed < settings_.window) return;
  const double rate = static_cast<double>(window_rows_) / std::chrono::duration<double>(elapsed).count();
  if (busy_ ? rate < settings_.idle_rate : rate > settings_.busy_rate) busy_ = !busy_;
  window_start_ = now;
  window_rows_ = 0;
}

}  // namespace outboxd::dispatch
