#!/usr/bin/python3
"""Restart refusals name the affected rank's file on every rank (issue 38, item 7).

NOT REGISTERED YET: it tests lib/mpi/decide.c's crpm_verdict_error (and
restart.c, which must hand it the affected ranks' paths), being rewritten by
the lead.  Enable it, once the messages below hold, with (tests/api/CMakeLists.txt,
after api_errors):

    crpm_add_script_test(NAME api_verdict_paths TIMEOUT 240 LABELS api
      COMMAND ${CRPM_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/verdict_paths.py --heat ${_heat}
              --workdir ${_api_work}/verdict_paths)

Four ranks, each its own node (node_size = 1), ckpt_dir = <ckpt>/node%n, so
rank r's container is <ckpt>/node<r>/heat/rank-<r>.crpm and no rank's own job
directory is another's.  Every failing launch must exit non-zero with one
"heat rank R: crpm_init failed: ..." line per rank, and on EVERY rank, the
affected ones and the others alike:

  corrupt   rank 2's container damaged: the message names
            <ckpt>/node2/heat/rank-2.crpm;
  missing   rank 1's container removed: names <ckpt>/node1/heat/rank-1.crpm;
  epoch     rank 1's container replaced by its copy of 4 checkpoints before:
            names <ckpt>/node1/heat/rank-1.crpm (the rank that cannot be
            reconciled with the others);

and no message names a node's job directory as where another node's rank
keeps its container: every path <ckpt>/node<k>/heat/rank-<j>.crpm in it has
k == j, and no bare <ckpt>/node<k>/heat (one node's directory standing for
all of them, "here <ckpt>/node0/heat", "in <ckpt>/node3/heat") appears.
No file is changed by a refused launch.

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402

TIMEOUT = 60
NP = 4
Failed = crpmtest.Failure


class Ctx:
    def __init__(self, heat, workdir):
        self.heat = heat
        self.workdir = workdir
        self.ckpt = os.path.join(workdir, "ckpt")
        self.cfg = os.path.join(workdir, "nodes.ini")
        with open(self.cfg, "w") as f:
            f.write("[basic]\nckpt_dir = %s/node%%n\njob_name = heat\nkeep_last_ckpt = 1\nverbosity = 1\n"
                    "node_size = 1\n" % self.ckpt)

    def run(self, iters):
        e = crpmtest.job_env(None, clear=crpmtest.CRPM_ENV_OVERRIDES)
        args = ["--iters", str(iters), "--print-every", "100", "--crpm", self.cfg, "--ckpt-every", "50"]
        r = crpmtest.run_job(crpmtest.mpiexec(NP) + [self.heat] + args, env=e, timeout=TIMEOUT)
        if r.timed_out:
            raise Failed("hung: no exit within %d s" % TIMEOUT)
        return r.rc, r.out

    def node_dir(self, r):
        return os.path.join(self.ckpt, "node%d" % r, "heat")

    def container(self, r):
        return os.path.join(self.node_dir(r), "rank-%d.crpm" % r)

    def save(self, name):
        dst = os.path.join(self.workdir, name)
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(self.ckpt, dst)

    def restore(self, name):
        shutil.rmtree(self.ckpt, ignore_errors=True)
        shutil.copytree(os.path.join(self.workdir, name), self.ckpt)


def snapshot(c):
    """Every file under ckpt with its bytes (a refused launch changes none;
    lock files hold the process that held them)."""
    files = {}
    for d, _, names in os.walk(c.ckpt):
        for n in names:
            if n.endswith(".lock"):
                continue
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                files[p] = f.read()
    return files


def messages(c, rc, out):
    if rc == 0:
        raise Failed("exit code 0, expected a refusal\n" + crpmtest.tail(out, 12))
    msgs = {}
    for r in range(NP):
        lines = re.findall(r"^heat rank %d: crpm_init failed: (.*)$" % r, out, re.M)
        if len(lines) != 1:
            raise Failed("rank %d printed %d crpm_init failures, expected 1\n%s" % (r, len(lines),
                                                                                  crpmtest.tail(out, 20)))
        msgs[r] = lines[0]
    return msgs


def check_paths(c, msgs, affected):
    want = c.container(affected)
    base = re.escape(c.ckpt)
    for r, m in msgs.items():
        if want not in m:
            raise Failed("rank %d does not name the affected file %s:\n  %s" % (r, want, m))
        for k, j in re.findall(base + r"/node(\d+)/heat/rank-(\d+)\.crpm", m):
            if k != j:
                raise Failed("rank %d places rank %s's container in node %s's directory:\n  %s" % (r, j, k, m))
        bare = re.findall(base + r"/node(\d+)/heat(?!/rank-)", m)
        if bare:
            raise Failed("rank %d names node %s's job directory as if it held every rank's container:\n  %s"
                         % (r, bare[0], m))


def refused(c, affected, what):
    before = snapshot(c)
    rc, out = c.run(600)
    msgs = messages(c, rc, out)
    if not re.search(what, msgs[0]):
        raise Failed("not the expected refusal (%s):\n  %s" % (what, msgs[0]))
    check_paths(c, msgs, affected)
    after = snapshot(c)
    if after != before:
        changed = sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))
        raise Failed("a refused launch changed the checkpoint files: %s" % changed[:6])


def scenario_reference(c):
    rc, out = c.run(600)
    if rc != 0:
        raise Failed("heat with checkpoints: exit code %d\n%s" % (rc, crpmtest.tail(out, 12)))
    for r in range(NP):
        if not os.path.exists(c.container(r)):
            raise Failed("%s missing: node_size = 1 with %%n should give each rank its own directory" %
                         c.container(r))
    c.save("saved-600")
    # four more checkpoints (650 .. 800): the old copy of a rank is then 4 epochs behind
    rc, out = c.run(800)
    if rc != 0 or "restarted from iteration 600" not in out:
        raise Failed("restart and continue to 800: exit code %d\n%s" % (rc, crpmtest.tail(out, 12)))
    c.save("saved-800")


def scenario_corrupt(c):
    c.restore("saved-600")
    with open(c.container(2), "r+b") as f:  # inside the checksummed superblock
        f.seek(90)
        b = f.read(1)
        f.seek(90)
        f.write(bytes([b[0] ^ 0x55]))
    refused(c, 2, "corrupt")


def scenario_missing(c):
    c.restore("saved-600")
    os.unlink(c.container(1))
    refused(c, 1, "missing")


def scenario_epoch(c):
    c.restore("saved-800")
    shutil.copy2(os.path.join(c.workdir, "saved-600", "node1", "heat", "rank-1.crpm"), c.container(1))
    refused(c, 1, "epoch|reconcile")


SCENARIOS = [scenario_reference, scenario_corrupt, scenario_missing, scenario_epoch]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heat", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    c = Ctx(a.heat, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(SCENARIOS, c, c.workdir, only=a.only, fatal=("reference",))


if __name__ == "__main__":
    sys.exit(main())
