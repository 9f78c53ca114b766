// A spdlog formatter that writes each record as one JSON object per line.
#pragma once

#include <spdlog/formatter.h>

#include <memory>

namespace outboxd::log {

class JsonFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

// Appends `text` to `dest` as the body of a JSON string (without quotes).
void append_json_escaped(std::string_view text, spdlog::memory_buf_t& dest);

}  // namespace outboxd::log
