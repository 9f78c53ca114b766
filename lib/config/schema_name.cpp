// The rule for the outbox and workflow schema names.
#include "config/schema_name.hpp"

#include "config/scalar.hpp"

namespace outboxd::config {
namespace {

constexpr std::size_t kMaxIdentifierBytes = 63;  // PostgreSQL's NAMEDATALEN - 1
constexpr std::size_t kDerivedSuffixBytes = 11;  // "_dispatcher", the longest suffix migrate appends

bool fits(char c, bool first) { return (c >= 'a' && c <= 'z') || c == '_' || (!first && c >= '0' && c <= '9'); }

}  // namespace

std::size_t max_schema_name_bytes(SchemaKind kind) {
  return kind == SchemaKind::outbox ? kMaxIdentifierBytes - kDerivedSuffixBytes : kMaxIdentifierBytes;
}

std::optional<std::string> schema_name_problem(std::string_view name, SchemaKind kind) {
  const std::size_t max_bytes = max_schema_name_bytes(kind);
  bool valid = !name.empty() && name.size() <= max_bytes;
  for (std::size_t i = 0; valid && i < name.size(); ++i) valid = fits(name[i], i == 0);
  if (!valid) {
    return "must be a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most " + std::to_string(max_bytes) +
           " bytes), got " + quote_value(name);
  }
  if (name.starts_with("pg_")) return "must not start with \"pg_\" (reserved by PostgreSQL)";
  return std::nullopt;
}

}  // namespace outboxd::config
