#include <doctest/doctest.h>

#include <specctl/util/shell.hpp>

#include "../support/shell_capture.hpp"

using specctl::util::shell_join;
using specctl::util::shell_quote;

TEST_CASE("shell_quote") {
  SUBCASE("safe words stay readable") {
    CHECK(shell_quote("--tp-size") == "--tp-size");
    CHECK(shell_quote("/models/Kimi-K2.5-INT4") == "/models/Kimi-K2.5-INT4");
    CHECK(shell_quote("0,1,2") == "0,1,2");
  }
  SUBCASE("everything else is single-quoted") {
    CHECK(shell_quote("") == "''");
    CHECK(shell_quote("a b") == "'a b'");
    CHECK(shell_quote("x; rm -rf ~") == "'x; rm -rf ~'");
    CHECK(shell_quote("it's") == "'it'\\''s'");
    CHECK(shell_quote("$(id)") == "'$(id)'");
    CHECK(shell_quote("~") == "'~'");
    CHECK(shell_quote("=x") == "'=x'");
  }
}

// The real check: a real shell must hand every word back unchanged and run nothing.
TEST_CASE("shell_join survives a real shell") {
  std::vector<std::string> words = {"x; rm -rf ~",
                                    "$(touch /tmp/specctl-pwned)",
                                    "`id`",
                                    "it's",
                                    "say \"hi\"",
                                    "a\tb",
                                    "line one\nline two",
                                    "*",
                                    "~",
                                    "",
                                    "&&",
                                    "|",
                                    "\\",
                                    "!",
                                    "#comment",
                                    "${HOME}",
                                    "-n",
                                    "-e"};
  auto out = specctl::test::run_shell("printf '%s\\0' " + shell_join(words));
  CHECK(out == words);
}
