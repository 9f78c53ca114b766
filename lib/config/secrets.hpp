// Secrets kept in files (password_file): read, trimmed, and never echoed in errors.
#pragma once

#include <cstddef>
#include <string>

#include "core/result.hpp"

namespace outboxd::config {

// A password file larger than this is almost surely the wrong file.
inline constexpr std::size_t kMaxSecretFileBytes = 64 * 1024;

// The file's content without one trailing newline ("\n" or "\r\n"), so that
// files written by `echo` or an editor work. An unreadable file, an empty
// one (after the trim) or an oversized one is an error; the message names the
// file as `shown` (the path as the config wrote it), never its content.
core::Result<std::string> read_secret_file(const std::string& path, const std::string& shown);

// Whether a file (a TLS certificate or key) can be opened and read; a
// directory cannot. The message names the file as `shown`.
core::Status check_readable_file(const std::string& path, const std::string& shown);

}  // namespace outboxd::config
