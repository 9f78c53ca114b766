// Public entry points of the config library: load and validate a YAML file, report every problem at once.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/config.hpp"
#include "config/redact.hpp"
#include "core/result.hpp"

namespace outboxd::config {

// One problem found in a config file. Lines and columns are 1-based; a line
// of 0 means the problem concerns the file as a whole (it cannot be read).
struct Diagnostic {
  std::string file;
  int line = 0;
  int column = 0;
  std::string key_path;  // e.g. "dispatch.batch_size"; empty for the document itself
  std::string message;

  // "file:line:col: key.path: message" (parts that are empty are left out).
  std::string to_string() const;
  // The same without the leading "file:", as the config corpus spells it.
  std::string to_string_without_file() const;
};

// A Config, or every diagnostic the file produced, in file order.
class [[nodiscard]] LoadResult {
 public:
  LoadResult(Config config) : state_(std::move(config)) {}                        // NOLINT: implicit by design
  LoadResult(std::vector<Diagnostic> diagnostics) : state_(std::move(diagnostics)) {}  // NOLINT: implicit by design

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  const Config& value() const& { return std::get<0>(state_); }
  Config& value() & { return std::get<0>(state_); }
  Config&& value() && { return std::get<0>(std::move(state_)); }

  // Empty when ok().
  const std::vector<Diagnostic>& diagnostics() const;
  // One diagnostic per line, no trailing newline.
  std::string error_text() const;
  // The diagnostics as a fatal core::Error, for callers that speak core::Result.
  core::Error error() const;

 private:
  std::variant<Config, std::vector<Diagnostic>> state_;
};

// Looks up an environment variable; nullopt when it is not set.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

struct LoadOptions {
  EnvLookup env;  // empty: the process environment (getenv)
};

// Reads and validates a config file. Relative paths inside it (password_file,
// tls.*_file) are resolved against the file's directory.
LoadResult load_file(const std::string& path, const LoadOptions& options = {});

// Validates YAML text; source_name is used in diagnostics and as the base for
// relative paths (its directory part, if any).
LoadResult load_string(std::string_view yaml, std::string source_name, const LoadOptions& options = {});

// Every key the loader knows, as dotted paths ("database", "database.url",
// ...), in the order the loader reads them; for documentation checks.
std::vector<std::string> known_key_paths();

// One line for `outboxd check-config`, without any secret, e.g.
// "ok: database outboxd@127.0.0.1:5432/app, broker amqp://127.0.0.1:5672 (rabbitmq, PLAIN as guest), schema outbox, 64 partitions".
// With broker.cloudevents on, ", CloudEvents from SOURCE for N destinations" follows the broker.
// With many outboxes it counts them instead of naming a database and a schema:
// "ok: 3 outboxes listed and more from a catalog, broker ...".
std::string summary(const Config& config);

// With many outboxes, the lines check-config prints after summary(): each
// listed outbox (its name, database as describe() shows it, schemas), the
// catalog (its database, interval and query) and the connection budget;
// never a password. Empty with one outbox.
std::vector<std::string> outboxes_summary(const Config& config);

}  // namespace outboxd::config
