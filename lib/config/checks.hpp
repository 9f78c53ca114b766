// Rules that involve more than one key, applied after the walk (internal, no YAML types).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "config/config.hpp"
#include "config/diagnostics.hpp"

namespace outboxd::config {

// Reports a rule broken by several keys at the first of them that the file
// gives (else at the first one's nearest parent), and stays quiet when one of
// them was reported already.
class CrossCheck {
 public:
  CrossCheck(const KeyPositions& positions, Diagnostics& diagnostics)
      : positions_(positions), diagnostics_(diagnostics) {}

  bool usable(std::initializer_list<std::string_view> paths) const;
  bool given(std::string_view path) const { return positions_.given(std::string(path)); }
  void fail(std::initializer_list<std::string_view> paths, std::string message);

 private:
  const KeyPositions& positions_;
  Diagnostics& diagnostics_;
};

// Turns an empty broker.sasl_mechanisms into the explicit list (PLAIN with a
// username, ANONYMOUS without) and checks that every mechanism has what it needs.
void resolve_sasl(BrokerConfig& broker, CrossCheck& check);

// All other cross-field rules: ordering of timings, lease arithmetic, schema
// names, TLS settings, passwords given twice.
void validate(const Config& config, CrossCheck& check);

}  // namespace outboxd::config
