#!/usr/bin/python3
"""Damaged checkpoints with real relaunches (issue 27): 4 ranks as 4 nodes
(node_size 1, ckpt_dir = <dir>/node%n), one bit flipped by damage_tool in a
named part of a file (damage.h), through the level-2 test program
(tests/l2/l2_app.c, built here as integrity_app).  A "reference" is a
failure-free run in a fresh directory; "the files are unchanged" compares
the SHA-256 of every file of the named nodes before and after.

  l3_survivor     level 3 (K = 4, M = 1), 16-KiB segments: a bit flipped in
                  every data segment of rank 1's container (its previous
                  epoch too) and node 2 wiped: every rank fails
                  crpm_init with CRPM_ERR_CORRUPT naming rank 1 (corrupt) and
                  rank 2 (missing), twice, and no file changes; with the
                  corrupt container removed instead: CRPM_ERR_MISSING, no
                  file changes; with it repaired (the saved bytes put back):
                  CRPM_STATUS_L3 and the reference result; a byte the last
                  checkpoint wrote flipped instead (the previous epoch
                  intact) with node 2 wiped: every rank resumes one
                  checkpoint back, rank 2 rebuilt from that checkpoint's
                  parity (CRPM_STATUS_L3, iteration 18, reference result)
  l3_unit_check   the same (a byte of every chunk) with the restart's data check
                  skipped (CRPM_TEST_SKIP_DATA_CHECK, test builds): the
                  survivor's own check of each unit it adds to the rebuild
                  refuses it: CRPM_ERR_CORRUPT on rank 1 and the failing rank's
                  message elsewhere, no container written, no file changed
  l2_owner        level 2: a data byte of rank 3's container flipped, no node
                  lost: CRPM_STATUS_L2, the reference result, the damaged file
                  kept as rank-3.crpm.corrupt-<time>; the same with that
                  container removed; the same with node 1 wiped too (rank 3
                  is not its neighbour)
  l2_owner_meta   level 2: rank 3's commit word, then its superblock, then its
                  committed metadata slot damaged: CRPM_STATUS_L2, reference
  l2_both         level 2, 16-KiB segments: rank 3's container and its
                  partner copy both damaged: in every data segment (its
                  previous epoch too): CRPM_ERR_CORRUPT naming both, files
                  unchanged; in one byte of a segment the last checkpoint
                  wrote (the previous epoch intact): every rank resumes one
                  checkpoint back (CRPM_STATUS_L1, restarted from iteration
                  18) and ends with the reference result
  l2_copy         level 2: a data byte of rank 3's partner copy flipped:
                  CRPM_STATUS_L1, reference; the copy was rewritten: node 3
                  then wiped, CRPM_STATUS_L2, reference; and with node 3
                  wiped while the copy is damaged: CRPM_ERR_CORRUPT naming the
                  copy, files unchanged
  l3_parity       level 3: a data byte of rank 0's parity flipped: CRPM_STATUS_L1,
                  reference; the parity was re-encoded: node 1 then wiped,
                  CRPM_STATUS_L3, reference; and with node 1 wiped while the
                  parity is damaged: CRPM_ERR_CORRUPT naming the parity, files
                  unchanged, then the parity repaired: CRPM_STATUS_L3, reference

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "l2"))
import l2common as L  # noqa: E402
from l2common import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402

L.configure(4, 1)
TIMEOUT = 60
STATUS = {"fresh": 0, "l1": 1, "l2": 2, "l3": 3, "l4": 4}  # CRPM_STATUS_Ln == n
ERR_CORRUPT = "checkpoint data is corrupt (checksum mismatch)"
ERR_MISSING = "some ranks have no checkpoint container for this job"
ERR_REMOTE = "the operation failed on another rank"
ARGS = ["--n", "65536", "--window", "512", "--ckpt-every", "2"]


class Ctx:
    def __init__(self, app, tool, workdir):
        self.app, self.tool, self.workdir = app, tool, workdir
        self.refs = {}

    def dir(self, name):
        return crpmtest.make_workdir(os.path.join(self.workdir, name))

    def run(self, d, cfg, level, iters, env=None):
        prog = [self.app, "--crpm", cfg, "--level", str(level), "--iters", str(iters)] + ARGS
        r = crpmtest.run_job(crpmtest.mpiexec(L.NP) + prog, env=L.launch_env(d, env), timeout=TIMEOUT)
        check(not r.timed_out, "hung for over %d s: %s" % (TIMEOUT, crpmtest.format_cmd(prog)))
        return r

    def damage(self, path, kind, seed=1):
        p = subprocess.run([self.tool, path, kind, str(seed)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True)
        check(p.returncode == 0, "damage_tool %s %s: %s" % (path, kind, p.stdout))
        return p.stdout

    def reference(self, level, iters, advanced=None):
        key = (level, iters, tuple(sorted((advanced or {}).items())))
        if key not in self.refs:
            d = self.dir("ref")
            cfg = config(d, "ref", level, advanced)
            r = self.run(d, cfg, level, iters)
            check(r.rc == 0, "reference run: exit code %s\n%s" % (r.rc, tail(r.out, 25)))
            self.refs[key] = result(r.out)
            crpmtest.clean_workdir(d)
        return self.refs[key]


def config(d, job, level, advanced=None, keep=1):
    b = {"keep_last_ckpt": keep}
    if level == 3:
        b.update(group_size=4, l3_parity=1)
    return L.write_config(os.path.join(d, job + ".ini"), d, job, b, advanced)


def status(out):
    return int(crpmtest.number_after(out, r"^l2_app: status (-?\d+)"))


def result(out):
    return crpmtest.one_line(out, r"^result ", "result line")


def own(d, job, r):
    return os.path.join(L.node_dir(d, r), job, "rank-%d.crpm" % r)


def copy_of(d, job, r):
    """Rank r's partner copy, on the next node."""
    return os.path.join(L.node_dir(d, (r + 1) % L.NNODES), job, "partner-%d.crpm" % r)


