#!/usr/bin/env bash
# The slowest tests of a ctest run, slowest first, from its JUnit file (ctest
# --output-junit; scripts/test.sh writes BUILD_DIR/ctest-junit.xml), and their summed time:
#   tests/slowest.sh JUNIT_FILE [COUNT]      (COUNT: 15)
# .ci/run prints it, so the suite's next growth shows before it costs a landing.
set -euo pipefail
junit="${1:?usage: tests/slowest.sh JUNIT_FILE [COUNT]}"
count="${2:-15}"
if [[ ! -f "$junit" ]]; then
  echo "tests/slowest.sh: no $junit (did ctest run with --output-junit?)" >&2
  exit 2
fi
# ctest writes each <testcase name="..." classname="..." time="S" ...> on a line of its own.
awk '
  /^[ \t]*<testcase / {
    name = $0; sub(/^[ \t]*<testcase name="/, "", name); sub(/" classname=.*/, "", name)
    time = $0; sub(/.* time="/, "", time); sub(/".*/, "", time)
    gsub(/&quot;/, "\"", name); gsub(/&apos;/, "'\''", name); gsub(/&lt;/, "<", name); gsub(/&gt;/, ">", name)
    gsub(/&amp;/, "\\&", name)
    printf "%9.1f s  %s\n", time, name
    total += time; n++
  }
  END { printf "%9.1f s  summed over %d tests\n", total, n > "/dev/stderr" }
' "$junit" 2>"${junit}.total" | sort -rn | head -n "$count"
cat "${junit}.total"
rm -f "${junit}.total"
