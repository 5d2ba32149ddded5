#!/usr/bin/env bash
# Sets up, builds and runs every test:   scripts/test.sh [BUILD_DIR] [CMAKE_ARGS...]
# README's test command; .ci/run calls it, then again with -Werror and sanitizers.
# A test that cannot run here is skipped, not passed: ctest lists it under "did not
# run", and the reasons the tests gave follow, from ctest's BUILD_DIR/ctest-junit.xml.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${1:-build}"
shift || true

scripts/setup.sh --tests
cmake -S . -B "$build_dir" -G Ninja "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
rm -f "$build_dir/ctest-junit.xml"
status=0
# Behind a hostile home: a test that reads the user's shell start-up or writes to ~ fails the run.
# SPECCTL_TEST_JOBS: how many tests at once; unless set, one more than the cores, since the
# end-to-end cases mostly wait (model loads, Slurm, SSH stalls).
tests/hostile-home.sh ctest --test-dir "$build_dir" --output-on-failure -j"${SPECCTL_TEST_JOBS:-$(($(nproc) + 1))}" \
  --output-junit ctest-junit.xml ||
  status=$?
skipped=$(tests/skipped.sh "$build_dir/ctest-junit.xml" || true)
if [[ -n "$skipped" ]]; then
  echo "Skipped, and why:"
  sed 's/^/  /; s/\t/: /' <<<"$skipped"
fi
exit "$status"
