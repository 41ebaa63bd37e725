#!/bin/bash
# FTI's own test suite on libcrpm: every suite at 4 ranks and at FTI's default
# of 16, then one table (cases, passed, failed, not applicable, per suite).
#
#   tests/fti-itf/run_suites.sh [--build DIR] [--fti-testing DIR] [--ranks "4 16"]
#                               [--sample] [--match RE] [--keep] [--results DIR] [--logs DIR] [suite...]
#
# --build: the build tree's tests/fti-itf (default build/tests/fti-itf);
# --fti-testing: FTI's testing tree (default ../shared/fti-testing beside the
# repository); --sample: a fixed sample of every suite (CI: 2 cases each);
# --logs: every program run's output kept there (run-<n>.out);
# --match: only cases whose "function params" match the bash regex RE;
# suite: names such as normal_run or recovervar (default: all).  The exit
# code is 0 when every failure is one known_failures.tsv lists (open work,
# with its reason) and no listed case passed.  Work directories go under
# /dev/shm.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=$repo/build/tests/fti-itf
fti_testing=$repo/../shared/fti-testing
ranks='4 16'
sample=0
match=''
keep=0
resdir=''
only=()
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=$2; shift 2 ;;
    --fti-testing) fti_testing=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --sample) sample=2; shift ;;
    --keep) keep=1; shift ;;
    --match) match=$2; shift 2 ;;
    --logs) mkdir -p "$2" && export FTI_ITF_LOGDIR=$(cd "$2" && pwd); shift 2 ;;
    --results) resdir=$2; shift 2 ;;
    -h | --help) sed -n '2,17p' "$0"; exit 0 ;;
    *) only+=("$1"); shift ;;
    esac
done
build=$(cd "$build" 2>/dev/null && pwd) || { echo "no build tree at $build (build tests/fti-itf first)" >&2; exit 2; }
fti_testing=$(cd "$fti_testing" 2>/dev/null && pwd) || { echo "FTI's testing tree not found" >&2; exit 77; }

# The suites FTI's own CMake declares (testing/suites/*/CMakeLists.txt), in its order.
all=(core/ckptDiffSizes/verify_log core/ckptDiffSizes/verify_log_disrupt core/multiLevelCkpt/normal_run
    core/multiLevelCkpt/ckpt_disrupt features/differentialCkpt/dCP features/recoverName/recovername
    features/recoverVar/recovervar features/staging/staging features/getConfig/getconfig
    features/syncIntv/sync_intv features/useCases/use_cases features/cornerCases/corner_cases
    features/keepL4Ckpt/keepl4 features/cppOperability/cppoperability
    features/variateProcessorRestart/vpr features/hdf5/hdf5 features/fortran/datatypes/datatypes)
files=()
for s in "${all[@]}"; do
    name=${s##*/}
    if [ ${#only[@]} -gt 0 ] && [[ ! " ${only[*]} " =~ " $name " ]]; then
        continue
    fi
    [ -f "$build/suites/$s.itf" ] || { echo "missing $build/suites/$s.itf (reconfigure the build)" >&2; exit 2; }
    files+=("$build/suites/$s.itf")
done
[ ${#files[@]} -gt 0 ] || { echo "no suite selected" >&2; exit 2; }

base=/dev/shm
[ -d "$base" ] && [ -w "$base" ] || base=${TMPDIR:-/tmp}
work=$(mktemp -d "$base/crpm-fti-itf-XXXXXX")
[ -n "$resdir" ] || resdir=$work/results
mkdir -p "$resdir"
cleanup() { [ "$keep" -eq 1 ] || rm -rf "$work"; }
trap cleanup EXIT

for n in $ranks; do
    res=$resdir/np$n.tsv
    : >"$res"
    mkdir -p "$work/np$n"
    echo "== $n ranks"
    (cd "$work/np$n" && bash "$here/itf_driver.sh" --fti-testing "$fti_testing" --nranks "$n" \
        --results "$res" --sample "$sample" --match "$match" "${files[@]}")
done

# The table: one row per suite, one column group per rank count.
echo
python3 "$here/table.py" "$resdir" "$here/known_failures.tsv" $ranks
