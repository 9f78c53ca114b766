// One accepted socket as cpp-httplib's Stream, bound by a deadline and a request-head size.
#pragma once

#include <httplib.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace outboxd::metrics {

// cpp-httplib reads a request through a Stream; this one gives up at the
// connection's deadline however the client trickles its bytes, and answers
// 431 itself once the head (up to its blank line) passes `max_head`, after
// which it neither reads nor writes, so the 400 cpp-httplib would add is not sent.
class BoundedStream final : public httplib::Stream {
 public:
  using Clock = std::chrono::steady_clock;

  BoundedStream(int fd, Clock::time_point deadline, std::size_t max_head);

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  int socket() const override { return fd_; }

 private:
  bool wait_for(short events) const;  // false at the deadline or on an error
  ssize_t send_all(const char* ptr, std::size_t size);
  bool count_head(const char* bytes, std::size_t size);  // false once the head is too large

  int fd_;
  Clock::time_point deadline_;
  std::size_t max_head_;
  std::size_t head_bytes_ = 0;
  std::size_t line_length_ = 0;  // bytes of the current head line, "\r" aside
  bool head_done_ = false;
  bool refused_ = false;  // 431 written; nothing more in or out
  char buffer_[4096];
  std::size_t buffered_ = 0;
  std::size_t taken_ = 0;
};

}  // namespace outboxd::metrics
