#!/usr/bin/python3
"""Asynchronous levels (async = 1, docs/async.md): 8 ranks as 4 simulated
nodes (node_size 2), driven through async_app.c.  Every launch but
`fallback` has CRPM_TEST_DRAIN_DELAY_MS: the background thread sleeps before
each drain, so the application's next calls find it in flight.

  write_l2, write_l3, write_l4
        checkpoint 1 at the level, the arrays overwritten as soon as the call
        returns; crpm_test then says "not done" on every rank, crpm_wait
        returns 0, crpm_test says "done"; a node (level 4: every node) is
        lost; the restart reports the level and recovers exactly
        checkpoint 1's values (the background read the committed copy, not
        the arrays)
  finalize_l2
        crpm_finalize right after a level-2 checkpoint: it waits for the
        drain; a node lost after, the restart recovers checkpoint 1 from
        level 2
  fail_l4, fail_l2
        glbl_dir becomes a file (level 4), or a directory stands where a
        partner copy must be written (level 2), while the drain sleeps: on
        every rank crpm_test reports the agreed error once the drain ends,
        the next crpm_checkpoint returns it too (and takes no checkpoint),
        the one after succeeds, finalize succeeds; no hang
  auto_l4
        ckpt_interval_l4 = auto through the heat example's crpm_snapshot: the
        level-4 cost behind the automatic interval is the drain's (at least
        the drain delay), not the call's
  backpressure
        the heat example's crpm_snapshot, level 2 every checkpoint, drains
        longer than an iteration: async_backpressure = wait waits for them
        (verbosity 2 says how long), skip takes no checkpoint while one runs
        (says so, never waits); the same checksum
  stop_l4
        the end of the allocation already past (CRPM_END_TIME): the heat
        example's first crpm_snapshot takes the final checkpoint at level 4
        and returns CRPM_SNAP_EXIT only once level 4 committed in the
        background; every node lost, the relaunch resumes from it (level 4)
  global_l4
        heat2d (a global dataset split by rows) on 8 ranks, level 4 every 20
        iterations in the background while it computes on; every node lost,
        the relaunch on 4 ranks restarts from the last level-4 file and ends
        with the digest of a run without checkpoints
  overlap_l4
        level 4 at checkpoint 1, level 1 at 2 and 3 right after: checkpoint
        2 returns with the drain of 1 still in flight (it did not wait for
        it: its level 1 writes the copies drain 1 does not read), checkpoint
        3 only once that drain ended (it overwrites them); every node lost,
        the restart recovers checkpoint 1 exactly from level 4 (the drain
        read epoch 1, not the epoch 2 committed meanwhile)
  overlap_l2
        checkpoint 1 at level 2 settled, 2 at level 2, 3 at level 1 right
        after: checkpoint 3 waits until level 2 of checkpoint 2 committed
        (before it, a node loss needs epoch 1 in the others' containers,
        which level 1 of 3 would overwrite); a node lost, the restart
        recovers checkpoint 2 from level 2
  overlap_l4_after_l2
        checkpoint 1 at level 2, 2 at level 4, 3 at level 1: level 2 holds
        the epoch before, so checkpoint 3 waits for the level-4 drain; a node
        lost, the restart recovers checkpoint 2 from level 4
  overlap_kill
        overlap_l2 with rank 2 set to die in the drain of checkpoint 2 at
        l2_sent once checkpoint 3 started (it must never fire: level 1 of 3
        waits for level 2 of 2), or at drain_committed after checkpoint 3's
        level 1 committed beside the drain; node 1 wiped, the relaunch
        recovers checkpoint 2 exactly
  overlap_fail
        fail_l4 with a level-1 checkpoint taken while the failing drain is
        in flight (it returns 0: the drain's failure is not known yet); the
        failure is then reported by crpm_test and the next checkpoint on
        every rank, the one after succeeds
  fallback
        async = 1 in a program that initialised MPI without
        MPI_THREAD_MULTIPLE: rank 0 warns once, the levels run
        synchronously (crpm_test right after the call: done)

  async_tests.py --app ASYNC_APP [--heat HEAT] [--heat2d HEAT2D] --workdir DIR [--no-l4] [--only NAME]
"""
import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "l2"))
import l2common as L  # noqa: E402
from l2common import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402

