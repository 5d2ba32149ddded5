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
#   4. reliability: two runs at once on one machine stop neither's server; kill -9 of specctl
#      mid-benchmark, then --resume stops the server it left and completes, keeping what was
#      measured; on an SSH host (a real sshd on 127.0.0.1:18310) a 20 s stall of the SSH sessions
#      during a level leaves the figure of the client on the host as a calm run's (within 15%).
#   5. honest numbers: every request a prompt of its own (llama.cpp serves under 5% of prompt
#      tokens from its cache, and report.json has 3 repeats with intervals per level); the seed
#      prompts sent verbatim are flagged as served from the prefix cache.
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

echo "== 4. reliability: two runs at once, kill -9 then --resume, the client beside the server through an SSH stall"
journal_has() { # DIR EVENT-OR-PHASE-JSON-FRAGMENT
  grep -q "$2" "$1/journal.jsonl" 2>/dev/null
}
wait_for() { # SECONDS COMMAND...: polls every 0.1 s
  local until=$(($(date +%s) + $1)); shift
  while ! "$@"; do [[ $(date +%s) -lt $until ]] || return 1; sleep 0.1; done
}
for p in 18302 18303 18304; do
  sed -e "s|@MODELS@|$models|g" -e "s|port: 18301|port: $p|" "$repo/bench/real/llamacpp-sweep.yaml" >"$work/at-$p.yaml"
done
# Two servers of 2 spinning threads each on 2 cores slow each other 300-fold: one thread each.
for p in 18302 18303; do sed -i "s|threads: 2|threads: 1|" "$work/at-$p.yaml"; done
# 4a. A second run on the same machine (another port) starts while the first one's server loads.
"$specctl" run "$work/at-18302.yaml" --only baseline --out "$work/two-a" --quiet >"$work/two-a.txt" 2>&1 &
run_a=$!
wait_for 60 journal_has "$work/two-a" '"event":"launched"'
"$specctl" run "$work/at-18303.yaml" --only baseline --out "$work/two-b" --quiet >"$work/two-b.txt" 2>&1
rc_b=$?
wait "$run_a"
rc_a=$?
echo "two runs at once: exit $rc_a and $rc_b"
python3 - "$work/two-a" "$work/two-b" <<'PY'
import json, sys
bad = 0
for d in sys.argv[1:]:
    r = json.load(open(d + "/variants/baseline/result.json"))
    actions = r.get("cleanup", {}).get("actions", [])
    print(f"{d}: {r['status']}; cleanup: {actions}")
    bad += r["status"] != "ok" or any("stopped" in a or "kill" in a for a in actions)
sys.exit(1 if bad else 0)
PY
[[ $? -eq 0 && $rc_a -eq 0 && $rc_b -eq 0 ]]
check "two runs at once: both complete, neither stops the other's server" $?

# 4b. kill -9 of specctl during a benchmark: the server it leaves is stopped by --resume, whose
# run completes with what was measured before the kill kept.
"$specctl" run "$work/at-18304.yaml" --only draft8 --out "$work/resumed" --quiet >"$work/resumed.txt" 2>&1 &
run_pid=$!
wait_for 120 journal_has "$work/resumed" '"phase":"bench parallel"'
sleep 1
kill -KILL "$run_pid"
wait "$run_pid" 2>/dev/null
sleep 0.5
pgrep -f "llama-server.*--port 18304" >/dev/null
left=$?
"$specctl" run "$work/at-18304.yaml" --only draft8 --resume "$work/resumed" --quiet >"$work/resumed2.txt" 2>&1
rc=$?
sleep 0.5
echo "kill -9 mid-benchmark: the server was left running ($([[ $left -eq 0 ]] && echo yes || echo no)); --resume exit $rc"
python3 - "$work/resumed" <<'PY'
import json, sys
r = json.load(open(sys.argv[1] + "/variants/draft8/result.json"))
print(f"resumed: {r['status']}; benchmarks {sorted(r.get('benchmarks', {}))}; flags {r.get('flags', [])}")
ok = r["status"] == "ok" and {"single-stream", "parallel"} <= set(r.get("benchmarks", {}))
# The resumed run stops the server the killed one left before anything else.
left = [json.loads(l) for l in open(sys.argv[1] + "/journal.jsonl")]
first = next(e["tag"] for e in left if e.get("event") == "launched")
ok = ok and any(e.get("event") == "torn_down" and e.get("by") == "resume" and e["tag"] == first for e in left)
ok = ok and any("measured before the run was resumed" in f for f in r.get("flags", []))
sys.exit(0 if ok else 1)
PY
[[ $? -eq 0 && $rc -eq 0 && $left -eq 0 ]] && ! pgrep -f "llama-server.*--port 18304" >/dev/null
check "kill -9 then --resume: the left server stopped, single-stream kept, the run completes" $?

