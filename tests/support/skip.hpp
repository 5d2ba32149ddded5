#pragma once

// Test support: a test case that cannot run here says so, and ctest reports it skipped.
// No doctest here: the fixtures that use it also serve benchmarks.
//
//   if (auto why = specctl::test::TestSshd::unavailable()) { specctl::test::skip(*why); return; }
//
// skip() prints "SKIPPED: <why>" on a line of its own; the SKIP_REGULAR_EXPRESSION
// of the suites that can skip (their CMakeLists.txt) turns that into ctest's "Not
// Run" instead of "Passed". Every TEST_CASE is its own ctest entry, so only the
// cases that really skipped are marked. scripts/test.sh lists the skips with their reasons, and
// .ci/run fails on a skip whose reason is not "no GPU".
//
// SPECCTL_TEST_WITHOUT="sshd slurm chromium specsim" makes the suites act as if
// those were not installed, so that each skip can be tried on a machine that has them.

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <string_view>

namespace specctl::test {

// The marker the suites' SKIP_REGULAR_EXPRESSION looks for.
inline constexpr std::string_view k_skip_marker = "SKIPPED: ";

// Whether SPECCTL_TEST_WITHOUT (words split by spaces or commas) names `tool`.
inline bool pretend_missing(std::string_view tool) {
  const char* value = std::getenv("SPECCTL_TEST_WITHOUT");
  if (value == nullptr) {
    return false;
  }
  std::string words(value);
  for (auto& c : words) {
    if (c == ',') {
      c = ' ';
    }
  }
  std::istringstream in(words);
  std::string word;
  while (in >> word) {
    if (word == tool) {
      return true;
    }
  }
  return false;
}

// Says why this test case does not run; the caller returns right after. `why`
// starts with what is missing: "no sshd (...)". CI accepts only "no GPU ...".
inline void skip(const std::string& why) {
  std::cout << k_skip_marker << why << std::endl;
}

} // namespace specctl::test