DELAY_MS = 400
REMOTE = -16  # CRPM_ERR_REMOTE: another rank failed


class Ctx:
    pass


def launch(c, d, mode, level, extra=(), env=None, delay=True, basic=None):
    cfg = L.write_config(os.path.join(d, "crpm.ini"), d, "async", dict({
        "async": 1, "keep_last_ckpt": 1, "glbl_dir": os.path.join(d, "global"), "group_size": 4}, **(basic or {})))
    e = {"CRPM_TEST_DRAIN_DELAY_MS": str(DELAY_MS)} if delay else {}
    e.update(env or {})
    cmd = crpmtest.mpiexec(L.NP) + [c.app, "--crpm", cfg, "--mode", mode, "--level", str(level)] + list(extra)
    return crpmtest.run_job(cmd, env=L.launch_env(d, e), timeout=60)


def every_rank(r, fmt, what):
    """Each rank printed the line fmt % rank."""
    lines = set(crpmtest.complete_lines(r.out))
    missing = [k for k in range(L.NP) if fmt % k not in lines]
    check(not missing, "%s: ranks %s did not print %r\n%s" % (what, missing, fmt % 0, tail(r.out, 30)))


def fresh(c, name):
    return crpmtest.make_workdir(os.path.join(c.workdir, name))


def write_then_verify(c, name, level, lose, status):
    d = fresh(c, name)
    r = launch(c, d, "write", level)
    check(r.rc == 0, "write launch: exit %s\n%s" % (r.rc, tail(r.out, 30)))
    every_rank(r, "rank %d test-after-call done 0", "a level-%d drain in flight after the call" % level)
    every_rank(r, "rank %d test-after-wait done 1", "crpm_wait")
    L.wipe(d, lose)
    v = launch(c, d, "verify", level)
    check(v.rc == 0, "verify launch: exit %s\n%s" % (v.rc, tail(v.out, 30)))
    every_rank(v, "rank %%d verify ok status %d step 1" % status, "restart from level %d" % level)


def scenario_write_l2(c):
    write_then_verify(c, "write_l2", 2, [1], 2)


def scenario_write_l3(c):
    write_then_verify(c, "write_l3", 3, [2], 3)


def scenario_write_l4(c):
    if c.no_l4:
        crpmtest.skip("no parallel HDF5 in this build")
    write_then_verify(c, "write_l4", 4, range(L.NNODES), 4)


def scenario_finalize_l2(c):
    d = fresh(c, "finalize_l2")
    r = launch(c, d, "finalize", 2)
    check(r.rc == 0, "finalize launch: exit %s\n%s" % (r.rc, tail(r.out, 30)))
    every_rank(r, "rank %d finalize rc 0", "crpm_finalize with a drain in flight")
    L.wipe(d, [3])
    v = launch(c, d, "verify", 2)
    check(v.rc == 0, "verify launch: exit %s\n%s" % (v.rc, tail(v.out, 30)))
    every_rank(v, "rank %d verify ok status 2 step 1", "restart from level 2 after finalize")


