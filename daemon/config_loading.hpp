// Loading the config file for a command, with diagnostics printed to stderr.
#pragma once

#include <optional>
#include <string>

#include "config/config.hpp"

namespace outboxd::daemon {

// The config, or nullopt after printing every diagnostic to stderr.
std::optional<config::Config> load_config_or_report(const std::string& path);

// Logging set up from the config; false (after printing why) on a bad level.
bool init_logging(const config::Config& config);

}  // namespace outboxd::daemon
