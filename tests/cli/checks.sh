# The checks the cli suites share, sourced by each: counters, a scratch folder, and
# expect (exit code), same (exact content) and contains (a substring). Each suite ends
# with: echo "$passed passed, $failed failed"; [[ $failed -eq 0 ]]
passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# expect NAME CODE COMMAND...: runs COMMAND (bounded by timeout, 30 s unless the suite
# sets check_timeout), stores stdout/stderr, checks the exit code.
expect() {
  local name="$1" code="$2"
  shift 2
  timeout "${check_timeout:-30}" "$@" >"$tmp/out" 2>"$tmp/err"
  local got=$?
  if [[ $got -ne $code ]]; then
    echo "FAIL $name: exit $got, expected $code"; sed 's/^/  stdout: /' "$tmp/out" | tail -5; sed 's/^/  stderr: /' "$tmp/err" | head -5
    failed=$((failed + 1))
    return 1
  fi
  passed=$((passed + 1))
}

# same NAME FILE EXPECTED: exact content check.
same() {
  if [[ "$(cat "$2")" == "$3" ]]; then
    passed=$((passed + 1))
  else
    echo "FAIL $1:"; diff <(echo "$3") "$2" | head -10
    failed=$((failed + 1))
  fi
}

# contains NAME FILE TEXT
contains() {
  if grep -qF -- "$3" "$2"; then
    passed=$((passed + 1))
  else
    echo "FAIL $1: no \"$3\" in:"; cat "$2"
    failed=$((failed + 1))
  fi
}