def fail_checks(r, what):
    check(r.rc is not None, "%s: the job hung\n%s" % (what, tail(r.out, 30)))
    codes = set()
    for k in range(L.NP):
        line = [x for x in crpmtest.complete_lines(r.out) if x.startswith("rank %d fail test rc " % k)]
        check(line, "%s: rank %d did not report crpm_test\n%s" % (what, k, tail(r.out, 30)))
        f = line[0].split()
        codes.add(int(f[5]))
        check(f[7] == "1", "%s: rank %d: crpm_test never said done\n%s" % (what, k, tail(r.out, 30)))
    # agreed (comm/agree.h): the failing ranks their own code, the others CRPM_ERR_REMOTE
    check(max(codes) < 0 and len(codes - {REMOTE}) == 1, "%s: crpm_test returned %s across the ranks, not one "
          "agreed error\n%s" % (what, sorted(codes), tail(r.out, 30)))
    for k in range(L.NP):
        code = int([x for x in crpmtest.complete_lines(r.out) if x.startswith("rank %d fail test rc " % k)][0].split()[5])
        check("rank %d fail next rc %d" % (k, code) in r.out, "%s: rank %d: the next crpm_checkpoint did not return "
              "%d\n%s" % (what, k, code, tail(r.out, 30)))
    every_rank(r, "rank %d fail after rc 0", what + ": the checkpoint after")
    every_rank(r, "rank %d finalize rc 0", what + ": crpm_finalize")


def scenario_fail_l4(c):
    if c.no_l4:
        crpmtest.skip("no parallel HDF5 in this build")
    d = fresh(c, "fail_l4")
    r = launch(c, d, "fail", 4, ["--break", os.path.join(d, "global")], basic={"keep_last_ckpt": 0})
    fail_checks(r, "glbl_dir broken under a level-4 drain")
    check("level 4" in r.out, "the error does not name level 4\n%s" % tail(r.out, 30))


def scenario_fail_l2(c):
    d = fresh(c, "fail_l2")
    # rank 2's partner copy lives on node 2 (rank 4's directory): a directory
    # in its way makes the level-2 write fail there
    block = os.path.join(L.node_dir(d, 2), "async", "partner-2.crpm")
    os.makedirs(os.path.join(block, "in-the-way"))
    r = launch(c, d, "fail", 2, basic={"keep_last_ckpt": 0})
    fail_checks(r, "a partner copy that cannot be written under a level-2 drain")


def scenario_auto_l4(c):
    if c.no_l4 or not c.heat:
        crpmtest.skip("no parallel HDF5 or no heat example in this build")
    d = fresh(c, "auto_l4")
    cfg = L.write_config(os.path.join(d, "crpm.ini"), d, "auto", {
        "async": 1, "glbl_dir": os.path.join(d, "global"), "ckpt_interval": 1, "ckpt_interval_l4": "auto",
        "mtbf_s": 50})
    env = {"CRPM_TEST_DRAIN_DELAY_MS": str(DELAY_MS), "OMPI_MPI_THREAD_LEVEL": "3"}
    r = crpmtest.run_job(crpmtest.mpiexec(L.NP) + [c.heat, "--nx", "128", "--ny", "64", "--iters", "40", "--crpm",
                                                    cfg], env=L.launch_env(d, env), timeout=60)
    check(r.rc == 0, "heat: exit %s\n%s" % (r.rc, tail(r.out, 30)))
    m = re.search(r"^\[crpm\] auto interval: level 4 every \S+ \S+ \(checkpoint cost (\S+) (us|ms|s),", r.out, re.M)
    check(m, "no automatic level-4 interval printed\n%s" % tail(r.out, 30))
    cost = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2)]
    check(cost >= DELAY_MS / 1000.0, "the level-4 cost is %g s, less than the drain's %g s\n%s" % (
        cost, DELAY_MS / 1000.0, tail(r.out, 30)))


