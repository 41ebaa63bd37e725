#!/usr/bin/env bash
# Sets up, builds and runs the whole CTest suite, then the engine suite again
# in an AddressSanitizer/UBSan build.  Extra arguments go to the main ctest
# run (e.g. scripts/test.sh -L engine).  CRPM_SANITIZE_SUITE=0 skips the
# sanitizer pass.  Both builds are test builds: libcrpm gets the internal
# test and benchmark hooks (CRPM_TEST_HOOKS, off in a shipped library) that
# the kill tests and the benchmarks' baselines need.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CRPM_BUILD_DIR:-$here/build}
CRPM_CMAKE_ARGS="-DCRPM_TEST_HOOKS=ON ${CRPM_CMAKE_ARGS:-}" "$here/scripts/setup.sh"
status=0
(cd "$build" && ctest --output-on-failure -j "${CRPM_TEST_JOBS:-2}" "$@") || status=$?

if [ "${CRPM_SANITIZE_SUITE:-1}" = 1 ]; then
  san=${build}-sanitize
  echo "== engine suite under AddressSanitizer + UBSan ($san)"
  cmake -S "$here" -B "$san" -DCRPM_SANITIZE=ON -DCRPM_TEST_HOOKS=ON -DCRPM_BUILD_APPS=OFF -DCRPM_BUILD_BENCH=OFF -DCRPM_FORTRAN=OFF \
    "-DCRPM_TEST_SUITES=engine;track;mpi;l2;l3;integrity;device" -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build "$san" -j "$(nproc)" >/dev/null
  (cd "$san" && UBSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j "${CRPM_TEST_JOBS:-2}" \
     -L "engine|decide|l2sim|l3sim|integrity_san") || status=$?
fi
exit $status
