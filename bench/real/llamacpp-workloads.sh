#!/usr/bin/env bash
# Workloads against a real llama.cpp llama-server (../shared/peers/llamacpp/recipe.sh builds
# one, CPU, with two tiny random-weight models of one vocabulary): what #18 built, held
# against the real server instead of specsim.
#
#   bench/real/llamacpp-workloads.sh LLAMA_SERVER_BINARY [MODELS_DIR=/tmp/peer/models] [SPECCTL=build/bin/specctl]
#
# One sweep, baseline then draft4 (the baseline runs first; same model), three benchmarks:
#   - specdec: single stream over 2 categories of the built-in set: accept length per
#     category from llama's own per-response timings (kind "responses"), equal to what the
#     records' draft_n_accepted give; one window for the whole benchmark (no split).
#   - random: concurrency 2, 8 prompts of 90 ± 25% tokens, 3 repeats: every prompt within ±1
#     token of its target by llama's usage; the variant that runs second fits them from the
#     counts the first kept (calibration.counts 0); vllm-random-c2-rep1.json holds completed 8.
#   - groups: shared_prefix, 2 groups x 3, 3 repeats: each repeat draws its own groups, so
#     a group's first request finds nothing in llama's cache and its later ones the system
#     prompt (the warmup shares nothing with them either).
# Port 18320 on 127.0.0.1. Prints "N passed, N failed" and exits 1 on any failure.
set -uo pipefail
server_bin=$(realpath "${1:?usage: llamacpp-workloads.sh LLAMA_SERVER_BINARY [MODELS_DIR] [SPECCTL]}")
models=$(realpath "${2:-/tmp/peer/models}")
specctl=$(realpath "${3:-build/bin/specctl}")
work=$(mktemp -d /tmp/specctl-llamacpp-workloads.XXXXXX)
export PATH="$(dirname "$server_bin"):$PATH"

cat >"$work/sweep.yaml" <<EOF
name: llamacpp-workloads
server:
  template: llamacpp
  model: $models/target.gguf
  port: 18320
  knobs: {threads: 2}
  health: {timeout: 2m, interval: 250ms, stall: 60s}
  cleanup: {policy: kill, grace: 5s, timeout: 20s}
variants:
  - name: draft4
    knobs: {draft_model: "$models/draft.gguf", spec_type: draft-simple, spec_draft_max: 4}
  - name: baseline
benchmarks:
  - name: specdec
    kind: single_stream
    runs: 8
    max_tokens: 48
    prompts: {specdec: {categories: [code, summarisation], num_prompts: 8}}
  - name: random
    kind: concurrency
    levels: [2]
    requests: 8
    prompts: {random: {input_tokens: 90, output_tokens: 24, range_ratio: 0.25, num_prompts: 8, seed: 3}}
  - name: groups
    kind: concurrency
    levels: [1]
    requests: 6
    prompts: {shared_prefix: {groups: 2, per_group: 3, system_tokens: 200, question_tokens: 20, output_tokens: 16}}
report:
  baseline: baseline
EOF
"$specctl" run "$work/sweep.yaml" --out "$work/out" >"$work/run.txt" 2>&1
code=$?
echo "specctl run exited $code (output in $work/run.txt)"

python3 - "$work/out" "$code" <<'PY'
import json, sys
out, code = sys.argv[1], int(sys.argv[2])
passed = failed = 0
def check(name, ok):
    global passed, failed
    print(("ok: " if ok else "FAILED: ") + name)
    passed, failed = passed + bool(ok), failed + (not ok)

def lines(path):
    return [json.loads(l) for l in open(path) if l.strip()]

check("the sweep exits 0", code == 0)
draft = json.load(open(out + "/variants/draft4/result.json"))
base = json.load(open(out + "/variants/baseline/result.json"))
spec = draft["benchmarks"]["specdec"]
print("  per category:", {c: (f["completed"], f["accept_length"], round(f["tok_s"], 1))
                          for c, f in spec["by_category"].items()})
records = lines(out + "/variants/draft4/requests-specdec.jsonl")
agree = True
for category, figures in spec["by_category"].items():
    mine = [r for r in records if r["category"] == category and r["ok"]]
    accepted = sum(r["draft_accepted"] for r in mine)
    steps = sum(r["predicted_tokens"] for r in mine) - len(mine) - accepted
    expected = 1 + accepted / steps
    print(f"  {category}: {figures['accept_length']:.4f} vs records {expected:.4f}")
    agree = agree and abs(figures["accept_length"] - expected) < 1e-9 \
        and figures["accept_length_source"]["kind"] == "responses" and figures["completed"] == 4
check("accept length per category from llama's per-response timings, 4 requests each", agree)
check("one window for the benchmark (no split: llama reports per response)",
      len(spec["result"]["runs"]) == 8 and "accept_length" in spec["metrics"])

rand = lines(out + "/variants/draft4/requests-random.jsonl")
off = [(r["prompt_id"], r["input_tokens"], r["prompt_tokens"]) for r in rand
       if abs(r["prompt_tokens"] - r["input_tokens"]) > 1]
print("  random: targets", sorted(r["input_tokens"] for r in rand), "served",
      sorted(r["prompt_tokens"] for r in rand))
check("random prompts within 1 token of their targets by llama's usage", len(rand) == 24 and not off)
# The baseline runs first: draft4 fits its prompts from what the baseline's server counted.
first = base["benchmarks"]["random"]["workload"]["calibration"]
again = draft["benchmarks"]["random"]["workload"]["calibration"]
print("  calibration:", first, "then", again)
check("the second variant fits its prompts from the counts the first kept",
      first["counts"] > 0 and again["counts"] == 0 and again["cached"] > 0 and again["prompts"] == 8)
vllm = json.load(open(out + "/variants/draft4/vllm-random-c2-rep1.json"))
check("vLLM-shaped file per level", vllm["completed"] == 8 and len(vllm["input_lens"]) == 8)

groups = lines(out + "/variants/baseline/requests-groups.jsonl")
print("  groups:", [(r["phase"][-2:], r["prompt_id"], r["cached_tokens"]) for r in groups])
# Each repeat draws its own groups (seed + offset): a group's first request there finds
# nothing in llama's cache, and its later ones find the system prompt.
firsts, laters, seen = [], [], set()
for r in groups:
    group = (r["phase"], r["prompt_id"].rsplit(":", 1)[0])
    (laters if group in seen else firsts).append(r["cached_tokens"] or 0)
    seen.add(group)
check("a group's first request in each repeat finds no cached prefix, its later ones the system prompt",
      len(groups) == 18 and len(firsts) == 6 and max(firsts) < 20 and min(laters) > 180)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
