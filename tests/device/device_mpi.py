#!/usr/bin/python3
"""GPU arrays through the public API and the FTI layer, on the mock device.

4 ranks as 4 simulated nodes (node_size = 1, ckpt_dir = <dir>/node%n) run
dev_app.c, whose arrays are mock device and managed memory
(CRPM_TEST_DEVICE=mock: libcrpm's GPU kinds run on tests/common/devops_mock.c,
which a test-hook build's libcrpm carries).
A "reference" is a failure-free run of 24 iterations.  A "first half" runs 12
iterations with keep_last_ckpt = 1; the relaunch with 24 resumes from it.

  levels    diff at level 2 with node 1 lost, fingerprint at level 3 with
            node 2 lost, full at level 4 with every node lost: status 2, 3, 4,
            restarted from iteration 12, the reference's result
  kill      each mode, levels 1-4 in turn, a rank killed inside a checkpoint
            (CRPM_TEST_KILL), relaunched (recovering with crpm_recover, or
            with crpm_recover_var array by array in fingerprint and full
            modes): the reference's result; protect
            says (verbosity 2) that array 1 is device memory in that mode's
            kind and array 2 managed memory
  fti       FTI_Protect of device and managed memory, FTI_Checkpoint at
            levels 1-4, a rank killed after a commit: the reference's result
  corrupt   a flipped byte of the device array's committed data in rank 0's
            container (crpm-inspect --verify names it), level 2: the restart
            rebuilds rank 0 from its partner copy (status 2) and ends with
            the reference's result
  mismatch  a relaunch protecting the device array with another size fails
            on every rank naming array 1; crpm-inspect --verify passes and
            lists array 1 with its size; the checkpoint survives: the next
            relaunch with the right size resumes and ends with the reference
  errors    crpm_protect_device of host memory: CRPM_ERR_INVAL "host memory"
            with the mock device; without it (this build's own device table)
            CRPM_ERR_DEVICE "no CUDA driver" or CRPM_ERR_NOTSUP "without
            CUDA"; an unknown mode is CRPM_ERR_INVAL; crpm_protect of host
            memory works; a device array whose copy cannot be allocated
            is checkpointed through copies and verbosity 1 says so, once

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import os
import re
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402

NP = 4
TIMEOUT = 60
N = 1 << 15
MOCK = {"CRPM_TEST_DEVICE": "mock"}


class Ctx:
    def __init__(self, a, workdir):
        self.app, self.inspect, self.workdir, self.l4 = a.app, a.inspect, workdir, not a.no_l4
        self.ref = None

    def dir(self, name):
        d = os.path.join(self.workdir, name)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        return d

    def config(self, d, extra=None):
        b = {"ckpt_dir": os.path.join(d, "node%n"), "job_name": "dev", "node_size": 1, "group_size": 4,
             "keep_last_ckpt": 1, "verbosity": 1}
        if self.l4:
            b["glbl_dir"] = os.path.join(d, "global")
        b.update(extra or {})
        p = os.path.join(d, "dev.ini")
        with open(p, "w") as f:
            f.write("[basic]\n" + "".join("%s = %s\n" % kv for kv in b.items()))
        return p

    def run(self, d, args, env=None, np=NP):
        e = crpmtest.job_env(dict(MOCK, **(env or {})), shm_dir=d, clear=crpmtest.CRPM_ENV_OVERRIDES)
        r = crpmtest.run_job(crpmtest.mpiexec(np) + [self.app] + args, env=e, timeout=TIMEOUT)
        check(not r.timed_out, "hung: %s\n%s" % (crpmtest.format_cmd(r.cmd), tail(r.out)))
        return r

    def ok(self, r, what):
        check(r.rc == 0, "%s: exit %s\n%s" % (what, r.rc, tail(r.out, 25)))
        return r.out

    def reference(self):
        if self.ref is None:
            d = self.dir("ref")
            out = self.ok(self.run(d, ["--crpm", self.config(d), "--n", str(N), "--iters", "24"]), "reference")
            self.ref = crpmtest.one_line(out, r"^result ")
        return self.ref


def status(out):
    return int(crpmtest.one_line(out, r"^dev_app: status ").split()[-1])


def resumed(c, d, args, what, want_status=None, env=None):
    out = c.ok(c.run(d, args + ["--iters", "24"], env=env), what)
    check("dev_app: restarted from iteration 12" in out, "%s: no restart from iteration 12\n%s" % (what, tail(out)))
    if want_status is not None:
        check(status(out) == want_status, "%s: status %d, expected %d\n%s" % (what, status(out), want_status,
                                                                           tail(out)))
    check(crpmtest.one_line(out, r"^result ") == c.reference(), "%s: result differs from the reference\n%s" % (
        what, tail(out)))
    return out


def scenario_levels(c):
    cases = [("diff", "2", [1], 2), ("fingerprint", "3", [2], 3)]
    if c.l4:
        cases.append(("full", "4", [0, 1, 2, 3], 4))
    for mode, level, lost, want in cases:
        d = c.dir("levels-" + mode)
        args = ["--crpm", c.config(d), "--n", str(N), "--mode", mode, "--levels", level]
        c.ok(c.run(d, args + ["--iters", "12"]), "%s: first half" % mode)
        for k in lost:
            shutil.rmtree(os.path.join(d, "node%d" % k))
        resumed(c, d, args, "%s at level %s, nodes %s lost" % (mode, level, lost), want)


def scenario_kill(c):
    levels = "1,2,3,4" if c.l4 else "1,2,3"
    for mode, hook, extra in (("auto", "1:after_data:3", []), ("fingerprint", "2:before_data:5", ["--recover-var"]),
                              ("full", "3:after_commit:4", ["--recover-var"])):
        d = c.dir("kill-" + mode)
        args = ["--crpm", c.config(d, {"keep_last_ckpt": 0, "verbosity": 2}), "--n", str(N), "--mode", mode,
                "--levels", levels, "--iters", "24"] + extra
        r = c.run(d, args, env={"CRPM_TEST_KILL": hook})
        check(r.rc != 0 and "result" not in r.out, "%s: the kill hook did not fire\n%s" % (mode, tail(r.out)))
        kind = {"auto": "cuda", "fingerprint": "cuda-fingerprint", "full": "cuda-full"}[mode]
        for what in ("array 1 is CUDA device memory (%s)" % kind, "array 2 is CUDA managed memory (cuda)"):
            check(what in r.out, "%s: protect did not say '%s'\n%s" % (mode, what, tail(r.out)))
        out = c.ok(c.run(d, args), "%s: relaunch after %s" % (mode, hook))
        check("dev_app: restarted from iteration" in out, "%s: no restart\n%s" % (mode, tail(out)))
        check(crpmtest.one_line(out, r"^result ") == c.reference(), "%s: result differs after %s\n%s" % (
            mode, hook, tail(out)))


def scenario_fti(c):
    d = c.dir("fti")
    text = ("[basic]\nhead = 0\nnode_size = 1\nckpt_dir = %s\nglbl_dir = %s\nmeta_dir = %s\n"
            "ckpt_l1 = 0\nckpt_l2 = 0\nckpt_l3 = 0\nckpt_l4 = 0\nkeep_last_ckpt = 0\ngroup_size = 4\n"
            "verbosity = 2\n" % (os.path.join(d, "local"), os.path.join(d, "global"), os.path.join(d, "meta")))
    cfg = os.path.join(d, "dev.fti")
    with open(cfg, "w") as f:
        f.write(text)
    args = ["--fti", cfg, "--n", str(N), "--levels", "1,2,3,4" if c.l4 else "1,2,3", "--iters", "24"]
    r = c.run(d, args, env={"CRPM_TEST_KILL": "1:after_commit:5"})
    check(r.rc != 0 and "result" not in r.out, "the kill hook did not fire\n" + tail(r.out))
    out = c.ok(c.run(d, args), "FTI relaunch")
    check("dev_app: restarted from iteration" in out, "no FTI_Recover\n" + tail(out))
    check(crpmtest.one_line(out, r"^result ") == c.reference(), "FTI: result differs\n" + tail(out))


def inspect(c, path, verify=True):
    return crpmtest.run_job([c.inspect] + (["--verify"] if verify else []) + [path], timeout=TIMEOUT)


def scenario_corrupt(c):
    d = c.dir("corrupt")
    args = ["--crpm", c.config(d), "--n", str(N), "--levels", "2"]
    c.ok(c.run(d, args + ["--iters", "12"]), "first half")
    path = os.path.join(d, "node0", "dev", "rank-0.crpm")
    size = os.path.getsize(path)
    hit = None
    with open(path, "r+b") as f:  # a byte whose flip crpm-inspect --verify reports in array 1
        for k in range(1, 64):
            off = size * k // 64
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0x40]))
            f.flush()
            r = inspect(c, path)
            if r.rc != 0 and re.search(r"array (id )?1\b", r.out):
                hit = off
                break
            f.seek(off)
            f.write(b)
            f.flush()
    check(hit is not None, "no byte of array 1's committed data found in %s" % path)
    resumed(c, d, args, "rank 0's container damaged at byte %d" % hit, 2)


def scenario_mismatch(c):
    d = c.dir("mismatch")
    args = ["--crpm", c.config(d), "--levels", "1"]
    c.ok(c.run(d, args + ["--n", str(N), "--iters", "12"]), "first half")
    r = inspect(c, os.path.join(d, "node1", "dev", "rank-1.crpm"))
    check(r.rc == 0, "crpm-inspect --verify: exit %s\n%s" % (r.rc, tail(r.out)))
    check(re.search(r"\b%d\b" % (N * 8), r.out), "crpm-inspect does not list array 1's %d bytes\n%s" % (
        N * 8, tail(r.out)))
    r = c.run(d, args + ["--n", str(2 * N), "--iters", "24"])
    check(r.rc != 0 and "result" not in r.out, "a relaunch with another size of array 1 did not fail\n" + tail(r.out))
    check(re.search(r"dev_app rank \d: crpm_recover failed: .*(array|id) 1\b", r.out),
          "the failure does not name array 1\n" + tail(r.out))
    resumed(c, d, args + ["--n", str(N)], "relaunch with the right size after a mismatch", 1)


def scenario_errors(c):
    d = c.dir("errors")
    cfg = c.config(d)
    out = c.ok(c.run(d, ["--crpm", cfg, "--errors"], np=1), "errors (mock device)")
    check(re.search(r"crpm_protect_device of host memory: -\d+ .*host memory, not CUDA", out),
          "host memory given to crpm_protect_device (mock device)\n" + tail(out))
    check(re.search(r"unknown mode: -\d+ .*unknown mode 9", out), "unknown mode\n" + tail(out))
    check("crpm_protect of host memory: 0" in out, "crpm_protect of host memory\n" + tail(out))
    out = c.ok(c.run(d, ["--crpm", cfg, "--errors"], np=1, env={"CRPM_TEST_DEVICE": None}), "errors (no GPU)")
    check(re.search(r"crpm_protect_device of host memory: -\d+ .*(no CUDA driver|without CUDA)", out),
          "without a GPU crpm_protect_device must say why\n" + tail(out))
    # no room for the device copy: the array is compared through copies, and verbosity 1 says so once
    args = ["--crpm", cfg, "--n", str(N), "--levels", "1", "--iters", "12"]
    out = c.ok(c.run(d, args, np=1, env={"CRPM_TEST_DEVICE": "mock:alloc=1"}), "a failed device allocation")
    said = re.findall(r"array 1 is CUDA device memory \(cuda\): its memory kind cannot follow it", out)
    check(len(said) == 1, "a device array that cannot be followed must be named once at verbosity 1\n" + tail(out))
    shutil.rmtree(os.path.join(d, "node0"), ignore_errors=True)
    out = c.ok(c.run(d, args, np=1), "one rank")
    check("CUDA device memory" not in out, "verbosity 1 names a device array that is followed\n" + tail(out))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--app", required=True)
    p.add_argument("--inspect", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--no-l4", action="store_true", help="no parallel HDF5: level 4 left out")
    p.add_argument("--only", help="run one scenario")
    a = p.parse_args()
    crpmtest.require_test_hooks("the mock GPU device (CRPM_TEST_DEVICE)")
    workdir = crpmtest.make_workdir(a.workdir)
    scenarios = [scenario_levels, scenario_kill, scenario_fti, scenario_corrupt, scenario_mismatch,
                 scenario_errors]
    return crpmtest.run_scenarios(scenarios, Ctx(a, workdir), workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
