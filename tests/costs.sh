#!/usr/bin/env bash
# Writes tests/ctest-costs.txt from the cost data ctest kept in BUILD_DIR after a whole
# run: each test's name and seconds, the slowest first. scripts/test.sh seeds a build
# that has no cost data of its own with it, so that ctest starts the slowest tests first
# instead of last, where one would hold the run open alone. A stale figure only changes
# the order.   Usage: tests/costs.sh BUILD_DIR
set -euo pipefail
data="${1:?usage: tests/costs.sh BUILD_DIR}/Testing/Temporary/CTestCostData.txt"
out="$(dirname "$0")/ctest-costs.txt"
# ctest's lines are "NAME RUNS SECONDS" (NAME may hold spaces); "---" starts the failures.
awk '/^---$/ {exit} NF >= 3 {seconds = $NF; NF -= 2; printf "%.1f\t%s\n", seconds, $0}' "$data" |
  LC_ALL=C sort -t$'\t' -k1,1gr -k2 | awk -F'\t' '{printf "%s 1 %s\n", $2, $1}' >"$out"
echo "$(wc -l <"$out") tests written to $out"
