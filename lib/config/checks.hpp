// Rules that involve more than one key, applied after the walk (internal, no YAML types).
#pragma once

#include <initializer_list>
#include <optional>
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

  // The check of an outbox's sections, whose values are database:'s and
  // outbox:'s unless the outbox gives its own: quiet about a rule none of
  // whose keys the outbox gives (the defaults' own check reports it once).
  CrossCheck over_defaults() const {
    CrossCheck check = *this;
    check.only_given_ = true;
    return check;
  }

  bool usable(std::initializer_list<std::string_view> paths) const;
  // Whether something was reported at exactly this path (not under it).
  bool reported_at(std::string_view path) const { return diagnostics_.has_error_exactly_at(path); }
  bool given(std::string_view path) const { return positions_.given(std::string(path)); }
  void fail(std::initializer_list<std::string_view> paths, std::string message);

 private:
  const KeyPositions& positions_;
  Diagnostics& diagnostics_;
  bool only_given_ = false;
};

// The rules of one outbox's database: and outbox: sections, wherever they
// sit: `section` is their path ("database", "outboxes[1].database").
void check_database(const DatabaseConfig& database, const std::string& section, CrossCheck& check);
void check_outbox(const OutboxConfig& outbox, const std::string& section, CrossCheck& check);

// Those rules as a catalog row must follow them too; nullopt when kept.
std::optional<std::string> password_given_twice(const DatabaseConfig& database);
std::optional<std::string> schemas_problem(const OutboxConfig& outbox);

// validate_outboxes.cpp: each item of outboxes: (a url, its own name and
// places), and tenants: only with many outboxes, its catalog with a query.
void check_outboxes(const Config& config, CrossCheck& check);
void check_tenants(const Config& config, CrossCheck& check);

// Turns an empty broker.sasl_mechanisms into the explicit list (PLAIN with a
// username, ANONYMOUS without) and checks that every mechanism has what it needs.
void resolve_sasl(BrokerConfig& broker, CrossCheck& check);

// All other cross-field rules: ordering of timings, lease arithmetic, schema
// names, TLS settings, passwords given twice.
void validate(const Config& config, CrossCheck& check);

}  // namespace outboxd::config
