#!/usr/bin/env python3
"""crpm-export: the exported values are the committed checkpoint (not the
application's later state); inconsistent container sets are refused (other
epochs unless --force, other jobs, a repeated rank); a partial export is
flagged by crpm-inspect; usage errors exit 2."""
import math
import os
import re
import shutil

import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from l4common import check, h5_values, main, mpirun, run, write_cfg

NP, N = 2, 300


def body(a, work):
    check(a.export and a.inspect and a.h5dump, "--export, --inspect and h5dump are required")
    ckpt, glbl = os.path.join(work, "ckpt"), os.path.join(work, "glbl")
    cfg = write_cfg(os.path.join(work, "c.ini"), ckpt, glbl, "ex")
    base = [a.app, "--n", str(N), "--crpm", cfg, "--ckpt-every", "10"]
    # 25 iterations: the last checkpoint is id 20, the arrays moved on after it.
    p = mpirun(NP, base + ["--iters", "25"])
    sums = {int(m.group(1)): float(m.group(2))
            for m in re.finditer(r"^CKPT id 20 level 1 rank (\d+) n \d+ sum (\S+)$", p.stdout, re.M)}
    check(len(sums) == NP, "CKPT lines of checkpoint 20:\n" + p.stdout)
    jobdir = os.path.join(ckpt, "ex")
    saved = os.path.join(work, "rank-1-epoch2.crpm")
    shutil.copy(os.path.join(jobdir, "rank-1.crpm"), saved)

    out = os.path.join(work, "ex.h5")
    e = run([a.export, "-o", out, os.path.join(jobdir, "rank-1.crpm"), os.path.join(jobdir, "rank-0.crpm")])
    check("exported 2 of 2 rank(s) of job 'ex' (checkpoint id 20, epoch 2" in e.stdout, e.stdout)
    run([a.inspect, "-q", out])
    for r in range(NP):
        u = h5_values(a.h5dump, out, "/rank_%d/id_1" % r)
        check(len(u) == N + 3 * r and abs(math.fsum(u) - sums[r]) <= 1e-12 * max(1, abs(sums[r])),
              "rank %d: exported field is not the one of checkpoint 20" % r)
        check(h5_values(a.h5dump, out, "/rank_%d/id_0" % r) == [20], "exported iteration counter")
    check(not os.path.exists(out + ".tmp"), "temporary file left")

    # Continue to checkpoint 30 (epoch 3), then mix in the saved epoch-2 rank 1.
    mpirun(NP, base + ["--iters", "30"])
    shutil.copy(saved, os.path.join(jobdir, "rank-1.crpm"))
    mixed = os.path.join(work, "mixed.h5")
    p = run([a.export, "-o", mixed, jobdir], expect=1)
    check("epochs 2 to 3" in p.stderr and not os.path.exists(mixed), "mixed epochs must be refused:\n" + p.stderr)
    p = run([a.export, "-f", "-o", mixed, jobdir])
    check("warning" in p.stderr and "epoch 2" in p.stdout, "--force export:\n" + p.stdout + p.stderr)
    check(h5_values(a.h5dump, mixed, "/epoch", attr=True) == [2], "--force records the lowest epoch")

    # A rank given twice, and containers of another job.
    p = run([a.export, "-o", mixed, saved, os.path.join(jobdir, "rank-1.crpm")], expect=1)
    check("both rank 1" in p.stderr, "repeated rank:\n" + p.stderr)
    cfg2 = write_cfg(os.path.join(work, "c2.ini"), ckpt, glbl, "other")
    mpirun(NP, [a.app, "--n", str(N), "--iters", "10", "--crpm", cfg2, "--ckpt-every", "10"])
    p = run([a.export, "-o", mixed, os.path.join(jobdir, "rank-0.crpm"), os.path.join(ckpt, "other", "rank-1.crpm")],
            expect=1)
    check("belongs to job 'other'" in p.stderr, "other job:\n" + p.stderr)

    # Only one rank: a valid file, but not a complete checkpoint.
    part = os.path.join(work, "part.h5")
    run([a.export, "-o", part, os.path.join(jobdir, "rank-0.crpm")])
    p = run([a.inspect, part], expect=1)
    check("1 of 2 rank group(s) missing" in p.stderr, "partial export:\n" + p.stdout + p.stderr)

    check("usage: crpm-export" in run([a.export, "--help"]).stdout, "--help")
    run([a.export, jobdir], expect=2)
    run([a.export, "-o", out], expect=2)
    run([a.export, "-o", out, os.path.join(work, "nonexistent.crpm")], expect=1)


if __name__ == "__main__":
    main(body)