def scenario_backpressure(c):
    if not c.heat:
        crpmtest.skip("no heat example in this build")
    out = {}
    for bp in ("wait", "skip"):
        d = fresh(c, "backpressure_" + bp)
        cfg = L.write_config(os.path.join(d, "crpm.ini"), d, "bp", {
            "async": 1, "async_backpressure": bp, "ckpt_interval": 1, "ckpt_interval_l2": 1})
        env = {"CRPM_TEST_DRAIN_DELAY_MS": "100", "OMPI_MPI_THREAD_LEVEL": "3"}
        r = crpmtest.run_job(crpmtest.mpiexec(L.NP) + [c.heat, "--nx", "128", "--ny", "64", "--iters", "40",
                                                        "--delay-us", "2000", "--crpm", cfg],
                             env=L.launch_env(d, env), timeout=60)
        check(r.rc == 0 and crpmtest.matching(r.out, "^checksum "), "%s: exit %s\n%s" % (bp, r.rc, tail(r.out, 30)))
        out[bp] = r.out
    waited = re.compile(r"^\[crpm\] checkpoint \d+ waited \S+ \S+ for the background levels", re.M)
    skipped = re.compile(r"^\[crpm\] snapshot: checkpoint \d+ \(L2\) skipped", re.M)
    committed = re.compile(r"^\[crpm\] checkpoint \d+ \(L2\): level 2 committed in the background", re.M)
    check(waited.search(out["wait"]) and not skipped.search(out["wait"]),
          "wait: no checkpoint said it waited\n%s" % tail(out["wait"], 20))
    check(skipped.search(out["skip"]) and not waited.search(out["skip"]),
          "skip: no skipped checkpoint, or one waited\n%s" % tail(out["skip"], 20))
    nw, ns = len(committed.findall(out["wait"])), len(committed.findall(out["skip"]))
    check(0 < ns < nw, "skip committed %d level-2 checkpoints, wait %d" % (ns, nw))
    check(crpmtest.matching(out["wait"], "^checksum ") == crpmtest.matching(out["skip"], "^checksum "),
          "the results differ")


def scenario_stop_l4(c):
    if c.no_l4 or not c.heat:
        crpmtest.skip("no parallel HDF5 or no heat example in this build")
    d = fresh(c, "stop_l4")
    cfg = L.write_config(os.path.join(d, "crpm.ini"), d, "stop", {
        "async": 1, "glbl_dir": os.path.join(d, "global"), "ckpt_interval": 5})
    cmd = crpmtest.mpiexec(L.NP) + [c.heat, "--nx", "128", "--ny", "64", "--iters", "40", "--crpm", cfg]
    env = {"CRPM_TEST_DRAIN_DELAY_MS": str(DELAY_MS), "OMPI_MPI_THREAD_LEVEL": "3",
           "CRPM_END_TIME": str(int(time.time()) - 60)}
    r = crpmtest.run_job(cmd, env=L.launch_env(d, env), timeout=60)
    lines = crpmtest.complete_lines(r.out)
    done = [i for i, x in enumerate(lines) if re.match(r"\[crpm\] checkpoint 1 \(L4\): level 4 committed in the "
                                                       r"background", x)]
    stop = [i for i, x in enumerate(lines) if x.startswith("heat: stopped at iteration 0 on every rank")]
    check(r.rc == 0 and done and stop and done[0] < stop[0], "the stop did not wait for level 4 (rc %s)\n%s" % (
        r.rc, tail(r.out, 30)))
    L.wipe(d, range(L.NNODES))
    env["CRPM_END_TIME"] = None
    r = crpmtest.run_job(cmd, env=L.launch_env(d, env), timeout=60)
    check(r.rc == 0 and "heat: restarted from iteration 0 (level 4)" in r.out,
          "no restart from level 4 after the stop (rc %s)\n%s" % (r.rc, tail(r.out, 30)))


