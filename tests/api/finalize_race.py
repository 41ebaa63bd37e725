#!/usr/bin/python3
"""A second launch of a job while the first one's crpm_finalize removes its
checkpoints (keep_last_ckpt = 0), driven through the heat example on 2 ranks.

The library's test hook CRPM_TEST_PAUSE=<point>:<dir> (builds with
CRPM_TEST_HOOKS) holds every rank of a launch at a point until the driver
creates <dir>/<point>.go, so each window is hit every time, not by chance:

  rmdir_window   the first launch holds after releasing its locks, before
                 removing the job directory; the second holds after making
                 the directory, before taking its lock.  The first then
                 removes the directory (it is gone when it exits), the second
                 goes on: it must start fresh and finish with the reference
                 checksum, never fail with an I/O error on the lock file
  busy           the first launch holds inside finalize (marker written,
                 nothing removed yet; then, in a second round, everything
                 removed but the locks); a second with lock_wait_s = 0.3
                 fails crpm_init with CRPM_ERR_BUSY on every rank and changes
                 nothing; the first then finishes and leaves no directory
  wait           the same hold, a second launch with lock_wait_s = 60 waiting
                 on the locks; once the first is released, the second gets
                 the locks after the removal and starts fresh (reference
                 checksum)

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402

NP = 2
TIMEOUT = 60
HEAT = ["--iters", "60", "--print-every", "20", "--ckpt-every", "10"]
BUSY_TEXT = "checkpoint in use by another job or process"


class Ctx:
    def __init__(self, heat, workdir):
        self.heat, self.workdir = heat, workdir
        self.jobs = []  # launches of the running scenario, killed if it fails

    def config(self, d, lock_wait):
        p = os.path.join(d, "w%s.ini" % lock_wait)
        with open(p, "w") as f:
            f.write("[basic]\nckpt_dir = %s\njob_name = race\nkeep_last_ckpt = 0\nverbosity = 1\n"
                    "[advanced]\nlock_wait_s = %s\n" % (os.path.join(d, "ckpt"), lock_wait))
        return p

    def start(self, d, cfg, pause=None, log="a.out"):
        env = crpmtest.job_env({"CRPM_TEST_PAUSE": pause}, shm_dir=d, clear=crpmtest.CRPM_ENV_OVERRIDES)
        job = crpmtest.Job(crpmtest.mpiexec(NP) + [self.heat] + HEAT + ["--crpm", cfg], env=env,
                           out_path=os.path.join(d, log))
        self.jobs.append(job)
        return job


def guarded(scenario):
    """A scenario that kills every launch it left running when it fails
    (a held launch would otherwise wait out its pause)."""
    def run(c):
        c.jobs = []
        try:
            scenario(c)
        finally:
            for j in c.jobs:
                if j.rc is None and j.proc.poll() is None:
                    j.kill()
    run.__name__ = scenario.__name__
    return run


def wait_reached(job, sync, point, what):
    """Waits until every rank of job created <sync>/<point>.<rank>."""
    end = time.time() + TIMEOUT
    while time.time() < end:
        if all(os.path.exists(os.path.join(sync, "%s.%d" % (point, r))) for r in range(NP)):
            return
        check(job.wait(0) is None, "%s: exited (%s) before reaching %s\n%s" % (what, job.rc, point,
                                                                                tail(job.text())))
        time.sleep(0.02)
    job.kill()
    raise crpmtest.Failure("%s: did not reach %s within %d s\n%s" % (what, point, TIMEOUT, tail(job.text())))


def release(sync, point):
    open(os.path.join(sync, point + ".go"), "w").close()


def finish(job, what):
    rc = job.wait(TIMEOUT)
    if rc is None:
        job.kill()
        raise crpmtest.Failure("%s: hung for over %d s\n%s" % (what, TIMEOUT, tail(job.text())))
    job.finish()
    return rc, job.text()


def expect_fresh_ok(rc, out, ref, what):
    check(rc == 0, "%s: exit code %s\n%s" % (what, rc, tail(out, 20)))
    check("restarted from" not in out, "%s: restarted instead of starting fresh\n%s" % (what, tail(out)))
    got = crpmtest.one_line(out, r"^checksum ")
    check(got == ref, "%s: checksum %s, reference %s" % (what, got, ref))


def workdir(c, name):
    d = crpmtest.make_workdir(os.path.join(c.workdir, name))
    sync = os.path.join(d, "sync")
    os.makedirs(sync)
    return d, sync


def scenario_rmdir_window(c):
    d, sync = workdir(c, "rmdir")
    cfg = c.config(d, 5)
    jobdir = os.path.join(d, "ckpt", "race")
    a = c.start(d, cfg, "finalize_rmdir:" + sync, "a.out")
    wait_reached(a, sync, "finalize_rmdir", "first launch")
    check(os.path.isdir(jobdir) and not os.listdir(jobdir),
          "first launch held before rmdir: expected an empty job directory, found %s" %
          (os.listdir(jobdir) if os.path.isdir(jobdir) else "none"))
    b = c.start(d, cfg, "init_lock:" + sync, "b.out")
    wait_reached(b, sync, "init_lock", "second launch")
    release(sync, "finalize_rmdir")
    rc, out = finish(a, "first launch")
    check(rc == 0, "first launch: exit code %s\n%s" % (rc, tail(out)))
    ref = crpmtest.one_line(out, r"^checksum ")
    # the window was hit: the directory the second launch made is gone again
    check(not os.path.exists(jobdir), "the first launch did not remove the job directory")
    release(sync, "init_lock")
    rc, out = finish(b, "second launch")
    check(not re.search(r"cannot open lock file|CRPM_ERR_IO|I/O", out), "second launch: I/O error on the lock\n" +
          tail(out, 20))
    expect_fresh_ok(rc, out, ref, "second launch after the directory was removed under it")
    check(not os.path.exists(jobdir), "the second launch left %s behind" % jobdir)
    crpmtest.clean_workdir(d)


def hold_in_finalize(c, name, point="finalize_marker"):
    d, sync = workdir(c, name)
    a = c.start(d, c.config(d, 5), point + ":" + sync, "a.out")
    wait_reached(a, sync, point, "first launch")
    jobdir = os.path.join(d, "ckpt", "race")
    files = sorted(os.listdir(jobdir))
    if point == "finalize_marker":
        check(".crpm-finalized" in files and "rank-0.crpm" in files,
              "first launch held in finalize: expected the marker and its containers, found %s" % files)
    else:
        check(files == ["rank-%d.lock" % r for r in range(NP)],
              "first launch held before unlocking: expected its lock files only, found %s" % files)
    return d, sync, a, jobdir, files


def scenario_busy(c):
    for point in ("finalize_marker", "finalize_unlock"):
        d, sync, a, jobdir, files = hold_in_finalize(c, "busy-" + point, point)
        b = c.start(d, c.config(d, 0.3), None, "b.out")
        rc, out = finish(b, "second launch")
        check(rc != 0, "second launch (%s): exit code 0 while the first held the locks\n%s" % (point, tail(out)))
        for r in range(NP):
            pat = re.compile(r"^heat rank %d: crpm_init failed: %s: .*in use by another job" % (r, BUSY_TEXT), re.M)
            check(len(pat.findall(out)) == 1, "%s: rank %d: expected one CRPM_ERR_BUSY line\n%s" % (
                point, r, tail(out, 20)))
        check(sorted(os.listdir(jobdir)) == files, "the refused launch changed the job directory: %s, was %s" % (
            sorted(os.listdir(jobdir)), files))
        release(sync, point)
        rc, out = finish(a, "first launch")
        check(rc == 0, "first launch: exit code %s\n%s" % (rc, tail(out)))
        check(not os.path.exists(jobdir), "the first launch did not remove the job directory")
        crpmtest.clean_workdir(d)


def scenario_wait(c):
    d, sync, a, jobdir, _ = hold_in_finalize(c, "wait")
    b = c.start(d, c.config(d, 60), "init_lock:" + sync, "b.out")
    wait_reached(b, sync, "init_lock", "second launch")
    release(sync, "init_lock")
    time.sleep(0.5)  # the second launch is now waiting on the locks
    check(b.wait(0) is None, "second launch did not wait for the locks\n" + tail(b.text()))
    release(sync, "finalize_marker")
    rc, out = finish(a, "first launch")
    check(rc == 0, "first launch: exit code %s\n%s" % (rc, tail(out)))
    ref = crpmtest.one_line(out, r"^checksum ")
    rc, out = finish(b, "second launch")
    expect_fresh_ok(rc, out, ref, "second launch waiting on the first one's finalize")
    crpmtest.clean_workdir(d)


SCENARIOS = [guarded(s) for s in (scenario_rmdir_window, scenario_busy, scenario_wait)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heat", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    c = Ctx(a.heat, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(SCENARIOS, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
