#include <specctl/util/text_table.hpp>

#include <doctest/doctest.h>

using specctl::util::Align;
using specctl::util::TextTable;

TEST_CASE("text table: aligned Markdown, UTF-8 widths, escaped pipes, short rows padded") {
  TextTable table({{"variant"}, {"tok/s", Align::right}, {"n", Align::right}});
  table.add_row({"baseline", "92.6 ± 0.5", "3"});
  table.add_row({"a|b", "1.04×"});
  CHECK(table.markdown() == "| variant  |      tok/s |    n |\n"
                            "| -------- | ---------: | ---: |\n"
                            "| baseline | 92.6 ± 0.5 |    3 |\n"
                            "| a\\|b     |      1.04× |      |\n");
  CHECK_FALSE(table.empty());
  CHECK(TextTable({{"x"}}).empty());
}
