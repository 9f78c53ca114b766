// SASL mechanism resolution: the explicit list the broker adapter uses, and never a silent fallback.
#include <algorithm>

#include "config/checks.hpp"
#include "config/names.hpp"

namespace outboxd::config {
namespace {

bool contains(const std::vector<std::string>& list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

}  // namespace

std::vector<std::string> sasl_mechanisms_of(const BrokerConfig& broker) {
  if (!broker.sasl_mechanisms.empty()) return broker.sasl_mechanisms;
  return {std::string(broker.username.empty() ? kSaslAnonymous : kSaslPlain)};
}

void resolve_sasl(BrokerConfig& broker, CrossCheck& check) {
  if (!check.usable({"broker.sasl_mechanisms", "broker.username", "broker.password", "broker.password_file"})) return;
  const bool explicit_list = !broker.sasl_mechanisms.empty();
  broker.sasl_mechanisms = sasl_mechanisms_of(broker);
  const auto& mechanisms = broker.sasl_mechanisms;
  const bool has_password = !broker.password.empty();
  const std::string_view password_key = check.given("broker.password") ? "broker.password" : "broker.password_file";

  if (has_password && !contains(mechanisms, kSaslPlain)) {
    check.fail({password_key}, explicit_list
                                   ? "is not used: PLAIN is not in broker.sasl_mechanisms"
                                   : "needs broker.username (without a username the mechanism is ANONYMOUS)");
  }
  if (contains(mechanisms, kSaslPlain)) {
    if (broker.username.empty()) check.fail({"broker.sasl_mechanisms"}, "PLAIN needs broker.username");
    if (!has_password && !broker.username.empty()) {
      check.fail({"broker.sasl_mechanisms", "broker.username"},
                 explicit_list ? "PLAIN needs broker.password or broker.password_file"
                               : "PLAIN (chosen because a username is set) needs broker.password or "
                                 "broker.password_file");
    }
  }
  if (contains(mechanisms, kSaslAnonymous) && !broker.username.empty()) {
    check.fail({"broker.username"},
               "ANONYMOUS takes no username: remove broker.username or put PLAIN in broker.sasl_mechanisms");
  }
  if (contains(mechanisms, kSaslExternal) && check.usable({"broker.url", "broker.urls", "broker.tls"}) &&
      (!broker.tls.enabled || broker.tls.cert_file.empty() || broker.tls.key_file.empty())) {
    check.fail({"broker.sasl_mechanisms"},
               "EXTERNAL needs TLS (an amqps:// url) with tls.cert_file and tls.key_file");
  }
}

}  // namespace outboxd::config
