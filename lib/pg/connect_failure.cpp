// Finds the server's SQLSTATE in libpq's verbose connection error and keeps the rest for people.
#include "pg/connect_failure.hpp"

#include "pg/sqlstate.hpp"

namespace outboxd::pg {
namespace {

constexpr std::string_view kAfterSeverity = ":  ";

bool sqlstate_char(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z'); }

// Where "SQLSTATE: " starts right after a severity's ":  ", at or after `from`; npos if nowhere.
std::size_t next_code(std::string_view text, std::size_t from) {
  for (std::size_t at = text.find(kAfterSeverity, from); at != std::string_view::npos;
       at = text.find(kAfterSeverity, at + 1)) {
    const std::size_t code = at + kAfterSeverity.size();
    if (text.size() < code + 7 || text.substr(code + 5, 2) != ": ") continue;
    bool valid = true;
    for (std::size_t i = code; i < code + 5; ++i) valid = valid && sqlstate_char(text[i]);
    if (valid) return code;
  }
  return std::string_view::npos;
}

// The server's source file and line help its developers, not the operator.
bool location_line(std::string_view line) { return line.substr(0, 9) == "LOCATION:"; }

}  // namespace

ConnectFailure read_connect_failure(std::string_view verbose, bool password_missing) {
  ConnectFailure failure;
  std::size_t copied = 0;
  for (std::size_t code = next_code(verbose, 0); code != std::string_view::npos; code = next_code(verbose, code)) {
    failure.sqlstate = std::string(verbose.substr(code, 5));
    failure.text += verbose.substr(copied, code - copied);
    copied = code + 7;
  }
  failure.text += verbose.substr(copied);
  std::string kept;
  for (std::size_t start = 0; start < failure.text.size();) {
    std::size_t end = failure.text.find('\n', start);
    end = end == std::string::npos ? failure.text.size() : end + 1;
    const std::string_view line = std::string_view(failure.text).substr(start, end - start);
    if (!location_line(line)) kept += line;
    start = end;
  }
  failure.text = std::move(kept);
  failure.kind = classify_connect_failure(failure.sqlstate, password_missing);
  return failure;
}

}  // namespace outboxd::pg
