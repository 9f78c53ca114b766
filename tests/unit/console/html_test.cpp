// Unit tests of the console's escaping, URL segments and HTML pieces: nothing from a row can become markup.
#include <catch2/catch.hpp>

#include "console/html.hpp"

using namespace outboxd::console;

TEST_CASE("escape turns every markup character into an entity", "[console]") {
  CHECK(escape("<script>alert('x')</script> & \"q\"") ==
        "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
  CHECK(escape("plain text") == "plain text");
}

TEST_CASE("escape makes control characters, bidi overrides and invalid UTF-8 harmless", "[console]") {
  CHECK(escape("a\nb\x1b[31m") == "a b [31m");
  CHECK(escape("evil\xe2\x80\xae" "txt") == "evil txt");
  CHECK(escape("\xff<") == "\xef\xbf\xbd&lt;");
}

TEST_CASE("escape_lines keeps newlines and escapes each line", "[console]") {
  CHECK(escape_lines("{\n  \"a\": \"<b>\"\n}", 1000) == "{\n  &quot;a&quot;: &quot;&lt;b&gt;&quot;\n}");
}

TEST_CASE("url_segment encodes every byte that could end or change a path", "[console]") {
  CHECK(url_segment("order-1_a.b~c") == "order-1_a.b~c");
  CHECK(url_segment("a/b?c#d e%\"<") == "a%2Fb%3Fc%23d%20e%25%22%3C");
  CHECK(url_decode("a%2Fb%20c") == std::optional<std::string>("a/b c"));
  CHECK_FALSE(url_decode("a%2"));
  CHECK_FALSE(url_decode("a%zz"));
}

TEST_CASE("link, table and action_form escape what they are given", "[console]") {
  CHECK(link("/rows/", "x\"><img src=y>", "<b>").markup ==
        "<a href=\"/rows/x%22%3E%3Cimg%20src%3Dy%3E\">&lt;b&gt;</a>");
  const Html t = table({"<h>"}, {{text("<c>")}});
  CHECK(t.markup == "<table><thead><tr><th>&lt;h&gt;</th></tr></thead><tbody><tr><td>&lt;c&gt;</td></tr></tbody></table>");
  const Html form = action_form("/parked/a%2Fb/skip", "skip", "tok\"en");
  CHECK(form.markup ==
        "<form method=\"post\" action=\"/parked/a%2Fb/skip\"><input type=\"hidden\" name=\"csrf\" "
        "value=\"tok&quot;en\"><button type=\"submit\">skip</button></form>");
}
