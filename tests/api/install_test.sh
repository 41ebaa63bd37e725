#!/bin/sh
# Installs the build tree into a scratch prefix and builds a small program
# against it twice, through find_package(crpm) and through pkg-config, then
# runs both with 2 ranks.  Usage: install_test.sh BUILD_DIR WORK_DIR
set -eu
build=$1
work=$2
rm -rf "$work"
mkdir -p "$work/src"
prefix=$work/prefix
run() { echo "+ $*"; "$@"; }

run cmake --install "$build" --prefix "$prefix" > "$work/install.log"
test -f "$prefix/include/crpm.h"

cat > "$work/src/consumer.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <crpm.h>
int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, v[3] = {1, 2, 3}, rc, st;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    rc = crpm_init(argv[1], MPI_COMM_WORLD);
    if (rc == 0) rc = crpm_protect(0, v, 3, CRPM_INT);
    if (rc == 0) rc = (st = crpm_status()) < 0 ? st : 0;
    if (rc == 0 && st == CRPM_STATUS_L1) {
        memset(v, 0, sizeof v);
        rc = crpm_recover();
        if (rc == 0 && (v[0] != 1 || v[2] != 3)) rc = -100;
    }
    if (rc == 0) rc = crpm_checkpoint(1, CRPM_L1);
    if (rc == 0) rc = crpm_finalize();
    if (rank == 0) printf("consumer: status %d rc %d %s\n", st, rc, rc ? crpm_strerror(rc) : "");
    MPI_Finalize();
    return rc != 0;
}
C
cat > "$work/src/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.20)
project(consumer C)
find_package(crpm 1.0 REQUIRED)
add_executable(consumer consumer.c)
target_link_libraries(consumer PRIVATE crpm::crpm)
C
cat > "$work/cfg.ini" <<C
[basic]
ckpt_dir = $work/ckpt
job_name = consumer
keep_last_ckpt = 1
verbosity = 1
C

run cmake -S "$work/src" -B "$work/b" -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer-cmake.log"
run cmake --build "$work/b" > "$work/consumer-build.log"

PKG_CONFIG_PATH=$(dirname "$(find "$prefix" -name crpm.pc)")
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs crpm)
echo "pkg-config: $flags"
libdir=$(dirname "$(find "$prefix" -name 'libcrpm.so' | head -n 1)")
run mpicc -o "$work/consumer-pc" "$work/src/consumer.c" $flags -Wl,-rpath,"$libdir"

mpiexec=${CRPM_MPIEXEC:-mpirun}
mpiflags=${CRPM_MPIEXEC_FLAGS---oversubscribe --allow-run-as-root}
# the first run starts fresh, the second restarts from its checkpoint
run "$mpiexec" -n 2 $mpiflags "$work/b/consumer" "$work/cfg.ini" | grep -q "consumer: status 0 rc 0"
run "$mpiexec" -n 2 $mpiflags "$work/consumer-pc" "$work/cfg.ini" \
    | grep -q "consumer: status 1 rc 0"
rm -rf "$work"
echo "1 passed, 0 failed"
