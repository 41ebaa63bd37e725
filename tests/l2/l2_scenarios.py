#!/usr/bin/python3
"""Level-2 scenarios with deterministic node losses (8 ranks, 4 nodes).

Driven through tests/l2/l2_app.c (prints crpm_status and the statistics) and
the heat example.  A "reference" is a failure-free run in a fresh directory.

  one_node        a run keeps its last checkpoint, node 1 is lost: every rank
                  reports CRPM_STATUS_L2, resumes from that checkpoint and
                  ends with the reference result; the lost node's containers
                  and partner copies are back; the next launch (nothing lost)
                  reports CRPM_STATUS_L1
  mirror          after a clean finish, partner-<r>.crpm on node k+1 is
                  byte-identical to rank-<r>.crpm on node k, for every rank
  two_nonadjacent nodes 0 and 2 lost together: CRPM_STATUS_L2, same result
  pair_error      node 1 and its partner node 2 lost together, no level 4:
                  every rank fails crpm_init with CRPM_ERR_MISSING and a
                  message about the lost containers, twice (never a silent
                  fresh start), and nodes 0 and 3 keep every file unchanged
  pair_l4         nodes 3 and 0 (partners across the end of the ring) lost,
                  a level-4 checkpoint in glbl_dir: CRPM_STATUS_L4, resumes
                  from the newest level-4 checkpoint, same result
  heat_pair_l4    the same through the heat example's crpm_snapshot schedule
                  (ckpt_interval_l2 = 1, ckpt_interval_l4 = 4), killed through
                  CRPM_TEST_KILL after a commit: "(level 4)", same checksum
  hooks           a rank killed at l2_sent / l2_applied / l2_committed of
                  checkpoint 5, then the owner's or the holder's node lost:
                  CRPM_STATUS_L2, the restart is from checkpoint 5 or 4 (4
                  exactly when the partner copy did not commit 5), same result
  first_checkpoint a rank killed before its first checkpoint's data, then its
                  node lost: the others committed epoch 1 locally and no
                  copy shows whether it completed, so every rank refuses
                  with CRPM_ERR_MISSING naming the lost ranks
  bytes_sent      bytes_sent of a level-2 checkpoint is about what the
                  checkpoint wrote (the changed blocks plus small metadata),
                  0 for level 1, at least the protected bytes with the
                  benchmarks' baseline l2_full_copy (CRPM_BENCH_BASELINE,
                  a CRPM_TEST_HOOKS build)
  copy_error      a partner copy that cannot be written (a directory in the
                  way): the level-2 checkpoint fails on every rank naming
                  the file, no hang; after the obstacle is removed the job
                  completes with the reference result
  one_node_config level 2 with one node: ckpt_interval_l2 with node_size =
                  the rank count, or with the default (MPI shared-memory)
                  nodes on this one machine, fails crpm_init with
                  CRPM_ERR_CONFIG on every rank; crpm_checkpoint(CRPM_L2)
                  fails with CRPM_ERR_CONFIG on every rank

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import l2common as L  # noqa: E402
from l2common import crpmtest  # noqa: E402
from crpmtest import Failure, check, tail  # noqa: E402

TIMEOUT = 60
STATUS = {"fresh": 0, "l1": 1, "l2": 2, "l4": 4}  # CRPM_STATUS_Ln == n
# crpm_strerror texts (lib/util/error.c)
ERR_MISSING = "some ranks have no checkpoint container for this job"
ERR_CONFIG = "bad or missing configuration"
ARGS = ["--n", "131072", "--window", "4096", "--ckpt-every", "2"]


class Ctx:
    def __init__(self, app, heat, workdir):
        self.app, self.heat, self.workdir = app, heat, workdir

    def dir(self, name):
        return crpmtest.make_workdir(os.path.join(self.workdir, name))

    def run(self, d, prog, np=L.NP, env=None):
        r = crpmtest.run_job(crpmtest.mpiexec(np) + prog, env=L.launch_env(d, env), timeout=TIMEOUT)
        check(not r.timed_out, "hung for over %d s: %s" % (TIMEOUT, crpmtest.format_cmd(prog)))
        return r

    def l2app(self, d, cfg, args, np=L.NP, env=None):
        return self.run(d, [self.app, "--crpm", cfg] + args, np, env)

    def ok(self, r, what):
        check(r.rc == 0, "%s: exit code %s\n%s" % (what, r.rc, tail(r.out, 25)))
        return r.out


def status(out):
    return int(crpmtest.number_after(out, r"^l2_app: status (-?\d+)"))


def result(out):
    return crpmtest.one_line(out, r"^result ", "result line")


def restarted(out):
    return crpmtest.number_after(out, r"^l2_app: restarted from iteration (\d+)")


def reference(c, iters, extra=(), basic=None):
    d = c.dir("ref-%d" % iters)
    cfg = L.write_config(os.path.join(d, "ref.ini"), d, "ref", basic)
    out = c.ok(c.l2app(d, cfg, ARGS + ["--iters", str(iters)] + list(extra)), "reference run")
    crpmtest.clean_workdir(d)
    return result(out)


def expect_resume(c, d, cfg, iters, want_status, ref, what, from_iter=None, extra=()):
    out = c.ok(c.l2app(d, cfg, ARGS + ["--iters", str(iters)] + list(extra)), what)
    st = status(out)
    check(st == want_status, "%s: crpm_status %d, expected %d\n%s" % (what, st, want_status, tail(out)))
    if want_status:
        it = restarted(out)
        check(from_iter is None or it in (from_iter if isinstance(from_iter, tuple) else (from_iter,)),
              "%s: restarted from iteration %d, expected %s" % (what, it, from_iter))
    check(result(out) == ref, "%s: result %s, reference %s" % (what, result(out), ref))
    return out


def first_run(c, name, iters=20, basic=None, extra=(), env=None):
    """A run that keeps its last checkpoint (iteration `iters`)."""
    d = c.dir(name)
    b = {"keep_last_ckpt": 1}
    b.update(basic or {})
    cfg = L.write_config(os.path.join(d, "crpm.ini"), d, name, b)
    r = c.l2app(d, cfg, ARGS + ["--iters", str(iters)] + list(extra), env=env)
    if env is None:
        c.ok(r, "first run")
    return d, cfg, r


def files_of(d, node, job):
    p = os.path.join(L.node_dir(d, node), job)
    return sorted(os.listdir(p)) if os.path.isdir(p) else []


def scenario_one_node(c):
    ref = reference(c, 40)
    d, cfg, _ = first_run(c, "one")
    before = files_of(d, 1, "one")
    check("rank-2.crpm" in before and "partner-0.crpm" in before,
          "node 1 should hold rank-2.crpm and partner-0.crpm (node 0's copy): %s" % before)
    L.wipe(d, [1])
    expect_resume(c, d, cfg, 40, STATUS["l2"], ref, "relaunch after losing node 1", 20)
    after = files_of(d, 1, "one")
    for f in ("rank-2.crpm", "rank-3.crpm", "partner-0.crpm", "partner-1.crpm"):
        check(f in after, "%s not rebuilt on node 1: %s" % (f, after))
    expect_resume(c, d, cfg, 60, STATUS["l1"], reference(c, 60), "next relaunch, nothing lost", 40)


def scenario_mirror(c):
    d, _, _ = first_run(c, "mirror")
    state = L.node_state(d, range(L.NNODES))
    for r in range(L.NP):
        own = os.path.join("node%d" % L.node_of(r), "mirror", "rank-%d.crpm" % r)
        copy = os.path.join("node%d" % ((L.node_of(r) + 1) % L.NNODES), "mirror", "partner-%d.crpm" % r)
        check(own in state and copy in state, "missing %s or %s: %s" % (own, copy, sorted(state)))
        check(state[own] == state[copy], "%s and %s differ" % (own, copy))


def scenario_two_nonadjacent(c):
    ref = reference(c, 40)
    d, cfg, _ = first_run(c, "two")
    L.wipe(d, [0, 2])
    expect_resume(c, d, cfg, 40, STATUS["l2"], ref, "relaunch after losing nodes 0 and 2", 20)


def expect_all_fail(r, np_, call, err, what, msg_re=None):
    """Non-zero exit, and every rank printed "<call> failed: <err>: <message>"
    with a message matching msg_re."""
    check(r.rc != 0, "%s: exit code 0, expected an error\n%s" % (what, tail(r.out)))
    for rank in range(np_):
        m = re.search(r"^l2_app rank %d: %s failed: (.*)$" % (rank, call), r.out, re.M)
        check(m, "%s: rank %d printed no '%s failed' line\n%s" % (what, rank, call, tail(r.out, 25)))
        check(m.group(1).startswith(err + ":"), "%s: rank %d: expected '%s', got %r" % (what, rank, err, m.group(1)))
        check(not msg_re or re.search(msg_re, m.group(1), re.I), "%s: rank %d's message does not match %r: %r" % (
            what, rank, msg_re, m.group(1)))


def scenario_pair_error(c):
    d, cfg, _ = first_run(c, "pair")
    L.wipe(d, [1, 2])
    keep = L.node_state(d, [0, 3])
    check(keep, "nothing on nodes 0 and 3 to keep")
    for attempt in ("relaunch", "second relaunch"):
        r = c.l2app(d, cfg, ARGS + ["--iters", "40"])
        expect_all_fail(r, L.NP, "crpm_init", ERR_MISSING, "%s after losing nodes 1 and 2" % attempt,
                        r"partner|lost|missing|rank")
        check(L.node_state(d, [0, 3]) == keep, "%s changed or removed files of nodes 0 and 3:\n%s\n%s" % (
            attempt, sorted(keep), sorted(L.node_state(d, [0, 3]))))


def scenario_pair_l4(c):
    l4 = ["--l4-every", "3"]
    ref = reference(c, 40, l4, {"glbl_dir": os.path.join(c.workdir, "ref-40", "global")})
    d, cfg, _ = first_run(c, "pl4", basic={"glbl_dir": os.path.join(c.workdir, "pl4", "global")}, extra=l4)
    L.wipe(d, [3, 0])
    # checkpoints every 2 iterations, every 3rd at level 4: the newest level 4 is iteration 18
    expect_resume(c, d, cfg, 40, STATUS["l4"], ref, "relaunch after losing nodes 3 and 0", 18, l4)


def scenario_heat_pair_l4(c):
    d = c.dir("heatl4")
    args = ["--nx", "128", "--ny", "64", "--iters", "400", "--print-every", "50"]
    ref = c.ok(c.run(d, [c.heat] + args), "heat without checkpoints")
    cfg = L.write_config(os.path.join(d, "heat.ini"), d, "heat", {
        "glbl_dir": os.path.join(d, "global"), "ckpt_interval": 10, "ckpt_interval_l2": 1, "ckpt_interval_l4": 4})
    r = c.run(d, [c.heat] + args + ["--crpm", cfg], env={"CRPM_TEST_KILL": "5:after_commit:10"})
    check(r.rc != 0, "the kill hook did not fire\n" + tail(r.out))
    lv = L.levels(r.out)
    check(2 in lv and 4 in lv, "expected level-2 and level-4 checkpoints, got levels %s\n%s" % (lv, tail(r.out)))
    L.wipe(d, [1, 2])
    out = c.ok(c.run(d, [c.heat] + args + ["--crpm", cfg]), "heat relaunch after losing nodes 1 and 2")
    check("(level 4)" in out, "heat did not restart from level 4\n" + tail(out))
    want = crpmtest.one_line(ref, r"^checksum ")
    check(crpmtest.one_line(out, r"^checksum ") == want, "checksum differs from the failure-free run\n" + tail(out))


def scenario_hooks(c):
    ref = reference(c, 30)
    # (killed rank, point, lost node, restart iterations allowed); checkpoint 5 is iteration 10
    cases = [(2, "l2_sent", 1, (8, 10)),       # owner 2 on node 1, its copy on node 2 may hold 5 or 4
             (4, "l2_applied", 1, (8,)),        # holder 4 of rank 2's copy, not committed: 4 exactly
             (4, "l2_applied", 2, (8, 10)),     # the holder's own node lost
             (4, "l2_committed", 1, (8, 10)),   # copy committed, the job's agreement not reached
             (1, "l2_sent", 0, (8, 10))]        # ring: node 0's copies are on node 1, node 3's on node 0
    for i, (rank, point, node, allowed) in enumerate(cases):
        what = "%s on rank %d, node %d lost" % (point, rank, node)
        d, cfg, r = first_run(c, "hook%d" % i, iters=30, env={"CRPM_TEST_KILL": "%d:%s:5" % (rank, point)})
        check(r.rc != 0 and "result" not in r.out, "%s: the kill hook did not fire\n%s" % (what, tail(r.out)))
        L.wipe(d, [node])
        expect_resume(c, d, cfg, 30, STATUS["l2"], ref, what, allowed)


def scenario_first_checkpoint(c):
    # Rank 3 dies before writing anything of the job's first checkpoint, so
    # no checkpoint was ever committed; then node 1 (ranks 2, 3) is lost.
    # Node 2, intact, holds no partner copy of ranks 2 and 3: proof that no
    # epoch ever committed everywhere, so nothing is lost by starting afresh.
    # The other ranks committed epoch 1 locally; without a copy of ranks 2
    # and 3 nothing shows whether that epoch had completed everywhere (a
    # level-1 checkpoint would have), so the library refuses rather than
    # start fresh over it, and says why.
    d, cfg, r = first_run(c, "first", iters=30, env={"CRPM_TEST_KILL": "3:before_data:1"})
    check(r.rc != 0 and "result" not in r.out, "the kill hook did not fire\n" + tail(r.out))
    L.wipe(d, [1])
    r = c.l2app(d, cfg, ARGS + ["--iters", "30"])
    expect_all_fail(r, L.NP, "crpm_init", ERR_MISSING, "relaunch after losing node 1 before any commit",
                    r"rank\(s\) 2, 3 is missing")


def bytes_line(out):
    m = re.search(r"^l2_app: sent total (\d+); last checkpoint: sent max (\d+) min (\d+), written max (\d+), "
                  r"protected (\d+) per rank", out, re.M)
    check(m, "no statistics line\n" + tail(out))
    return [int(x) for x in m.groups()]


def scenario_bytes_sent(c):
    window = 4096 * 8  # bytes changed per iteration; 2 iterations per checkpoint
    d = c.dir("bytes")
    for name, level, env in (("l1", 1, None), ("l2", 2, None), ("full", 2, {"CRPM_BENCH_BASELINE": "l2_full_copy"})):
        cfg = L.write_config(os.path.join(d, name + ".ini"), d, "b" + name)
        out = c.ok(c.l2app(d, cfg, ARGS + ["--iters", "20", "--level", str(level)], env=env), "%s run" % name)
        total, smax, smin, wmax, prot = bytes_line(out)
        what = "%s: sent %d..%d bytes at the last checkpoint (written %d, protected %d per rank; %d in all)" % (
            name, smin, smax, wmax, prot, total)
        print("bytes_sent: " + what, flush=True)
        if name == "l1":
            check(total == 0, what + ": level 1 sends nothing")
        elif name == "l2":
            # the checkpoint changed 2 windows; it may rewrite up to twice
            # that (the older of the two copies); metadata is small
            check(2 * window <= smin and smax <= 4 * window + 16384, what + ": expected the changed bytes plus "
                  "small metadata (%d..%d)" % (2 * window, 4 * window + 16384))
            check(smax <= wmax + 16384, what + ": more sent than written")
        else:
            check("[crpm] benchmark baseline l2_full_copy" in out, what + ": the baseline was not announced")
            check(smin >= prot, what + ": l2_full_copy must send the whole container")


def scenario_copy_error(c):
    # The partner copy of rank 0 cannot be written on node 1 (a directory
    # stands where its file is made): the first level-2 checkpoint fails on
    # every rank with a message naming the file, nobody hangs; once the
    # obstacle is gone the job runs to the failure-free result.
    ref = reference(c, 20)
    d = c.dir("copyerr")
    cfg = L.write_config(os.path.join(d, "crpm.ini"), d, "copyerr")
    os.makedirs(os.path.join(L.node_dir(d, 1), "copyerr", "partner-0.crpm.sync"))
    r = c.l2app(d, cfg, ARGS + ["--iters", "20"])
    check(r.rc != 0, "copy that cannot be written: exit code 0\n" + tail(r.out))
    for rank in range(L.NP):  # the holder's own error or CRPM_ERR_REMOTE carrying it
        check(re.search(r"^l2_app rank %d: crpm_checkpoint failed: .*partner-0\.crpm\.sync" % rank, r.out, re.M),
              "rank %d does not report the copy it could not write\n%s" % (rank, tail(r.out, 25)))
    os.rmdir(os.path.join(L.node_dir(d, 1), "copyerr", "partner-0.crpm.sync"))
    out = c.ok(c.l2app(d, cfg, ARGS + ["--iters", "20"]), "relaunch once the copy can be written")
    check(result(out) == ref, "relaunch: result %s, reference %s" % (result(out), ref))


def scenario_one_node_config(c):
    d = c.dir("onenode")
    cfg = L.write_config(os.path.join(d, "a.ini"), d, "a", {"node_size": 2, "ckpt_interval_l2": 1})
    r = c.run(d, [c.app, "--crpm", cfg, "--level", "1"], np=2)
    expect_all_fail(r, 2, "crpm_init", ERR_CONFIG, "one node with ckpt_interval_l2")
    cfg = L.write_config(os.path.join(d, "b.ini"), d, "b", {"node_size": 0, "ckpt_interval_l2": 1})
    r = c.run(d, [c.app, "--crpm", cfg, "--level", "1"], np=4)
    expect_all_fail(r, 4, "crpm_init", ERR_CONFIG, "shared-memory nodes (one machine)")
    cfg = L.write_config(os.path.join(d, "c.ini"), d, "c", {"node_size": 2})
    r = c.run(d, [c.app, "--crpm", cfg, "--level", "2", "--iters", "4"], np=2)
    expect_all_fail(r, 2, "crpm_checkpoint", ERR_CONFIG, "CRPM_L2 on one node")


SCENARIOS = [scenario_one_node, scenario_mirror, scenario_two_nonadjacent, scenario_pair_error, scenario_pair_l4,
             scenario_heat_pair_l4, scenario_hooks, scenario_first_checkpoint, scenario_bytes_sent, scenario_one_node_config,
             scenario_copy_error]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True, help="tests/l2 l2_app")
    ap.add_argument("--heat", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--no-l4", action="store_true", help="a build without HDF5: skip the level-4 scenarios")
    ap.add_argument("--only")
    a = ap.parse_args()
    scen = [s for s in SCENARIOS if not (a.no_l4 and "l4" in s.__name__)]
    c = Ctx(a.app, a.heat, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(scen, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
