#!/bin/bash
# GPU suite of libcrpm (docs/gpu.md): needs the repository, a CUDA toolkit
# (nvcc), MPI and the build dependencies of scripts/setup.sh, and an NVIDIA
# GPU; never part of CI.  Ends within 8 minutes:
#
#   1. builds in build-gpu/ with CRPM_CUDA=ON, the test hooks and the GPU
#      tests (for this GPU's architecture only);
#   2. test_gpu: every device mode on device and managed memory, odd sizes
#      and addresses, recovery, a corrupt container (tests/gpu/test_gpu.c);
#   3. the GPU heat example (apps/examples/heat_gpu) killed and restarted
#      (tests/tools/crash_restart.py: a rank killed inside a checkpoint, or
#      the whole job at a random time), bitwise equal to a failure-free run:
#      diff at level 1, fingerprint at level 2, full copy, managed memory;
#   4. bench_gpu: 1, 8 and 32 GiB device arrays (sizes that do not fit, or
#      would not end in the time left, are skipped and said so), 0.1 / 1 /
#      10 / 100 % of blocks changed at random and contiguous, the three modes
#      against the floors; prints the table, writes gpu.json.
#
# usage: tests/gpu/run.sh [BUILD_DIR]      (default: <repo>/build-gpu)
# Environment: CRPM_GPU_LIMIT_S (default 470: seconds for the whole script),
# CRPM_GPU_SHM (default /dev/shm: where the containers go).
# Exit: 0 all passed, 1 something failed, 77 no GPU or no CUDA toolkit here
# (nothing run).  Results and logs: BUILD_DIR/gpu-results/.
set -u
start=$(date +%s)
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
limit=${CRPM_GPU_LIMIT_S:-470}
shm=${CRPM_GPU_SHM:-/dev/shm}
out=$build/gpu-results
elapsed() { echo $(($(date +%s) - start)); }
left() { echo $((limit - $(elapsed))); }
say() { printf '[gpu %3ds] %s\n' "$(elapsed)" "$*"; }

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "tests/gpu/run.sh: SKIPPED: no NVIDIA GPU here (nvidia-smi lists none); nothing run"
    exit 77
fi
nvcc=$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null || true)
if [ -z "$nvcc" ]; then
    echo "tests/gpu/run.sh: SKIPPED: no CUDA toolkit (nvcc not on PATH nor in /usr/local/cuda/bin)"
    exit 77
fi
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
arch=${cap:+-DCMAKE_CUDA_ARCHITECTURES=$cap}
mkdir -p "$out"
say "GPU: $(nvidia-smi -L | head -1); nvcc: $nvcc; build: $build"

failed=0
step() { # step NAME TIMEOUT CMD...: runs CMD with its output in $out/NAME.log
    local name=$1 t=$2
    shift 2
    if [ "$(left)" -lt 20 ]; then
        say "$name: SKIPPED: out of time"
        failed=1
        return 1
    fi
    [ "$t" -gt "$(left)" ] && t=$(left)
    say "$name ..."
    timeout -k 10 "$t" "$@" >"$out/$name.log" 2>&1
    local rc=$?
    if [ $rc -eq 0 ]; then
        say "$name: ok"
    else
        say "$name: FAILED (exit $rc; log $out/$name.log)"
        tail -n 25 "$out/$name.log" | sed 's/^/    | /'
        failed=1
    fi
    return $rc
}

jobs=$(nproc 2>/dev/null || echo 4)
step configure 120 cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCRPM_CUDA=ON \
    -DCMAKE_CUDA_COMPILER="$nvcc" $arch -DCRPM_TEST_HOOKS=ON -DCRPM_GPU_TESTS=ON -DCRPM_FORTRAN=OFF || exit 1
step build 240 cmake --build "$build" -j "$jobs" --target test_gpu bench_gpu crpm_heat_gpu || exit 1

step test_gpu 120 "$build/tests/gpu/test_gpu" "$shm" 8

heat=$build/apps/examples/heat_gpu/crpm_heat_gpu
py=$(command -v /usr/bin/python3 || command -v python3)
export CRPM_MPIEXEC_FLAGS="${CRPM_MPIEXEC_FLAGS:---oversubscribe --allow-run-as-root}"
cfg=$out/heat.ini
cat >"$cfg" <<EOF
[basic]
ckpt_dir = $shm/crpm-gpu-$$/node%n
job_name = heat_gpu
node_size = 1
keep_last_ckpt = 0
verbosity = 1
EOF
heat_case() { # NAME LEVEL HEAT-ARGS...
    local name=$1 level=$2
    shift 2
    step "heat_$name" 100 "$py" "$root/tests/tools/crash_restart.py" --np 2 --trials 2 --seed 7 --max-kills 1 \
        --kill-after 20%:80% --hook-kill after_data,after_commit:2-12 --result '^checksum ' \
        --timeout 60 --workdir "$out/work-$name" -- \
        "$heat" --nx 2048 --ny 1024 --iters 600 --crpm "$cfg" --ckpt-every 25 --level "$level" "$@"
}
heat_case diff 1 --mode diff
heat_case fingerprint 2 --mode fingerprint
heat_case full 1 --mode full
heat_case managed 1 --managed

budget=$(($(left) - 15))
if [ "$budget" -gt 30 ]; then
    step bench "$((budget + 10))" "$build/bench/gpu/bench_gpu" "$shm" "$out/gpu.json" --budget-s "$budget" --reps 3 \
        --reps-big 1
    sed -n '/^bench_gpu:/,$p' "$out/bench.log"
else
    say "bench: SKIPPED: out of time"
    failed=1
fi

say "done: $([ $failed -eq 0 ] && echo 'all passed' || echo 'FAILURES above'); results and logs in $out"
exit $failed
