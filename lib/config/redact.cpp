// Removing passwords from connection strings before they reach a log line or an error message.
#include "config/redact.hpp"

#include <algorithm>

#include "config/url.hpp"

namespace outboxd::config {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string redact_query(std::string_view query) {
  std::string out;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    const std::string_view key = param.substr(0, param.find('='));
    if (key != "password") {
      if (!out.empty()) out += '&';
      out += param;
    }
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return out;
}

// Splits off the user info at the last '@' before any query or fragment,
// rather than at the first '/', so that an unescaped '/' in a password cannot
// make the password look like a path and slip through.
std::string redact_uri(std::string_view text, std::size_t scheme_end) {
  std::string out(text.substr(0, scheme_end + 3));
  std::string_view rest = text.substr(scheme_end + 3);
  std::string_view tail;
  const auto query_or_fragment = rest.find_first_of("?#");
  if (query_or_fragment != std::string_view::npos) {
    tail = rest.substr(query_or_fragment);
    rest = rest.substr(0, query_or_fragment);
  }
  const auto at = rest.rfind('@');
  if (at != std::string_view::npos) {
    out += rest.substr(0, std::min(at, rest.find(':')));
    rest = rest.substr(at);
  }
  out += rest;
  if (!tail.empty() && tail.front() == '?') {
    const auto hash = tail.find('#');
    const std::string query = redact_query(tail.substr(1, hash == std::string_view::npos ? tail.npos : hash - 1));
    if (!query.empty()) out += "?" + query;
    tail = hash == std::string_view::npos ? std::string_view() : tail.substr(hash);
  }
  out += tail;
  return out;
}

// Drops every "password = value" pair; lenient, so that a malformed string
// still loses its password.
std::string redact_conninfo(std::string_view text) {
  static constexpr std::string_view kKey = "password";
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const bool at_token_start = pos == 0 || is_space(text[pos - 1]);
    if (at_token_start && text.substr(pos, kKey.size()) == kKey) {
      std::size_t probe = pos + kKey.size();
      while (probe < text.size() && is_space(text[probe])) ++probe;
      if (probe < text.size() && text[probe] == '=') {
        ++probe;
        while (probe < text.size() && is_space(text[probe])) ++probe;
        probe = scan_conninfo_value(text, probe).end;
        while (probe < text.size() && is_space(text[probe])) ++probe;
        pos = probe;
        continue;
      }
    }
    out += text[pos++];
  }
  while (!out.empty() && is_space(out.back())) out.pop_back();
  return out;
}

}  // namespace

std::string redact(std::string_view url) {
  if (split_uri(url)) return redact_uri(url, url.find("://"));
  return redact_conninfo(url);
}

}  // namespace outboxd::config
