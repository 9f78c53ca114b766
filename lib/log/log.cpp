// Installs the process-wide stderr logger in the configured format and level.
#include "log/log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include "core/safe_text.hpp"
#include "log/json_formatter.hpp"

namespace outboxd::log {

namespace {

thread_local std::string current_outbox;

// %v, but a message that carries a newline or a terminal escape from a row or
// a broker cannot start a line of its own or repaint the operator's terminal.
class EscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    if (!current_outbox.empty()) {
      dest.append(std::string_view("outbox "));
      dest.append(current_outbox.data(), current_outbox.data() + current_outbox.size());
      dest.append(std::string_view(": "));
    }
    const std::string text = core::escaped_for_log(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<EscapedMessage>(); }
};

}  // namespace

void set_thread_outbox(std::string name) { current_outbox = std::move(name); }
const std::string& thread_outbox() { return current_outbox; }
spdlog::level::level_enum routine() { return current_outbox.empty() ? spdlog::level::info : spdlog::level::debug; }

std::unique_ptr<spdlog::formatter> human_formatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<EscapedMessage>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %^%-5l%$ %*");
  return formatter;
}

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
    logger->set_formatter(human_formatter());
  }
  logger->set_level(parsed);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
  return {};
}

}  // namespace outboxd::log
