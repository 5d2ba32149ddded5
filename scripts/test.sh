#!/usr/bin/env bash
# Sets up, builds and runs every test:   scripts/test.sh [BUILD_DIR] [CMAKE_ARGS...]
# README's test command; .ci/run calls it, then again with -Werror and sanitizers.
# A test that cannot run here is skipped, not passed: ctest lists it under "did not
# run", and the reasons the tests gave follow, from ctest's BUILD_DIR/ctest-junit.xml.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${1:-build}"
shift || true

# The build's packages first; the tests' own (openssh-server, Slurm, Chromium) and the
# debootstrap roots, about 80 s of network and disk on a fresh machine, come in beside the
# build, which wants the CPUs. Whatever happens to the build, apt is waited for, never cut off.
scripts/setup.sh
mkdir -p "$build_dir"
setup_log="$build_dir/setup-tests.log"
scripts/setup.sh --tests >"$setup_log" 2>&1 &
setup_pid=$!
trap 'wait "$setup_pid" 2>/dev/null || true' EXIT
cmake -S . -B "$build_dir" -G Ninja "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
if ! wait "$setup_pid"; then
  echo "test.sh: scripts/setup.sh --tests failed; the end of $setup_log:" >&2
  tail -n 20 "$setup_log" >&2
  exit 1
fi
cat "$setup_log"
rm -f "$build_dir/ctest-junit.xml"
status=0
# Behind a hostile home: a test that reads the user's shell start-up or writes to ~ fails the run.
# SPECCTL_TEST_JOBS: how many tests at once; unless set, two more than the cores, since the
# end-to-end cases mostly wait (model loads, Slurm, SSH stalls): on 2 cores the suite's tests
# sum to about 1,400 s, and 4 at once took 350 s where 3 took 454 s.
tests/hostile-home.sh ctest --test-dir "$build_dir" --output-on-failure -j"${SPECCTL_TEST_JOBS:-$(($(nproc) + 2))}" \
  --output-junit ctest-junit.xml ||
  status=$?
skipped=$(tests/skipped.sh "$build_dir/ctest-junit.xml" || true)
if [[ -n "$skipped" ]]; then
  echo "Skipped, and why:"
  sed 's/^/  /; s/\t/: /' <<<"$skipped"
fi
exit "$status"
