#!/usr/bin/env bash
# A rate benchmark's SLO and its bisection (`slo:`, `bisect:`) against a real llama.cpp
# llama-server, for anyone who has one (../shared/peers/llamacpp/recipe.sh builds one, CPU,
# with tiny random-weight models).
#
#   bench/real/llamacpp-slo.sh LLAMA_SERVER_BINARY [MODELS_DIR=/tmp/peer/models] [SPECCTL=build/bin/specctl]
#
# 1. Calibration, on a server of its own (2 threads, 4 slots): specctl bench at concurrency 4
#    gives the server's full request rate C (req/s) and the E2E p99 of a full server (F ms).
# 2. A run of one variant with a rate benchmark at C/4 and 3C req/s, 8 s each, 32 tokens,
#    slo: {e2e_p99_ms: 2F}, bisect: 3. At C/4 the server is mostly idle (E2E about one
#    request's alone); at 3C requests queue for the whole level and E2E grows far past 2F.
# Checks: exit 0; the low rate met and the high one missed; slo_search.max_rate >= the low rate
# and below missed_at; every step agrees with its level's slo_met (one repeat each); the
# bisected levels are marked "search" and there are at most 3; goodput_rps <= request_s on
# every level, and vLLM's request_goodput of each level file is the same figure; report.md
# says "highest rate meeting the SLO". Prints each level's figures.
# Port 18330 on 127.0.0.1. Prints "N passed, N failed" and exits 1 on any failure.
set -uo pipefail
server_bin=$(realpath "${1:?usage: llamacpp-slo.sh LLAMA_SERVER_BINARY [MODELS_DIR] [SPECCTL]}")
models=$(realpath "${2:-/tmp/peer/models}")
specctl=$(realpath "${3:-build/bin/specctl}")
work=$(mktemp -d /tmp/specctl-llamacpp-slo.XXXXXX)
export PATH="$(dirname "$server_bin"):$PATH"
passed=0
failed=0
check() { # NAME CONDITION-EXIT-CODE
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); echo "ok: $1"; else failed=$((failed + 1)); echo "FAILED: $1"; fi
}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT

echo "== 1. calibration: the server's full request rate and its E2E when full"
"$server_bin" -m "$models/target.gguf" --host 127.0.0.1 --port 18330 -t 2 -np 4 >"$work/calibration-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do curl -fs http://127.0.0.1:18330/health >/dev/null 2>&1 && break; sleep 0.25; done
"$specctl" bench --url http://127.0.0.1:18330 --concurrency 4 --requests 16 --max-tokens 32 --no-progress \
  --json "$work/calibration.json" >"$work/calibration.txt" 2>&1
check "the calibration ran" $?
kill -TERM "${pids[0]}"
wait "${pids[0]}" 2>/dev/null
read -r low high bound < <(python3 - "$work/calibration.json" <<'PY'
import json, sys
level = json.load(open(sys.argv[1]))["levels"][0]
rate = level["request_s"]
full = level["e2e_ms"]["p99"]
def two(x):  # two significant digits: rates people would write
    return float(f"{x:.2g}")
print(two(rate / 4), two(3 * rate), round(2 * full))
print(f"full server: {rate:.2f} req/s, E2E p99 {full:.0f} ms", file=sys.stderr)
PY
)
echo "rates [$low, $high] req/s, slo e2e_p99_ms <= $bound"

echo "== 2. the SLO search in one server launch"
cat >"$work/slo.yaml" <<EOF
name: llamacpp-slo
description: "real llama-server (CPU): the highest request rate meeting an E2E SLO, by bisection"
server:
  template: llamacpp
  model: $models/target.gguf
  port: 18330
  knobs: {threads: 2, parallel: 4}
  health: {timeout: 2m, interval: 250ms, stall: 60s}
  cleanup: {policy: kill, grace: 5s, timeout: 20s}
variants:
  - name: baseline
benchmarks:
  - name: open
    kind: rate
    rates: [$low, $high]
    duration: 8s
    max_tokens: 32
    repeats: 1
    timeout: 10m
    slo: {e2e_p99_ms: $bound}
    bisect: 3
EOF
"$specctl" plan "$work/slo.yaml" >"$work/plan.txt" 2>&1
grep -q "then up to 3 rates bisected" "$work/plan.txt"
check "specctl plan names the SLO and the bisection" $?
"$specctl" run "$work/slo.yaml" --out "$work/run" --quiet >"$work/run.txt" 2>&1
check "the run exits 0" $?
python3 - "$work/run" "$low" "$high" <<'PY'
import json, sys, glob
out, low, high = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
r = json.load(open(out + "/variants/baseline/result.json"))
b = r["benchmarks"]["open"]
s = b["slo_search"]
levels, steps = b["levels"], s["steps"]
for l in levels:
    m = l["metrics"]
    print(f"  rate {l['rate']:>6g}{' (search)' if l.get('search') else '         '}: {m['request_s']:.2f} req/s done, "
          f"goodput {m['goodput_rps']:.2f} req/s, E2E p99 {m['e2e_p99_ms']:.0f} ms, TTFT p99 {m['ttft_p99_ms']:.0f} ms, "
          f"{'met' if m['slo_met'] else 'missed: ' + ', '.join(m['slo_missed'])}")
print(f"  max_rate {s['max_rate']}, missed_at {s['missed_at']}: {s['why']}")
problems = []
if not (steps[0]["rate"] == low and steps[0]["met"]):
    problems.append("the low rate did not meet the SLO")
if not (steps[1]["rate"] == high and not steps[1]["met"]):
    problems.append("the high rate did not miss the SLO")
if s["max_rate"] is None or s["max_rate"] < low:
    problems.append("max_rate is below the low rate")
if s["missed_at"] is None or s["max_rate"] is None or not s["max_rate"] < s["missed_at"] <= high:
    problems.append("missed_at is not between max_rate and the high rate")
if len(levels) != len(steps):
    problems.append(f"{len(levels)} levels for {len(steps)} steps")
for l, st in zip(levels, steps):
    if l["rate"] != st["rate"] or l["metrics"]["slo_met"] != st["met"] or bool(l.get("search")) != st["search"]:
        problems.append(f"step {st} disagrees with its level")
    if l["metrics"]["goodput_rps"] > l["metrics"]["request_s"] + 1e-9:
        problems.append(f"goodput above the request rate at {l['rate']}")
    if (l["metrics"]["slo_missed"] == []) != l["metrics"]["slo_met"]:
        problems.append(f"slo_missed and slo_met disagree at {l['rate']}")
    if st["met"] and st["rate"] > s["max_rate"] or not st["met"] and st["rate"] > s["max_rate"] and st["rate"] < s["missed_at"]:
        problems.append(f"step {st} is outside what slo_search concluded")
searched = sum(1 for l in levels if l.get("search"))
if not 1 <= searched <= 3:
    problems.append(f"{searched} bisected levels")
for l in levels:
    tag = f"r{l['rate']:g}"
    v = json.load(open(f"{out}/variants/baseline/vllm-open-{tag}.json"))
    if abs(v["request_goodput"] - l["metrics"]["goodput_rps"]) > 1e-9:
        problems.append(f"vLLM's request_goodput at {tag} is {v['request_goodput']}")
if "highest rate meeting the SLO" not in open(out + "/report.md").read():
    problems.append("report.md does not say the highest rate meeting the SLO")
for p in problems:
    print("  problem:", p)
sys.exit(1 if problems else 0)
PY
check "slo_search agrees with the levels' figures" $?
! pgrep -f "llama-server.*--port 18330" >/dev/null
check "no llama-server is left" $?

echo "results in $work"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
