#!/usr/bin/env bash
# Every source compiles on its own: a unity build (sources batched into one translation
# unit) and a precompiled header hide a missing #include that an earlier file of the
# batch, or the header, brought. Each source of BUILD_DIR's unity batches (the libraries'
# and the test suites') is compiled alone with -fsyntax-only, its batch's flags
# (compile_commands.json) and no precompiled header.
#   scripts/check-each-file.sh [BUILD_DIR [SOURCE...]]
# With SOURCEs (paths from the repository root, e.g. the output of `git diff --name-only`),
# only the batched sources among them are compiled: the quick check after a change.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
shift || true
only=("$@")
commands="$build_dir/compile_commands.json"
[[ -f "$commands" ]] || { echo "check-each-file: no $commands (configure $build_dir first)"; exit 1; }

jobs=$(mktemp)
trap 'rm -f "$jobs"' EXIT
# CMake writes one key per line: "directory", "command", "file", "output". The command
# is a shell command line once its JSON escapes are undone.
unescape() { sed 's/\\\\/\x01/g; s/\\"/"/g; s/\x01/\\/g'; }
dir="" cmd=""
while IFS= read -r line; do
  case "$line" in
    *'"directory": "'*) dir=$(sed 's/.*"directory": "\(.*\)",\{0,1\}$/\1/' <<<"$line" | unescape) ;;
    *'"command": "'*) cmd=$(sed 's/.*"command": "\(.*\)",\{0,1\}$/\1/' <<<"$line" | unescape) ;;
    *'"file": "'*)
      file=$(sed 's/.*"file": "\(.*\)",\{0,1\}$/\1/' <<<"$line" | unescape)
      [[ "$file" == */Unity/unity_*_cxx.cxx ]] || continue
      # Without the launcher, the output, the batch file and the precompiled header.
      flags=$(sed -E 's#^[^ ]*ccache +##; s# -o [^ ]+# #; s# -c [^ ]+# #; s# -include [^ ]*cmake_pch[^ ]*# #g; s# -Winvalid-pch# #' <<<"$cmd")
      while IFS= read -r source; do
        if [[ ${#only[@]} -gt 0 ]]; then
          wanted=0
          for o in "${only[@]}"; do [[ "$source" == */"$o" ]] && wanted=1; done
          [[ $wanted -eq 1 ]] || continue
        fi
        printf 'cd %q && %s -fsyntax-only %q\n' "$dir" "$flags" "$source"
      done < <(sed -n 's/^#include "\(.*\)"$/\1/p' "$file")
      ;;
  esac
done <"$commands" >"$jobs"

count=$(wc -l <"$jobs")
if [[ $count -eq 0 && ${#only[@]} -gt 0 ]]; then echo "check-each-file: no batched source among those named"; exit 0; fi
[[ $count -gt 0 ]] || { echo "check-each-file: $build_dir has no unity batches (configured with SPECCTL_UNITY=OFF?)"; exit 1; }
# Each job prints what failed; xargs exits non-zero when any did.
if ! xargs -P "$(nproc)" -d '\n' -n 1 bash -c <"$jobs"; then
  echo "check-each-file: a source above does not compile on its own"
  exit 1
fi
echo "check-each-file: $count sources compile on their own"
