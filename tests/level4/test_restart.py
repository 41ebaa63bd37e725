#!/usr/bin/env python3
"""Restart from level 4 when level 1 is unusable, through the public API.

A: rank 1 is killed after its 7th checkpoint (id 35; level-4 files l4-20,
   l4-30), its container is deleted, and the relaunch resumes from l4-30 with
   results equal to a run without checkpointing.  The final containers,
   exported with crpm-export, hold exactly the data of the final level-4 file
   (same crc32 per dataset), and a fresh job restarts from the export.
B: crpm_snapshot mode with ckpt_interval_l4: rank 0 is killed, a bit of its
   container's superblock is flipped, and the relaunch resumes from level 4."""
import os
import re
import shutil

import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from l4common import (check, h5_values, main, mpirun, results, run, superblock, flip_bit, write_cfg)

NP = 2
APP_ARGS = ["--n", "500", "--iters", "60"]


def restart_line(out):
    m = re.search(r"^RESTART level (\d) iter (\d+)$", out, re.M)
    check(m, "no RESTART line in:\n" + out)
    return int(m.group(1)), int(m.group(2))


def crc_table(a, path):
    return {(r, i): h5_values(a.h5dump, path, "/rank_%d/id_%d/crc32" % (r, i), attr=True)[0]
            for r in range(NP) for i in range(5)}


def scenario_a(a, work, ref):
    ckpt, glbl = os.path.join(work, "a-ckpt"), os.path.join(work, "a-glbl")
    cfg = write_cfg(os.path.join(work, "a.ini"), ckpt, glbl, "rs", keep_l4=2)
    args = [a.app] + APP_ARGS + ["--crpm", cfg, "--ckpt-every", "5", "--l4-every", "2"]
    mpirun(NP, args, env={"CRPM_TEST_KILL": "1:after_commit:7"}, expect="nonzero")
    l4dir = os.path.join(glbl, "rs")
    check(sorted(os.listdir(l4dir)) == ["l4-20.h5", "l4-30.h5"],
          "level-4 files after the kill: %s" % sorted(os.listdir(l4dir)))
    os.unlink(os.path.join(ckpt, "rs", "rank-1.crpm"))

    p = mpirun(NP, args)
    check(restart_line(p.stdout) == (4, 30), "should resume from level 4 at iteration 30:\n" + p.stdout)
    check(results(p.stdout) == ref, "results after the level-4 restart differ:\n%s\nvs\n%s" %
          (results(p.stdout), ref))

    if not (a.export and a.h5dump):
        print("crpm-export or h5dump missing: export checks skipped")
        return
    # The final checkpoint (id 60) was level 4 and the containers were kept.
    exp = os.path.join(work, "exported.h5")
    e = run([a.export, os.path.join(ckpt, "rs"), "-o", exp])
    check("exported 2 of 2 rank(s) of job 'rs' (checkpoint id 60" in e.stdout, "export summary: " + e.stdout)
    if a.inspect:
        run([a.inspect, "-q", exp])
    final = os.path.join(l4dir, "l4-60.h5")
    check(crc_table(a, exp) == crc_table(a, final), "exported data differs from the level-4 file l4-60.h5")
    check(h5_values(a.h5dump, exp, "/rank_1/id_0") == [60], "exported iteration counter")

    # The export serves as a level-4 checkpoint of a new job directory.
    glbl2 = os.path.join(work, "a-glbl2")
    os.makedirs(os.path.join(glbl2, "rs"))
    shutil.copy(exp, os.path.join(glbl2, "rs", "l4-60.h5"))
    cfg2 = write_cfg(os.path.join(work, "a2.ini"), os.path.join(work, "a-ckpt2"), glbl2, "rs")
    p = mpirun(NP, [a.app] + APP_ARGS + ["--crpm", cfg2, "--ckpt-every", "5"])
    check(restart_line(p.stdout) == (4, 60), "restart from the exported file:\n" + p.stdout)
    check(results(p.stdout) == ref, "results after restarting from the export differ")


def scenario_b(a, work, ref):
    ckpt, glbl = os.path.join(work, "b-ckpt"), os.path.join(work, "b-glbl")
    cfg = write_cfg(os.path.join(work, "b.ini"), ckpt, glbl, "snap", keep_l4=1, ckpt_interval=4,
                    ckpt_interval_l4=3)
    args = [a.app] + APP_ARGS + ["--crpm", cfg, "--snapshot"]
    mpirun(NP, args, env={"CRPM_TEST_KILL": "0:after_commit:8"}, expect="nonzero")
    l4 = [f for f in os.listdir(os.path.join(glbl, "snap")) if f.endswith(".h5")]
    check(len(l4) == 1, "keep_l4 = 1 should leave one level-4 file, found %s" % l4)
    cont = os.path.join(ckpt, "snap", "rank-0.crpm")
    check(superblock(cont)["magic"] == b"CRPMCONT", "unexpected container layout")
    flip_bit(cont, 17)  # inside segment_size, covered by the superblock crc
    p = mpirun(NP, args)
    level, it = restart_line(p.stdout)
    check(level == 4 and 0 < it < 60, "should resume from level 4, got level %d iter %d" % (level, it))
    check(results(p.stdout) == ref, "results after the snapshot-mode level-4 restart differ")


def body(a, work):
    ref = results(mpirun(NP, [a.app] + APP_ARGS).stdout)
    check(len(ref) == 2, "reference run printed no RESULT lines")
    scenario_a(a, work, ref)
    scenario_b(a, work, ref)


if __name__ == "__main__":
    main(body)
