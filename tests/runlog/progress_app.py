#!/usr/bin/python3
"""crpm.set_progress and crpm.stats() on several ranks (runlog_test.py,
scenario python_progress).

  progress_app.py --crpm cfg.ini --out DIR [--iters I] [--levels 1,2]

Sets a progress callback reporting at every step (every = 0) before init,
then checkpoints at the levels in turn (recovering first after a restart).
Each rank writes DIR/progress-<rank>.json: its reports, crpm.status() and
crpm.stats() (the last and the totals)."""
import argparse
import json
import os

import numpy as np
from mpi4py import MPI

import crpm

ap = argparse.ArgumentParser()
ap.add_argument("--crpm", required=True)
ap.add_argument("--out", required=True)
ap.add_argument("--iters", type=int, default=6)
ap.add_argument("--levels", default="1,2")
a = ap.parse_args()
levels = [int(x) for x in a.levels.split(",")]
rank = MPI.COMM_WORLD.Get_rank()
reports = []
crpm.set_progress(lambda p: reports.append(list(p)), every=0)
it = np.zeros(1, dtype=np.int64)
grid = np.arange(65536, dtype=np.float64) + rank
with crpm.init(a.crpm, MPI.COMM_WORLD):
    crpm.protect(0, it)
    crpm.protect(1, grid)
    status = crpm.status()
    if status > 0:
        crpm.recover()
    while it[0] < a.iters:
        grid[(it[0] * 4096) % grid.size:][:4096] += 1.0
        it[0] += 1
        crpm.checkpoint(int(it[0]), levels[(int(it[0]) - 1) % len(levels)])
    st = crpm.stats()
    with open(os.path.join(a.out, "progress-%d.json" % rank), "w") as f:
        json.dump({"status": status, "reports": reports, "last": st.last._asdict(),
                   "total": st.total._asdict()}, f)
crpm.set_progress()
