#!/usr/bin/env bash
# The main job: a 4-rank heat-diffusion run that checkpoints with libcrpm, is
# killed with SIGKILL in the middle, is relaunched, resumes from its last
# checkpoint and ends with the same checksum as a run that never failed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${CRPM_BUILD_DIR:-$here/build}
"$here/scripts/setup.sh" >/dev/null
heat=$build/apps/examples/heat/crpm_heat
inspect=$build/apps/tools/crpm-inspect
np=${CRPM_DEMO_NP:-4}
mpiflags=()
mpirun --version 2>/dev/null | grep -q "Open MPI" && mpiflags=(--oversubscribe --allow-run-as-root)
base=/dev/shm
[ -w "$base" ] || base=${TMPDIR:-/tmp}
work=$(mktemp -d "$base/crpm-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
cat > "$work/demo.ini" <<INI
[basic]
ckpt_dir = $work/ckpt
job_name = heat-demo
keep_last_ckpt = 0
verbosity = 1
INI
args=(--nx 1536 --ny 1536 --iters 4000 --print-every 500 --crpm "$work/demo.ini" --ckpt-every 25)
run() { mpirun "${mpiflags[@]}" -np "$np" "$heat" "$@"; }

echo "== 1. failure-free reference run ($np ranks)"
CRPM_CKPT_DIR=$work/ref run "${args[@]}" | tee "$work/ref.out"

echo
echo "== 2. the same job, killed with SIGKILL after 2 seconds"
set +e
setsid bash -c 'exec mpirun "$@"' mpirun "${mpiflags[@]}" -np "$np" "$heat" "${args[@]}" > "$work/killed.out" 2>&1 &
pid=$!
sleep 2
# Open MPI puts each rank in a process group of its own: kill the session
pkill -KILL -s "$pid" 2>/dev/null
{ wait "$pid"; } 2>/dev/null
while pgrep -s "$pid" >/dev/null 2>&1; do sleep 0.1; done
set -e
cat "$work/killed.out"
echo "(killed)"
echo
echo "== what survived: rank 0's container"
if [ -x "$inspect" ]; then "$inspect" "$work/ckpt/heat-demo/rank-0.crpm" || true; else ls -l "$work/ckpt/heat-demo"; fi

echo
echo "== 3. relaunch: the job resumes from its last checkpoint"
run "${args[@]}" | tee "$work/restart.out"

echo
ref=$(grep -i checksum "$work/ref.out" | tail -n 1)
got=$(grep -i checksum "$work/restart.out" | tail -n 1)
echo "failure-free: $ref"
echo "restarted:    $got"
if [ -n "$ref" ] && [ "$ref" = "$got" ]; then
  echo "demo: the restarted job finished with the same checksum, bit for bit."
else
  echo "demo: checksums differ" >&2
  exit 1
fi