def scenario_global_l4(c):
    if c.no_l4 or not c.heat2d:
        crpmtest.skip("no parallel HDF5 or no heat2d example in this build")
    d = fresh(c, "global_l4")
    args = [c.heat2d, "--nx", "96", "--ny", "80", "--iters", "90", "--print-every", "50"]
    env = {"CRPM_TEST_DRAIN_DELAY_MS": "100", "OMPI_MPI_THREAD_LEVEL": "3"}
    ref = crpmtest.run_job(crpmtest.mpiexec(L.NP) + args, env=L.launch_env(d, env), timeout=60)
    digest = crpmtest.matching(ref.out, "^digest ")
    check(ref.rc == 0 and digest, "heat2d without checkpoints: exit %s\n%s" % (ref.rc, tail(ref.out)))
    cfg = L.write_config(os.path.join(d, "crpm.ini"), d, "g4", {
        "async": 1, "keep_last_ckpt": 1, "glbl_dir": os.path.join(d, "global")})
    extra = ["--crpm", cfg, "--ckpt-every", "20", "--level", "4"]
    r = crpmtest.run_job(crpmtest.mpiexec(L.NP) + args + extra, env=L.launch_env(d, env), timeout=60)
    check(r.rc == 0 and crpmtest.matching(r.out, "^digest ") == digest and re.search(
        r"^\[crpm\] checkpoint \d+ \(L4\): level 4 committed in the background", r.out, re.M),
        "heat2d with level 4 in the background: exit %s\n%s" % (r.rc, tail(r.out)))
    L.wipe(d, range(L.NNODES))
    r = crpmtest.run_job(crpmtest.mpiexec(4) + args + extra, env=L.launch_env(d, env), timeout=60)
    check(r.rc == 0 and re.search(r"^heat2d: restarted from iteration 80 .* on 4 ranks", r.out, re.M) and
          crpmtest.matching(r.out, "^digest ") == digest,
          "the restart on 4 ranks from level 4: exit %s, digest %s (reference %s)\n%s" % (
              r.rc, crpmtest.matching(r.out, "^digest "), digest, tail(r.out)))


def overlap_run(c, d, level, extra):
    r = launch(c, d, "overlap", level, extra)
    check(r.rc == 0, "overlap launch: exit %s\n%s" % (r.rc, tail(r.out, 30)))
    every_rank(r, "rank %d overlap 2 done 0", "checkpoint 2 returned with the drain before it in flight")
    every_rank(r, "rank %d finalize rc 0", "crpm_finalize")
    return r


def scenario_overlap_l4(c):
    if c.no_l4:
        crpmtest.skip("no parallel HDF5 in this build")
    d = fresh(c, "overlap_l4")
    r = overlap_run(c, d, 4, [])
    every_rank(r, "rank %d overlap 3 done 1", "checkpoint 3 waited for the drain of checkpoint 1")
    L.wipe(d, range(L.NNODES))
    v = launch(c, d, "verify", 4, ["--step", "1"])
    check(v.rc == 0, "verify launch: exit %s\n%s" % (v.rc, tail(v.out, 30)))
    every_rank(v, "rank %d verify ok status 4 step 1", "restart from level 4")


def scenario_overlap_l2(c):
    d = fresh(c, "overlap_l2")
    r = overlap_run(c, d, 2, ["--settle", "1", "--level2", "2"])
    check(re.search(r"^\[crpm\] checkpoint 3 waited \S+ \S+ for the background levels of checkpoint 2$", r.out,
                    re.M), "checkpoint 3 did not wait for level 2 of checkpoint 2\n%s" % tail(r.out, 30))
    L.wipe(d, [1])
    v = launch(c, d, "verify", 2, ["--step", "2"])
    check(v.rc == 0, "verify launch: exit %s\n%s" % (v.rc, tail(v.out, 30)))
    every_rank(v, "rank %d verify ok status 2 step 2", "restart from level 2")


def scenario_overlap_l4_after_l2(c):
    if c.no_l4:
        crpmtest.skip("no parallel HDF5 in this build")
    d = fresh(c, "overlap_l4_after_l2")
    r = overlap_run(c, d, 2, ["--settle", "1", "--level2", "4"])
    every_rank(r, "rank %d overlap 3 done 1", "checkpoint 3 waited for level 4 of checkpoint 2")
    L.wipe(d, [2])
    v = launch(c, d, "verify", 2, ["--step", "0"])
    check(v.rc == 0, "verify launch: exit %s\n%s" % (v.rc, tail(v.out, 30)))
    every_rank(v, "rank %d verify ok status 4 step 2", "restart from level 4")


