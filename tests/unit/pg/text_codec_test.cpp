// Identifier quoting, array literals and integer parsing for libpq text values.
#include <catch2/catch.hpp>

#include "pg/text_codec.hpp"

using namespace outboxd::pg;

TEST_CASE("quote_ident always quotes and doubles embedded quotes", "[pg]") {
  CHECK(quote_ident("outbox") == "\"outbox\"");
  CHECK(quote_ident("Billing") == "\"Billing\"");
  CHECK(quote_ident("a\"b") == "\"a\"\"b\"");
  CHECK(quote_ident("x\"; DROP TABLE y; --") == "\"x\"\"; DROP TABLE y; --\"");
  CHECK(quote_ident("") == "\"\"");
  CHECK(quote_ident("bücher") == "\"bücher\"");
}

TEST_CASE("integer arrays become {1,2,3} literals", "[pg]") {
  const std::vector<int> none;
  const std::vector<int> small{0, 1, -2, 63};
  const std::vector<std::int64_t> big{9223372036854775807LL, -9223372036854775807LL - 1, 42};
  CHECK(int_array_literal(none) == "{}");
  CHECK(int_array_literal(small) == "{0,1,-2,63}");
  CHECK(int_array_literal(big) == "{9223372036854775807,-9223372036854775808,42}");
}

TEST_CASE("text arrays quote every element and escape quotes and backslashes", "[pg]") {
  const std::vector<std::string> values{"plain", "", "NULL", "with \"quotes\"", "back\\slash", "a,b{c}", "ü"};
  CHECK(text_array_literal(values) ==
        "{\"plain\",\"\",\"NULL\",\"with \\\"quotes\\\"\",\"back\\\\slash\",\"a,b{c}\",\"ü\"}");
  CHECK(text_array_literal(std::vector<std::string>{}) == "{}");
}

TEST_CASE("boolean arrays", "[pg]") {
  CHECK(bool_array_literal(std::vector<bool>{true, false, true}) == "{t,f,t}");
  CHECK(bool_array_literal(std::vector<bool>{}) == "{}");
}

TEST_CASE("parse_int64 takes the whole text or nothing", "[pg]") {
  CHECK(parse_int64("0") == 0);
  CHECK(parse_int64("-17") == -17);
  CHECK(parse_int64("9223372036854775807") == 9223372036854775807LL);
  CHECK_FALSE(parse_int64("").has_value());
  CHECK_FALSE(parse_int64("12a").has_value());
  CHECK_FALSE(parse_int64("9223372036854775808").has_value());
  CHECK_FALSE(parse_int64(" 1").has_value());
}
