// Who is logged in to the console, and the checks on what a request carries: token, cookie, CSRF field.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace outboxd::console {

inline constexpr const char* kLoginCookie = "outboxd_console";
// Behind HTTPS: a browser keeps a __Host- cookie only when it is Secure,
// has Path=/ and no Domain, so it can be neither set nor shadowed by
// another service on the host or a sibling domain.
inline constexpr const char* kSecureLoginCookie = "__Host-outboxd_console";

// The login cookie's name: kSecureLoginCookie when `secure` (console.behind_tls).
inline const char* login_cookie_name(bool secure) { return secure ? kSecureLoginCookie : kLoginCookie; }

struct Login {
  std::string name;  // as given at login, made safe (at most 64 bytes)
  std::string csrf;  // the field `csrf` every POST of this login must carry
};

// Browser logins. Ids and CSRF tokens come from
// `random_token` (the console passes 32 bytes of getrandom() as hex); a
// login unused for `idle_limit` is gone; past `max_logins` the least
// recently used goes. Thread-safe.
class LoginBook {
 public:
  using Clock = std::chrono::steady_clock;

  LoginBook(std::function<std::string()> random_token, std::chrono::seconds idle_limit,
            std::size_t max_logins = 256);

  // The new login's id, for the cookie.
  std::string open(std::string_view name, Clock::time_point now);
  // The login, its idle time restarted; nullopt for an unknown or expired id.
  std::optional<Login> find(std::string_view id, Clock::time_point now);
  void close(std::string_view id);

 private:
  struct Entry {
    Login login;
    Clock::time_point last_used;
  };
  std::function<std::string()> random_token_;
  std::chrono::seconds idle_limit_;
  std::size_t max_logins_;
  std::mutex mutex_;
  std::map<std::string, Entry, std::less<>> logins_;
};

// Wrong tokens at login, slowed down: after kFreeFailures of them in a row,
// a login is refused until a wait has passed since the last one, 1 s
// doubling with each further failure up to kMaxWait; a right token ends the
// run. Guessing a token of 16 characters is hopeless anyway: this keeps the
// attempts (and their log lines) few. Bearer requests are not logins and
// are never slowed. Thread-safe.
class LoginThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kFreeFailures = 5;
  static constexpr std::chrono::seconds kMaxWait{60};

  // How long from `now` until a login may be tried; 0: at once.
  std::chrono::seconds wait(Clock::time_point now) const;
  void failed(Clock::time_point now);
  void succeeded();

 private:
  mutable std::mutex mutex_;
  int failures_ = 0;  // in a row
  Clock::time_point last_failure_{};
};

// Why `token` cannot be the console's, or nullopt: it must hold at least
// kMinTokenCharacters characters other than whitespace.
inline constexpr std::size_t kMinTokenCharacters = 16;
std::optional<std::string> token_problem(std::string_view token);

// Compares in time that depends on the lengths only, so the token cannot be
// guessed byte by byte from response times.
bool same_secret(std::string_view given, std::string_view secret);

// The value of cookie `name` in a Cookie header ("a=1; b=2").
std::optional<std::string> cookie_value(std::string_view header, std::string_view name);

// The value of field `name` in a form's body (application/x-www-form-urlencoded:
// "a=1&b=x%20y"), decoded; empty when the field is absent or its value is
// not validly encoded. Only the body is
// read: a query string can ride on a link anyone may send, and lands in logs.
std::string form_value(std::string_view body, std::string_view name);

// The token of "Bearer <token>" (scheme case-insensitive).
std::optional<std::string> bearer_token(std::string_view authorization);

// The Set-Cookie value for a login: HttpOnly, SameSite=Strict, Path=/;
// `secure` (behind a TLS proxy) names it login_cookie_name(true) and adds Secure.
std::string login_cookie(std::string_view id, bool secure);
// The Set-Cookie value that ends a login in the browser.
std::string logout_cookie(bool secure);

// The name typed at login as it is kept and recorded: safe text, at most 64
// bytes, surrounding spaces trimmed; nullopt when nothing remains.
std::optional<std::string> login_name(std::string_view typed);

}  // namespace outboxd::console
