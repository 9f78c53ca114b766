// Escaping and number formatting of the Prometheus text exposition format 0.0.4.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outboxd::metrics::text_format {

// HELP text: backslash and newline are escaped.
std::string escape_help(std::string_view help);
// Label values: backslash, double quote and newline are escaped.
std::string escape_label_value(std::string_view value);

// Shortest text that reads back as the same double; "+Inf", "-Inf", "NaN".
std::string format_double(double value);

// `{a="x",b="y"}`, or nothing for no labels. `extra` (e.g. the histogram's
// `le`) comes last when given.
std::string label_block(const std::vector<std::pair<std::string, std::string>>& labels,
                        const std::pair<std::string, std::string>* extra = nullptr);

}  // namespace outboxd::metrics::text_format
