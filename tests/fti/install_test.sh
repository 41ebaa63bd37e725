#!/bin/sh
# Installs the build tree into a scratch prefix and builds an unchanged FTI
# program (init_only.c) against the installed FTI layer twice: with the
# pkg-config file fti.pc and with find_package(crpm-fti); runs both on 2
# ranks (fresh start, then restart).  Usage: install_test.sh BUILD_DIR SRC_DIR WORK_DIR
set -eu
build=$1
src=$2
work=$3
rm -rf "$work"
mkdir -p "$work/cmake-src"
prefix=$work/prefix
run() { echo "+ $*"; "$@"; }

run cmake --install "$build" --prefix "$prefix" > "$work/install.log"
test -f "$prefix/include/crpm-fti/fti.h"
test ! -e "$prefix/include/fti.h"   # never where a real FTI puts its header
pcdir=$(dirname "$(find "$prefix" -name fti.pc)")
case $pcdir in */crpm-fti/pkgconfig) ;; *) echo "fti.pc in $pcdir"; exit 1 ;; esac

PKG_CONFIG_PATH=$pcdir
export PKG_CONFIG_PATH
flags=$(pkg-config --cflags --libs fti)
echo "pkg-config fti: $flags"
run mpicc -o "$work/app-pc" "$src/init_only.c" $flags

cp "$src/init_only.c" "$work/cmake-src/"
cat > "$work/cmake-src/CMakeLists.txt" <<'C'
cmake_minimum_required(VERSION 3.20)
project(fti_consumer C)
find_package(crpm-fti 1.6 REQUIRED)
add_executable(app init_only.c)
target_link_libraries(app PRIVATE crpm::fti)
C
run cmake -S "$work/cmake-src" -B "$work/b" -DCMAKE_PREFIX_PATH="$prefix" > "$work/consumer-cmake.log"
run cmake --build "$work/b" > "$work/consumer-build.log"

cat > "$work/app.fti" <<C
[basic]
head = 0
ckpt_dir = $work/Local
glbl_dir = $work/Global
meta_dir = $work/Meta
keep_last_ckpt = 1
verbosity = 2
C
mpiexec=${CRPM_MPIEXEC:-mpirun}
mpiflags=${CRPM_MPIEXEC_FLAGS---oversubscribe --allow-run-as-root}
env -u CRPM_CKPT_DIR "$mpiexec" -n 2 $mpiflags "$work/app-pc" "$work/app.fti" > "$work/run1.log" 2>&1
grep -q "fresh start" "$work/run1.log"
env -u CRPM_CKPT_DIR "$mpiexec" -n 2 $mpiflags "$work/b/app" "$work/app.fti" > "$work/run2.log" 2>&1
grep -q "a checkpoint is available" "$work/run2.log"
rm -rf "$work"
echo "1 passed, 0 failed"
