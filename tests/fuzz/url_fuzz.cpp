// libFuzzer target: arbitrary bytes as database.url (libpq URI or conninfo) and as broker.url.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "config/url.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  namespace config = outboxd::config;

  config::DatabaseConfig database;
  if (config::set_database_url(database, url).ok()) {
    // What check-config and the logs print of a parsed url.
    (void)config::describe(database.target);
  }

  config::BrokerConfig broker;
  (void)config::set_broker_url(broker, url);
  return 0;
}
