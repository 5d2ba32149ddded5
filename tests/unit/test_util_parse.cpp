#include <doctest/doctest.h>

#include <specctl/util/parse.hpp>
#include <specctl/util/text.hpp>

#include <cstdint>

using specctl::util::parse_number;
using specctl::util::trim_view;

TEST_CASE("util::trim_view") {
  const std::string text = " \t value  \r\n";
  const auto view = trim_view(text);
  CHECK(view == "value");
  // A view into the text, not a copy.
  CHECK(view.data() == text.data() + 3);
  CHECK(trim_view("").empty());
  CHECK(trim_view(" \r\n\t ").empty());
  CHECK(trim_view("a b") == "a b");
}

TEST_CASE("util::parse_number") {
  SUBCASE("integers, whitespace around them trimmed") {
    CHECK(parse_number<int>("42") == 42);
    CHECK(parse_number<int>("-7") == -7);
    CHECK(parse_number<int>(" 12\n") == 12);
    CHECK(parse_number<int>("\t0\r") == 0);
    CHECK(parse_number<std::uint64_t>("18446744073709551615") == UINT64_MAX);
  }
  SUBCASE("the whole text must be the number") {
    CHECK_FALSE(parse_number<int>(""));
    CHECK_FALSE(parse_number<int>("   "));
    CHECK_FALSE(parse_number<int>("12abc"));
    CHECK_FALSE(parse_number<int>("1 2"));
    CHECK_FALSE(parse_number<int>("abc"));
    CHECK_FALSE(parse_number<int>("+5"));
    CHECK_FALSE(parse_number<int>("0x10"));
    CHECK_FALSE(parse_number<int>("1.5"));
  }
  SUBCASE("out of range or of the wrong sign") {
    CHECK_FALSE(parse_number<int>("2147483648"));
    CHECK(parse_number<int>("2147483647") == 2147483647);
    CHECK_FALSE(parse_number<std::uint64_t>("18446744073709551616"));
    CHECK_FALSE(parse_number<unsigned>("-1"));
    CHECK_FALSE(parse_number<std::uint8_t>("256"));
  }
  SUBCASE("floating point") {
    CHECK(parse_number<double>("0.85") == doctest::Approx(0.85));
    CHECK(parse_number<double>(" -2.5e3 ") == doctest::Approx(-2500.0));
    CHECK(parse_number<double>("10") == doctest::Approx(10.0));
    CHECK_FALSE(parse_number<double>("1.5x"));
    CHECK_FALSE(parse_number<double>("."));
  }
}