def parity(d, job, r):
    return os.path.join(L.node_dir(d, r), job, "parity-%d.crpm" % r)


def first_run(c, name, level, iters=20, advanced=None):
    d = c.dir(name)
    cfg = config(d, name, level, advanced)
    r = c.run(d, cfg, level, iters)
    check(r.rc == 0, "first run: exit code %s\n%s" % (r.rc, tail(r.out, 25)))
    return d, cfg


def expect_resume(c, d, cfg, level, iters, want, from_iter, what, advanced=None):
    r = c.run(d, cfg, level, iters)
    check(r.rc == 0, "%s: exit code %s\n%s" % (what, r.rc, tail(r.out, 25)))
    st = status(r.out)
    check(st == STATUS[want], "%s: crpm_status %d, expected %d (%s)\n%s" % (what, st, STATUS[want], want,
                                                                           tail(r.out)))
    it = crpmtest.number_after(r.out, r"^l2_app: restarted from iteration (\d+)")
    check(it == from_iter, "%s: restarted from iteration %s, expected %d" % (what, it, from_iter))
    ref = c.reference(level, iters, advanced)
    check(result(r.out) == ref, "%s: result %s, reference %s" % (what, result(r.out), ref))
    return r.out


def expect_all_fail(c, d, cfg, level, err, what, must=(), nodes=range(4)):
    """Every rank fails crpm_init with err and a message holding each of
    `must`; the files of `nodes` do not change."""
    before = L.node_state(d, nodes)
    r = c.run(d, cfg, level, 40)
    check(r.rc != 0, "%s: exit code 0, expected an error\n%s" % (what, tail(r.out)))
    for rank in range(L.NP):
        m = re.search(r"^l2_app rank %d: crpm_init failed: (.*)$" % rank, r.out, re.M)
        check(m, "%s: rank %d printed no 'crpm_init failed' line\n%s" % (what, rank, tail(r.out, 25)))
        check(m.group(1).startswith(err + ":"), "%s: rank %d: expected '%s', got %r" % (what, rank, err, m.group(1)))
        for text in must:
            check(text in m.group(1), "%s: rank %d's message lacks %r: %r" % (what, rank, text, m.group(1)))
        check(not re.search(r"remove the|rm -", m.group(1)), "%s: rank %d advises removing files: %r" % (
            what, rank, m.group(1)))
    check(L.node_state(d, nodes) == before, "%s changed files:\n%s\n%s" % (what, sorted(before),
                                                                         sorted(L.node_state(d, nodes))))


