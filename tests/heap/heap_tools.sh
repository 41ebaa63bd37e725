#!/bin/sh
# crpm-inspect and crpm-export on checkpoints holding a persistent heap:
# inspect reports its size, address, used bytes and roots with the
# allocator's invariants checked; export writes it as the byte dataset
# /rank_<r>/id_-2147483648 whose crc32 the level-4 verifier accepts.
#   heap_tools.sh WORKDIR MPIEXEC-AND-FLAGS WORDCOUNT INSPECT [EXPORT]
set -eu
work=$1 mpiexec=$2 wc=$3 inspect=$4 export=${5:-}
rm -rf "$work" && mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
printf '[basic]\nckpt_dir = %s/ckpt\njob_name = tools\nheap_size = 256M\nkeep_last_ckpt = 1\nverbosity = 0\n' \
    "$work" > "$work/tools.ini"
$mpiexec -n 2 "$wc" --iters 20 --batch 1000 --print-every 20 --crpm "$work/tools.ini" --ckpt-every 10 > "$work/run.out"
out=$("$inspect" "$work/ckpt/tools")
echo "$out" | grep -E '^heap' || { echo "no heap report"; exit 1; }
[ "$(echo "$out" | grep -c '^heap used: .* blocks; allocator state consistent$')" = 2 ] || { echo "used bytes"; exit 1; }
[ "$(echo "$out" | grep -c '^heap roots:     0 = 0x')" = 2 ] || { echo "root 0 not reported"; exit 1; }
[ "$(echo "$out" | grep -c 'persistent heap at 0x[0-9a-f]* (array -2147483648)')" = 2 ] || { echo "size/address"; exit 1; }
if [ -n "$export" ]; then
    "$export" -o "$work/heap.h5" "$work/ckpt/tools" | tee "$work/export.out"
    grep -q '^rank 1: persistent heap, [0-9]* bytes, as the byte dataset /rank_1/id_-2147483648$' "$work/export.out" \
        || { echo "export did not name the heap"; exit 1; }
    "$inspect" "$work/heap.h5" > /dev/null || { echo "exported file rejected"; exit 1; }
    if command -v h5ls > /dev/null; then
        bytes=$(echo "$out" | sed -n 's/^heap: *\([0-9]*\) bytes saved.*/\1/p' | head -1)
        h5ls -r "$work/heap.h5" | grep -q "^/rank_0/id_-2147483648 *Dataset {$bytes}" \
            || { echo "no byte dataset of $bytes bytes"; h5ls -r "$work/heap.h5"; exit 1; }
    fi
fi
echo "heap tools: ok"
