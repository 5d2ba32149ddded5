#!/usr/bin/env bash
# Checks that code outside util/ uses util's helpers instead of writing them
# again (issue #17, "one owner for each fact"). It reads the C++ files of src/,
# include/ and tests/, except src/util/ and include/specctl/util/, where the
# helpers themselves live, and reports each line that:
#
#   - calls ::close( (own descriptors with util::UniqueFd);
#   - calls posix_spawn_file_actions_init (use util::SpawnSetup);
#   - in src/ and include/ only, writes a bare std::chrono::<unit>{<digits>} or
#     std::chrono::<unit>(<digits>) that no name explains (use ::zero() or a
#     named constant). A literal is named on a line that declares a constant
#     (constexpr ..., const ... k_...), or on a declaration whose whole
#     initializer it is: `<type> <name> = std::chrono::seconds{15};` or
#     `<type> <name>{std::chrono::seconds{15}};` (default member initializers
#     of config structs, named locals), also when the literal is on the next
#     line after the "=". tests/ are not held to this rule: a test's deadlines
#     and sleeps read best where they are used.
#
# scripts/check-helpers.allow lists the files that may still break a rule, one
# "path:pattern" a line (pattern is "::close(", "posix_spawn_file_actions_init"
# or "std::chrono"); "#" starts a comment. The list only shrinks: an entry
# whose file no longer breaks its rule is reported too, so that it is removed.
#
# Exit 0 with a one-line summary when nothing is found; exit 1 with
# "file:line: message" for each violation. Runs from any working directory.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
allow_file="scripts/check-helpers.allow"

mapfile -t files < <(find src include tests -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cc' \) \
  -not -path 'src/util/*' -not -path 'include/specctl/util/*' | LC_ALL=C sort)

# One "path<TAB>line<TAB>pattern<TAB>message" per violation.
findings="$(awk '
  function named_constant(code) {
    return (" " code) ~ /[^A-Za-z0-9_]constexpr[^A-Za-z0-9_]/ ||
           (" " code) ~ /[^A-Za-z0-9_]const[[:space:]].*[^A-Za-z0-9_]k_[A-Za-z0-9_]*[[:space:]]*[={]/
  }
  BEGIN {
    literal = "std::chrono::[a-z_]+[[:space:]]*[({][[:space:]]*[0-9][0-9\047]*[[:space:]]*[)}]"
    decl_head = "^[[:space:]]*[A-Za-z_][A-Za-z0-9_:]*(<[^;=]*>)?[[:space:]]+[A-Za-z_][A-Za-z0-9_]*[[:space:]]*"
    decl = decl_head "(=[[:space:]]*" literal "|[{][[:space:]]*" literal "[[:space:]]*[}])[[:space:]]*;[[:space:]]*$"
    decl_open = decl_head "=[[:space:]]*$"
    continued = "^[[:space:]]*" literal "[[:space:]]*;[[:space:]]*$"
  }
  FNR == 1 { previous = "" }
  {
    code = $0
    # Comments may name what they forbid.
    if (code ~ /^[[:space:]]*(\/\/|\/\*|\*)/) {
      next
    }
    sub(/[[:space:]]\/\/.*$/, "", code)
    if ((" " code) ~ /[^A-Za-z0-9_>]::close\(/) {
      printf "%s\t%d\t::close(\tcloses a descriptor by hand: own it with util::UniqueFd (<specctl/util/unique_fd.hpp>)\n", FILENAME, FNR
    }
    if (index(code, "posix_spawn_file_actions_init") > 0) {
      printf "%s\t%d\tposix_spawn_file_actions_init\tsets up posix_spawn by hand: use util::SpawnSetup (<specctl/util/spawn.hpp>)\n", FILENAME, FNR
    }
    if (FILENAME !~ /^tests\// && code ~ literal && !named_constant(code) && code !~ decl &&
        !(code ~ continued && (named_constant(previous) || previous ~ decl_open) && previous ~ /=[[:space:]]*$/)) {
      printf "%s\t%d\tstd::chrono\tbare std::chrono literal: name it (constexpr ... k_name = ...) or use ::zero()\n", FILENAME, FNR
    }
    previous = code
  }
' "${files[@]}")"

declare -A allowed=()
declare -A allow_line=()
if [[ -f "$allow_file" ]]; then
  number=0
  while IFS= read -r entry || [[ -n "$entry" ]]; do
    number=$((number + 1))
    entry="${entry%%#*}"
    entry="${entry%"${entry##*[![:space:]]}"}"
    entry="${entry#"${entry%%[![:space:]]*}"}"
    if [[ -z "$entry" ]]; then
      continue
    fi
    allowed["$entry"]=0
    allow_line["$entry"]=$number
  done <"$allow_file"
fi

violations=()
allowed_count=0
if [[ -n "$findings" ]]; then
  while IFS=$'\t' read -r path line pattern message; do
    key="$path:$pattern"
    if [[ -n "${allowed[$key]+set}" ]]; then
      allowed["$key"]=$((allowed["$key"] + 1))
      allowed_count=$((allowed_count + 1))
    else
      violations+=("$path:$line: $message")
    fi
  done <<<"$findings"
fi

for key in "${!allowed[@]}"; do
  if [[ "${allowed[$key]}" -eq 0 ]]; then
    violations+=("$allow_file:${allow_line[$key]}: \"$key\" is allowed but no longer found: remove the line")
  fi
done

if [[ ${#violations[@]} -gt 0 ]]; then
  printf '%s\n' "${violations[@]}" | LC_ALL=C sort -t: -k1,1 -k2,2n >&2
  echo "check-helpers: ${#violations[@]} violation(s) in ${#files[@]} files" >&2
  exit 1
fi
echo "check-helpers: ${#files[@]} files clean (${allowed_count} known uses allowed by $allow_file)"
