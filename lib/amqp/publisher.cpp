// Publisher: the container thread, the hand-over of batches, start and stop.
#include "amqp/publisher.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>

#include <proton/container.hpp>
#include <proton/work_queue.hpp>

#include "amqp/detail/connection_handler.hpp"
#include "amqp/connection_settings.hpp"
#include "amqp/detail/proton_options.hpp"
#include "core/safe_text.hpp"

namespace outboxd::amqp {

using Rows = std::vector<core::OutboxMessage>;

struct FencedBatch {
  Rows rows;
  core::SteadyTime send_before;
};

class Publisher::Impl {
 public:
  Impl(const config::BrokerConfig& broker, std::string container_id, OutcomeSink& sink, const core::Clock* clock,
       core::RandomSource* random)
      : broker_(broker),
        container_id_(std::move(container_id)),
        sink_(sink),
        own_random_(static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
                    reinterpret_cast<std::uintptr_t>(this)),
        clock_(clock ? *clock : steady_),
        random_(random ? *random : own_random_) {
    if (auto settings = connection_settings(broker_)) settings_ = settings.value();
  }

  core::Status start();
  void publish(Rows batch, core::SteadyTime send_before);
  void stop();
  bool connected() const { return connected_; }
  bool plain_over_cleartext() const { return settings_ && settings_->plain_over_cleartext; }

 private:
  void run();
  void run_container(std::string& exit_reason);
  void drain_inbox();
  void answer_not_connected(Rows& batch, const std::string& reason);
  void answer_leftovers(const std::string& reason);

  const config::BrokerConfig broker_;
  const std::string container_id_;
  OutcomeSink& sink_;
  core::SteadyClock steady_;
  core::FastRandom own_random_;
  const core::Clock& clock_;
  core::RandomSource& random_;
  std::optional<ConnectionSettings> settings_;
  std::atomic<bool> connected_{false};
  std::unique_ptr<ConnectionHandler> handler_;  // used on the container thread only
  std::thread thread_;
  std::mutex stop_mutex_;  // serialises stop() callers around the join

  // Hand-over between callers and the container thread.
  std::mutex mutex_;
  std::condition_variable restart_wait_;
  std::vector<FencedBatch> inbox_;
  proton::work_queue* work_queue_ = nullptr;  // set while a container runs
  bool accepting_ = false;
  bool stop_requested_ = false;
  bool wake_pending_ = false;
};

core::Status Publisher::Impl::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable() || stop_requested_) return core::fatal_error("publisher already started");
  auto settings = connection_settings(broker_);
  if (!settings) return settings.error();
  proton::connection_options options;
  try {
    options = make_connection_options(broker_, settings.value());
  } catch (const std::exception& e) {
    return core::fatal_error(std::string("broker.tls: ") + e.what());
  }
  handler_ = std::make_unique<ConnectionHandler>(broker_, settings.value(), options, sink_, connected_, clock_,
                                                 random_);
  accepting_ = true;
  thread_ = std::thread([this] { run(); });
  return {};
}

void Publisher::Impl::publish(Rows batch, core::SteadyTime send_before) {
  if (batch.empty()) return;
  std::string reason;
  {
    std::lock_guard lock(mutex_);
    if (accepting_) {
      inbox_.push_back({std::move(batch), send_before});
      // One wake-up per burst: the drain takes everything queued by then.
      if (!wake_pending_ && work_queue_) {
        wake_pending_ = work_queue_->add([this] { drain_inbox(); });
      }
      return;
    }
    reason = stop_requested_ ? "publisher stopped" : "publisher not started";
  }
  answer_not_connected(batch, reason);
}

void Publisher::Impl::drain_inbox() {
  std::vector<FencedBatch> batches;
  {
    std::lock_guard lock(mutex_);
    batches.swap(inbox_);
    wake_pending_ = false;
  }
  for (auto& batch : batches) handler_->accept_batch(std::move(batch.rows), batch.send_before);
}

