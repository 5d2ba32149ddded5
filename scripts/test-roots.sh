#!/usr/bin/env bash
# Makes the systems the end-to-end tests reach over SSH as GPU nodes are
# (tests/run/test_run_old_nodes.cpp): Debian 11 "bullseye" (glibc 2.31) and a
# minimal Debian 12 "bookworm" without specctl's libraries. Each is a debootstrap
# minbase root with ps and ss (procps, iproute2), made once into
# $SPECCTL_TEST_ROOTS (default /var/cache/specctl-roots): about 30 s and 250 MiB
# each from Debian's archive, nothing when they are there. scripts/setup.sh --tests runs it.
set -euo pipefail

roots="${SPECCTL_TEST_ROOTS:-/var/cache/specctl-roots}"
mirror="${SPECCTL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
sudo=""
if [[ $(id -u) -ne 0 ]]; then
  sudo="sudo"
fi

for suite in bullseye bookworm; do
  if [[ -x "$roots/$suite/bin/sh" ]]; then
    continue
  fi
  echo "test-roots: making the $suite root in $roots/$suite"
  $sudo mkdir -p "$roots"
  $sudo rm -rf "$roots/$suite.part"
  # Made aside and renamed when whole: a root that exists is complete.
  if ! $sudo debootstrap --variant=minbase --include=procps,iproute2 "$suite" "$roots/$suite.part" "$mirror" \
    >"$roots/$suite.log" 2>&1; then
    echo "test-roots: debootstrap $suite failed; the end of $roots/$suite.log:" >&2
    tail -n 5 "$roots/$suite.log" >&2
    exit 1
  fi
  # A machine's own /etc/hosts, which debootstrap leaves out.
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' | $sudo tee "$roots/$suite.part/etc/hosts" >/dev/null
  $sudo mv "$roots/$suite.part" "$roots/$suite"
done
