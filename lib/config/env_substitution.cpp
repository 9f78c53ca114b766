// ${VAR} and ${VAR:-default} in scalar values, with $$ for a literal dollar sign.
#include "config/env_substitution.hpp"

#include <cstdlib>

namespace outboxd::config {
namespace {

bool is_name_start(char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || (c >= '0' && c <= '9'); }

bool is_valid_name(std::string_view name) {
  if (name.empty() || !is_name_start(name.front())) return false;
  for (const char c : name) {
    if (!is_name_char(c)) return false;
  }
  return true;
}

// Expands the body of one ${...} reference (the text between the braces).
core::Result<std::string> expand_reference(std::string_view body, const EnvLookup& env) {
  const auto separator = body.find(":-");
  const std::string_view name = body.substr(0, separator);
  if (!is_valid_name(name)) {
    // The text is not echoed: it may be part of a secret.
    return core::fatal_error(
        "malformed variable reference (write ${NAME} or ${NAME:-default} with NAME made of letters, digits and _, "
        "or $$ for a literal $)");
  }
  const std::optional<std::string> value = env(std::string(name));
  if (separator == std::string_view::npos) {
    if (!value) {
      return core::fatal_error("environment variable " + std::string(name) +
                               " is not set (write ${" + std::string(name) + ":-default} to give a default)");
    }
    return *value;
  }
  if (value && !value->empty()) return *value;
  return std::string(body.substr(separator + 2));
}

}  // namespace

EnvLookup process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) return std::nullopt;
    return std::string(value);
  };
}

core::Result<std::string> substitute_env(std::string_view text, const EnvLookup& env) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    if (c != '$' || i + 1 >= text.size()) {
      out += c;
      ++i;
      continue;
    }
    if (text[i + 1] == '$') {
      out += '$';
      i += 2;
      continue;
    }
    if (text[i + 1] != '{') {
      out += c;
      ++i;
      continue;
    }
    const auto close = text.find('}', i + 2);
    if (close == std::string_view::npos) {
      return core::fatal_error("unterminated variable reference: \"${\" without \"}\" (write $$ for a literal $)");
    }
    auto expanded = expand_reference(text.substr(i + 2, close - i - 2), env);
    if (!expanded) return expanded.error();
    out += expanded.value();
    i = close + 1;
  }
  return out;
}

}  // namespace outboxd::config