void Publisher::Impl::stop() {
  // From the container thread itself (an OutcomeSink breaking its contract)
  // joining would deadlock: request the stop and let the thread finish.
  const bool on_container_thread = thread_.joinable() && thread_.get_id() == std::this_thread::get_id();
  {
    std::lock_guard lock(mutex_);
    if (!stop_requested_) {
      stop_requested_ = true;
      if (work_queue_) work_queue_->add([this] { handler_->begin_shutdown(); });
    }
  }
  restart_wait_.notify_all();
  if (on_container_thread) return;
  std::lock_guard stopping(stop_mutex_);
  if (thread_.joinable()) thread_.join();
  answer_leftovers("publisher stopped");  // rows published before start(): the thread never ran
}

void Publisher::Impl::run() {
  std::string exit_reason = "publisher stopped";
  for (;;) {
    run_container(exit_reason);
    std::unique_lock lock(mutex_);
    if (stop_requested_) break;
    // container::run() ended without stop(): it threw. Start a fresh one.
    restart_wait_.wait_for(lock, broker_.reconnect_max, [this] { return stop_requested_; });
    if (stop_requested_) break;
  }
  answer_leftovers("publisher stopped");
}

void Publisher::Impl::run_container(std::string& exit_reason) {
  proton::container container(*handler_, container_id_);
  container.auto_stop(false);  // between connections there is none, and that is no reason to stop
  proton::work_queue queue(container);
  {
    std::lock_guard lock(mutex_);
    work_queue_ = &queue;
    wake_pending_ = !inbox_.empty() && queue.add([this] { drain_inbox(); });
    if (stop_requested_) queue.add([this] { handler_->begin_shutdown(); });
  }
  try {
    container.run();
    exit_reason = "publisher stopped";
  } catch (const std::exception& e) {
    exit_reason = "AMQP container failed: " + core::safe_text(e.what());
  } catch (...) {
    exit_reason = "AMQP container failed";
  }
  {
    std::lock_guard lock(mutex_);
    work_queue_ = nullptr;
    wake_pending_ = false;
  }
  try {
    handler_->after_run(exit_reason);
  } catch (...) {
    // after_run only reports; a sink that throws breaks its own contract.
  }
}

void Publisher::Impl::answer_not_connected(Rows& batch, const std::string& reason) {
  for (const auto& row : batch) {
    sink_.on_outcome(outcome_for(core::delivery_key(row), core::DeliveryOutcome::connection_lost, reason));
  }
}

void Publisher::Impl::answer_leftovers(const std::string& reason) {
  std::vector<FencedBatch> leftovers;
  {
    std::lock_guard lock(mutex_);
    accepting_ = false;
    leftovers.swap(inbox_);
  }
  for (auto& batch : leftovers) answer_not_connected(batch.rows, reason);
}

Publisher::Publisher(const config::BrokerConfig& broker, std::string container_id, OutcomeSink& sink,
                     const core::Clock& clock, core::RandomSource& random)
    : impl_(std::make_unique<Impl>(broker, std::move(container_id), sink, &clock, &random)) {}

Publisher::Publisher(const config::BrokerConfig& broker, std::string container_id, OutcomeSink& sink)
    : impl_(std::make_unique<Impl>(broker, std::move(container_id), sink, nullptr, nullptr)) {}

Publisher::~Publisher() { impl_->stop(); }

core::Status Publisher::start() { return impl_->start(); }
void Publisher::publish(std::vector<core::OutboxMessage> batch, core::SteadyTime send_before) {
  impl_->publish(std::move(batch), send_before);
}
void Publisher::stop() { impl_->stop(); }
bool Publisher::connected() const { return impl_->connected(); }
bool Publisher::plain_over_cleartext() const { return impl_->plain_over_cleartext(); }

}  // namespace outboxd::amqp
