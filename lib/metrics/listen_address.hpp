// Strict parsing of the HTTP listen address: "host:port" or "[ipv6]:port".
#pragma once

#include <string>
#include <string_view>

#include "core/result.hpp"

namespace outboxd::metrics {

struct ListenAddress {
  std::string host;  // without brackets: "127.0.0.1", "localhost", "::1"
  int port = 0;      // 0..65535; 0 asks the kernel for a free port
};

// "127.0.0.1:9187", "localhost:9187", "[::1]:9187", "[::]:0". Rejected as a
// fatal error naming the input: a missing host or port, a port that is not
// all digits or above 65535, an unbracketed IPv6 address, anything after the
// closing bracket but ":port", whitespace or control characters in the host.
core::Result<ListenAddress> parse_listen_address(std::string_view text);

}  // namespace outboxd::metrics
