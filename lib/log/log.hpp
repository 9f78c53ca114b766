// Logging set-up: one stderr logger, human-readable or one JSON object per line.
#pragma once

#include <memory>
#include <string>

#include <spdlog/common.h>
#include <spdlog/formatter.h>

#include "core/result.hpp"

namespace outboxd::log {

enum class Format { human, json };

// Installs the default spdlog logger. Fails on an unknown level name.
core::Status init(const std::string& level, Format format);

// "2026-12-01T10:39:11.123Z warn  message": UTC, the level, and the message
// with control characters and invalid UTF-8 escaped (core::escaped_for_log).
std::unique_ptr<spdlog::formatter> human_formatter();

// The outbox the calling thread serves, when one daemon serves many: each
// line it logs names it ("outbox acme: ..." or "outbox":"acme"). Empty: none.
void set_thread_outbox(std::string name);
const std::string& thread_outbox();
// The level of a run loop's routine news (connected, leases taken): info,
// but debug on a thread serving one outbox of many, whose loops start and
// stop with their work many times an hour.
spdlog::level::level_enum routine();

}  // namespace outboxd::log
