#!/usr/bin/env bash
# The end-to-end check of specctl against a real llama.cpp llama-server, for anyone who has one
# (CI cannot build llama.cpp). ../shared/peers/llamacpp/recipe.sh builds one (CPU) and two tiny
# random-weight GGUF models with one vocabulary.
#
#   bench/real/llamacpp.sh LLAMA_SERVER_BINARY [MODELS_DIR=/tmp/peer/models] [SPECCTL=build/bin/specctl]
#
# It checks what the real server taught us (docs/bench.md, ENGINES.md):
#   1. specctl bench --concurrency 1,2,4 --requests 40, three times: no request lost (the server
#      closes the connection after every stream).
#   2. a sweep baseline / draft 4 / draft 8 (single stream, concurrency 1,2,4): exit 0, every
#      request completed, single-stream decode tok/s within 10% of llama's own
#      timings.predicted_per_second, accept length equal to llama's "mean len" over the same
#      requests, no "Received second interrupt" in any server log (one TERM at teardown).
#   3. faults: a missing model fails at once naming "failed to open GGUF file"; kill -9 of the
#      server mid-benchmark is named ("the server died during ...", exit code 137) within 2 s;
#      Ctrl-C during the load exits 130 and leaves no llama-server.
# Ports 18300-18310 on 127.0.0.1. Prints "N passed, N failed" and exits 1 on any failure.
set -uo pipefail
server_bin=$(realpath "${1:?usage: llamacpp.sh LLAMA_SERVER_BINARY [MODELS_DIR] [SPECCTL]}")
models=$(realpath "${2:-/tmp/peer/models}")
specctl=$(realpath "${3:-build/bin/specctl}")
repo=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/specctl-llamacpp.XXXXXX)
export PATH="$(dirname "$server_bin"):$PATH"
passed=0
failed=0
check() { # NAME CONDITION-EXIT-CODE
  if [[ $2 -eq 0 ]]; then passed=$((passed + 1)); echo "ok: $1"; else failed=$((failed + 1)); echo "FAILED: $1"; fi
}
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; }
trap cleanup EXIT

echo "== 1. specctl bench against a running llama-server (draft-simple, 4 drafted tokens)"
"$server_bin" -m "$models/target.gguf" -md "$models/draft.gguf" --spec-type draft-simple --spec-draft-n-max 4 \
  --host 127.0.0.1 --port 18300 -t 2 >"$work/bench-server.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 240); do curl -fs http://127.0.0.1:18300/health >/dev/null 2>&1 && break; sleep 0.25; done
for i in 1 2 3; do
  "$specctl" bench --url http://127.0.0.1:18300 --concurrency 1,2,4 --requests 40 --max-tokens 64 --no-progress \
    --json "$work/bench$i.json" >"$work/bench$i.txt" 2>&1
  python3 - "$work/bench$i.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
lost = sum(l["requests"] - l["completed"] for l in d["levels"])
resent = sum(l.get("resent", 0) for l in d["levels"])
print(f"run: {sum(l['completed'] for l in d['levels'])}/{sum(l['requests'] for l in d['levels'])} completed, "
      f"{lost} lost, {resent} sent again on a fresh connection")
sys.exit(1 if lost else 0)
PY
  check "bench run $i lost no request" $?
done
kill -TERM "${pids[0]}"; wait "${pids[0]}" 2>/dev/null
! grep -q "Received second interrupt" "$work/bench-server.log"
check "the bench server stopped on one TERM" $?

echo "== 2. a sweep: baseline, draft 4, draft 8"
sed -e "s|@MODELS@|$models|g" "$repo/bench/real/llamacpp-sweep.yaml" >"$work/sweep.yaml"
"$specctl" run "$work/sweep.yaml" --out "$work/sweep" --quiet >"$work/sweep.txt" 2>&1
check "the sweep exits 0" $?
python3 "$repo/bench/real/llamacpp_check.py" "$work/sweep"
check "the sweep's figures agree with llama's own" $?
! grep -l "Received second interrupt" "$work"/sweep/variants/*/server.log
check "no server log of the sweep has a second interrupt" $?

echo "== 3. faults"
sed -e "s|@MODELS@|$models|g" -e "s|target.gguf|missing.gguf|" "$repo/bench/real/llamacpp-sweep.yaml" >"$work/missing.yaml"
start=$(date +%s.%N)
"$specctl" run "$work/missing.yaml" --only baseline --out "$work/missing" --quiet >"$work/missing.txt" 2>&1
rc=$?
took=$(echo "$(date +%s.%N) - $start" | bc)
echo "missing model: exit $rc after ${took}s"
[[ $rc -ne 0 ]] && grep -q "failed to open GGUF file" "$work/missing/variants/baseline/result.json"
check "a missing model fails naming failed to open GGUF file" $?

"$specctl" run "$work/sweep.yaml" --only draft4 --out "$work/killed" --quiet >"$work/killed.txt" 2>&1 &
run_pid=$!
pid=""
for _ in $(seq 1 1200); do
  if grep -q '"phase":"bench parallel"' "$work/killed/journal.jsonl" 2>/dev/null; then
    pid=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    e=json.loads(l)
    if e.get("event")=="launched": print(e["pid"])' "$work/killed/journal.jsonl" | tail -1)
    break
  fi
  sleep 0.1
done
sleep 1
killed_at=$(date +%s.%N)
# The launched pid is the shell that waits for the server and writes its exit code: kill the server.
[[ -n "$pid" ]] && pkill -KILL -P "$pid"
wait "$run_pid"
python3 - "$work/killed" "$killed_at" <<'PY'
import json, sys, datetime
r = json.load(open(sys.argv[1] + "/variants/draft4/result.json"))
reason = r.get("reason", "")
print("kill -9:", reason)
ok = "the server died during bench parallel" in reason and "exit code 137" in reason
sys.exit(0 if ok else 1)
PY
check "kill -9 mid-benchmark is named with exit code 137" $?
python3 - "$work/killed" "$killed_at" <<'PY'
import json, sys, datetime
killed = float(sys.argv[2])
# The benchmark ends and the teardown begins once the death is noticed.
for l in open(sys.argv[1] + "/journal.jsonl"):
    e = json.loads(l)
    if e.get("event") == "phase_started" and e.get("phase") == "teardown":
        t = datetime.datetime.fromisoformat(e["t"].replace("Z", "+00:00")).timestamp()
        print(f"noticed {t - killed:.2f} s after the kill")
        sys.exit(0 if t - killed < 2.0 else 1)
sys.exit(1)
PY
check "kill -9 noticed within 2 s" $?

"$specctl" run "$work/sweep.yaml" --only draft8 --out "$work/interrupted" --quiet >"$work/interrupted.txt" 2>&1 &
run_pid=$!
for _ in $(seq 1 1200); do
  grep -q '"phase":"load"' "$work/interrupted/journal.jsonl" 2>/dev/null && break
  sleep 0.02
done
kill -INT "$run_pid"
wait "$run_pid"
rc=$?
sleep 0.5
echo "Ctrl-C during load: exit $rc"
[[ $rc -eq 130 ]] && ! pgrep -f "port 18301" >/dev/null
check "Ctrl-C during the load exits 130 and leaves no server" $?

echo "results in $work"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
