#!/usr/bin/python3
"""An FTI program with inline_l2 = inline_l3 = inline_l4 = 0 (libcrpm's
async = 1): tests/fti/status_levels.c, which cycles FTI_Checkpoint through
levels 1 to 4, on 4 ranks as 2 nodes (Open MPI gives it MPI_THREAD_MULTIPLE
through OMPI_MPI_THREAD_LEVEL=3).

  1. failure-free with inline_l* = 1 and with inline_l* = 0: the same
     checksum; the second run's levels 2-4 ran in the background
  2. inline_l* = 0, rank 1 killed at drain_start of checkpoint 7 (level 4:
     level 1 committed, the level-4 file never started), every node's local
     directory lost: the relaunch recovers the previous level-4 checkpoint
     (3, iteration 60) and ends with the reference checksum

  fti_async.py --app FTI_STATUS_LEVELS --sync-cfg F --async-cfg F --workdir D
"""
import argparse
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402
from crpmtest import Failure, check, tail  # noqa: E402

NP, ITERS = 4, 400


def run(a, d, cfg, env=None):
    os.makedirs(d, exist_ok=True)
    e = {"OMPI_MPI_THREAD_LEVEL": "3"}
    e.update(env or {})
    return crpmtest.run_job(crpmtest.mpiexec(NP) + [a.app, cfg, str(ITERS)], env=crpmtest.job_env(e, shm_dir=d),
                            timeout=90, cwd=d)


def checksum(r):
    m = re.search(r"^checksum \S+ sum \S+$", r.out, re.M)
    return m.group(0) if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    for k in ("--app", "--sync-cfg", "--async-cfg", "--workdir"):
        ap.add_argument(k, required=True)
    a = ap.parse_args()
    crpmtest.require_test_hooks("killing a rank at drain_start (CRPM_TEST_KILL)")
    w = crpmtest.make_workdir(a.workdir)
    try:
        ref = run(a, os.path.join(w, "sync"), a.sync_cfg)
        check(ref.rc == 0 and checksum(ref), "inline run: exit %s\n%s" % (ref.rc, tail(ref.out)))
        check("in the background" not in ref.out, "inline_l* = 1 ran a level in the background\n%s" % tail(ref.out))
        asy = run(a, os.path.join(w, "async"), a.async_cfg)
        check(asy.rc == 0 and checksum(asy) == checksum(ref), "inline_l* = 0: exit %s, %s instead of %s\n%s" % (
            asy.rc, checksum(asy), checksum(ref), tail(asy.out)))
        for lv in (2, 3, 4):
            check(re.search(r"^\[crpm\] checkpoint \d+ \(L%d\): level %d committed in the background" % (lv, lv),
                            asy.out, re.M), "inline_l* = 0: no level-%d checkpoint in the background\n%s" % (
                                lv, tail(asy.out)))
        d = os.path.join(w, "kill")
        k = run(a, d, a.async_cfg, {"CRPM_TEST_KILL": "1:drain_start:7"})
        check(k.rc not in (0, None), "the kill at drain_start did not happen\n%s" % tail(k.out))
        shutil.rmtree(os.path.join(d, "Local"))
        r = run(a, d, a.async_cfg)
        check(r.rc == 0 and "recovered at iteration 60" in r.out and checksum(r) == checksum(ref),
              "after the kill and the loss of every node: exit %s, %s (reference %s)\n%s" % (
                  r.rc, checksum(r), checksum(ref), tail(r.out, 25)))
    except Failure as e:
        print("FAILED: %s" % e)
        return 1
    crpmtest.clean_workdir(w)
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
