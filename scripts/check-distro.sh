#!/usr/bin/env bash
# Builds specctl and runs README's test command in another Debian release, as a
# user of that release would: scripts/check-distro.sh [SUITE] [LOG] [COMMAND] (default
# trixie, Debian 13: g++ 14, Boost 1.83, fmt 10, yaml-cpp 0.8, libssh2 1.11, curl 8; the
# command, run in the checkout there, is scripts/test.sh unless given).
#
# A debootstrap minbase root of SUITE is made once in $SPECCTL_TEST_ROOTS/SUITE-build
# (default /var/cache/specctl-roots). This checkout's files (tracked and new, not
# ignored) are copied to /src/specctl in it, and scripts/test.sh runs there in a mount
# namespace of its own with /proc, /dev and /sys mounted and the test roots
# (scripts/test-roots.sh) bound in: setup.sh installs SUITE's packages by their names
# there, builds into build/ (kept for the next check), and runs every test. Nothing stays
# mounted afterwards.
# Needs root and Debian's archive; about 40 minutes on 2 cores, most of it the suite.
set -euo pipefail
cd "$(dirname "$0")/.."

suite="${1:-trixie}"
log="${2:-/dev/stdout}"
command="${3:-scripts/test.sh}"
roots="${SPECCTL_TEST_ROOTS:-/var/cache/specctl-roots}"
mirror="${SPECCTL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
root="$roots/$suite-build"
if [[ $(id -u) -ne 0 ]]; then
  echo "check-distro: needs root (debootstrap, chroot, mounts)" >&2
  exit 2
fi

scripts/setup.sh --tests >/dev/null
if [[ ! -x "$root/bin/sh" ]]; then
  echo "check-distro: making the $suite root in $root"
  rm -rf "$root.part"
  debootstrap --variant=minbase "$suite" "$root.part" "$mirror" >"$roots/$suite-build.log" 2>&1 ||
    { tail -n 5 "$roots/$suite-build.log" >&2; exit 1; }
  mv "$root.part" "$root"
fi
# A machine's own name service files, which debootstrap leaves out ("localhost" among them).
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
# The build folder stays from an earlier check (ccache makes the rebuild cheap); the rest is this checkout.
mkdir -p "$root/src/specctl" "$root/var/cache/specctl-roots"
find "$root/src/specctl" -mindepth 1 -maxdepth 1 ! -name build -exec rm -rf {} +
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$root/src/specctl"

# The command as a file in the root, so that no quoting of its own is needed.
printf '%s\n' "$command" >"$root/tmp/check-distro-command"
echo "check-distro: $command in $suite ($root)"
unshare --mount --propagation private -- /bin/sh -c '
  root=$1 roots=$2
  # The root a mount point of its own, as / is: the tests make mounts private under it.
  mount --bind "$root" "$root" &&
  mount -t proc proc "$root/proc" &&
  mount --rbind /dev "$root/dev" &&
  mount --rbind /sys "$root/sys" &&
  mount --bind "$roots" "$root/var/cache/specctl-roots" &&
  # pivot_root, not chroot alone: a chrooted process may not make a user namespace,
  # and the full-disk test makes one (unshare -rm).
  cd "$root" && mkdir -p .oldroot && pivot_root . .oldroot &&
  exec chroot . /bin/sh -c "umount -l /.oldroot && exec /usr/bin/env -i HOME=/root \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
    /bin/bash -c \"cd /src/specctl && head -n 1 /etc/os-release && bash /tmp/check-distro-command\""
' sh "$root" "$roots" >"$log" 2>&1
