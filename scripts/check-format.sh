#!/usr/bin/env bash
# Every C++ file of the tree is laid out as .clang-format says, by Debian 12's clang-format (14):
#   scripts/check-format.sh         fails, naming each file that differs (CI runs this)
#   scripts/check-format.sh --fix   formats them in place
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v clang-format >/dev/null; then
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends clang-format
fi

mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h')
if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${files[@]}"
  exit 0
fi
differ=$({ clang-format --dry-run -Werror "${files[@]}" 2>&1 || true; } | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: .*/\1/p' | sort -u)
if [[ -n "$differ" ]]; then
  echo "check-format: $(wc -l <<<"$differ") files differ from .clang-format (scripts/check-format.sh --fix formats them):"
  sed 's/^/  /' <<<"$differ"
  exit 1
fi
echo "check-format: ${#files[@]} files as .clang-format says"
