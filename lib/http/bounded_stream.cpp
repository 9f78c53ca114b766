// A Stream that cuts a connection off at its deadline and answers an oversized request head with 431.
#include "http/bounded_stream.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <string_view>

namespace outboxd::metrics {

namespace {

constexpr std::string_view kHeadTooLarge =
    "HTTP/1.1 431 Request Header Fields Too Large\r\n"
    "Content-Type: text/plain; charset=utf-8\r\n"
    "Content-Length: 22\r\n"
    "Connection: close\r\n"
    "\r\n"
    "request head too large";

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  const int rc = peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                      : ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  char host[NI_MAXHOST];
  char service[NI_MAXSERV];
  if (rc != 0 || ::getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof host, service,
                               sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return;
  }
  ip = host;
  port = std::atoi(service);
}

}  // namespace

BoundedStream::BoundedStream(int fd, Clock::time_point deadline, std::size_t max_head)
    : fd_(fd), deadline_(deadline), max_head_(max_head) {}

bool BoundedStream::wait_for(short events) const {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    if (left <= 0) return false;
    pollfd polled{fd_, events, 0};
    const int rc = ::poll(&polled, 1, static_cast<int>(left));
    if (rc > 0) return true;  // an error or hang-up shows in the read or write that follows
    if (rc < 0 && errno != EINTR) return false;
  }
}

bool BoundedStream::is_readable() const { return !refused_ && (taken_ < buffered_ || wait_for(POLLIN)); }

bool BoundedStream::is_writable() const { return !refused_ && wait_for(POLLOUT); }

ssize_t BoundedStream::read(char* ptr, size_t size) {
  if (refused_) return -1;
  if (taken_ == buffered_) {
    if (!wait_for(POLLIN)) return -1;
    const ssize_t n = ::recv(fd_, buffer_, sizeof buffer_, 0);
    if (n <= 0) return n;
    buffered_ = static_cast<std::size_t>(n);
    taken_ = 0;
  }
  const std::size_t given = std::min(size, buffered_ - taken_);
  const char* bytes = buffer_ + taken_;
  taken_ += given;
  if (!count_head(bytes, given)) {
    refused_ = true;
    send_all(kHeadTooLarge.data(), kHeadTooLarge.size());
    return -1;
  }
  std::copy(bytes, bytes + given, ptr);
  return static_cast<ssize_t>(given);
}

// The head ends at its first empty line ("\r\n\r\n", or "\n\n" from a lenient client).
bool BoundedStream::count_head(const char* bytes, std::size_t size) {
  for (std::size_t i = 0; i < size && !head_done_; ++i) {
    ++head_bytes_;
    if (bytes[i] == '\n') {
      head_done_ = line_length_ == 0;
      line_length_ = 0;
    } else if (bytes[i] != '\r') {
      ++line_length_;
    }
  }
  return head_done_ || head_bytes_ <= max_head_;
}

ssize_t BoundedStream::write(const char* ptr, size_t size) { return refused_ ? -1 : send_all(ptr, size); }

ssize_t BoundedStream::send_all(const char* ptr, std::size_t size) {
  std::size_t sent = 0;
  while (sent < size) {
    if (!wait_for(POLLOUT)) return -1;
    const ssize_t n = ::send(fd_, ptr + sent, size - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) return -1;
    sent += static_cast<std::size_t>(n);
  }
  return static_cast<ssize_t>(size);
}

void BoundedStream::get_remote_ip_and_port(std::string& ip, int& port) const { address_of(fd_, true, ip, port); }

void BoundedStream::get_local_ip_and_port(std::string& ip, int& port) const { address_of(fd_, false, ip, port); }

}  // namespace outboxd::metrics
