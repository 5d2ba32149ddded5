#!/usr/bin/env bash
# Hostile input, each refused at once with a line naming the file (and, in YAML, the
# line and column), exit 2, in bounded memory: a device, a FIFO or a directory where a
# file should be, YAML whose aliases expand far past its text, a NUL byte in a value, a
# duration that would overflow a deadline, an empty or enormous prompt file; and a
# result folder whose result.json is a directory, a FIFO or /dev/zero.
# Usage: bounded_input_test.sh SPECCTL
set -uo pipefail
specctl="$1"
source "$(dirname "$0")/checks.sh"

# Every specctl here runs in bounded memory: an expansion that copies what it aliases
# would die of it instead of answering. At most 1 GiB of address space; under
# AddressSanitizer, whose shadow alone reserves terabytes of address space, at most
# 3 GiB resident instead (the sanitizer's own limit: it aborts past it). Its redzones
# and quarantine double what parsing 300,000 variants holds (1.5 GiB was exceeded).
if [[ -n "${SPECCTL_TEST_SANITIZED:-}" ]]; then
  limited=(env "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}hard_rss_limit_mb=3072")
  # Sanitized yaml-cpp allocations make parsing the 6 MB of 300,000 variants take 20 s
  # alone and past 30 s beside two other sanitized tests.
  check_timeout=120
else
  limited=(prlimit --as=1073741824)
fi

expect dev-zero 2 "${limited[@]}" "$specctl" validate /dev/zero
contains dev-zero-why "$tmp/err" "/dev/zero: cannot read file: it is a device, not a file"

mkfifo "$tmp/fifo.yaml"
expect fifo 2 "${limited[@]}" "$specctl" validate "$tmp/fifo.yaml"
contains fifo-why "$tmp/err" "fifo.yaml: cannot read file: it is a FIFO, not a file"

mkdir "$tmp/dir.yaml"
expect directory 2 "${limited[@]}" "$specctl" validate "$tmp/dir.yaml"
contains directory-why "$tmp/err" "dir.yaml: cannot read file: it is a directory"

truncate -s 20M "$tmp/huge.yaml"
expect huge 2 "${limited[@]}" "$specctl" validate "$tmp/huge.yaml"
contains huge-why "$tmp/err" "huge.yaml: cannot read file: it is 20.0 MiB, more than the 16.0 MiB a YAML file of specctl's may be"

# A valid experiment, then hostile variations of it.
base() {
  cat <<'YAML'
name: hostile
server: {template: specsim, model: /models/m, port: 31999}
variants:
  - name: baseline
benchmarks:
  - {name: single, kind: single_stream}
YAML
}
base >"$tmp/ok.yaml"
expect ok 0 "${limited[@]}" "$specctl" validate "$tmp/ok.yaml"

# One 1 MiB string, aliased 300 times: 1 MiB of text, 300 MiB once expanded.
{
  base
  printf 'description: &big "%s"\n' "$(head -c 1048576 /dev/zero | tr '\0' a)"
  printf 'x-aliases: [%s*big]\n' "$(printf '*big, %.0s' $(seq 299))"
} >"$tmp/aliased.yaml"
expect aliased-string 2 "${limited[@]}" "$specctl" validate "$tmp/aliased.yaml"
contains aliased-string-why "$tmp/err" "the document expands to more than 1000000 values or 64.0 MiB"

# The billion laughs: nine levels of ten aliases each.
{
  base
  echo 'x-a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]'
  prev=a
  for level in b c d e f g h i; do
    echo "x-$level: &$level [*$prev,*$prev,*$prev,*$prev,*$prev,*$prev,*$prev,*$prev,*$prev,*$prev]"
    prev=$level
  done
} >"$tmp/laughs.yaml"
expect billion-laughs 2 "${limited[@]}" "$specctl" validate "$tmp/laughs.yaml"
contains billion-laughs-why "$tmp/err" "laughs.yaml:"
contains billion-laughs-what "$tmp/err" "the document expands to more than"

# 300,000 variants (6 MB): refused before any is built (it took 870 MB and 12 s).
{
  base | sed '/^variants:/,/name: baseline/d'
  echo 'variants:'
  seq 1 300000 | sed 's/^/  - {name: v/; s/$/}/'
} >"$tmp/many.yaml"
expect many-variants 2 "${limited[@]}" "$specctl" validate "$tmp/many.yaml"
contains many-variants-why "$tmp/err" "300000 variants, more than the 10000 an experiment may list"

base | sed 's|name: baseline|name: "base\\0line"|' >"$tmp/nul.yaml"
expect nul 2 "${limited[@]}" "$specctl" validate "$tmp/nul.yaml"
contains nul-where "$tmp/err" "nul.yaml:4:11"
contains nul-why "$tmp/err" "a NUL byte (\\0) in a value"

base | sed 's|kind: single_stream|kind: single_stream, timeout: 3000000h|' >"$tmp/long.yaml"
expect long-duration 2 "${limited[@]}" "$specctl" validate "$tmp/long.yaml"
contains long-duration-why "$tmp/err" "duration \"3000000h\" is longer than 30 days, the longest specctl accepts"

: >"$tmp/empty.txt"
base | sed "s|kind: single_stream|kind: single_stream, prompts: {file: $tmp/empty.txt}|" >"$tmp/empty-prompts.yaml"
expect empty-prompts 2 "${limited[@]}" "$specctl" validate "$tmp/empty-prompts.yaml"
contains empty-prompts-why "$tmp/err" "empty.txt: the prompt file holds no prompt"

truncate -s 1G "$tmp/giant.txt"
base | sed "s|kind: single_stream|kind: single_stream, prompts: {file: $tmp/giant.txt}|" >"$tmp/giant-prompts.yaml"
expect giant-prompts 2 "${limited[@]}" "$specctl" validate "$tmp/giant-prompts.yaml"
contains giant-prompts-why "$tmp/err" "giant.txt: cannot read the prompt file: it is 1.0 GiB, more than the 256.0 MiB a prompt file may be"

mkfifo "$tmp/fifo.txt"
base | sed "s|kind: single_stream|kind: single_stream, prompts: {file: $tmp/fifo.txt}|" >"$tmp/fifo-prompts.yaml"
expect fifo-prompts 2 "${limited[@]}" "$specctl" validate "$tmp/fifo-prompts.yaml"
contains fifo-prompts-why "$tmp/err" "fifo.txt\": it is a FIFO, not a file"

# A result folder whose result.json is not a file: the report is made, naming the damage
# (a damaged variant is not an ok one: exit 1).
for kind in directory fifo dev-zero; do
  run="$tmp/run-$kind"
  cp -r tests/data/report/sweep "$run"
  result="$run/variants/eagle3/result.json"
  rm -f "$result"
  case $kind in
    directory) mkdir "$result" ;;
    fifo) mkfifo "$result" ;;
    dev-zero) ln -s /dev/zero "$result" ;;
  esac
  expect "report-$kind" 1 "${limited[@]}" "$specctl" report "$run" --format md
  contains "report-$kind-why" "$tmp/out" "variants/eagle3/result.json: damaged: it is a"
done

echo "$passed passed, $failed failed"
[[ $failed -eq 0 ]]
