// Connection options of the bench tools: SASL PLAIN with a user, ANONYMOUS without (loopback brokers only).
#pragma once

#include <proton/connection_options.hpp>

#include <string>

inline proton::connection_options bench_connection_options(const std::string& user, const std::string& password) {
  proton::connection_options options;
  options.sasl_enabled(true);
  if (user.empty()) {
    options.sasl_allowed_mechs("ANONYMOUS");
  } else {
    options.user(user).password(password).sasl_allowed_mechs("PLAIN").sasl_allow_insecure_mechs(true);
  }
  return options;
}
