#!/usr/bin/env bash
# Measures the benchmark engine itself (see README.md in this folder):
#   1. accuracy against the scripted server with a known token schedule;
#   2. client cost against specsim's flood profile at 1, 100 and 1000 streams;
#   3. the same load with Python clients built like the seeds' scripts
#      (requests + threads, and aiohttp), and the ratio of client CPU per token.
# Usage: bench/client/run.sh [BUILD_DIR]   (default: build)
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build}
bin=$build/bin
for program in specsim specctl_client_speed specctl_client_accuracy; do
  if [[ ! -x $bin/$program ]]; then
    echo "run.sh: $bin/$program is missing: build first (cmake --build $build)" >&2
    exit 2
  fi
done

# The Python clients need requests and aiohttp; Debian packages them.
python=/usr/bin/python3
if ! $python -c 'import requests, aiohttp' 2>/dev/null; then
  echo "run.sh: installing python3-requests and python3-aiohttp" >&2
  apt-get install -y -q python3-requests python3-aiohttp >/dev/null
fi

# With two or more cores the server and the client each get their own.
server_cpu=() client_cpu=()
if command -v taskset >/dev/null && (( $(nproc) >= 2 )); then
  server_cpu=(taskset -c 0) client_cpu=(taskset -c 1)
fi

work=$(mktemp -d)
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then
    kill -KILL "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

port=$($python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port
"${server_cpu[@]}" "$bin/specsim" --model-path /models/flood --host 127.0.0.1 --port "$port" --sim-load-time 0.2 \
  --sim-profile flood --sim-gpu-dir "$work/gpus" >"$work/specsim.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 150); do
  if curl -fsS "$url/health" >/dev/null 2>&1; then
    break
  fi
  sleep 0.1
done
curl -fsS "$url/health" >/dev/null || { echo "run.sh: specsim did not start:" >&2; cat "$work/specsim.log" >&2; exit 1; }
model=$(curl -fsS "$url/v1/models" | $python -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')

echo "== accuracy: 250 streams, 500 requests of 64 tokens, 20 ms apart, against a known schedule"
# Not pinned: the scripted server is a thread of the same process and needs its own core.
"$bin/specctl_client_accuracy" 250 500 64 20

echo "== client cost against specsim --sim-profile flood (1 token per event)"
results=$work/results.jsonl
run() {
  "$@" | tee -a "$results"
}
run "${client_cpu[@]}" "$bin/specctl_client_speed" "$url" 1 20 20000
run "${client_cpu[@]}" "$bin/specctl_client_speed" "$url" 100 200 5000
run "${client_cpu[@]}" "$bin/specctl_client_speed" "$url" 1000 2000 1000
run "${client_cpu[@]}" $python "$root/bench/client/python_client.py" --url "$url" --model "$model" --client threads \
  --streams 1 --requests 5 --max-tokens 20000
run "${client_cpu[@]}" $python "$root/bench/client/python_client.py" --url "$url" --model "$model" --client threads \
  --streams 100 --requests 200 --max-tokens 1000
run "${client_cpu[@]}" $python "$root/bench/client/python_client.py" --url "$url" --model "$model" --client aiohttp \
  --streams 100 --requests 200 --max-tokens 1000
run "${client_cpu[@]}" $python "$root/bench/client/python_client.py" --url "$url" --model "$model" --client threads \
  --streams 1000 --requests 1000 --max-tokens 1000
run "${client_cpu[@]}" $python "$root/bench/client/python_client.py" --url "$url" --model "$model" --client aiohttp \
  --streams 1000 --requests 1000 --max-tokens 1000

echo "== client CPU per token (lower is better), ratio to specctl at the same stream count"
$python - "$results" <<'PY'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
ours = {r["streams"]: r for r in rows if r["client"] == "specctl"}
print(f'{"client":16} {"streams":>7} {"tokens":>9} {"tok/s":>10} {"us/token":>9} {"tok/cpu-s":>10} {"RSS MiB":>8} {"x specctl":>9}')
for r in rows:
    base = ours.get(r["streams"])
    ratio = r["cpu_us_per_token"] / base["cpu_us_per_token"] if base and base["cpu_us_per_token"] else float("nan")
    rss = f'{r["peak_rss_mib"]:.1f}' if "peak_rss_mib" in r else "-"
    print(f'{r["client"]:16} {r["streams"]:>7} {r["output_tokens"]:>9} {r["output_tok_s"]:>10.0f} '
          f'{r["cpu_us_per_token"]:>9.2f} {r["tokens_per_client_cpu_s"]:>10.0f} {rss:>8} {ratio:>9.1f}')
PY
