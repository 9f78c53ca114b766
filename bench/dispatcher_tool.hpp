// What the database bench tools share: `TOOL -c CONFIG [RUNS]`, a connection as the dispatcher, every partition.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "config/loader.hpp"
#include "pg/connection.hpp"
#include "pg/text_codec.hpp"

namespace outboxd::bench {

struct DispatcherTool {
  std::string schema;
  pg::Connection connection;
  std::vector<int> partitions;  // every one, as a single instance leasing them all
  int runs = 11;
};

// Reads `-c CONFIG [RUNS]` (RUNS default 11) and connects with the config's
// database URL, the dispatcher's login, as the daemon does. On failure it
// prints why (usage, or `NAME: error`) and sets `exit_code` (2 or 1).
inline std::optional<DispatcherTool> open_dispatcher_tool(int argc, char** argv, const char* name, int& exit_code) {
  if (argc < 3 || argc > 4 || std::string(argv[1]) != "-c") {
    std::fprintf(stderr, "usage: %s -c CONFIG [RUNS]\n", argv[0]);
    exit_code = 2;
    return std::nullopt;
  }
  exit_code = 1;
  auto config = config::load_file(argv[2]);
  if (!config) {
    std::fprintf(stderr, "%s: %s\n", name, config.error_text().c_str());
    return std::nullopt;
  }
  const std::string schema = config.value().outbox.schema;
  auto connection = pg::Connection::open(config.value().database, std::string("outboxd ") + name);
  if (!connection) {
    std::fprintf(stderr, "%s: %s\n", name, connection.error().message.c_str());
    return std::nullopt;
  }
  auto count = connection.value().exec("SELECT partition_count FROM " + pg::quote_ident(schema) + ".settings");
  if (!count) {
    std::fprintf(stderr, "%s: %s\n", name, count.error().message.c_str());
    return std::nullopt;
  }
  std::vector<int> partitions;
  for (int p = 0; p < count.value().int64(0, 0); ++p) partitions.push_back(p);
  const int runs = argc == 4 ? std::max(1, std::atoi(argv[3])) : 11;
  return DispatcherTool{schema, std::move(connection).value(), std::move(partitions), runs};
}

}  // namespace outboxd::bench
