#!/usr/bin/env python3
"""Corrupted level-4 files are detected with a clear message.

A: one bit of rank 1's data in the newest file (l4-30) is flipped and rank
   1's container is gone: crpm-inspect fails naming the dataset, and the
   relaunch warns about l4-30, resumes from l4-20 and ends with the results
   of a run without checkpointing.
B: the newest file is truncated and a bit of the older one is flipped: the
   relaunch cannot restart and says why for both files; no RESULT printed."""
import os
import re

import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from l4common import check, flip_bit, h5_offset, main, mpirun, results, run, write_cfg

NP = 2
APP_ARGS = ["--n", "400", "--iters", "50"]


def crash_run(a, work, tag):
    ckpt, glbl = os.path.join(work, tag + "-ckpt"), os.path.join(work, tag + "-glbl")
    cfg = write_cfg(os.path.join(work, tag + ".ini"), ckpt, glbl, tag, keep_l4=2)
    args = [a.app] + APP_ARGS + ["--crpm", cfg, "--ckpt-every", "5", "--l4-every", "2"]
    mpirun(NP, args, env={"CRPM_TEST_KILL": "1:after_commit:7"}, expect="nonzero")
    l4dir = os.path.join(glbl, tag)
    check(sorted(os.listdir(l4dir)) == ["l4-20.h5", "l4-30.h5"], "level-4 files: %s" % os.listdir(l4dir))
    os.unlink(os.path.join(ckpt, tag, "rank-1.crpm"))
    return args, l4dir


def body(a, work):
    check(a.h5dump, "h5dump not found")
    ref = results(mpirun(NP, [a.app] + APP_ARGS).stdout)

    # A: flipped bit in the newest file -> fall back to the previous one.
    args, l4dir = crash_run(a, work, "ca")
    newest = os.path.join(l4dir, "l4-30.h5")
    off, size = h5_offset(a.h5dump, newest, "/rank_1/id_1")
    flip_bit(newest, off + size // 2)
    if a.inspect:
        p = run([a.inspect, newest], expect=1)
        check(re.search(r"rank_1/id_1: checksum mismatch", p.stderr) and "BAD" in p.stdout,
              "crpm-inspect should name the corrupt dataset:\n" + p.stdout + p.stderr)
    p = mpirun(NP, args)
    check(re.search(r"warning: skipping level-4 checkpoint: .*l4-30\.h5:/rank_1/id_1: checksum mismatch",
                    p.stderr), "no clear warning about l4-30.h5:\n" + p.stderr)
    check(re.search(r"^RESTART level 4 iter 20$", p.stdout, re.M), "should resume from l4-20:\n" + p.stdout)
    check(results(p.stdout) == ref, "results after falling back to l4-20 differ")

    # B: nothing valid left -> a clear error, no results.
    args, l4dir = crash_run(a, work, "cb")
    newest, older = os.path.join(l4dir, "l4-30.h5"), os.path.join(l4dir, "l4-20.h5")
    os.truncate(newest, os.path.getsize(newest) // 2)
    off, size = h5_offset(a.h5dump, older, "/rank_0/id_2")
    flip_bit(older, off + 3)
    if a.inspect:
        p = run([a.inspect, "-q", newest], expect=1)
        check("truncated" in p.stderr and "file damaged" in p.stderr, "crpm-inspect on a truncated file:\n" + p.stderr)
    p = mpirun(NP, args, expect="nonzero")
    check(not results(p.stdout), "a run without a valid checkpoint must not compute results")
    check(re.search(r"l4-30\.h5: cannot open as HDF5: file damaged \(HDF5: truncated file", p.stderr),
          "no clear message about the truncated l4-30.h5:\n" + p.stderr)
    check(re.search(r"l4-20\.h5:/rank_0/id_2: checksum mismatch", p.stderr),
          "no clear message about the corrupt l4-20.h5:\n" + p.stderr)
    check("crpm_init failed" in p.stderr, "the application should report the failed crpm_init:\n" + p.stderr)


if __name__ == "__main__":
    main(body)
