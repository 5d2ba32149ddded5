#!/usr/bin/env bash
# Runs a command (the test suite) with the user's home hidden behind a hostile one, and
# fails if anything read its shell start-up or left a file in it:
#
#   tests/hostile-home.sh ctest --test-dir build ...
#
# GPU nodes run `pyenv init` or `conda init` from root's ~/.bashrc, and a shell killed
# while pyenv holds its shim lock leaves the lock stale: every later shell then waits
# 60 s. The tests must not care: each test sshd gives its sessions a home of its own
# (tests/support/sshd.cpp, SetEnv HOME), and specctl, ssh and every helper write only
# to folders a test made. Here the home that sshd, ssh and getpwuid() see (the passwd
# entry's, bind-mounted over in a private mount namespace, so the real one is never
# touched) has a ~/.bashrc and ~/.profile that sleep 5 s, then wait up to 60 s for a
# lock like pyenv's, which is already taken and stale. Each shell that reads them
# also writes a line to a log outside the home; afterwards that log must not exist
# and the home must hold exactly what it held before.
#
# It needs root and unshare(1) (a mount namespace); without them it says so and runs
# the command as it is, with the real home.
set -euo pipefail

if [[ $# -eq 0 ]]; then
  echo "usage: tests/hostile-home.sh COMMAND [ARGS...]" >&2
  exit 2
fi

if [[ "${SPECCTL_HOSTILE_HOME_INSIDE:-}" == 1 ]]; then
  # Inside the namespace: hide the home, then run the command.
  mount --bind "$SPECCTL_HOSTILE_HOME_DIR/home" "$SPECCTL_HOSTILE_HOME_REAL"
  unset SPECCTL_HOSTILE_HOME_INSIDE SPECCTL_HOSTILE_HOME_DIR SPECCTL_HOSTILE_HOME_REAL
  exec "$@"
fi

real_home=$(getent passwd "$(id -u)" | cut -d: -f6)
if [[ $(id -u) -ne 0 ]] || ! command -v unshare >/dev/null || [[ -z "$real_home" || ! -d "$real_home" ]]; then
  echo "hostile-home: needs root, unshare(1) and a home folder; running with the real home"
  exec "$@"
fi

dir=$(mktemp -d /tmp/specctl-hostile-home.XXXXXX)
trap 'rm -rf "$dir"' EXIT
home="$dir/home"
mkdir -p "$home/.pyenv/shims"
# The stale lock: its shell is long dead.
: >"$home/.pyenv/shims/.pyenv-shim"
for rc in .bashrc .profile .bash_profile; do
  cat >"$home/$rc" <<EOF
echo "\$\$ $rc: \${BASH_EXECUTION_STRING:-interactive}" | head -c 300 >>'$dir/rc-read'
echo >>'$dir/rc-read'
sleep 5
# pyenv's rehash lock: noclobber create, retried for 60 s.
for _ in \$(seq 60); do
  ( set -o noclobber; : >"\$HOME/.pyenv/shims/.pyenv-shim" ) 2>/dev/null && break
  sleep 1
done
EOF
done
list_home() { (cd "$home" && find . -printf "%y %p\n" | sort && find . -type f -exec sha256sum {} + | sort); }
list_home >"$dir/before"

status=0
SPECCTL_HOSTILE_HOME_INSIDE=1 SPECCTL_HOSTILE_HOME_DIR="$dir" SPECCTL_HOSTILE_HOME_REAL="$real_home" \
  unshare --mount --propagation private "$0" "$@" || status=$?

echo "== hostile home: $real_home seen as one whose ~/.bashrc sleeps 5 s and waits on a stale lock"
if [[ -s "$dir/rc-read" ]]; then
  echo "hostile-home: a shell read the user's start-up files (a test's session is not hermetic):"
  sed 's/^/  /' "$dir/rc-read" | head -20
  status=1
fi
list_home >"$dir/after"
if ! cmp -s "$dir/before" "$dir/after"; then
  echo "hostile-home: the run changed the user's home (a test wrote outside its own folders):"
  diff "$dir/before" "$dir/after" | sed -n 's/^[<>] /  /p' | head -20
  status=1
fi
if [[ $status -eq 0 ]]; then
  echo "hostile-home: no shell read it, nothing was written to it"
fi
exit "$status"
