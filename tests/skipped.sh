#!/usr/bin/env bash
# Lists the tests a ctest run skipped, one a line, each with the reason it printed
# after "SKIPPED: " (tests/support/skip.hpp), from that run's JUnit file
# (ctest --output-junit; scripts/test.sh writes BUILD_DIR/ctest-junit.xml):
#   NAME<tab>REASON
# A skipped test that printed no reason is listed with "(no reason given)".
# Usage: tests/skipped.sh JUNIT_FILE
set -euo pipefail
junit="${1:?usage: tests/skipped.sh JUNIT_FILE}"
if [[ ! -f "$junit" ]]; then
  echo "tests/skipped.sh: no $junit (did ctest run with --output-junit?)" >&2
  exit 2
fi
# ctest writes each <testcase ...> and <skipped .../> on a line of its own, and the
# test's output as the text of <system-out>, escaped.
awk '
  function unescape(s) {
    gsub(/&lt;/, "<", s); gsub(/&gt;/, ">", s); gsub(/&quot;/, "\"", s); gsub(/&apos;/, "'\''", s)
    gsub(/&amp;/, "\\&", s)
    return s
  }
  /^[ \t]*<testcase / {
    name = $0; sub(/^[ \t]*<testcase name="/, "", name); sub(/" classname=.*/, "", name)
    name = unescape(name); skipped = 0; reason = ""
  }
  /^[ \t]*<skipped/ { skipped = 1 }
  /SKIPPED: / && reason == "" {
    reason = $0; sub(/.*SKIPPED: /, "", reason); sub(/<\/system-out>.*/, "", reason)
    reason = unescape(reason)
  }
  /<\/testcase>/ {
    if (skipped) { print name "\t" (reason == "" ? "(no reason given)" : reason) }
    skipped = 0
  }
' "$junit"
