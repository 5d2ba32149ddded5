#!/usr/bin/env bash
# Runs specctl as a user would and checks exit codes and exact output.
# Usage: cli_test.sh PATH_TO_SPECCTL   (from the source directory)
set -u
specctl="$1"
source "$(dirname "$0")/checks.sh"

expect version 0 "$specctl" --version
same version-text "$tmp/out" "specctl 0.1.0"

expect help 0 "$specctl" --help
contains help-validate "$tmp/out" "validate"
contains help-plan "$tmp/out" "plan"
contains help-exit-codes "$tmp/out" "2 bad input"

expect plan-help 0 "$specctl" plan --help
contains plan-help-json "$tmp/out" "--json"

expect no-command 2 "$specctl"
contains no-command-message "$tmp/err" "specctl: error:"

expect unknown-command 2 "$specctl" frobnicate
expect unknown-flag 2 "$specctl" validate --frob experiments/kimi-k25-eagle3.yaml
expect validate-no-file 2 "$specctl" validate

expect validate-ok 0 "$specctl" validate experiments/kimi-k25-eagle3.yaml experiments/eagle3-steps.yaml
same validate-ok-text "$tmp/out" "experiments/kimi-k25-eagle3.yaml: ok (2 variants, 2 benchmarks)
experiments/eagle3-steps.yaml: ok (11 variants, 2 benchmarks)"

# A bad file among good ones: the good are still reported ok, the exit code is 2.
expect validate-mixed 2 "$specctl" validate examples/quickstart.yaml tests/data/bad/unknown_knob.yaml
same validate-mixed-out "$tmp/out" "examples/quickstart.yaml: ok (4 variants, 2 benchmarks)"
same validate-mixed-err "$tmp/err" "$(cat tests/data/bad/unknown_knob.expected)"

expect validate-missing 2 "$specctl" validate no-such-file.yaml
same validate-missing-err "$tmp/err" "no-such-file.yaml: cannot read file: No such file or directory"

expect validate-devnull 2 "$specctl" validate /dev/null
same validate-devnull-err "$tmp/err" "/dev/null: cannot read file: it is a device, not a file"
: >"$tmp/empty.yaml"
expect validate-empty 2 "$specctl" validate "$tmp/empty.yaml"
same validate-empty-err "$tmp/err" "$tmp/empty.yaml: the file is empty"

# Random bytes must give an error, never a crash or a hang.
for i in 1 2 3 4 5; do
  head -c 4096 /dev/urandom >"$tmp/random$i.yaml"
  expect "validate-random-$i" 2 "$specctl" validate "$tmp/random$i.yaml"
done
printf 'a: &x [*x]\n' >"$tmp/alias.yaml"
expect validate-recursive-alias 2 "$specctl" validate "$tmp/alias.yaml"
python3 -c 'print("[" * 100000)' >"$tmp/deep.yaml" 2>/dev/null || printf '%*s' 100000 '' | tr ' ' '[' >"$tmp/deep.yaml"
expect validate-deep-nesting 2 "$specctl" validate "$tmp/deep.yaml"

expect plan-text 0 "$specctl" plan experiments/kimi-k25-eagle3.yaml
contains plan-command "$tmp/out" "NCCL_PROTO=LL python3 -m sglang.launch_server --model-path /models/Kimi-K2.5-INT4 --host 127.0.0.1 --port 30000 --tp-size 8"
contains plan-estimate "$tmp/out" "estimate: at most 17h 9m 12s for 2 variants"

expect plan-json 0 "$specctl" plan --json experiments/kimi-k25-eagle3.yaml
contains plan-json-argv "$tmp/out" '"argv": ['
if command -v python3 >/dev/null; then
  if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len(d["variants"]) == 2' "$tmp/out"; then
    passed=$((passed + 1))
  else
    echo "FAIL plan-json-parse"; failed=$((failed + 1))
  fi
fi

expect plan-bad 2 "$specctl" plan tests/data/bad/several_errors.yaml
same plan-bad-err "$tmp/err" "$(cat tests/data/bad/several_errors.expected)"
same plan-bad-no-stdout "$tmp/out" ""

# plan --probe: probe_test.sh, on ports of its own.

# specctl report / compare on the fixed result folder of tests/data/report (copied: report writes files).
cp -r tests/data/report/sweep "$tmp/sweep"
expect report-fixture 1 "$specctl" report "$tmp/sweep"
same report-stdout "$tmp/out" "$(cat tests/data/report/golden/sweep.md)"
contains report-wrote "$tmp/err" "wrote $tmp/sweep/junit.xml"
expect report-junit 1 "$specctl" report "$tmp/sweep" --format junit
same report-junit-text "$tmp/out" "$(cat tests/data/report/golden/sweep.junit.xml)"
expect report-bad-format 2 "$specctl" report "$tmp/sweep" --format pdf
expect report-bad-baseline 2 "$specctl" report "$tmp/sweep" --baseline eagle
same report-bad-baseline-text "$tmp/err" 'specctl: error: --baseline "eagle": not a variant of this run (did you mean "eagle3"?)'
expect report-missing-dir 2 "$specctl" report "$tmp/no-such-dir"
contains report-missing-dir-text "$tmp/err" "no-such-dir"
mkdir "$tmp/empty"
expect report-not-a-run 2 "$specctl" report "$tmp/empty"
same report-not-a-run-text "$tmp/err" "specctl: error: $tmp/empty/run.json: cannot read run.json (is \"$tmp/empty\" a specctl result folder?)"
expect compare-same 0 "$specctl" compare "$tmp/sweep" tests/data/report/sweep
contains compare-same-text "$tmp/out" "**no regression: 0 faster, 0 slower,"
expect compare-json 0 "$specctl" compare "$tmp/sweep" tests/data/report/sweep --format json
contains compare-json-text "$tmp/out" '"format": "specctl-comparison"'

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
