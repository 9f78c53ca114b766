// The keyword/value list handed to PQconnectStartParams (internal to lib/pg, tested on its own).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "core/result.hpp"

namespace outboxd::pg {

struct ConnectParams {
  // In order: the keywords of database.url (as the config parsed it) come
  // first, so that the ones after them take precedence.
  std::vector<std::pair<std::string, std::string>> keywords;
};

// Name and value of each setting the daemon's statements run with:
// statement_timeout, jit and plan_cache_mode.
using Settings = std::vector<std::pair<std::string, std::string>>;
Settings daemon_settings(const config::DatabaseConfig& config);

// Without a pooler, the daemon's settings go in the startup packet's
// `options`; with one, none do (see Connection::open).
// The URL's own `options` are merged and its TCP settings respected; the
// password, when configured, is a keyword of its own.
core::Result<ConnectParams> connect_params(const config::DatabaseConfig& config, const std::string& application_name);

}  // namespace outboxd::pg
