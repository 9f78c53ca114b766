// JSON laid out for people in time and memory bounded by what is shown, whatever its depth.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace outboxd::console {

// Indentation stops growing at this depth. A body nested 32,768 deep fits
// the 64 KiB the console reads, and laid out with an indentation per level
// it would take gigabytes: the indentation grows with the square of the
// depth. Past a few levels no one reads the indentation anyway.
inline constexpr std::size_t kMaxIndentDepth = 32;

// `json`, valid JSON (the caller checked it), laid out as nlohmann's
// dump(2) lays it out: two spaces per level up to kMaxIndentDepth, one
// member or element per line, empty containers kept on one line; strings
// as written. Stops once `max_bytes` are written: the result is at most
// `max_bytes` plus its last token and line's indentation.
std::string pretty_json(std::string_view json, std::size_t max_bytes);

}  // namespace outboxd::console
