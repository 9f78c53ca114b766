// ${VAR} and ${VAR:-default} in scalar values, with $$ for a literal dollar sign.
#pragma once

#include <string>
#include <string_view>

#include "config/loader.hpp"
#include "core/result.hpp"

namespace outboxd::config {

// The environment of this process, through getenv.
EnvLookup process_environment();

// Replaces every ${NAME} with the variable's value and every ${NAME:-default}
// with the value, or with the default when the variable is unset or empty.
// "$$" is one "$"; a "$" before anything else is kept as it is. The default
// is literal text up to the first "}" (no nesting). An unset variable without
// a default, a malformed name or a missing "}" is an error.
core::Result<std::string> substitute_env(std::string_view text, const EnvLookup& env);

}  // namespace outboxd::config
