// Unit tests of the Prometheus text format helpers: escaping, numbers, label blocks.
#include <catch2/catch.hpp>

#include <limits>

#include "metrics/text_format.hpp"

using namespace outboxd::metrics::text_format;

TEST_CASE("Label values escape backslash, double quote and newline only", "[metrics]") {
  CHECK(escape_label_value("plain") == "plain");
  CHECK(escape_label_value("a\\b") == "a\\\\b");
  CHECK(escape_label_value("say \"x\"") == "say \\\"x\\\"");
  CHECK(escape_label_value("two\nlines") == "two\\nlines");
  CHECK(escape_label_value("tab\tand caf\xc3\xa9") == "tab\tand caf\xc3\xa9");
  CHECK(escape_label_value("") == "");
}

TEST_CASE("Help text escapes backslash and newline, not quotes", "[metrics]") {
  CHECK(escape_help("a \"b\" c") == "a \"b\" c");
  CHECK(escape_help("a\\b\nc") == "a\\\\b\\nc");
}

TEST_CASE("Doubles render in the shortest form that reads back exactly", "[metrics]") {
  CHECK(format_double(0) == "0");
  CHECK(format_double(1) == "1");
  CHECK(format_double(2.5) == "2.5");
  CHECK(format_double(0.005) == "0.005");
  CHECK(format_double(0.1 + 0.2) == "0.30000000000000004");
  CHECK(format_double(-3) == "-3");
  CHECK(format_double(1e21) == "1e+21");
  CHECK(format_double(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_double(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_double(std::numeric_limits<double>::quiet_NaN()) == "NaN");
}

TEST_CASE("Label blocks list the labels in order, the extra one last", "[metrics]") {
  CHECK(label_block({}).empty());
  CHECK(label_block({{"a", "1"}}) == "{a=\"1\"}");
  CHECK(label_block({{"b", "2"}, {"a", "1"}}) == "{b=\"2\",a=\"1\"}");
  const std::pair<std::string, std::string> le{"le", "+Inf"};
  CHECK(label_block({}, &le) == "{le=\"+Inf\"}");
  CHECK(label_block({{"d", "q\""}}, &le) == "{d=\"q\\\"\",le=\"+Inf\"}");
}
