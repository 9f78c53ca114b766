// The broker's ceiling: a plain Proton publisher sending N messages with a fixed in-flight window.
//
// usage: raw_publisher URL ADDRESS COUNT WINDOW BODY_BYTES [USER PASSWORD] [rabbitmq|artemis] [RATE [SESSIONS]]
// Prints one line: `raw_publisher sent=N seconds=S rate=R` once every message was accepted.
// With RATE (messages per second), sends at that pace instead of as fast as
// the window allows, each body the wall-clock send time as epoch seconds, so
// latency_consumer measures the broker's own publish-to-consumer latency.
// With SESSIONS too, each message falls due at that pace in one of SESSIONS
// sessions at random and is sent only once the previous message of its
// session was accepted (strict order); its body is the time it fell due, so
// the latency includes that wait.
#include <proton/connection.hpp>
#include <proton/container.hpp>
#include <proton/delivery.hpp>
#include <proton/duration.hpp>
#include <proton/message.hpp>
#include <proton/message_id.hpp>
#include <proton/messaging_handler.hpp>
#include <proton/sender.hpp>
#include <proton/sender_options.hpp>
#include <proton/target_options.hpp>
#include <proton/tracker.hpp>
#include <proton/transport.hpp>
#include <proton/work_queue.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "sasl_options.hpp"

namespace {

class RawPublisher final : public proton::messaging_handler {
 public:
  RawPublisher(std::string url, std::string address, long count, long window, std::size_t body_bytes,
               std::string user, std::string password, std::string profile, double rate, int sessions)
      : url_(std::move(url)), address_(std::move(address)), count_(count), window_(window),
        body_(body_bytes, 'x'), user_(std::move(user)), password_(std::move(password)), profile_(std::move(profile)),
        rate_(rate), waiting_(static_cast<std::size_t>(sessions)), in_flight_(static_cast<std::size_t>(sessions)) {}

  void on_container_start(proton::container& container) override {
    container.connect(url_, bench_connection_options(user_, password_));
  }

  void on_connection_open(proton::connection& connection) override {
    proton::target_options target;
    target.address(address_);
    if (profile_ == "rabbitmq") target.durability_mode(proton::terminus::UNSETTLED_STATE);
    if (profile_ == "artemis") target.capabilities({proton::symbol("queue")});
    sender_ = connection.open_sender(address_, proton::sender_options().target(target));
    start_ = std::chrono::steady_clock::now();
    if (rate_ > 0) tick();
  }

  void on_sendable(proton::sender&) override { send_more(); }

  void on_tracker_accept(proton::tracker& tracker) override {
    ++accepted_;
    if (!waiting_.empty()) session_done(std::stol(std::string(tracker.tag())));
    if (accepted_ == count_) {
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
      std::printf("raw_publisher sent=%ld seconds=%.3f rate=%.0f\n", count_, seconds,
                  static_cast<double>(count_) / seconds);
      tracker.connection().close();
      return;
    }
    send_more();
  }

  void on_tracker_reject(proton::tracker&) override { fail("rejected"); }
  void on_tracker_release(proton::tracker&) override { fail("released"); }
  void on_transport_error(proton::transport& t) override { fail(t.error().what()); }
  void on_connection_error(proton::connection& c) override { fail(c.error().what()); }
  void on_sender_error(proton::sender& s) override { fail(s.error().what()); }
  void on_error(const proton::error_condition& e) override { fail(e.what()); }

  bool failed() const { return failed_; }

 private:
  // Fixed-rate mode: every millisecond, send what the pace says is due.
  void tick() {
    send_more();
    if (sent_ < count_) sender_.work_queue().schedule(proton::duration(1), [this] { tick(); });
  }

  long due() const {
    if (rate_ <= 0) return count_;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    return std::min(count_, static_cast<long>(elapsed * rate_));
  }

  static std::string wall_clock() {
    char now[32];
    const double wall = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    return std::string(now, static_cast<std::size_t>(std::snprintf(now, sizeof now, "%.6f", wall)));
  }

  void send_more() {
    if (!waiting_.empty()) return send_in_session_order();
    const long due_now = due();
    while (sent_ < due_now && sent_ - accepted_ < window_ && sender_.credit() > 0) {
      // The drain ceiling passes body_ itself: no extra copy per message.
      if (rate_ > 0) {
        send(sent_, wall_clock());
      } else {
        send(sent_, body_);
      }
    }
  }

  void send(long index, const std::string& body) {
    proton::message message;
    message.id(proton::message_id(std::to_string(index)));
    message.durable(true);
    message.body(proton::binary(body.begin(), body.end()));
    sender_.send(message, proton::binary(std::to_string(index)));
    ++sent_;
  }

  // Strict order: messages fall due into their session's queue; a session's
  // head goes out when nothing of that session is in flight.
  struct Due {
    long index;
    std::string at;  // wall-clock time it fell due: the body
  };

  void send_in_session_order() {
    for (const long due_now = due(); fallen_due_ < due_now; ++fallen_due_) {
      const auto session = pick_(random_);
      session_of_.push_back(session);
      waiting_[session].push_back({fallen_due_, wall_clock()});
      if (!in_flight_[session] && waiting_[session].size() == 1) ready_.push_back(session);
    }
    while (!ready_.empty() && sent_ - accepted_ < window_ && sender_.credit() > 0) {
      const auto session = ready_.front();
      ready_.pop_front();
      in_flight_[session] = true;
      send(waiting_[session].front().index, waiting_[session].front().at);
      waiting_[session].pop_front();
    }
  }

  void session_done(long index) {
    const auto session = session_of_[static_cast<std::size_t>(index)];
    in_flight_[session] = false;
    if (!waiting_[session].empty()) ready_.push_back(session);
  }

  void fail(const std::string& why) {
    std::fprintf(stderr, "raw_publisher: %s\n", why.c_str());
    failed_ = true;
    sender_.connection().close();
  }

  std::string url_, address_;
  long count_, window_;
  std::string body_, user_, password_, profile_;
  double rate_;  // 0: as fast as the window allows
  std::vector<std::deque<Due>> waiting_;  // per session; empty: no session order
  std::vector<bool> in_flight_;           // per session
  std::deque<std::size_t> ready_;         // sessions whose head may go out
  std::vector<std::size_t> session_of_;   // per message index
  std::mt19937 random_{42};
  std::uniform_int_distribution<std::size_t> pick_{0, waiting_.empty() ? 0 : waiting_.size() - 1};
  long fallen_due_ = 0;
  proton::sender sender_;
  long sent_ = 0, accepted_ = 0;
  bool failed_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s URL ADDRESS COUNT WINDOW BODY_BYTES [USER PASSWORD] [PROFILE] [RATE [SESSIONS]]\n",
                 argv[0]);
    return 2;
  }
  RawPublisher publisher(argv[1], argv[2], std::stol(argv[3]), std::stol(argv[4]),
                         static_cast<std::size_t>(std::stoul(argv[5])), argc > 7 ? argv[6] : "",
                         argc > 7 ? argv[7] : "", argc > 8 ? argv[8] : "generic", argc > 9 ? std::stod(argv[9]) : 0.0,
                         argc > 10 ? std::stoi(argv[10]) : 0);
  try {
    proton::container(publisher).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "raw_publisher: %s\n", e.what());
    return 1;
  }
  return publisher.failed() ? 1 : 0;
}