# 4c. The server on an SSH host (a real sshd on 127.0.0.1:18310); its sessions are stopped
# (SIGSTOP) for 20 s during draft4's concurrency-1 level. With the client on the host
# (`client: host`, the default) the level's figure must not see the stall.
ssh_dir="$work/sshd"
mkdir -p "$ssh_dir"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/host_key"
ssh-keygen -q -t ed25519 -N '' -f "$ssh_dir/user_key"
cp "$ssh_dir/user_key.pub" "$ssh_dir/authorized_keys"
echo "[127.0.0.1]:18310 $(cut -d' ' -f1,2 "$ssh_dir/host_key.pub")" >"$ssh_dir/known_hosts"
cat >"$ssh_dir/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port 18310
HostKey $ssh_dir/host_key
AuthorizedKeysFile $ssh_dir/authorized_keys
PidFile $ssh_dir/sshd.pid
StrictModes no
UsePAM no
PermitRootLogin yes
PasswordAuthentication no
AllowTcpForwarding yes
EOF
/usr/sbin/sshd -D -e -f "$ssh_dir/sshd_config" 2>"$ssh_dir/sshd.log" &
sshd_pid=$!
pids+=("$sshd_pid")
# Over SSH llama-server is not on PATH: a template of our own names the binary.
cat >"$work/llamacpp-peer.yaml" <<EOF
name: llamacpp-peer
extends: llamacpp
command: [$server_bin, -m, "{model}", --host, "{listen}", --port, "{port}"]
version_command: [$server_bin, --version]
EOF
{
  echo "hosts:"
  echo "  node: {ssh: \"$(id -un)@127.0.0.1:18310\", identity: \"$ssh_dir/user_key\", known_hosts: \"$ssh_dir/known_hosts\", state_dir: \"$work/node-state\"}"
  sed -e "s|@MODELS@|$models|g" -e "s|port: 18301|port: 18305|" -e "s|template: llamacpp|template: ./llamacpp-peer.yaml\n  host: node|" \
    "$repo/bench/real/llamacpp-sweep.yaml"
} >"$work/ssh.yaml"
sessions() { # the sshd processes serving connections: every sshd below the listener
  local todo=("$sshd_pid") out=() p c
  while [[ ${#todo[@]} -gt 0 ]]; do
    p=${todo[0]}; todo=("${todo[@]:1}")
    for c in $(pgrep -P "$p"); do todo+=("$c"); [[ $(cat /proc/$c/comm 2>/dev/null) == sshd ]] && out+=("$c"); done
  done
  echo "${out[@]}"
}
level_started() { grep -qs '"concurrency 1' "$work"/node-state/*/bench-*parallel*/progress.jsonl; }
"$specctl" run "$work/ssh.yaml" --only draft4 --out "$work/ssh" --quiet >"$work/ssh.txt" 2>&1 &
run_pid=$!
stalled=0
if wait_for 180 level_started; then
  stopped=$(sessions)
  kill -STOP $stopped
  echo "stopped sshd processes $stopped for 20 s"
  sleep 20
  kill -CONT $stopped
  stalled=1
fi
wait "$run_pid"
rc=$?
echo "ssh sweep: exit $rc"
python3 - "$work/ssh" "$work/sweep" <<'PY'
import json, sys
ssh = json.load(open(sys.argv[1] + "/variants/draft4/result.json"))
calm = json.load(open(sys.argv[2] + "/variants/draft4/result.json"))
def c1(r):
    return next(l for l in r["benchmarks"]["parallel"]["levels"] if l["concurrency"] == 1)
a, b = c1(ssh), c1(calm)
tok, ref = a["metrics"]["output_tok_s"], b["metrics"]["output_tok_s"]
p99, ref99 = a["metrics"]["ttft_p99_ms"], b["metrics"]["ttft_p99_ms"]
print(f"c1 through the stall: {tok:.1f} tok/s, TTFT p99 {p99:.1f} ms; local sweep: {ref:.1f} tok/s, p99 {ref99:.1f} ms; "
      f"client: {ssh['benchmarks']['parallel'].get('client')}")
ok = ssh["status"] == "ok" and abs(tok - ref) <= 0.15 * ref and p99 < max(2 * ref99, ref99 + 500)
sys.exit(0 if ok else 1)
PY
[[ $? -eq 0 && $rc -eq 0 && $stalled -eq 1 ]] && ! pgrep -f "llama-server.*--port 18305" >/dev/null
check "a 20 s SSH stall during a level leaves the host-side client's figure as measured calmly" $?
python3 "$repo/bench/real/llamacpp_check.py" "$work/ssh"
check "the SSH sweep's figures agree with llama's own" $?

echo "== 5. honest numbers: prompts of their own, and the prefix cache"
# One variant, single stream, the three seed prompts sent 6 times: verbatim (unique_prompts: false)
# llama.cpp serves most of each repeat's prompt from its cache, and the run says so.
for unique in false true; do
  sed -e "s|@MODELS@|$models|g" -e "s|port: 18301|port: 18306|" -e '/^  - name: draft/,$d' \
    "$repo/bench/real/llamacpp-sweep.yaml" >"$work/cache-$unique.yaml"
  cat >>"$work/cache-$unique.yaml" <<EOF
benchmarks:
  - {name: single-stream, kind: single_stream, runs: 6, max_tokens: 32, unique_prompts: $unique}
EOF
  "$specctl" run "$work/cache-$unique.yaml" --out "$work/cache-$unique" --quiet >"$work/cache-$unique.txt" 2>&1
done
python3 - "$work/cache-false" "$work/cache-true" <<'PY'
import json, sys
same, own = (json.load(open(d + "/variants/baseline/result.json")) for d in sys.argv[1:3])
def share(r):
    m = r["benchmarks"]["single-stream"]["metrics"]
    return m["cached_tokens"], m["prompt_tokens"], m["ttft_ms"]
for name, r in (("verbatim", same), ("unique", own)):
    c, p, t = share(r)
    print(f"{name}: {c} of {p} prompt tokens from the cache, TTFT {t:.1f} ms, flags {r['flags']}")
flagged = any("prefix cache" in f for f in same["flags"])
clean = not any("prefix cache" in f for f in own["flags"]) and share(own)[0] <= 0.05 * share(own)[1]
sys.exit(0 if flagged and clean else 1)
PY
check "repeated prompts are flagged as served from llama's prefix cache; prompts of their own are not" $?

echo "results in $work"
echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
