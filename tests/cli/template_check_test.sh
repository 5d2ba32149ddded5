#!/usr/bin/env bash
# `specctl template check` as a user runs it: exit codes 0 (ready), 1 (fatal, never ready), 2 (bad input).
# Usage: template_check_test.sh PATH_TO_SPECCTL   (from the source directory)
set -u
specctl="$1"
source "$(dirname "$0")/checks.sh"
corpus=tests/data/engine-logs

expect help 0 "$specctl" template check --help
contains help-exit "$tmp/out" "Exit 0 when the log reached ready"

expect ready 0 "$specctl" template check sglang "$corpus/sglang-0.5/healthy-eagle3.log"
contains ready-verdict "$tmp/out" "verdict:  ready"
contains ready-milestone "$tmp/out" "Capture draft cuda graph begin"
contains ready-metric "$tmp/out" "| accept_length    |       3 |   2.66 |   2.41 |   2.95 |"

# A template named by its file works the same.
expect ready-path 0 "$specctl" template check templates/vllm.yaml "$corpus/vllm-v1/healthy-coloured.log"

# The non-fatal traceback must not fail a load.
expect nonfatal-traceback 0 "$specctl" template check sglang "$corpus/sglang-0.5/nonfatal-traceback.log"

expect fatal 1 "$specctl" template check sglang "$corpus/sglang-0.5/oom-load.log"
contains fatal-verdict "$tmp/out" "verdict:  failed: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate"
contains fatal-first "$tmp/out" "(the first fatal line was line 7)"
contains fatal-pattern "$tmp/out" 'pattern "CUDA out of memory\. Tried to allocate"'

expect fatal-json 1 "$specctl" template check vllm "$corpus/vllm-v1/port-in-use.log" --json
contains fatal-json-verdict "$tmp/out" '"verdict": "failed"'
contains fatal-json-pattern "$tmp/out" '"pattern": "OSError: \\[Errno 98\\] Address already in use"'

# A log that never gets ready (here: the sglang template reading a vLLM log) is exit 1 too.
expect never-ready 1 "$specctl" template check sglang "$corpus/vllm-v1/healthy-eagle3.log"
contains never-ready-verdict "$tmp/out" "verdict:  no verdict: no ready or fatal line in"

expect missing-log 2 "$specctl" template check sglang "$tmp/no-such.log"
same missing-log-text "$tmp/err" "specctl: error: $tmp/no-such.log: cannot read file: No such file or directory"

expect unknown-template 2 "$specctl" template check sglnag "$corpus/sglang-0.5/oom-load.log"
contains unknown-template-text "$tmp/err" 'specctl: error: unknown template "sglnag" (did you mean "sglang"?)'
[[ $(wc -l <"$tmp/err") -eq 1 ]] && passed=$((passed + 1)) || { echo "FAIL unknown-template: more than one line"; failed=$((failed + 1)); }

printf 'name: broken\ncommand: [x]\nlog: {fatal: ["(unclosed"]}\n' >"$tmp/broken.yaml"
expect broken-template 2 "$specctl" template check "$tmp/broken.yaml" "$corpus/sglang-0.5/oom-load.log"
contains broken-template-text "$tmp/err" "specctl: error: template \"$tmp/broken.yaml\" has 1 error"

expect no-arguments 2 "$specctl" template check
expect no-subcommand 2 "$specctl" template

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
