#!/usr/bin/env bash
# Builds the libFuzzer harnesses of fuzz/ with Debian's clang (in build-fuzz/) and runs
# each for a bounded time over a copy of its committed corpus, fuzz/corpus/NAME/.
#   scripts/fuzz.sh             30 seconds per harness
#   scripts/fuzz.sh 300         300 seconds per harness
#   FUZZ_TARGETS="sse chunk" scripts/fuzz.sh   only those harnesses
# Exits 1 when a harness crashed, hung, ran out of memory or tripped a sanitizer, and
# prints where the input that did it was kept (build-fuzz/artifacts/NAME/).
set -euo pipefail

seconds="${1:-30}"
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "usage: scripts/fuzz.sh [SECONDS per harness]" >&2
  exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# libstdc++ 12's <expected> needs __cpp_concepts >= 202002L, which bookworm's clang
# reports from version 19 on (clang 14 to 16 report 201907L).
clang="clang++-19"
packages=(clang-19 libclang-rt-19-dev ccache)

scripts/setup.sh
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    sudo="sudo"
  fi
  echo "fuzz: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

build="build-fuzz"
# -O1 and line tables only: a faster build, and stack traces that still name lines.
cmake -S . -B "$build" -DCMAKE_CXX_COMPILER="$clang" -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DSPECCTL_FUZZ=ON -DSPECCTL_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" >/dev/null
cmake --build "$build" --target fuzz -j"$(nproc)"

targets=()
if [[ -n "${FUZZ_TARGETS:-}" ]]; then
  read -r -a targets <<<"$FUZZ_TARGETS"
else
  for harness in "$build"/fuzz/fuzz_*; do
    targets+=("$(basename "$harness" | sed 's/^fuzz_//')")
  done
fi

export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Stack traces with function names and lines: any llvm-symbolizer reads clang 19's DWARF.
for symbolizer in llvm-symbolizer-19 llvm-symbolizer; do
  if command -v "$symbolizer" >/dev/null; then
    export ASAN_SYMBOLIZER_PATH
    ASAN_SYMBOLIZER_PATH=$(command -v "$symbolizer")
    break
  fi
done
# The harnesses write their input to a file each iteration (and the journal's
# fsyncs it): on tmpfs that is ten times faster than on disk.
scratch_root="$build/tmp"
if [[ -d /dev/shm && -w /dev/shm ]]; then
  scratch_root=$(mktemp -d /dev/shm/specctl-fuzz.XXXXXX)
fi
trap 'rm -rf "$scratch_root"' EXIT
# The results harness replaces one file of tests/data/report/sweep with its input, the
# first byte choosing which (fuzz/fuzz_results.cpp): its seeds are that fixture's own
# files, made here rather than kept as copies of result folders in the tree.
seed_results() {
  local out=$1 fixture=tests/data/report/sweep i=0 v
  for v in baseline eagle3 eagle3-steps4 eagle3-nofusion; do
    { printf "\\$(printf '%03o' "$i")"; cat "$fixture/variants/$v/result.json"; } >"$out/result-$v"
    i=$((i + 1))
  done
  { printf '\300'; cat "$fixture/experiment.json"; } >"$out/experiment-json"
  { printf '\340'; cat "$fixture/run.json"; } >"$out/run-json"
  cp tests/data/fuzz/results-*.bin "$out/"
}

# One harness over a copy of its corpus; what it found goes to $build/logs/NAME.summary,
# its first line "ok" or "failed".
fuzz_one() {
  local name=$1 harness corpus artifacts scratch log seeds rc runs speed found summary
  harness="$build/fuzz/fuzz_$name"
  # New inputs go to a copy: the committed corpus changes only by hand.
  corpus="$build/corpus/$name"
  artifacts="$build/artifacts/$name"
  scratch="$scratch_root/$name"
  log="$build/logs/$name.log"
  summary="$build/logs/$name.summary"
  rm -rf "$corpus" "$artifacts" "$scratch" "$summary"
  mkdir -p "$corpus" "$artifacts" "$scratch" "$build/logs"
  if [[ -d "fuzz/corpus/$name" ]]; then
    cp -R "fuzz/corpus/$name/." "$corpus/"
  fi
  if [[ "$name" == results ]]; then
    seed_results "$corpus"
  fi

  seeds=$(find "$corpus" -type f | wc -l)
  rc=0
  TMPDIR="$scratch" "$harness" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$log" 2>&1 || rc=$?
  rm -rf "$scratch"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  found=$(find "$artifacts" -type f | head -1)
  if [[ $rc -ne 0 || -n "$found" ]]; then
    {
      echo failed
      echo "fuzz: $name FAILED (exit code $rc) after ${runs:-?} runs; the log is $log"
      grep -E "==[0-9]+==ERROR|^SUMMARY|runtime error|what\(\):" "$log" | head -5 || true
      for input in "$artifacts"/*; do
        [[ -e "$input" ]] && echo "fuzz: $name: the input that did it: $input"
      done
    } >"$summary"
  else
    { echo ok; echo "fuzz: $name: ${runs:-?} runs in ${seconds}s (${speed:-?} exec/s), corpus $seeds -> $(find "$corpus" -type f | wc -l) inputs, no crash"; } >"$summary"
  fi
}

for name in "${targets[@]}"; do
  if [[ ! -x "$build/fuzz/fuzz_$name" ]]; then
    echo "fuzz: no harness \"$name\"" >&2
    exit 2
  fi
done
# A harness runs on one core: as many at once as there are cores, each for its full time.
running=0
for name in "${targets[@]}"; do
  if [[ $running -ge $(nproc) ]]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$name" &
  running=$((running + 1))
done
# A harness that failed outside libFuzzer leaves no summary: that is reported below.
wait || true
failed=()
for name in "${targets[@]}"; do
  summary="$build/logs/$name.summary"
  if [[ ! -f "$summary" ]]; then
    echo "fuzz: $name left no summary"
    failed+=("$name")
    continue
  fi
  [[ $(head -1 "$summary") == ok ]] || failed+=("$name")
  tail -n +2 "$summary"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: ${#failed[@]} harness(es) failed: ${failed[*]}"
  exit 1
fi
echo "fuzz: ${#targets[@]} harnesses, ${seconds}s each, no crash"