def set_aside(d, job, r):
    top = os.path.join(L.node_dir(d, r), job)
    return [f for f in os.listdir(top) if f.startswith("rank-%d.crpm.corrupt-" % r)]


def scenario_l3_survivor(c):
    adv = {"segment_size": "16K"}  # small segments: some hold data of the previous epoch too
    d, cfg = first_run(c, "l3s", 3, advanced=adv)
    saved = own(d, "l3s", 1) + ".saved"
    shutil.copyfile(own(d, "l3s", 1), saved)
    out = c.damage(own(d, "l3s", 1), "segments")
    check("previous epoch too" in out, "every segment damaged but not the previous epoch: %s" % out)
    L.wipe(d, [2])
    for attempt in ("relaunch", "second relaunch"):
        expect_all_fail(c, d, cfg, 3, ERR_CORRUPT, "%s with rank 1 corrupt, node 2 lost" % attempt,
                        ("container of rank(s) 1 ", "is corrupt", "container of rank(s) 2 is missing"), [0, 1, 3])
    kept = os.path.join(c.workdir, "l3s-kept")
    shutil.copytree(d, kept)
    os.unlink(own(d, "l3s", 1))
    expect_all_fail(c, d, cfg, 3, ERR_MISSING, "relaunch with the corrupt container removed", ("rank(s) 1, 2",),
                    [0, 1, 3])
    shutil.rmtree(d)
    shutil.copytree(kept, d)
    shutil.copyfile(saved, own(d, "l3s", 1))
    expect_resume(c, d, cfg, 3, 40, "l3", 20, "relaunch with the container repaired", adv)
    # a byte the last checkpoint wrote: rank 1's previous epoch is intact and
    # so is the parity of that checkpoint, so every rank resumes there, rank 2
    # rebuilt from parity at that epoch
    d, cfg = first_run(c, "l3s", 3)
    out = c.damage(own(d, "l3s", 1), "fresh")
    check("previous epoch too" not in out, "damage that should spare the previous epoch: %s" % out)
    L.wipe(d, [2])
    expect_resume(c, d, cfg, 3, 40, "l3", 18, "rank 1 corrupt at the newest checkpoint, node 2 lost")


def scenario_l2_owner(c):
    for how in ("kept", "removed", "node 1 lost too"):
        d, cfg = first_run(c, "l2o", 2)
        print("  " + c.damage(own(d, "l2o", 3), "data").strip())
        if how == "removed":
            os.unlink(own(d, "l2o", 3))
        if how == "node 1 lost too":
            L.wipe(d, [1])
        expect_resume(c, d, cfg, 2, 40, "l2", 20, "rank 3 corrupt (%s)" % how)
        aside = set_aside(d, "l2o", 3)
        check(len(aside) == (how != "removed"), "%s: set-aside files of rank 3: %s" % (how, aside))


def scenario_l2_owner_meta(c):
    for kind in ("commit", "super", "slot"):
        d, cfg = first_run(c, "l2m", 2)
        print("  " + c.damage(own(d, "l2m", 3), kind, 7).strip())
        expect_resume(c, d, cfg, 2, 40, "l2", 20, "rank 3's %s damaged" % kind)
        check(len(set_aside(d, "l2m", 3)) == 1, "%s: the damaged container was not kept aside" % kind)


def scenario_l2_both(c):
    adv = {"segment_size": "16K"}
    d, cfg = first_run(c, "l2b", 2, advanced=adv)
    out = c.damage(own(d, "l2b", 3), "segments")
    check("previous epoch too" in out, "every segment damaged but not the previous epoch: %s" % out)
    c.damage(copy_of(d, "l2b", 3), "segments")
    expect_all_fail(c, d, cfg, 2, ERR_CORRUPT, "rank 3 and its copy corrupt",
                    ("container of rank(s) 3 ", "partner copy of rank(s) 3 is corrupt",
                     "previous epoch of rank(s) 3 is corrupt"))
    # one byte the last checkpoint wrote: the epoch before it is intact everywhere
    d, cfg = first_run(c, "l2b", 2, advanced=adv)
    out = c.damage(own(d, "l2b", 3), "fresh")
    check("previous epoch too" not in out, "damage that should spare the previous epoch: %s" % out)
    c.damage(copy_of(d, "l2b", 3), "segments")
    expect_resume(c, d, cfg, 2, 40, "l1", 18, "rank 3 and its copy corrupt, its previous epoch intact", adv)


