#!/usr/bin/env bash
# Writes tests/ctest-costs.cmake from the JUnit file of a whole ctest run (scripts/test.sh
# writes BUILD_DIR/ctest-junit.xml): each test's seconds as its COST property, which ctest
# reads to start the slowest tests first instead of last, where one would hold the run open
# alone. (CTestCostData.txt cannot carry them: CMake before 4.0 cuts a test's name at its
# first space there, and every name here has one.) A stale figure only changes the order.
#   Usage: tests/costs.sh JUNIT_FILE
set -euo pipefail
junit="${1:?usage: tests/costs.sh JUNIT_FILE}"
out="$(dirname "$0")/ctest-costs.cmake"
{
  echo "# The seconds each test took in a whole run, as its COST: ctest starts the costly first."
  echo "# Written by tests/costs.sh; included by every folder of tests (tests/CMakeLists.txt)."
  tests/slowest.sh "$junit" 100000 2>/dev/null | sed -n 's/^ *\([0-9.]*\) s  \(.*\)$/\1\t\2/p' |
    awk -F'\t' '$2 !~ /]==]|^summed over [0-9]+ tests$/ {printf "set_tests_properties([==[%s]==] PROPERTIES COST %s)\n", $2, $1}'
} >"$out"
echo "$(($(wc -l <"$out") - 2)) tests written to $out"
