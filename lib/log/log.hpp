// Logging set-up: one stderr logger, human-readable or one JSON object per line.
#pragma once

#include <string>

#include "core/result.hpp"

namespace outboxd::log {

enum class Format { human, json };

// Installs the default spdlog logger. Fails on an unknown level name.
core::Status init(const std::string& level, Format format);

}  // namespace outboxd::log
