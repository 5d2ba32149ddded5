#!/usr/bin/env bash
# specctl tune against a real llama.cpp llama-server (../shared/peers/llamacpp/recipe.sh
# builds one, CPU, with two tiny random-weight models of one vocabulary): #19's loop held
# against a real server instead of specsim.
#
#   bench/real/llamacpp-tune.sh LLAMA_SERVER_BINARY [MODELS_DIR=/tmp/peer/models] [SPECCTL=build/bin/specctl]
#
# The space: draft-model speculation off or on (spec_type none | draft-simple), and its
# draft length 1..8 (start 4) where it is on; load c1 and c4, 2 repeats, 64 tokens.
# Checks: the tuning ends (exit 0 or 1: with 2 repeats of a CPU server the answer may be
# inconclusive) with tune.md, tune.json and tuned.yaml; no trial was launched twice; at
# most the budget of 6 trials; `specctl validate` accepts tuned.yaml; then kill -9 is not
# needed: a second `specctl tune --from` of the first's folder launches nothing.
# Port 18321 on 127.0.0.1. Prints "N passed, N failed" and exits 1 on any failure.
set -uo pipefail
server_bin=$(realpath "${1:?usage: llamacpp-tune.sh LLAMA_SERVER_BINARY [MODELS_DIR] [SPECCTL]}")
models=$(realpath "${2:-/tmp/peer/models}")
specctl=$(realpath "${3:-build/bin/specctl}")
work=$(mktemp -d /tmp/specctl-llamacpp-tune.XXXXXX)
export PATH="$(dirname "$server_bin"):$PATH"

cat >"$work/tune.yaml" <<EOF
name: llamacpp-tune
description: "real llama-server (CPU): draft-model speculation on or off, and its draft length"
server:
  template: llamacpp
  model: $models/target.gguf
  port: 18321
  knobs: {threads: 2, parallel: 4}
  health: {timeout: 2m, interval: 250ms, stall: 60s}
  cleanup: {policy: kill, grace: 5s, timeout: 20s}
tune:
  space:
    spec_type: [none, draft-simple]
    draft_model: {values: ["$models/draft.gguf"], where: {spec_type: draft-simple}}
    spec_draft_max: {range: [1, 8], start: 4, where: {spec_type: draft-simple}}
  speculation: spec_type
  load: {concurrency: [1, 4], requests: 8, repeats: 2, max_tokens: 64}
  budget: {loads: 6}
EOF
passed=0
failed=0
check() {
  if eval "$2"; then passed=$((passed + 1)); echo "ok: $1"; else failed=$((failed + 1)); echo "FAILED: $1"; fi
}
"$specctl" tune "$work/tune.yaml" --out "$work/first" >"$work/first.txt" 2>&1
code=$?
echo "specctl tune exited $code (output in $work/first.txt)"
check "the tuning ends with an answer or an inconclusive one (exit 0 or 1)" "[ $code -le 1 ]"
for f in tune.md tune.json tuned.yaml; do
  check "$f written" "[ -s '$work/first/$f' ]"
done
launched=$(grep -c '"event":"launched"' "$work/first/journal.jsonl")
distinct=$(grep '"event":"launched"' "$work/first/journal.jsonl" | grep -o '"variant":"[^"]*"' | sort -u | wc -l)
check "each trial launched once ($launched launches, $distinct trials)" "[ $launched -eq $distinct ]"
check "at most the budget of 6 trials" "[ $launched -le 6 ]"
check "tuned.yaml is an experiment specctl accepts" "'$specctl' validate '$work/first/tuned.yaml' >/dev/null"
"$specctl" tune "$work/tune.yaml" --out "$work/second" --from "$work/first" >"$work/second.txt" 2>&1
check "--from the first tuning launches nothing" "! grep -q '\"event\":\"launched\"' '$work/second/journal.jsonl'"
check "--from says what it reused" "grep -q '0 trials launched, $distinct reused' '$work/second.txt'"
grep -A12 '^# Tuning' "$work/first.txt"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
