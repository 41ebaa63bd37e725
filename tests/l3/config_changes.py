#!/usr/bin/python3
"""A relaunch with another node layout or level-3 code than the checkpoints
were written with: a configuration mismatch on every rank, before any
node-loss reasoning, and nothing changed or removed.

8 ranks as simulated nodes (ckpt_dir = <dir>/node%n), run by the level-2
test program (tests/l2/l2_app.c as l3_app).  Each family writes its
checkpoints once (iteration 20, kept), then every variant starts from a
copy of them:

  node_size       level 2 with node_size = 2 (4 nodes), relaunched with
                  node_size = 1 and node_size = 4, with all nodes and with
                  node 1 wiped
  l3_code         level 3 with group_size = 4, l3_parity = 1 (8 nodes),
                  relaunched with l3_parity = 2 and with group_size = 8, with
                  all nodes and with node 1 wiped; then, with the original
                  configuration: node 3's parity container put in place of
                  its rank-3.crpm (the container kept aside by the test) fails
                  crpm_init on every rank with CRPM_ERR_IDENTITY naming the
                  file, nothing changed; and the files with their layout
                  records zeroed (as made before records existed) still
                  resume, with node 1 wiped too (rebuilt from parity)

Each mismatched launch must fail crpm_init on every rank with
CRPM_ERR_CONFIG and the exact message naming the key, the recorded value
and this run's, and leave every checkpoint file as it was (same names, same
bytes); relaunched with the original configuration, the job resumes from
iteration 20 (CRPM_STATUS_L1, or L2 / L3 with the node rebuilt) and ends with
the result of a failure-free run, bitwise.

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import hashlib
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "l2"))
import l2common as L  # noqa: E402
from l2common import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402
import l2_scenarios as S  # noqa: E402  (status, result, restarted, expect_all_fail)

NP = 8
TIMEOUT = 60
STATUS = {"l1": 1, "l2": 2, "l3": 3}  # CRPM_STATUS_Ln == n
ARGS = ["--n", "16384", "--window", "1024", "--ckpt-every", "2"]
RECORDED = r"\(recorded in \S+/(?:rank|partner|parity)-\d+\.crpm\)"
KEEP = "nothing was changed or removed"


class Ctx:
    def __init__(self, app, workdir):
        self.app, self.workdir = app, workdir
        self.refs = {}

    def run(self, d, cfg, level, iters):
        prog = [self.app, "--crpm", cfg, "--level", str(level), "--iters", str(iters)] + ARGS
        r = crpmtest.run_job(crpmtest.mpiexec(NP) + prog, env=L.launch_env(d), timeout=TIMEOUT)
        check(not r.timed_out, "hung for over %d s: %s" % (TIMEOUT, crpmtest.format_cmd(prog)))
        return r

    def ok(self, r, what):
        check(r.rc == 0, "%s: exit code %s\n%s" % (what, r.rc, tail(r.out, 25)))
        return r.out

    def reference(self, basic, level, iters):
        key = (tuple(sorted(basic.items())), level, iters)
        if key not in self.refs:
            d = crpmtest.make_workdir(os.path.join(self.workdir, "ref"))
            cfg = config(d, "ref", basic)
            self.refs[key] = S.result(self.ok(self.run(d, cfg, level, iters), "reference run"))
            crpmtest.clean_workdir(d)
        return self.refs[key]


def config(d, job, basic, keep=0):
    b = {"ckpt_dir": os.path.join(d, "node%n"), "job_name": job, "keep_last_ckpt": keep, "verbosity": 1}
    b.update(basic)
    p = os.path.join(d, "%s-%s.ini" % (job, "-".join("%s%s" % kv for kv in sorted(basic.items()))))
    with open(p, "w") as f:
        f.write("[basic]\n" + "".join("%s = %s\n" % kv for kv in b.items()))
    return p


def state(d):
    """{path: sha256} of every checkpoint file under d/node* (locks aside: a
    launch creates them, and a new layout makes new, empty node directories)."""
    out = {}
    for n in sorted(os.listdir(d)):
        if not n.startswith("node"):
            continue
        for top, _, files in os.walk(os.path.join(d, n)):
            for f in files:
                if f.endswith(".lock"):
                    continue
                p = os.path.join(top, f)
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, d)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def copy_of(c, src, lost=()):
    d = os.path.join(c.workdir, "v")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(src, d, ignore=shutil.ignore_patterns("*.ini", "vader*", "*.lock"))
    for k in lost:
        shutil.rmtree(os.path.join(d, "node%d" % k))
    return d


def expect_resume(c, d, basic, level, status, ref, what):
    out = c.ok(c.run(d, config(d, "job", basic, keep=1), level, 40), what)
    check(S.status(out) == STATUS[status], "%s: crpm_status %d, expected %d\n%s" % (
        what, S.status(out), STATUS[status], tail(out)))
    check(S.restarted(out) == 20, "%s: restarted from iteration %d" % (what, S.restarted(out)))
    check(S.result(out) == ref, "%s: result %s, reference %s" % (what, S.result(out), ref))


def family(c, name, basic, level, variants, lost_status, after=None):
    """One first run, then each variant (key, value, expected message) with
    no node lost and with node 1 wiped; then after(c, src, ref)."""
    src = crpmtest.make_workdir(os.path.join(c.workdir, name))
    c.ok(c.run(src, config(src, "job", basic, keep=1), level, 20), "first run")
    ref = c.reference(basic, level, 40)
    for key, value, message in variants:
        for lost in (False, True):
            what = "%s = %s%s" % (key, value, ", node 1 lost" if lost else "")
            d = copy_of(c, src, [1] if lost else [])
            before = state(d)
            check(before, what + ": no checkpoint files to compare")
            changed = dict(basic, **{key: value})
            r = c.run(d, config(d, "job", changed, keep=1), level, 40)
            S.expect_all_fail(r, NP, "crpm_init", S.ERR_CONFIG, "relaunch with " + what,
                              "^" + re.escape(S.ERR_CONFIG) + ": crpm_init: " + message + " " + RECORDED +
                              "; relaunch .*; " + KEEP + "$")
            now = state(d)
            check(now == before, "relaunch with %s changed checkpoint files: removed %s, added %s, changed %s" % (
                what, sorted(set(before) - set(now)), sorted(set(now) - set(before)),
                sorted(k for k in before if k in now and before[k] != now[k])))
            expect_resume(c, d, basic, level, lost_status if lost else "l1", ref,
                          "original configuration after " + what)
            shutil.rmtree(d, ignore_errors=True)
    if after:
        after(c, src, basic, level, ref)
    crpmtest.clean_workdir(src)


def nodes(ns, n):
    return r"node_size = %d \(%d nodes?\)" % (ns, n)


def scenario_node_size(c):
    variants = [(k, v, r"configuration mismatch: the checkpoints of job 'job' were written with %s, this run has %s"
                 % (nodes(2, 4), nodes(v, NP // v))) for k, v in (("node_size", 1), ("node_size", 4))]
    family(c, "ns", {"node_size": 2}, 2, variants, "l2")


LAYOUT_OFF, LAYOUT_LEN = 1024, 40  # format.h: struct crpm_layout_rec
ERR_IDENTITY = "container belongs to another job or rank"


def renamed_and_unrecorded(c, src, basic, level, ref):
    d = copy_of(c, src)
    job3 = os.path.join(d, "node3", "job")
    os.rename(os.path.join(job3, "rank-3.crpm"), os.path.join(d, "rank-3.crpm.kept"))
    shutil.copy(os.path.join(job3, "parity-3.crpm"), os.path.join(job3, "rank-3.crpm"))
    before = state(d)
    r = c.run(d, config(d, "job", basic, keep=1), level, 40)
    S.expect_all_fail(r, NP, "crpm_init", ERR_IDENTITY, "parity container in place of rank 3's container",
                      "^" + re.escape(ERR_IDENTITY) + ": crpm_init: " + re.escape(os.path.join(job3, "rank-3.crpm")) +
                      r" is named as a rank's container of rank 3 but its layout record says it is a level-3 parity "
                      r"container; refusing to use it \(a file was renamed or copied\); " + KEEP + "$")
    check(state(d) == before, "the refused launch changed checkpoint files")
    shutil.rmtree(d, ignore_errors=True)
    for lost in ([], [1]):
        d = copy_of(c, src, lost)
        for top, _, files in os.walk(d):
            for f in files:
                if f.endswith(".crpm"):
                    with open(os.path.join(top, f), "r+b") as fh:
                        fh.seek(LAYOUT_OFF)
                        fh.write(bytes(LAYOUT_LEN))
        expect_resume(c, d, basic, level, "l3" if lost else "l1", ref,
                      "files without layout records%s" % (", node 1 lost" if lost else ""))
        shutil.rmtree(d, ignore_errors=True)


def scenario_l3_code(c):
    variants = [(k, v, r"configuration mismatch: the level-3 parity of job 'job' was written with %s = %d, this run "
                 r"has %s = %d" % (k, was, k, v)) for k, was, v in (("l3_parity", 1, 2), ("group_size", 4, 8))]
    family(c, "l3", {"node_size": 1, "group_size": 4, "l3_parity": 1}, 3, variants, "l3", renamed_and_unrecorded)


SCENARIOS = [scenario_node_size, scenario_l3_code]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--app", required=True, help="l3_app (tests/l2/l2_app.c)")
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only")
    a = ap.parse_args()
    c = Ctx(a.app, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(SCENARIOS, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
