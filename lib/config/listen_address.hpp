// The HTTP listen address, "host:port" or "[ipv6]:port": one parser for the config check and the server.
#pragma once

#include <string>
#include <string_view>

#include "core/result.hpp"

namespace outboxd::config {

struct ListenAddress {
  std::string host;  // without brackets: "127.0.0.1", "localhost", "::1"
  int port = 0;      // 0..65535; 0 asks the kernel for a free port
};

// "127.0.0.1:9187", "localhost:9187", "[::1]:9187", "[::]:0". Refused, as a
// fatal error saying what is wrong and quoting the input: a missing host or
// port, a port that is not 1 to 5 digits or is above 65535, an unbracketed
// IPv6 address, a bracketed host that is not one, anything after the closing
// bracket but ":port", whitespace, control characters or brackets in a host.
// The config (http.listen) and the HTTP server both parse with it, so a value
// the config accepts is one the server can bind.
core::Result<ListenAddress> parse_listen_address(std::string_view text);

}  // namespace outboxd::config
