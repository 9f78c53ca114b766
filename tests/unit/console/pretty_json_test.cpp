// pretty_json: laid out as nlohmann's dump(2), in output bounded by what is shown, whatever the depth.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <string>

#include "console/pages.hpp"
#include "console/pretty_json.hpp"

namespace outboxd::console {
namespace {

using nlohmann::json;

std::string nested(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// The longest run of spaces that starts a line.
std::size_t widest_indent(const std::string& text) {
  std::size_t widest = 0;
  std::size_t at = 0;
  while ((at = text.find('\n', at)) != std::string::npos) {
    const auto end = text.find_first_not_of(' ', ++at);
    widest = std::max(widest, (end == std::string::npos ? text.size() : end) - at);
  }
  return widest;
}

}  // namespace

TEST_CASE("pretty_json lays a document out as dump(2) does, strings as written", "[console][json]") {
  for (const auto& document :
       {json::parse(R"({"a":"<b>","n":[1,2.5,-3e4],"empty":{},"none":[],"deep":{"x":[{"y":null,"z":true}]}})"),
        json::parse(R"([[],[[]],{"k":{}},"x, \"y\": [z]",false])")}) {
    CHECK(pretty_json(document.dump(), 1 << 20) == document.dump(2));
  }
  CHECK(pretty_json(" { \"a\" :\n [ 1 , 2 ] }\t", 1 << 20) == "{\n  \"a\": [\n    1,\n    2\n  ]\n}");
  CHECK(pretty_json(R"(["\u003c\\"])", 1 << 20) == "[\n  \"\\u003c\\\\\"\n]");
}

TEST_CASE("pretty_json stops indenting at kMaxIndentDepth and writing at its bound", "[console][json]") {
  const auto shown = pretty_json(nested(32'768), 256 * 1024);
  CHECK(widest_indent(shown) == 2 * kMaxIndentDepth);
  CHECK(shown.size() <= 256 * 1024 + 2 * kMaxIndentDepth + 2);
  CHECK(shown.starts_with("[\n  [\n    [\n"));
  const auto whole = pretty_json(nested(100), 1 << 20);
  CHECK(std::count(whole.begin(), whole.end(), '\n') == 198);  // the innermost [] on one line
}

TEST_CASE("A body nested 32,768 deep is shown as JSON in a page of bounded size", "[console][json]") {
  const auto body = nested(32'768);
  const auto markup = body_html({body, static_cast<std::int64_t>(body.size()), "application/json"}).markup;
  CHECK(markup.find("shown as JSON") != std::string::npos);
  CHECK(markup.size() < 300 * 1024);
}

}  // namespace outboxd::console
