// eventfd, signalfd and poll(): the only blocking call the main thread makes.
#include "daemon/run/event_loop.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace outboxd::daemon {

namespace {

sigset_t watched_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

// Failing to create these descriptors means the process cannot work at all:
// an impossible condition on a sane system, so crash loudly.
[[noreturn]] void fail(const char* what) {
  std::perror(what);
  std::abort();
}

}  // namespace

EventFd::EventFd() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (fd_ < 0) fail("eventfd");
}

EventFd::~EventFd() { close(fd_); }

void EventFd::notify() {
  const std::uint64_t one = 1;
  // A full counter still leaves the descriptor readable, so a failed write is harmless.
  [[maybe_unused]] const auto n = write(fd_, &one, sizeof(one));
}

void EventFd::clear() {
  std::uint64_t value = 0;
  [[maybe_unused]] const auto n = read(fd_, &value, sizeof(value));
}

SignalWatcher::SignalWatcher() {
  const sigset_t set = watched_signals();
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0) fail("pthread_sigmask");
  fd_ = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) fail("signalfd");
}

SignalWatcher::~SignalWatcher() { close(fd_); }

std::vector<int> SignalWatcher::take() {
  std::vector<int> received;
  signalfd_siginfo info;
  while (read(fd_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
    received.push_back(static_cast<int>(info.ssi_signo));
  }
  return received;
}

Readiness SystemEvents::wait(int database_fd, std::chrono::milliseconds timeout) {
  pollfd fds[3] = {{event_fd_.fd(), POLLIN, 0}, {signals_.fd(), POLLIN, 0}, {database_fd, POLLIN, 0}};
  const nfds_t count = database_fd >= 0 ? 3 : 2;
  const auto ms = static_cast<int>(std::max<std::chrono::milliseconds::rep>(0, timeout.count()));
  Readiness ready;
  if (poll(fds, count, ms) <= 0) return ready;  // timeout or EINTR: the caller re-evaluates
  ready.news = (fds[0].revents & POLLIN) != 0;
  ready.signal = (fds[1].revents & POLLIN) != 0;
  ready.database = count == 3 && (fds[2].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
  if (ready.news) event_fd_.clear();
  return ready;
}

}  // namespace outboxd::daemon
