// Removing passwords from connection strings before they reach a log line or an error message.
#include "config/redact.hpp"

#include <algorithm>

namespace outboxd::config {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

bool is_secret_key(std::string_view key) { return key == "password" || key == "sslpassword"; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A query key as libpq reads it: pass%77ord is password.
std::string percent_decode(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex_value(text[i + 1]) >= 0 && hex_value(text[i + 2]) >= 0) {
      out += static_cast<char>(hex_value(text[i + 1]) * 16 + hex_value(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

std::string redact_query(std::string_view query) {
  std::string out;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view param = query.substr(0, amp);
    if (!is_secret_key(percent_decode(param.substr(0, param.find('='))))) {
      if (!out.empty()) out += '&';
      out += param;
    }
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
  }
  return out;
}

// Splits off the user info at the last '@' of the whole text, and keeps of it
// only what precedes the first ':', '/', '?' or '#': a password with any of
// those unescaped cannot slip through (an '@' in a query value costs the text
// before it, which errs on the safe side).
std::string redact_uri(std::string_view text, std::size_t scheme_end) {
  std::string out(text.substr(0, scheme_end + 3));
  std::string_view rest = text.substr(scheme_end + 3);
  std::string_view tail;
  const auto at = rest.rfind('@');
  if (at != std::string_view::npos) {
    out += rest.substr(0, std::min(at, rest.find_first_of(":/?#")));
    rest = rest.substr(at);
  }
  const auto query_or_fragment = rest.find_first_of("?#");
  if (query_or_fragment != std::string_view::npos) {
    tail = rest.substr(query_or_fragment);
    rest = rest.substr(0, query_or_fragment);
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

// The end of a conninfo value starting at `pos`, quoted with '...' or bare.
std::size_t conninfo_value_end(std::string_view text, std::size_t pos) {
  const bool quoted = pos < text.size() && text[pos] == '\'';
  if (quoted) ++pos;
  while (pos < text.size() && (quoted ? text[pos] != '\'' : !is_space(text[pos]))) {
    if (text[pos] == '\\') ++pos;
    ++pos;
  }
  return std::min(text.size(), quoted ? pos + 1 : pos);
}

// Drops every "password = value" and "sslpassword = value" pair; lenient, so
// that a malformed string still loses its password.
std::string redact_conninfo(std::string_view text) {
  std::string out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    const bool at_token_start = pos == 0 || is_space(text[pos - 1]);
    std::size_t probe = pos;
    while (at_token_start && probe < text.size() && !is_space(text[probe]) && text[probe] != '=') ++probe;
    if (probe > pos && is_secret_key(text.substr(pos, probe - pos))) {
      while (probe < text.size() && is_space(text[probe])) ++probe;
      if (probe < text.size() && text[probe] == '=') {
        ++probe;
        while (probe < text.size() && is_space(text[probe])) ++probe;
        probe = conninfo_value_end(text, probe);
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
  const auto scheme_end = url.find("://");
  if (scheme_end != std::string_view::npos && scheme_end > 0 && url.find_first_of(" =") > scheme_end) {
    return redact_uri(url, scheme_end);
  }
  return redact_conninfo(url);
}

}  // namespace outboxd::config
