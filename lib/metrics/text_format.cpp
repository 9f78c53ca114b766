// Escaping and number formatting of the Prometheus text exposition format 0.0.4.
#include "metrics/text_format.hpp"

#include <array>
#include <charconv>
#include <cmath>

namespace outboxd::metrics::text_format {

namespace {

std::string escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '"':
        out += quote ? "\\\"" : "\"";
        break;
      default: out += c;
    }
  }
  return out;
}

void append_label(std::string& out, const std::pair<std::string, std::string>& label) {
  if (out.size() > 1) out += ',';
  out += label.first;
  out += "=\"";
  out += escape_label_value(label.second);
  out += '"';
}

}  // namespace

std::string escape_help(std::string_view help) { return escape(help, false); }

std::string escape_label_value(std::string_view value) { return escape(value, true); }

std::string format_double(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  std::array<char, 32> buffer{};
  const auto [end, error] = std::to_chars(buffer.data(), buffer.data() + buffer.size(), value);
  // 32 characters hold any shortest round-trip double; the error branch is unreachable.
  if (error != std::errc()) return "NaN";
  return std::string(buffer.data(), end);
}

std::string label_block(const std::vector<std::pair<std::string, std::string>>& labels,
                        const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && extra == nullptr) return {};
  std::string out = "{";
  for (const auto& label : labels) append_label(out, label);
  if (extra != nullptr) append_label(out, *extra);
  out += '}';
  return out;
}

}  // namespace outboxd::metrics::text_format
