#!/usr/bin/env bash
# Installs what specctl needs from Debian's archive (12 or 13), and nothing when it is all there.
#   scripts/setup.sh           build tools and libraries
#   scripts/setup.sh --tests   also what the tests use (openssh-server for the SSH suites), and the
#                              Debian 11 and 12 roots the old-node tests reach (scripts/test-roots.sh)
set -euo pipefail

# Boost by the release's own name for a version of 1.81 or later (only specsim uses it);
# everything else has one name in Debian 12 and 13 (scripts/check-distro.sh builds in 13).
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
case "$codename" in
  bookworm) boost=libboost1.81-dev ;;
  trixie | noble) boost=libboost1.83-dev ;;
  *) boost=libboost-dev ;;
esac
packages=(
  # build tools
  g++ cmake make ninja-build ccache pkg-config
  # libraries (the project's whole stack)
  "$boost" libyaml-cpp-dev libcurl4-openssl-dev libssh2-1-dev libfmt-dev
  doctest-dev nlohmann-json3-dev libcli11-dev
)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(openssh-server openssh-client procps iproute2 curl strace slurmctld slurmd slurm-client munge chromium fonts-dejavu-core
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
