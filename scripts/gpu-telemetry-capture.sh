#!/usr/bin/env bash
# Records what a real nvidia-smi answers to specctl's telemetry sampler, for
# tests/data/nvidia-smi/<driver>/: run it on a GPU machine (DEVELOPERS.md, "A lent GPU"),
# then copy OUT into tests/data/nvidia-smi/ and point the parser tests at it.
#   scripts/gpu-telemetry-capture.sh OUT [SECONDS]
# Every command is bounded (timeout); nothing here needs root or changes a GPU setting.
set -uo pipefail
out=${1:?usage: $0 OUT [SECONDS]}
seconds=${2:-5}
mkdir -p "$out"
fields=index,timestamp,power.draw,power.limit,utilization.gpu,memory.used,memory.total,temperature.gpu,clocks.sm,clocks.max.sm,total_energy_consumption,clocks_event_reasons.active

run() { # NAME COMMAND...: stdout, stderr and exit code of one command
  local name=$1
  shift
  timeout -s KILL 60 "$@" >"$out/$name.out" 2>"$out/$name.err"
  echo $? >"$out/$name.rc"
}

run version nvidia-smi --version
run list nvidia-smi -L
run table nvidia-smi
run query-power nvidia-smi -q -d POWER,CLOCK,PERFORMANCE,TEMPERATURE
# Which field names this driver takes, one by one (the sampler's probe).
for f in ${fields//,/ } clocks_throttle_reasons.active power.draw.instant power.draw.average enforced.power.limit; do
  run "field-$f" nvidia-smi --query-gpu="$f" --format=csv,noheader,nounits -i 0
done
run field-unknown nvidia-smi --query-gpu=index,no.such.field --format=csv,noheader,nounits
# The sampler exactly as specctl runs it, stopped with TERM as specctl stops it, and
# once more with INT (Ctrl-C); the exit codes are what the driver's tool does.
for sig in TERM INT; do
  timeout -s "$sig" "$seconds" nvidia-smi --query-gpu="$fields" --format=csv,noheader,nounits -lms 500 \
    >"$out/sampler-$sig.csv" 2>"$out/sampler-$sig.err"
  echo $? >"$out/sampler-$sig.rc"
done
# With header and units, as a person reads it.
timeout -s INT 2 nvidia-smi --query-gpu="$fields" --format=csv -lms 500 >"$out/sampler-header.csv" 2>&1
echo "recorded into $out:"
ls -l "$out"
