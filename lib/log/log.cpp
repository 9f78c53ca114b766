// Installs the process-wide stderr logger in the configured format and level.
#include "log/log.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "log/json_formatter.hpp"

namespace outboxd::log {

core::Status init(const std::string& level, Format format) {
  const auto parsed = spdlog::level::from_str(level);
  // from_str maps anything unknown to "off"; only accept "off" when asked for.
  if (parsed == spdlog::level::off && level != "off") {
    return core::fatal_error("unknown log level \"" + level + "\"");
  }
  spdlog::drop("outboxd");  // init may run again on SIGHUP or in tests
  auto logger = spdlog::stderr_logger_mt("outboxd");
  if (format == Format::json) {
    logger->set_formatter(std::make_unique<JsonFormatter>());
  } else {
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%-5l%$ %v", spdlog::pattern_time_type::utc);
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return {};
}

}  // namespace outboxd::log
