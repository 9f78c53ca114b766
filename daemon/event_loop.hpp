// The main thread's sleep: poll() on an eventfd, a signalfd and the database socket.
#pragma once

#include <chrono>
#include <vector>

namespace outboxd::daemon {

// An eventfd other threads write to so the main thread wakes up.
class Wakeup {
 public:
  Wakeup();
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;

  void notify();  // thread-safe, async-signal-safe
  void clear();
  int fd() const { return fd_; }

 private:
  int fd_;
};

// SIGTERM, SIGINT and SIGHUP delivered as readable events instead of handlers.
// Construct it before starting any thread so every thread inherits the mask.
class SignalWatcher {
 public:
  SignalWatcher();
  ~SignalWatcher();
  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;

  std::vector<int> take();  // signals received since the last call
  int fd() const { return fd_; }

 private:
  int fd_;
};

struct Readiness {
  bool wakeup = false;
  bool signal = false;
  bool database = false;
};

// Sleeps until one of the descriptors is readable or `timeout` passes.
// `database_fd` < 0 means no database socket to watch.
Readiness wait_for_events(const Wakeup& wakeup, const SignalWatcher& signals, int database_fd,
                          std::chrono::milliseconds timeout);

}  // namespace outboxd::daemon
