// The rule for the outbox and workflow schema names, one function for the config, migrate and the CLI.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace outboxd::config {

enum class SchemaKind {
  outbox,    // outbox.schema: migrate derives <schema>_writer, <schema>_dispatcher, <schema>_wakeup
  workflow,  // outbox.workflow_schema
};

// The longest name of each kind, in bytes: PostgreSQL keeps 63 bytes of an
// identifier (NAMEDATALEN - 1) and cuts the rest without a word; the outbox
// schema leaves room for "_dispatcher" in the role names derived from it.
std::size_t max_schema_name_bytes(SchemaKind kind);

// Why `name` cannot be a schema of that kind, or nullopt when it can. A
// lower-case SQL identifier ([a-z_][a-z0-9_]*), so that it means the same
// quoted or not, within max_schema_name_bytes(), not starting with "pg_".
// The message names neither key nor kind: callers prefix their own.
std::optional<std::string> schema_name_problem(std::string_view name, SchemaKind kind);

}  // namespace outboxd::config
