// The custom readers of the outbox, leases and http keys: schema names, the instance id, the listen address.
#include <optional>
#include <string>

#include "config/listen_address.hpp"
#include "config/scalar.hpp"
#include "config/schema_name.hpp"
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
std::optional<std::string> listen_problem(std::string_view listen) {
  if (listen.empty()) return std::nullopt;
  const auto address = parse_listen_address(listen);
  if (!address) {
    return address.error().message + "; write \"host:port\" such as 127.0.0.1:9187, or leave it empty to turn "
                                     "HTTP off";
  }
  // The server would bind it, but to a port no scraper or healthcheck can know.
  if (address.value().port == 0) return "port 0 would be chosen anew at every start; give a fixed port such as 9187";
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
  if (!http.text(key, listen)) return;
  if (const auto problem = listen_problem(listen)) {
    http.report(key, *problem);
    return;
  }
  out = std::move(listen);
}

}  // namespace outboxd::config
