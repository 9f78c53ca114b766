// The custom readers of the outbox, leases and http keys: schema names, the instance id, the listen address.
#include <optional>
#include <string>

#include "config/listen_address.hpp"
#include "config/scalar.hpp"
#include "config/schema_name.hpp"
#include "config/secrets.hpp"
#include "config/sections.hpp"

namespace outboxd::config {
namespace {

constexpr std::size_t kMaxInstanceIdBytes = 128;  // the SQL bound on identifiers

void read_schema_name(MapReader& outbox, std::string_view key, SchemaKind kind, std::string& out) {
  std::string name;
  if (!outbox.text(key, name)) return;
  if (const auto problem = schema_name_problem(name, kind)) {
    outbox.report(key, *problem);
    return;
  }
  out = std::move(name);
}

// Empty turns HTTP off; anything else goes through the server's own parser.
// Through the server's own parser; port 0 would bind, but to a port no
// scraper, healthcheck or operator can know. `port` is the key's usual one.
std::optional<std::string> listen_problem(std::string_view listen, const char* port, const char* when_empty) {
  const auto address = parse_listen_address(listen);
  if (!address) {
    return address.error().message + "; write \"host:port\" such as 127.0.0.1:" + port + when_empty;
  }
  if (address.value().port == 0) {
    return std::string("port 0 would be chosen anew at every start; give a fixed port such as ") + port;
  }
  return std::nullopt;
}

}  // namespace

void read_outbox_schema(MapReader& outbox, std::string_view key, std::string& out, Config&) {
  read_schema_name(outbox, key, SchemaKind::outbox, out);
}

void read_workflow_schema(MapReader& outbox, std::string_view key, std::string& out, Config&) {
  read_schema_name(outbox, key, SchemaKind::workflow, out);
}

void read_instance_id(MapReader& leases, std::string_view key, std::string& out, Config&) {
  if (leases.nonempty_text(key, out) && (out.size() > kMaxInstanceIdBytes || has_control_characters(out))) {
    leases.report(key, "must be at most 128 bytes without control characters");
    out.clear();
  }
}

void read_http_listen(MapReader& http, std::string_view key, std::string& out, Config&) {
  std::string listen;
  if (!http.text(key, listen) || listen.empty()) return;  // empty: HTTP off
  if (const auto problem = listen_problem(listen, "9187", ", or leave it empty to turn HTTP off")) {
    http.report(key, *problem);
    return;
  }
  out = std::move(listen);
}

void read_console_listen(MapReader& console, std::string_view key, std::string& out, Config&) {
  std::string listen;
  if (!console.text(key, listen)) return;
  if (listen.empty()) {
    console.report(key, "give host:port, such as 127.0.0.1:9189");
  } else if (const auto problem = listen_problem(listen, "9189", "")) {
    console.report(key, *problem);
  } else {
    out = std::move(listen);
  }
}

// Read here too, so that check-config finds a missing or empty token file;
// the console reads it again at start.
void read_console_token_file(MapReader& console, std::string_view key, std::string& out, Config&) {
  std::string file;
  std::string written;
  if (!console.file_path(key, file, &written)) return;
  if (auto token = read_secret_file(file, written); !token) {
    console.report(key, token.error().message);
    return;
  }
  out = std::move(file);
}

}  // namespace outboxd::config
