#!/usr/bin/env bash
# Installs what specctl needs from Debian 12's archive, and nothing when it is all there.
#   scripts/setup.sh           build tools and libraries
#   scripts/setup.sh --tests   also what the tests use (openssh-server for the SSH suites), and the
#                              Debian 11 and 12 roots the old-node tests reach (scripts/test-roots.sh)
set -euo pipefail

packages=(
  # build tools
  g++ cmake make ninja-build ccache pkg-config
  # libraries (the project's whole stack)
  libboost1.81-dev libyaml-cpp-dev libcurl4-openssl-dev libssh2-1-dev libfmt-dev
  doctest-dev nlohmann-json3-dev libcli11-dev
)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(openssh-server openssh-client procps curl strace slurmctld slurmd slurm-client munge chromium fonts-dejavu-core
    debootstrap patchelf)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  sudo=""
  if [[ $(id -u) -ne 0 ]]; then
    sudo="sudo"
  fi
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [[ "${1:-}" == "--tests" ]]; then
  "$(dirname "$0")/test-roots.sh"
fi
