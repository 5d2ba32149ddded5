#!/usr/bin/env bash
# `specctl plan --probe` on this machine (specsim's fake nvidia-smi, no GPU held): it
# says what cleanup would do and changes nothing. The quickstart is probed on ports of
# this run's own, never on its 31000, which a user's sweep or anything else may hold.
# Usage: probe_test.sh PATH_TO_SPECCTL PATH_TO_SPECSIM PATH_TO_PORT_HOLDER [BUSY_PORT]
#   (from the source directory). With BUSY_PORT, that port is kept busy for the whole
#   run (held here, unless something else already listens there): 31000 shows that
#   nothing here depends on the quickstart's port being free.
set -u
specctl="$1"
specsim="$2"
holder_bin="$3"
busy_port="${4:-}"
source "$(dirname "$0")/checks.sh"

holders=()
trap 'for pid in "${holders[@]}"; do kill "$pid" 2>/dev/null; done; rm -rf "$tmp"' EXIT

# hold PORT NAME: listens on 127.0.0.1:PORT (0: any free port) in the background; sets
# holder (its pid) and held (the port) once it listens, bounded by 30 s. Fails when
# the port is taken already or the holder did not get there.
hold() {
  local file="$tmp/$2.port"
  "$holder_bin" hold "$1" "$file" 2>"$tmp/$2.err" &
  holder=$!
  holders+=("$holder")
  for _ in $(seq 300); do
    [[ -s "$file" ]] && break
    kill -0 "$holder" 2>/dev/null || break
    sleep 0.1
  done
  held=$(cat "$file" 2>/dev/null)
  [[ -n "$held" ]]
}

if [[ -n "$busy_port" ]]; then
  if hold "$busy_port" busy; then
    echo "holding 127.0.0.1:$busy_port for the whole run (pid $holder)"
  else
    # Taken already (that is the point), or the holder is broken: say which.
    echo "not holding port $busy_port: $(cat "$tmp/busy.err")"
    if ! grep -q "is taken" "$tmp/busy.err"; then
      echo "FAIL busy-port-held: the port holder did not listen on $busy_port"; failed=$((failed + 1))
    fi
  fi
fi

# The quickstart with every port replaced by PORT, written to FILE.
quickstart_on() {
  sed -E "s/^( *port: )[0-9]+ *$/\1$1/" examples/quickstart.yaml >"$2"
}

mkdir -p "$tmp/bin" "$tmp/gpus"
ln -s "$specsim" "$tmp/bin/nvidia-smi"
probe() {
  expect "$1" 0 env PATH="$tmp/bin:$PATH" SPECSIM_GPU_DIR="$tmp/gpus" HOME="$tmp" "$specctl" plan --probe "$2"
}

# On a free port: nothing to clean up.
free_port=$("$holder_bin" free)
quickstart_on "$free_port" "$tmp/free.yaml"
contains probe-port-rewritten "$tmp/free.yaml" "  port: $free_port"
probe plan-probe "$tmp/free.yaml"
contains plan-probe-clean "$tmp/out" "[baseline] local: nothing to clean up"

# A foreign listener on the experiment's port is reported, not touched.
if hold 0 foreign; then
  quickstart_on "$held" "$tmp/held.yaml"
  probe plan-probe-port "$tmp/held.yaml"
  contains plan-probe-port-holder "$tmp/out" "left alone: port $held is already in use by pid $holder"
  if kill -0 "$holder" 2>/dev/null; then
    passed=$((passed + 1))
  else
    echo "FAIL plan-probe-port-untouched: the listener on $held is gone"; failed=$((failed + 1))
  fi
else
  echo "FAIL plan-probe-port-listener: no listener within 30 s: $(cat "$tmp/foreign.err")"; failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
