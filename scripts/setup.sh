#!/usr/bin/env bash
# Idempotent setup: installs missing Debian packages (when root), then
# configures and builds libcrpm in $CRPM_BUILD_DIR (default: build/).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CRPM_BUILD_DIR:-$here/build}
pkgs=(libopenmpi-dev openmpi-bin libhdf5-openmpi-dev hdf5-tools libpmem-dev libpmemobj-dev libinih-dev libisal-dev zlib1g-dev
      gfortran cmake pkg-config make gcc g++ python3 python3-matplotlib procps
      python3-mpi4py python3-numpy python3-venv python3-setuptools
      clang-14 llvm-14-dev)  # clang-14, llvm-14-dev: the pass plugin (lib/instrument, CRPM_INSTRUMENT)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ]; then
    echo "setup: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null >/dev/null
  else
    echo "setup: missing packages: ${missing[*]} (run as root or install them)" >&2
    exit 1
  fi
fi

cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE="${CRPM_BUILD_TYPE:-RelWithDebInfo}" ${CRPM_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j "$(nproc)"
