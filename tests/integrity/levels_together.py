#!/usr/bin/python3
"""Levels used together (issue 38), with real relaunches: 4 ranks as 4
nodes (node_size 1, ckpt_dir = <dir>/node%n), the test program checkpointing
every 5 iterations at the levels of a schedule (--schedule "231": checkpoint
1 at level 2, 2 at level 3, 3 at level 1, cycled), level 3 with
group_size 4 and l3_parity 1.

  stale_l2        L2 at 5, L3 at 10, L1 at 15, every rank killed after 15
                  (the run ends there), node 2 wiped: the stale partner copy
                  of rank 2 (checkpoint 5) does not block the level-3
                  rebuild: CRPM_STATUS_L3, restarted from iteration 10, the
                  reference result; synchronous and with async = 1
  stale_l2_last   the same ended after 10 (no level 1 after it): back at 10
                  from parity, not silently at 5 from the copy
  header          the first 18 bytes of two ranks' containers overwritten:
                  level 2 (ranks 1 and 3, not partners) brings both back
                  (CRPM_STATUS_L2, iteration 15); level 3 with l3_parity 2
                  the same (CRPM_STATUS_L3); the damaged files kept aside
  lost_copies     every partner copy erased, the containers intact: the
                  relaunch (CRPM_STATUS_L1) writes them again; node 1 wiped
                  next: CRPM_STATUS_L2, the reference result
  lost_parity     every parity container erased, the containers intact: the
                  relaunch re-encodes them; node 1 wiped next: CRPM_STATUS_L3
  refusal         node 2 wiped and every partner copy erased under an L2-only
                  schedule: every rank refuses with CRPM_ERR_MISSING naming
                  rank 2 and what it lacks; no file changed

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import glob
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "l2"))
import l2common as L  # noqa: E402
from l2common import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402

L.configure(4, 1)
TIMEOUT = 90
STATUS = {"fresh": 0, "l1": 1, "l2": 2, "l3": 3, "l4": 4}  # CRPM_STATUS_Ln == n
ERR_MISSING = "some ranks have no checkpoint container for this job"
ARGS = ["--n", "65536", "--window", "4096", "--ckpt-every", "5"]


class Ctx:
    def __init__(self, app, workdir):
        self.app, self.workdir, self.refs = app, workdir, {}

    def dir(self, name):
        return crpmtest.make_workdir(os.path.join(self.workdir, name))

    def run(self, d, cfg, schedule, iters):
        prog = [self.app, "--crpm", cfg, "--level", "1", "--schedule", schedule, "--iters", str(iters)] + ARGS
        r = crpmtest.run_job(crpmtest.mpiexec(L.NP) + prog, env=L.launch_env(d), timeout=TIMEOUT)
        check(not r.timed_out, "hung for over %d s: %s" % (TIMEOUT, crpmtest.format_cmd(prog)))
        return r

    def reference(self, iters):
        if iters not in self.refs:
            d = self.dir("ref")
            r = self.run(d, config(d, "ref"), "1", iters)
            check(r.rc == 0, "reference run: exit code %s\n%s" % (r.rc, tail(r.out, 25)))
            self.refs[iters] = result(r.out)
            crpmtest.clean_workdir(d)
        return self.refs[iters]


def config(d, job, parity=1, asynchronous=0):
    b = {"keep_last_ckpt": 1, "group_size": 4, "l3_parity": parity, "async": asynchronous}
    return L.write_config(os.path.join(d, job + ".ini"), d, job, b)


def result(out):
    return crpmtest.one_line(out, r"^result ", "result line")


def status(out):
    return int(crpmtest.number_after(out, r"^l2_app: status (-?\d+)"))


def job_files(d, job, pattern):
    return sorted(glob.glob(os.path.join(d, "node*", job, pattern)))


def first_run(c, name, schedule, iters, **kw):
    d = c.dir(name)
    cfg = config(d, name, **kw)
    r = c.run(d, cfg, schedule, iters)
    check(r.rc == 0, "%s: first run: exit code %s\n%s" % (name, r.rc, tail(r.out, 25)))
    return d, cfg


def expect_resume(c, d, cfg, schedule, want, from_iter, what, iters=30):
    r = c.run(d, cfg, schedule, iters)
    check(r.rc == 0, "%s: exit code %s\n%s" % (what, r.rc, tail(r.out, 25)))
    st = status(r.out)
    check(st == STATUS[want], "%s: crpm_status %d, expected %d (%s)\n%s" % (what, st, STATUS[want], want,
                                                                           tail(r.out)))
    it = crpmtest.number_after(r.out, r"^l2_app: restarted from iteration (\d+)")
    check(it == from_iter, "%s: restarted from iteration %s, expected %d\n%s" % (what, it, from_iter, tail(r.out)))
    check(result(r.out) == c.reference(iters), "%s: result %s, reference %s" % (what, result(r.out),
                                                                               c.reference(iters)))
    return r.out


def scenario_stale_l2(c):
    for asynchronous in (0, 1):
        d, cfg = first_run(c, "stale", "231", 15, asynchronous=asynchronous)
        L.wipe(d, [2])
        expect_resume(c, d, cfg, "231", "l3", 10, "async = %d: node 2 lost after L2, L3, L1" % asynchronous)


def scenario_stale_l2_last(c):
    d, cfg = first_run(c, "stalelast", "231", 10)
    L.wipe(d, [2])
    expect_resume(c, d, cfg, "231", "l3", 10, "node 2 lost after L2, L3")


def overwrite_header(path):
    with open(path, "r+b") as f:
        f.write(b"\xa5" * 18)


def scenario_header(c):
    for schedule, parity, want in (("2", 1, "l2"), ("3", 2, "l3")):
        name = "hdr%s" % schedule
        d, cfg = first_run(c, name, schedule, 15, parity=parity)
        for r in (1, 3):
            overwrite_header(os.path.join(L.node_dir(d, r), name, "rank-%d.crpm" % r))
        expect_resume(c, d, cfg, schedule, want, 15, "level %s: two containers' headers overwritten" % schedule)
        for r in (1, 3):
            aside = glob.glob(os.path.join(L.node_dir(d, r), name, "rank-%d.crpm.*-*" % r))
            check(len(aside) == 1, "level %s: rank %d's damaged container not kept aside: %s" % (schedule, r, aside))


def lost_redundancy(c, name, schedule, pattern, what, want):
    """Every file of a level (pattern) erased, the containers intact: the
    relaunch writes them again, and a node loss next is repaired from them."""
    d, cfg = first_run(c, name, schedule, 15)
    files = job_files(d, name, pattern)
    check(len(files) == L.NP, "expected %d %s, found %s" % (L.NP, what, files))
    for f in files:
        os.remove(f)
    expect_resume(c, d, cfg, schedule, "l1", 15, "every %s erased" % what, iters=15)
    check(len(job_files(d, name, pattern)) == L.NP, "the %s were not written again: %s" %
          (what, job_files(d, name, pattern)))
    L.wipe(d, [1])
    expect_resume(c, d, cfg, schedule, want, 15, "then node 1 lost")


def scenario_lost_copies(c):
    lost_redundancy(c, "lostcp", "2", "partner-*.crpm", "partner copies", "l2")


def scenario_lost_parity(c):
    lost_redundancy(c, "lostpar", "3", "parity-*.crpm", "parity containers", "l3")


def scenario_refusal(c):
    d, cfg = first_run(c, "refuse", "2", 15)
    L.wipe(d, [2])
    for f in job_files(d, "refuse", "partner-*.crpm"):
        os.remove(f)
    before = L.node_state(d, range(L.NNODES), skip=(".lock",))
    r = c.run(d, cfg, "2", 30)
    check(r.rc != 0, "node 2 and every copy lost: the relaunch did not refuse\n%s" % tail(r.out))
    for rank in range(L.NP):
        line = crpmtest.one_line(r.out, r"^l2_app rank %d: crpm_init failed" % rank, "rank %d error" % rank)
        check(ERR_MISSING in line and "rank 2: its container is missing" in line and "partner copy" in line,
              "rank %d: the refusal does not name the cause: %s" % (rank, line))
        check("remove the" not in line and "delete" not in line, "rank %d: the message advises a removal: %s" %
              (rank, line))
    check(L.node_state(d, range(L.NNODES), skip=(".lock",)) == before, "a refused relaunch changed files")


SCENARIOS = [scenario_stale_l2, scenario_stale_l2_last, scenario_header, scenario_lost_copies,
             scenario_lost_parity, scenario_refusal]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True, help="integrity_app (tests/l2/l2_app.c)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    c = Ctx(a.app, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(SCENARIOS, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
