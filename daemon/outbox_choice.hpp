// Which outbox a command acts on: the one of a one-outbox file, the one --outbox names, or every one (migrate, status).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace outboxd::daemon {

// What the command line says a command runs on.
struct ConfigChoice {
  std::string path;    // -c
  std::string outbox;  // --outbox; empty: not given
};

// The config a command of one outbox runs on, or the exit code after saying why not.
struct OneOutbox {
  std::optional<config::Config> config;
  int exit_code = 0;
};

// With one outbox, `config` itself, and --outbox refused. With many, the
// outbox --outbox names (listed, else read from the catalog) as a
// one-outbox config (config::for_outbox); without --outbox, or with a name
// no outbox has, refused naming the choices (the first 20). Refusals exit 2.
OneOutbox choose_outbox(const config::Config& config, const ConfigChoice& choice, const char* command);

// choose_outbox() on the file loaded (78 after printing its errors).
OneOutbox one_outbox_config(const ConfigChoice& choice, const char* command);

// Every outbox of a many-outbox config: the list, then the catalog's (read
// on a connection of its own), what the catalog left out printed to stderr.
struct AllOutboxes {
  std::vector<config::OutboxEntry> entries;
  bool complete = true;  // false: the catalog could not be read (said on stderr); the list's alone
};
AllOutboxes all_outboxes(const config::Config& config, const char* command);

// How a command names an outbox of many in its output: "acme (outboxd@db:5432/acme, schema acme)".
std::string outbox_heading(const config::OutboxEntry& entry);

}  // namespace outboxd::daemon
