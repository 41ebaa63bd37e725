#!/usr/bin/python3
"""Level-3 scenarios with deterministic node losses (8 ranks as 8 nodes,
two groups of 4: nodes 0-3 and 4-7).

Driven through the level-2 test program (tests/l2/l2_app.c, built here as
l3_app: --level 3 calls crpm_checkpoint(id, CRPM_L3), prints crpm_status and
the statistics) and the heat example, with the helpers of tests/l2
(l2common.py, configured for one rank per node).  Every launch runs with
CRPM_TEST_L3_VERIFY=1 (each level-3 checkpoint compares the parity with a
full re-encode).  A "reference" is a failure-free run in a fresh directory.

  one_per_group   M = 1: nodes 1 and 6 lost (one per group): every rank
                  reports CRPM_STATUS_L3, resumes from the last checkpoint,
                  ends with the reference result; the lost containers are
                  back; the next launch (nothing lost) reports CRPM_STATUS_L1
  two_per_group   M = 2: nodes 0, 3 and 5 lost: CRPM_STATUS_L3, same result
  too_many        M = 1, nodes 1 and 2 lost, no level 4: every rank fails
                  crpm_init with CRPM_ERR_MISSING, twice, and the files of
                  the other nodes stay unchanged
  too_many_l4     the same with a level-4 checkpoint every 3rd: CRPM_STATUS_L4,
                  resumes from the newest level-4 checkpoint, same result
  parity_lost     only the parity containers of node 2 removed: the relaunch
                  reports CRPM_STATUS_L1 and writes them again at init; a
                  launch after that survives losing node 1 (whose rebuild
                  needs node 2's parity) with the reference result
  config          group_size 4 with 6 nodes and ckpt_interval_l3 = 1: init
                  fails on every rank ("multiple of 4 nodes"); l3_parity 3
                  with group_size 4 (and ckpt_interval_l3 = 1): init fails
                  (CRPM_ERR_CONFIG);
                  crpm_checkpoint(CRPM_L3) on one node: CRPM_ERR_CONFIG on
                  every rank
  bytes_sent      a level-3 checkpoint after a small change sends about M x
                  the changed bytes (M = 1 and 2), far less than the
                  protected bytes
  shapes          tests/l3/l3_shapes.c (every byte checked after the
                  restart): "mixed" (arrays of very different sizes per
                  rank, 4-KiB segments, so the units of a parity row define
                  different widths) with M = 1, nodes 1 and 6 lost, and with
                  M = 2, nodes 0, 1 and 6 lost (group 0 then loses a data
                  unit with a parity holder in two codewords and two data
                  units in one); "tiny" (1000 + 13 x rank arrays of 1-9
                  bytes: meta areas of 24-27 KB, longer than the rebuild's
                  first read and over two 16-KiB segments) with M = 2,
                  nodes 0, 1 and 6 lost: CRPM_STATUS_L3, every array equal
                  to what was checkpointed, the reference result
  l1_between      heat, crpm_snapshot with level 3 every 3rd checkpoint and
                  level 1 between: the failure-free run passes the parity
                  check; killed right after the commit of a level-3
                  checkpoint, after one level-1 checkpoint and after two,
                  then node 2 lost: with at most one level-1 checkpoint
                  after it, every survivor still holds the level-3 epoch
                  (two copies), so the relaunch rebuilds there (never at a
                  later epoch: the parity describes no other) and ends with
                  the reference checksum; after two the level-3 epoch is
                  overwritten and every rank fails crpm_init with
                  CRPM_ERR_MISSING

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "l2"))
import l2common as L  # noqa: E402
from l2common import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402
import l2_scenarios as S  # noqa: E402  (status, result, restarted, expect_all_fail, bytes_line)

L.configure(8, 1)
TIMEOUT = 60
STATUS = {"fresh": 0, "l1": 1, "l2": 2, "l3": 3, "l4": 4}  # CRPM_STATUS_Ln == n
VERIFY = {"CRPM_TEST_L3_VERIFY": "1"}
ARGS = ["--n", "131072", "--window", "4096", "--ckpt-every", "2", "--level", "3"]
REBUILT = re.compile(r"^\[crpm\] restart: (\d+) containers? rebuilt from level-3 parity at epoch (\d+)", re.M)


class Ctx:
    def __init__(self, app, heat, workdir, shapes=None):
        self.app, self.heat, self.workdir, self.shapes = app, heat, workdir, shapes

    def dir(self, name):
        return crpmtest.make_workdir(os.path.join(self.workdir, name))

    def run(self, d, prog, np=L.NP, env=None):
        e = dict(VERIFY, **(env or {}))
        r = crpmtest.run_job(crpmtest.mpiexec(np) + prog, env=L.launch_env(d, e), timeout=TIMEOUT)
        check(not r.timed_out, "hung for over %d s: %s" % (TIMEOUT, crpmtest.format_cmd(prog)))
        return r

    def app_run(self, d, cfg, args, np=L.NP, env=None):
        return self.run(d, [self.app, "--crpm", cfg] + args, np, env)

    def ok(self, r, what):
        check(r.rc == 0, "%s: exit code %s\n%s" % (what, r.rc, tail(r.out, 25)))
        return r.out


def config(d, name, parity=1, basic=None):
    b = {"group_size": 4, "l3_parity": parity}
    b.update(basic or {})
    return L.write_config(os.path.join(d, name + ".ini"), d, name, b)


def reference(c, iters, parity=1, extra=(), basic=None, name=None):
    d = c.dir(name or "ref-%d-%d" % (iters, parity))
    out = c.ok(c.app_run(d, config(d, "ref", parity, basic), ARGS + ["--iters", str(iters)] + list(extra)),
               "reference run")
    check(S.status(out) == STATUS["fresh"], "reference run: status %d" % S.status(out))
    crpmtest.clean_workdir(d)
    return S.result(out)


def first_run(c, name, iters=20, parity=1, basic=None, extra=(), env=None):
    """A run that keeps its last checkpoint (iteration `iters`)."""
    d = c.dir(name)
    b = {"keep_last_ckpt": 1}
    b.update(basic or {})
    cfg = config(d, name, parity, b)
    c.ok(c.app_run(d, cfg, ARGS + ["--iters", str(iters)] + list(extra), env=env), "first run")
    return d, cfg


def expect_resume(c, d, cfg, iters, want, ref, what, from_iter, extra=()):
    out = c.ok(c.app_run(d, cfg, ARGS + ["--iters", str(iters)] + list(extra)), what)
    st = S.status(out)
    check(st == want, "%s: crpm_status %d, expected %d\n%s" % (what, st, want, tail(out)))
    it = S.restarted(out)
    check(it == from_iter, "%s: restarted from iteration %d, expected %d" % (what, it, from_iter))
    check(S.result(out) == ref, "%s: result %s, reference %s" % (what, S.result(out), ref))
    return out


def files_of(d, node, job):
    p = os.path.join(L.node_dir(d, node), job)
    return sorted(os.listdir(p)) if os.path.isdir(p) else []


def scenario_one_per_group(c):
    ref = reference(c, 40)
    d, cfg = first_run(c, "one")
    L.wipe(d, [1, 6])
    out = expect_resume(c, d, cfg, 40, STATUS["l3"], ref, "relaunch after losing nodes 1 and 6", 20)
    m = REBUILT.search(out)
    check(m and m.group(1) == "2", "expected '2 containers rebuilt from level-3 parity'\n" + tail(out))
    for k in (1, 6):
        got = files_of(d, k, "one")
        check("rank-%d.crpm" % k in got and "parity-%d.crpm" % k in got,
              "node %d: container or parity not back: %s" % (k, got))
    expect_resume(c, d, cfg, 60, STATUS["l1"], reference(c, 60), "next relaunch, nothing lost", 40)


def scenario_two_per_group(c):
    ref = reference(c, 40, parity=2)
    d, cfg = first_run(c, "two", parity=2)
    L.wipe(d, [0, 3, 5])
    expect_resume(c, d, cfg, 40, STATUS["l3"], ref, "relaunch after losing nodes 0, 3 and 5 (M = 2)", 20)


def scenario_too_many(c):
    d, cfg = first_run(c, "many")
    L.wipe(d, [1, 2])
    others = [k for k in range(L.NNODES) if k not in (1, 2)]
    keep = L.node_state(d, others)
    check(keep, "nothing on the surviving nodes to keep")
    for attempt in ("relaunch", "second relaunch"):
        r = c.app_run(d, cfg, ARGS + ["--iters", "40"])
        S.expect_all_fail(r, L.NP, "crpm_init", S.ERR_MISSING, "%s after losing nodes 1 and 2 (M = 1)" % attempt,
                          r"lost|missing|rank")
        check(L.node_state(d, others) == keep, "%s changed or removed files of the surviving nodes" % attempt)


def scenario_too_many_l4(c):
    l4 = ["--l4-every", "3"]
    ref = reference(c, 40, extra=l4, basic={"glbl_dir": os.path.join(c.workdir, "ref-l4", "global")},
                    name="ref-l4")
    d, cfg = first_run(c, "manyl4", basic={"glbl_dir": os.path.join(c.workdir, "manyl4", "global")}, extra=l4)
    L.wipe(d, [4, 7])
    # checkpoints every 2 iterations, every 3rd at level 4: the newest level 4 is iteration 18
    expect_resume(c, d, cfg, 40, STATUS["l4"], ref, "relaunch after losing nodes 4 and 7 (M = 1)", 18, l4)


def scenario_parity_lost(c):
    ref20, ref40 = reference(c, 20), reference(c, 40)
    d, cfg = first_run(c, "par")
    job = os.path.join(L.node_dir(d, 2), "par")
    gone = [f for f in os.listdir(job) if f.startswith("parity-")]
    check(any(f.endswith(".crpm") for f in gone), "node 2 holds no parity container: %s" % os.listdir(job))
    for f in gone:
        os.remove(os.path.join(job, f))
    data = L.node_state(d, range(L.NNODES), skip=(".lock",))
    # resumes at iteration 20 and checkpoints nothing more: the parity can only come back at init
    expect_resume(c, d, cfg, 20, STATUS["l1"], ref20, "relaunch without node 2's parity", 20)
    check("parity-2.crpm" in files_of(d, 2, "par"), "node 2's parity container not written again: %s" %
          files_of(d, 2, "par"))
    after = L.node_state(d, range(L.NNODES), skip=(".lock",))
    for f, h in data.items():
        if "rank-" in f:
            check(after.get(f) == h, "%s changed by a relaunch that only re-encoded parity" % f)
    L.wipe(d, [1])
    expect_resume(c, d, cfg, 40, STATUS["l3"], ref40, "then node 1 lost", 20)


def scenario_config(c):
    d = c.dir("config")
    cfg = L.write_config(os.path.join(d, "a.ini"), d, "a", {"group_size": 4, "ckpt_interval_l3": 1})
    r = c.app_run(d, cfg, ["--level", "1", "--iters", "4"], np=6)
    S.expect_all_fail(r, 6, "crpm_init", S.ERR_CONFIG, "group_size 4 with 6 nodes", r"multiple of 4 nodes")
    cfg = L.write_config(os.path.join(d, "b.ini"), d, "b", {"group_size": 4, "l3_parity": 3, "ckpt_interval_l3": 1})
    r = c.app_run(d, cfg, ["--level", "1", "--iters", "4"])
    S.expect_all_fail(r, L.NP, "crpm_init", S.ERR_CONFIG, "l3_parity 3 with group_size 4", r"l3_parity")
    cfg = L.write_config(os.path.join(d, "c.ini"), d, "c", {"node_size": 2})
    r = c.app_run(d, cfg, ["--level", "3", "--iters", "4"], np=2)
    S.expect_all_fail(r, 2, "crpm_checkpoint", S.ERR_CONFIG, "CRPM_L3 on one node")


def scenario_bytes_sent(c):
    changed = 2 * 4096 * 8  # 2 iterations of 4096 doubles per checkpoint
    d = c.dir("bytes")
    for m in (1, 2):
        cfg = config(d, "b%d" % m, m)
        out = c.ok(c.app_run(d, cfg, ARGS + ["--iters", "20"]), "M = %d run" % m)
        total, smax, smin, wmax, prot = S.bytes_line(out)
        what = "M = %d: sent %d..%d bytes at the last checkpoint (written %d, protected %d per rank; %d in all)" % (
            m, smin, smax, wmax, prot, total)
        print("bytes_sent: " + what, flush=True)
        # the last checkpoint is differential (the first one encoded all)
        check(m * changed <= smin and smax <= m * changed + m * 16384,
              what + ": expected M x the changed bytes plus small metadata (%d..%d)" % (
                  m * changed, m * changed + m * 16384))
        check(smax < m * prot / 4, what + ": not far below M x the protected size (a full encode)")


def scenario_l1_between(c):
    d = c.dir("l1b")
    args = ["--nx", "128", "--ny", "64", "--iters", "40", "--print-every", "10"]
    ref = crpmtest.one_line(c.ok(c.run(d, [c.heat] + args), "heat without checkpoints"), r"^checksum ")
    basic = {"group_size": 4, "ckpt_interval": 1, "ckpt_interval_l3": 3}
    cfg = L.write_config(os.path.join(d, "ok.ini"), d, "ok", basic)
    out = c.ok(c.run(d, [c.heat] + args + ["--crpm", cfg]), "failure-free heat, level 3 every 3rd checkpoint")
    lv = L.levels(out)
    check(3 in lv and 1 in lv, "expected level-1 and level-3 checkpoints, got %s" % lv)
    check(crpmtest.one_line(out, r"^checksum ") == ref, "checksum differs with checkpoints\n" + tail(out))
    outcomes = []
    for after in (0, 1, 2):  # level-1 checkpoints after the newest level-3 one
        name = "k%d" % after
        cfg = L.write_config(os.path.join(d, name + ".ini"), d, name, basic)
        # the 4th level-3 checkpoint and `after` level-1 ones completed: killed
        # as the next checkpoint begins
        n = [i + 1 for i, x in enumerate(lv) if x == 3][3] + after + 1
        kill = ",".join("%d:before_data:%d" % (k, n) for k in range(L.NP))  # every rank: all at one epoch
        r = c.run(d, [c.heat] + args + ["--crpm", cfg], env={"CRPM_TEST_KILL": kill})
        check(r.rc != 0, "the kill hook did not fire\n" + tail(r.out))
        got = L.levels(r.out)
        l3_ids = [i for i, x in zip(L.committed_ids(r.out), got) if x == 3]
        check(l3_ids, "no level-3 checkpoint before the kill\n" + tail(r.out))
        L.wipe(d, [2])
        r2 = c.run(d, [c.heat] + args + ["--crpm", cfg])
        what = "killed %d level-1 checkpoint(s) after a level-3 one, node 2 lost" % after
        if r2.rc == 0:
            check(crpmtest.one_line(r2.out, r"^checksum ") == ref, what + ": wrong checksum\n" + tail(r2.out))
            m = REBUILT.search(r2.out)
            check(m, what + ": no rebuild from level-3 parity reported\n" + tail(r2.out))
            rid = L.recovered_id(r2.out)
            check(rid == l3_ids[-1], what + ": recovered checkpoint %s, the newest level-3 one is %d" % (
                rid, l3_ids[-1]))
            outcomes.append("%d L1 after: rebuilt at checkpoint %d (epoch %s)" % (after, rid, m.group(2)))
        else:
            errs = re.findall(r"^heat rank (\d+): crpm_init failed: (.*)$", r2.out, re.M)
            check(sorted(int(x) for x, _ in errs) == list(range(L.NP)),
                  what + ": failed, but not with a crpm_init error on every rank\n" + tail(r2.out, 25))
            outcomes.append("%d L1 after: error: %s" % (after, errs[0][1][:150]))
            check(after > 1, what + ": the level-3 epoch is still held by every survivor, the rebuild must "
                  "work\n" + tail(r2.out, 25))
            check(all(e.startswith(S.ERR_MISSING) for _, e in errs), what + ": expected CRPM_ERR_MISSING\n" +
                  tail(r2.out, 25))
        check(r2.rc == 0 or after > 1, what + ": expected a rebuild")
        check(r2.rc != 0 or after < 2, what + ": two level-1 checkpoints overwrote the epoch the parity describes, "
              "a rebuild is impossible")
    print("l1_between: " + "; ".join(outcomes), flush=True)


def scenario_shapes(c):
    for shape, parity, seg, lost in (("mixed", 1, "4K", [1, 6]), ("mixed", 2, "4K", [0, 1, 6]),
                                     ("tiny", 2, "16K", [0, 1, 6])):
        name = "shapes-%s-%d" % (shape, parity)
        args = ["--shape", shape, "--ckpt-every", "2"]
        basic = {"group_size": 4, "l3_parity": parity}
        adv = {"segment_size": seg}
        d = c.dir(name + "-ref")
        ref = S.result(c.ok(c.run(d, [c.shapes, "--crpm", L.write_config(os.path.join(d, "r.ini"), d, "r", basic, adv)]
                                  + args + ["--iters", "10"]), name + ": reference run"))
        crpmtest.clean_workdir(d)
        d = c.dir(name)
        cfg = L.write_config(os.path.join(d, "s.ini"), d, "s", dict(basic, keep_last_ckpt=1), adv)
        c.ok(c.run(d, [c.shapes, "--crpm", cfg] + args + ["--iters", "6"]), name + ": first run")
        L.wipe(d, lost)
        what = "%s: relaunch after losing nodes %s (M = %d)" % (name, lost, parity)
        out = c.ok(c.run(d, [c.shapes, "--crpm", cfg] + args + ["--iters", "10"]), what)
        m = re.search(r"^l3_shapes: status (\d+)", out, re.M)
        check(m and int(m.group(1)) == STATUS["l3"], "%s: expected status %d\n%s" % (what, STATUS["l3"], tail(out)))
        m = REBUILT.search(out)
        check(m and m.group(1) == str(len(lost)), "%s: expected %d containers rebuilt\n%s" % (what, len(lost),
                                                                                           tail(out)))
        v = re.search(r"^l3_shapes: verified (\d+) arrays, (\d+) bytes after restart from iteration 6$", out, re.M)
        check(v, "%s: no verification after the restart from iteration 6\n%s" % (what, tail(out)))
        check(S.result(out) == ref, "%s: result %s, reference %s" % (what, S.result(out), ref))
        print("shapes: %s: %s arrays, %s bytes verified" % (name, v.group(1), v.group(2)), flush=True)
        crpmtest.clean_workdir(d)


SCENARIOS = [scenario_one_per_group, scenario_two_per_group, scenario_too_many, scenario_too_many_l4,
             scenario_parity_lost, scenario_config, scenario_bytes_sent, scenario_shapes, scenario_l1_between]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True, help="l3_app (tests/l2/l2_app.c)")
    ap.add_argument("--heat", required=True)
    ap.add_argument("--shapes", required=True, help="l3_shapes (tests/l3/l3_shapes.c)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--no-l4", action="store_true", help="a build without HDF5: skip the level-4 scenarios")
    ap.add_argument("--only")
    a = ap.parse_args()
    scen = [s for s in SCENARIOS if not (a.no_l4 and "l4" in s.__name__)]
    c = Ctx(a.app, a.heat, crpmtest.make_workdir(a.workdir), a.shapes)
    return crpmtest.run_scenarios(scen, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
