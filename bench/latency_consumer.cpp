// Commit-to-consumer latency: reads messages whose body is the writer's clock_timestamp() as epoch seconds.
//
// usage: latency_consumer URL ADDRESS QUIET_SECONDS [USER PASSWORD] [rabbitmq|artemis] [ARRIVALS]
// Receives until QUIET_SECONDS pass without a message after the first one,
// then prints `latency_consumer received=N p50=.. p90=.. p99=.. max=..` (ms).
// With ARRIVALS, also writes `message-id arrival-epoch-seconds latency-ms` per
// message there, so the caller can measure from each row's commit timestamp,
// or group the latencies by message id.
// A C++ consumer, so that the figure is the dispatcher's and the broker's,
// not an interpreter's on the same two cores.
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/receiver.hpp>
#include <proton/receiver_options.hpp>
#include <proton/source_options.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "sasl_options.hpp"

namespace {

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

class LatencyConsumer final : public proton::messaging_handler {
 public:
  LatencyConsumer(std::string url, std::string address, double quiet_seconds, std::string user, std::string password,
                  std::string profile, const std::string& arrivals)
      : url_(std::move(url)), address_(std::move(address)), quiet_(quiet_seconds), user_(std::move(user)),
        password_(std::move(password)), profile_(std::move(profile)) {
    if (!arrivals.empty()) arrivals_.open(arrivals);
  }

  void on_container_start(proton::container& container) override {
    connection_ = container.connect(url_, bench_connection_options(user_, password_));
  }

  void on_connection_open(proton::connection& connection) override {
    proton::source_options source;
    source.address(address_);
    if (profile_ == "rabbitmq") source.durability_mode(proton::terminus::UNSETTLED_STATE);
    if (profile_ == "artemis") source.capabilities({proton::symbol("queue")});
    connection.open_receiver(address_, proton::receiver_options().source(source).credit_window(2000));
    std::printf("latency_consumer ready\n");
    std::fflush(stdout);
  }

  void on_message(proton::delivery&, proton::message& message) override {
    const double now = wall_seconds();
    const auto body = proton::get<proton::binary>(message.body());
    latencies_.push_back((now - std::stod(std::string(body.begin(), body.end()))) * 1000.0);
    if (arrivals_.is_open()) {
      char when[64];
      std::snprintf(when, sizeof when, "%.6f %.3f", now, latencies_.back());
      arrivals_ << proton::get<std::string>(message.id()) << ' ' << when << '\n';
    }
    last_ = now;
    if (latencies_.size() == 1) check_quiet();
  }

  void on_transport_error(proton::transport& t) override { fail(t.error().what()); }
  void on_connection_error(proton::connection& c) override { fail(c.error().what()); }
  void on_receiver_error(proton::receiver& r) override { fail(r.error().what()); }
  void on_error(const proton::error_condition& e) override { fail(e.what()); }

  int report() {
    if (failed_) return 1;
    std::sort(latencies_.begin(), latencies_.end());
    const auto n = latencies_.size();
    if (n == 0) {
      std::printf("latency_consumer received=0\n");
      return 1;
    }
    auto pct = [&](double p) { return latencies_[std::min(n - 1, static_cast<std::size_t>(p / 100.0 * n))]; };
    std::printf("latency_consumer received=%zu p50=%.2f p90=%.2f p99=%.2f max=%.2f\n", n, pct(50), pct(90), pct(99),
                latencies_.back());
    return 0;
  }

 private:
  void check_quiet() {
    if (wall_seconds() - last_ >= quiet_) {
      connection_.close();
      return;
    }
    connection_.work_queue().schedule(proton::duration(100), [this] { check_quiet(); });
  }

  void fail(const std::string& why) {
    std::fprintf(stderr, "latency_consumer: %s\n", why.c_str());
    failed_ = true;
    if (connection_) connection_.close();
  }

  std::string url_, address_;
  double quiet_;
  std::string user_, password_, profile_;
  proton::connection connection_;
  std::vector<double> latencies_;
  std::ofstream arrivals_;
  double last_ = 0;
  bool failed_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s URL ADDRESS QUIET_SECONDS [USER PASSWORD] [PROFILE]\n", argv[0]);
    return 2;
  }
  LatencyConsumer consumer(argv[1], argv[2], std::stod(argv[3]), argc > 5 ? argv[4] : "", argc > 5 ? argv[5] : "",
                           argc > 6 ? argv[6] : "generic", argc > 7 ? argv[7] : "");
  try {
    proton::container(consumer).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "latency_consumer: %s\n", e.what());
    return 1;
  }
  return consumer.report();
}
