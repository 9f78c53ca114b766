// Logins with idle expiry, constant-time token comparison, and the parsing of Cookie, Authorization and form bodies.
#include "console/login_book.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include "console/html.hpp"
#include "core/safe_text.hpp"

namespace outboxd::console {

namespace {

std::string_view trimmed(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

LoginBook::LoginBook(std::function<std::string()> random_token, std::chrono::seconds idle_limit,
                     std::size_t max_logins)
    : random_token_(std::move(random_token)), idle_limit_(idle_limit), max_logins_(max_logins) {}

std::string LoginBook::open(std::string_view name, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  std::erase_if(logins_, [&](const auto& entry) { return now - entry.second.last_used >= idle_limit_; });
  while (!logins_.empty() && logins_.size() >= max_logins_) {
    logins_.erase(std::min_element(logins_.begin(), logins_.end(), [](const auto& a, const auto& b) {
      return a.second.last_used < b.second.last_used;
    }));
  }
  std::string id = random_token_();
  logins_[id] = {{std::string(name), random_token_()}, now};
  return id;
}

std::optional<Login> LoginBook::find(std::string_view id, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  const auto found = logins_.find(id);
  if (found == logins_.end()) return std::nullopt;
  if (now - found->second.last_used >= idle_limit_) {
    logins_.erase(found);
    return std::nullopt;
  }
  found->second.last_used = now;
  return found->second.login;
}

void LoginBook::close(std::string_view id) {
  std::lock_guard lock(mutex_);
  if (const auto found = logins_.find(id); found != logins_.end()) logins_.erase(found);
}

std::chrono::seconds LoginThrottle::wait(Clock::time_point now) const {
  std::lock_guard lock(mutex_);
  if (failures_ < kFreeFailures) return std::chrono::seconds(0);
  const int doublings = std::min(failures_ - kFreeFailures, 6);  // 2^6 s passes kMaxWait
  const auto until = last_failure_ + std::min(std::chrono::seconds(std::int64_t{1} << doublings), kMaxWait);
  return until <= now ? std::chrono::seconds(0) : std::chrono::ceil<std::chrono::seconds>(until - now);
}

void LoginThrottle::failed(Clock::time_point now) {
  std::lock_guard lock(mutex_);
  ++failures_;
  last_failure_ = now;
}

void LoginThrottle::succeeded() {
  std::lock_guard lock(mutex_);
  failures_ = 0;
}

std::optional<std::string> token_problem(std::string_view token) {
  const auto counted = static_cast<std::size_t>(std::count_if(token.begin(), token.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) == 0;
  }));
  if (counted >= kMinTokenCharacters) return std::nullopt;
  return "the token has fewer than " + std::to_string(kMinTokenCharacters) + " characters other than whitespace";
}

bool same_secret(std::string_view given, std::string_view secret) {
  unsigned char differ = given.size() == secret.size() ? 0 : 1;
  for (std::size_t i = 0; i < given.size(); ++i) {
    differ |= static_cast<unsigned char>(given[i] ^ (secret.empty() ? 0 : secret[i % secret.size()]));
  }
  return differ == 0 && !secret.empty();
}

std::optional<std::string> cookie_value(std::string_view header, std::string_view name) {
  while (!header.empty()) {
    const std::size_t end = header.find(';');
    const std::string_view pair = trimmed(header.substr(0, end));
    const std::size_t equals = pair.find('=');
    if (equals != std::string_view::npos && pair.substr(0, equals) == name) return std::string(pair.substr(equals + 1));
    if (end == std::string_view::npos) break;
    header.remove_prefix(end + 1);
  }
  return std::nullopt;
}

std::string form_value(std::string_view body, std::string_view name) {
  while (!body.empty()) {
    const std::size_t end = body.find('&');
    const std::string_view pair = body.substr(0, end);
    const std::size_t equals = pair.find('=');
    if (pair.substr(0, equals) == name) {
      if (equals == std::string_view::npos) return {};
      std::string value(pair.substr(equals + 1));
      std::replace(value.begin(), value.end(), '+', ' ');
      return url_decode(value).value_or("");  // a malformed escape: no value
    }
    if (end == std::string_view::npos) break;
    body.remove_prefix(end + 1);
  }
  return {};
}

std::optional<std::string> bearer_token(std::string_view authorization) {
  authorization = trimmed(authorization);
  constexpr std::string_view kScheme = "bearer ";
  if (authorization.size() <= kScheme.size()) return std::nullopt;
  for (std::size_t i = 0; i < kScheme.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kScheme[i]) return std::nullopt;
  }
  const std::string_view token = trimmed(authorization.substr(kScheme.size()));
  if (token.empty()) return std::nullopt;
  return std::string(token);
}

std::string login_cookie(std::string_view id, bool secure) {
  return std::string(login_cookie_name(secure)) + "=" + std::string(id) + "; Path=/; HttpOnly; SameSite=Strict" +
         (secure ? "; Secure" : "");
}

std::string logout_cookie(bool secure) { return login_cookie("", secure) + "; Max-Age=0"; }

std::optional<std::string> login_name(std::string_view typed) {
  std::string name(trimmed(core::safe_text(trimmed(typed), 64)));
  if (name.empty()) return std::nullopt;
  return name;
}

}  // namespace outboxd::console
