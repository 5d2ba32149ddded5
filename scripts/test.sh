#!/usr/bin/env bash
# Sets up, builds and runs every test:   scripts/test.sh [BUILD_DIR] [CMAKE_ARGS...]
# README's test command; .ci/run calls it, then again with -Werror and sanitizers.
set -euo pipefail
cd "$(dirname "$0")/.."

build_dir="${1:-build}"
shift || true

scripts/setup.sh --tests
cmake -S . -B "$build_dir" "$@" >/dev/null
cmake --build "$build_dir" -j"$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)"
