// The main thread's sleep: poll() on an eventfd, a signalfd and the database socket.
#pragma once

#include <chrono>
#include <vector>

#include "daemon/run/ports.hpp"

namespace outboxd::daemon {

// An eventfd other threads write to so the main thread wakes up (news from the AMQP thread).
class EventFd {
 public:
  EventFd();
  ~EventFd();
  EventFd(const EventFd&) = delete;
  EventFd& operator=(const EventFd&) = delete;

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

// The Events port on poll(): the eventfd, the signalfd and the database socket.
class SystemEvents final : public Events {
 public:
  SystemEvents(SignalWatcher& signals, EventFd& event_fd) : signals_(signals), event_fd_(event_fd) {}

  std::vector<int> take_signals() override { return signals_.take(); }
  // Clears the eventfd when it woke the wait.
  Readiness wait(int database_fd, std::chrono::milliseconds timeout) override;

 private:
  SignalWatcher& signals_;
  EventFd& event_fd_;
};

}  // namespace outboxd::daemon
