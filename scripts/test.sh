#!/usr/bin/env bash
# Sets up, builds and runs the whole CTest suite.  Extra arguments go to ctest
# (e.g. scripts/test.sh -L engine).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CRPM_BUILD_DIR:-$here/build}
"$here/scripts/setup.sh"
cd "$build"
ctest --output-on-failure -j "${CRPM_TEST_JOBS:-2}" "$@"