def scenario_l2_copy(c):
    d, cfg = first_run(c, "l2c", 2)
    c.damage(copy_of(d, "l2c", 3), "data")
    expect_resume(c, d, cfg, 2, 40, "l1", 20, "rank 3's partner copy corrupt")
    L.wipe(d, [3])
    expect_resume(c, d, cfg, 2, 60, "l2", 40, "node 3 lost after the copy was rewritten")
    d, cfg = first_run(c, "l2c", 2)
    c.damage(copy_of(d, "l2c", 3), "data")
    L.wipe(d, [3])
    expect_all_fail(c, d, cfg, 2, ERR_CORRUPT, "node 3 lost, its copy corrupt",
                    ("container of rank(s) 3 is missing", "partner copy of rank(s) 3 is corrupt"), [0, 1, 2])


def scenario_l3_parity(c):
    d, cfg = first_run(c, "l3p", 3)
    c.damage(parity(d, "l3p", 0), "data")
    expect_resume(c, d, cfg, 3, 40, "l1", 20, "rank 0's parity corrupt")
    L.wipe(d, [1])
    expect_resume(c, d, cfg, 3, 60, "l3", 40, "node 1 lost after the parity was re-encoded")
    d, cfg = first_run(c, "l3p", 3)
    saved = parity(d, "l3p", 0) + ".saved"
    shutil.copyfile(parity(d, "l3p", 0), saved)
    c.damage(parity(d, "l3p", 0), "data")
    L.wipe(d, [1])
    expect_all_fail(c, d, cfg, 3, ERR_CORRUPT, "node 1 lost, rank 0's parity corrupt",
                    ("container of rank(s) 1 is missing", "parity container of rank(s) 0 is corrupt"), [0, 2, 3])
    shutil.copyfile(saved, parity(d, "l3p", 0))
    expect_resume(c, d, cfg, 3, 40, "l3", 20, "node 1 lost, the parity repaired")


def scenario_l3_unit_check(c):
    d, cfg = first_run(c, "l3u", 3)
    c.damage(own(d, "l3u", 1), "chunks")
    L.wipe(d, [2])
    before = L.node_state(d, [0, 1, 3])
    r = c.run(d, cfg, 3, 40, env={"CRPM_TEST_SKIP_DATA_CHECK": "1"})
    check(r.rc != 0, "rebuild from a survivor whose units fail their CRCs succeeded\n%s" % tail(r.out))
    for rank in range(L.NP):
        m = re.search(r"^l2_app rank %d: crpm_init failed: (.*)$" % rank, r.out, re.M)
        check(m, "rank %d printed no 'crpm_init failed' line\n%s" % (rank, tail(r.out, 25)))
        want = ERR_CORRUPT if rank == 1 else ERR_REMOTE
        check(m.group(1).startswith(want + ":") and "fails its CRC32C check" in m.group(1)
              and "cannot serve the rebuild" in m.group(1), "rank %d: %r" % (rank, m.group(1)))
    check(L.node_state(d, [0, 1, 3]) == before, "the refused rebuild changed files")
    check(not os.path.exists(own(d, "l3u", 2)), "a container was written from the refused rebuild")


SCENARIOS = [scenario_l3_survivor, scenario_l3_unit_check, scenario_l2_owner, scenario_l2_owner_meta, scenario_l2_both, scenario_l2_copy,
             scenario_l3_parity]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True, help="integrity_app (tests/l2/l2_app.c)")
    ap.add_argument("--tool", required=True, help="damage_tool")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    c = Ctx(a.app, a.tool, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(SCENARIOS, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
