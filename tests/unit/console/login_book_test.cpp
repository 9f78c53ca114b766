// Unit tests of the console's logins, token comparison and the parsing of Cookie and Authorization.
#include <catch2/catch.hpp>

#include "console/login_book.hpp"

using namespace outboxd::console;
using std::chrono::hours;
using std::chrono::seconds;

namespace {

struct Counter {
  int next = 0;
  std::string operator()() { return "token" + std::to_string(next++); }
};

}  // namespace

TEST_CASE("A login is found by its id until it has been idle too long", "[console]") {
  LoginBook logins(Counter{}, seconds(60));
  const LoginBook::Clock::time_point t0{};
  const std::string id = logins.open("alice", t0);
  CHECK(id == "token0");
  const auto found = logins.find(id, t0 + seconds(59));
  REQUIRE(found);
  CHECK(found->name == "alice");
  CHECK(found->csrf == "token1");
  CHECK(logins.find(id, t0 + seconds(59) + seconds(59)));  // each use restarts the idle time
  CHECK_FALSE(logins.find(id, t0 + seconds(59) * 2 + seconds(60)));
  CHECK_FALSE(logins.find("token1", t0));  // a CSRF token is no login id
}

TEST_CASE("Closing a login and the cap on logins", "[console]") {
  LoginBook logins(Counter{}, hours(8), 2);
  const LoginBook::Clock::time_point t0{};
  const std::string a = logins.open("a", t0);
  const std::string b = logins.open("b", t0 + seconds(1));
  logins.close(b);
  CHECK_FALSE(logins.find(b, t0 + seconds(2)));
  const std::string c = logins.open("c", t0 + seconds(3));
  const std::string d = logins.open("d", t0 + seconds(4));  // the least recently used (a) goes
  CHECK_FALSE(logins.find(a, t0 + seconds(5)));
  CHECK(logins.find(c, t0 + seconds(5)));
  CHECK(logins.find(d, t0 + seconds(5)));
}

TEST_CASE("same_secret wants the whole secret, and an empty secret matches nothing", "[console]") {
  CHECK(same_secret("0123456789abcdef", "0123456789abcdef"));
  CHECK_FALSE(same_secret("0123456789abcdeF", "0123456789abcdef"));
  CHECK_FALSE(same_secret("0123456789abcde", "0123456789abcdef"));
  CHECK_FALSE(same_secret("0123456789abcdef0", "0123456789abcdef"));
  CHECK_FALSE(same_secret("", ""));
}

TEST_CASE("Cookie and Authorization headers", "[console]") {
  CHECK(cookie_value("a=1; outboxd_console=abc; b=2", kLoginCookie) == std::optional<std::string>("abc"));
  CHECK_FALSE(cookie_value("xoutboxd_console=abc", kLoginCookie));
  CHECK(bearer_token("Bearer tok") == std::optional<std::string>("tok"));
  CHECK(bearer_token("bearer  tok ") == std::optional<std::string>("tok"));
  CHECK_FALSE(bearer_token("Basic dXNlcg=="));
  CHECK_FALSE(bearer_token("Bearer "));
  CHECK(login_cookie("id", false) == "outboxd_console=id; Path=/; HttpOnly; SameSite=Strict");
}

TEST_CASE("Behind HTTPS the login cookie is Secure and __Host-, and so is its end", "[console]") {
  CHECK(login_cookie("id", true) == "__Host-outboxd_console=id; Path=/; HttpOnly; SameSite=Strict; Secure");
  CHECK(logout_cookie(true) == "__Host-outboxd_console=; Path=/; HttpOnly; SameSite=Strict; Secure; Max-Age=0");
  CHECK(logout_cookie(false) == "outboxd_console=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
  CHECK(cookie_value("outboxd_console=a; __Host-outboxd_console=b", login_cookie_name(true)) ==
        std::optional<std::string>("b"));
}

TEST_CASE("A login name is kept as safe text of at most 64 bytes", "[console]") {
  CHECK(login_name("  alice ") == std::optional<std::string>("alice"));
  CHECK(login_name("bob\n\x1b[2J") == std::optional<std::string>("bob  [2J"));
  CHECK_FALSE(login_name("   "));
  CHECK(login_name(std::string(200, 'x'))->size() <= 64);
}

TEST_CASE("A form field is read from the body only, decoded", "[console]") {
  CHECK(form_value("csrf=ab12&name=alice+%3Cops%3E", "name") == "alice <ops>");
  CHECK(form_value("csrf=ab12&name=alice", "csrf") == "ab12");
  CHECK(form_value("xcsrf=1&csrfx=2", "csrf").empty());
  CHECK(form_value("csrf", "csrf").empty());
  CHECK(form_value("a=%zz%4", "a").empty());  // not validly encoded: no value
  CHECK(form_value("a=1%2B1", "a") == "1+1");
  CHECK(form_value("", "csrf").empty());
}

TEST_CASE("A token needs 16 characters other than whitespace", "[console]") {
  CHECK_FALSE(token_problem("0123456789abcdef"));
  CHECK(token_problem(std::string(16, ' ')));
  CHECK(token_problem(" 0123456789abcde\t"));
  CHECK_FALSE(token_problem("correct horse battery staple"));
}

TEST_CASE("Wrong tokens in a row slow logins down, a right one ends it", "[console]") {
  LoginThrottle throttle;
  const auto t0 = LoginThrottle::Clock::time_point{} + hours(1);
  for (int i = 0; i < LoginThrottle::kFreeFailures; ++i) {
    CHECK(throttle.wait(t0) == seconds(0));
    throttle.failed(t0);
  }
  CHECK(throttle.wait(t0) == seconds(1));
  CHECK(throttle.wait(t0 + seconds(1)) == seconds(0));
  for (int i = 0; i < 10; ++i) throttle.failed(t0);
  CHECK(throttle.wait(t0) == LoginThrottle::kMaxWait);
  throttle.succeeded();
  CHECK(throttle.wait(t0) == seconds(0));
}