def scenario_overlap_kill(c):
    # rank 2 would die in the drain of checkpoint 2: at l2_sent once
    # checkpoint 3 started (it never does: level 1 of 3 waits for level 2 of
    # 2), or at drain_committed once checkpoint 3's level 1 committed beside
    # the drain; node 1 (ranks 2, 3) is then lost
    for point, n in (("l2_sent", 3), ("drain_committed", 3)):
        d = fresh(c, "overlap_kill_" + point)
        r = launch(c, d, "overlap", 2, ["--settle", "1", "--level2", "2"],
                   env={"CRPM_TEST_KILL": "2:%s:%d" % (point, n)})
        if point == "l2_sent":
            check(r.rc == 0, "%s: level 2 of checkpoint 2 ran after checkpoint 3 started\n%s" % (
                point, tail(r.out, 30)))
            newest = 2
        else:
            check(r.rc not in (None, 0) and "rank 2 finalize rc" not in r.out,
                  "%s: the kill did not end the job\n%s" % (point, tail(r.out, 30)))
            # after the drain's agreement: level 2 holds checkpoint 2 everywhere
            check("rank 0 overlap 3 done 0" in r.out, "%s: checkpoint 3 not taken beside the drain of 2\n%s" % (
                point, tail(r.out, 30)))
            newest = 2
        L.wipe(d, [1])
        v = launch(c, d, "verify", 2, ["--step", "0"])
        check(v.rc == 0, "%s: verify launch: exit %s\n%s" % (point, v.rc, tail(v.out, 30)))
        steps = set()
        for k in range(L.NP):
            m = re.search(r"^rank %d verify ok status \d step (\d+)$" % k, v.out, re.M)
            check(m, "%s: rank %d did not recover\n%s" % (point, k, tail(v.out, 30)))
            steps.add(int(m.group(1)))
        check(steps == {newest}, "%s: recovered checkpoints %s, level 2 had committed %d\n%s" % (
            point, sorted(steps), newest, tail(v.out, 30)))


def scenario_overlap_fail(c):
    if c.no_l4:
        crpmtest.skip("no parallel HDF5 in this build")
    d = fresh(c, "overlap_fail")
    r = launch(c, d, "fail", 4, ["--break", os.path.join(d, "global"), "--overlap", "1"],
               basic={"keep_last_ckpt": 0})
    every_rank(r, "rank %d fail overlap rc 0", "a level-1 checkpoint beside the failing level-4 drain")
    fail_checks(r, "glbl_dir broken under a level-4 drain with a checkpoint beside it")


def scenario_fallback(c):
    d = fresh(c, "fallback")
    r = launch(c, d, "write", 2, env={"CRPM_ASYNC_APP_SINGLE": "1"}, delay=False)
    check(r.rc == 0, "exit %s\n%s" % (r.rc, tail(r.out, 30)))
    check(r.out.count("async = 1 needs MPI_THREAD_MULTIPLE") == 1,
          "no single warning about MPI_THREAD_MULTIPLE\n%s" % tail(r.out, 30))
    every_rank(r, "rank %d test-after-call done 1", "synchronous levels")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--heat", help="the heat example (auto_l4, backpressure, stop_l4)")
    ap.add_argument("--heat2d", help="the heat2d example (global_l4)")
    ap.add_argument("--no-l4", action="store_true")
    ap.add_argument("--only")
    a = ap.parse_args()
    crpmtest.require_test_hooks("holding drains in flight (CRPM_TEST_DRAIN_DELAY_MS)")
    c = Ctx()
    c.app, c.heat, c.heat2d, c.no_l4 = a.app, a.heat, a.heat2d, a.no_l4
    c.workdir = crpmtest.make_workdir(a.workdir)
    scenarios = [scenario_write_l2, scenario_write_l3, scenario_write_l4, scenario_finalize_l2, scenario_fail_l4,
                 scenario_fail_l2, scenario_auto_l4, scenario_backpressure, scenario_stop_l4,
                 scenario_global_l4, scenario_overlap_l4, scenario_overlap_l2,
                 scenario_overlap_l4_after_l2, scenario_overlap_kill, scenario_overlap_fail,
                 scenario_fallback]
    return crpmtest.run_scenarios(scenarios, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
