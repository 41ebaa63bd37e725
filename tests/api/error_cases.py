#!/usr/bin/python3
"""Error and fallback scenarios of the API, driven through the heat example.

Each failing launch must exit non-zero, within its timeout, with the reason
printed once on every rank, by the application from crpm_last_error() ("heat
rank R: crpm_init failed: ..."; the library itself prints errors only at
verbosity 3), and must not remove the
checkpoints it refused.  Scenarios: another rank count (fewer and more), a
corrupt container, a missing container, containers of another job, a bad
configuration, verbosity-2 checkpoint lines, and (when level 4 is built) the
fallback to a level-4 checkpoint when a container is lost.

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import glob
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402

TIMEOUT = 60

Failed = crpmtest.Failure


class Ctx:
    def __init__(self, heat, workdir):
        self.heat = heat
        self.workdir = workdir
        self.ckpt = os.path.join(workdir, "ckpt")
        self.glbl = os.path.join(workdir, "glbl")

    def cfg(self, name, body):
        p = os.path.join(self.workdir, name + ".ini")
        with open(p, "w") as f:
            f.write(body)
        return p

    def basic(self, name, job="heat", keep=1, verbosity=1, extra=""):
        return self.cfg(name, "[basic]\nckpt_dir = %s\njob_name = %s\nkeep_last_ckpt = %d\nverbosity = %d\n%s" % (
            self.ckpt, job, keep, verbosity, extra))

    def run(self, np, args, env=None):
        e = crpmtest.job_env(env, clear=crpmtest.CRPM_ENV_OVERRIDES)
        r = crpmtest.run_job(crpmtest.mpiexec(np) + [self.heat] + args, env=e, timeout=TIMEOUT)
        if r.timed_out:
            raise Failed("hung: no exit within %d s (%s)" % (TIMEOUT, " ".join(args)))
        return r.rc, r.out, r.elapsed

    def container(self, r, job="heat"):
        return os.path.join(self.ckpt, job, "rank-%d.crpm" % r)


def expect_ok(out_rc, what):
    rc, out, _ = out_rc
    if rc != 0:
        raise Failed("%s: exit code %d\n%s" % (what, rc, indent(out)))
    return out


def indent(text, n=12):
    return crpmtest.tail(text, n)


def checksum(out):
    return crpmtest.one_line(out, r"^checksum ", "checksum line")


def expect_error(res, np, per_rank):
    """Non-zero exit and, for every rank r, exactly one line on stderr matching
    per_rank(r) (a regex), printed by the application."""
    rc, out, secs = res
    if rc == 0:
        raise Failed("exit code 0, expected an error\n" + indent(out))
    for r in range(np):
        pat = re.compile(r"^heat rank %d: crpm_init failed: .*(%s)" % (r, per_rank(r)), re.M)
        if len(list(pat.finditer(out))) != 1:
            raise Failed("rank %d printed not exactly one message matching %r\n%s" % (r, pat.pattern, indent(out, 20)))
    if re.search(r"^\[crpm rank \d+\] crpm_", out, re.M):
        raise Failed("the library printed the error too (verbosity 1)\n" + indent(out, 20))
    return out


HEAT = ["--iters", "600", "--print-every", "100"]


def scenario_reference(c):
    out = expect_ok(c.run(4, HEAT), "heat without checkpointing")
    c.ref = checksum(out)
    cfg = c.basic("keep")
    out = expect_ok(c.run(4, HEAT + ["--crpm", cfg, "--ckpt-every", "50"]), "heat with checkpoints")
    if checksum(out) != c.ref:
        raise Failed("checkpointing changed the result")
    for r in range(4):
        if not os.path.exists(c.container(r)):
            raise Failed("keep_last_ckpt = 1 but %s is gone" % c.container(r))
    # a completed job with kept checkpoints restarts at its last iteration
    out = expect_ok(c.run(4, HEAT + ["--crpm", cfg, "--ckpt-every", "50"]), "restart of a finished job")
    if "restarted from iteration 600 (level 1)" not in out or checksum(out) != c.ref:
        raise Failed("restart did not resume at iteration 600\n" + indent(out))
    c.keep_cfg = cfg
    shutil.copytree(os.path.join(c.ckpt, "heat"), os.path.join(c.workdir, "heat-saved"))


def restore(c):
    shutil.rmtree(os.path.join(c.ckpt, "heat"), ignore_errors=True)
    shutil.copytree(os.path.join(c.workdir, "heat-saved"), os.path.join(c.ckpt, "heat"))


def check_intact_and_restartable(c):
    out = expect_ok(c.run(4, HEAT + ["--crpm", c.keep_cfg, "--ckpt-every", "50"]), "restart after repair")
    if "restarted from iteration 600" not in out or checksum(out) != c.ref:
        raise Failed("checkpoint not intact after the refused launch\n" + indent(out))


def scenario_fewer_ranks(c):
    restore(c)
    expect_error(c.run(2, HEAT + ["--crpm", c.keep_cfg, "--ckpt-every", "50"]), 2,
                 lambda r: "different number of ranks")
    check_intact_and_restartable(c)


def scenario_more_ranks(c):
    restore(c)
    expect_error(c.run(6, HEAT + ["--crpm", c.keep_cfg, "--ckpt-every", "50"]), 6,
                 lambda r: "different number of ranks")
    check_intact_and_restartable(c)


def scenario_corrupt(c):
    restore(c)
    with open(c.container(2), "r+b") as f:  # inside the checksummed superblock
        f.seek(90)
        b = f.read(1)
        f.seek(90)
        f.write(bytes([b[0] ^ 0x55]))
    expect_error(c.run(4, HEAT + ["--crpm", c.keep_cfg, "--ckpt-every", "50"]), 4,
                 lambda r: "corrupt" if r == 2 else r"container of rank\(s\) 2 .*corrupt")
    if not all(os.path.exists(c.container(r)) for r in range(4)):
        raise Failed("a refused launch removed containers")


def scenario_missing(c):
    restore(c)
    os.unlink(c.container(1))
    expect_error(c.run(4, HEAT + ["--crpm", c.keep_cfg, "--ckpt-every", "50"]), 4,
                 lambda r: r"container of rank\(s\) 1 is missing")
    restore(c)
    check_intact_and_restartable(c)


def scenario_foreign_job(c):
    restore(c)
    other = os.path.join(c.ckpt, "other")
    shutil.rmtree(other, ignore_errors=True)
    shutil.copytree(os.path.join(c.ckpt, "heat"), other)
    expect_error(c.run(4, HEAT + ["--crpm", c.keep_cfg, "--ckpt-every", "50"], env={"CRPM_JOB_NAME": "other"}), 4,
                 lambda r: "belongs to job 'heat'")
    shutil.rmtree(other)


def scenario_bad_config(c):
    cfg = c.cfg("bad", "; libcrpm\n[basic]\nckpt_dir = %s\njob_name = heat\nckpt_every = 10\n" % c.ckpt)
    expect_error(c.run(4, HEAT + ["--crpm", cfg, "--ckpt-every", "50"]), 4,
                 lambda r: re.escape(cfg) + r", line 5: unknown key 'ckpt_every'")
    cfg = c.cfg("nodir", "[basic]\njob_name = heat\n")
    expect_error(c.run(4, HEAT + ["--crpm", cfg, "--ckpt-every", "50"]), 4,
                 lambda r: "required key ckpt_dir missing")
    expect_error(c.run(4, HEAT + ["--crpm", os.path.join(c.workdir, "nope.ini")]), 4,
                 lambda r: "cannot open")


def scenario_verbose(c):
    cfg = c.basic("verbose", job="verbose", keep=0, verbosity=2)
    out = expect_ok(c.run(4, HEAT + ["--crpm", cfg, "--ckpt-every", "50"]), "verbosity 2")
    found = re.findall(r"^\[crpm\] checkpoint (\d+) \(L1\): .* written of .* protected \(.*%\) in ([0-9.]+) (s|ms|us)$",
                       out, re.M)
    lines = [x[0] for x in found]
    if lines != [str(i) for i in range(50, 601, 50)]:
        raise Failed("expected one line per checkpoint (50..600) on rank 0, got %s\n%s" % (lines, indent(out)))
    # times in a unit that shows them: never "0.0000 s"
    for _, v, unit in found:
        if float(v) <= 0 or (unit == "s" and float(v) < 1) or (unit == "ms" and float(v) < 1):
            raise Failed("checkpoint time printed as %s %s\n%s" % (v, unit, indent(out)))
    if os.path.exists(os.path.join(c.ckpt, "verbose")):
        raise Failed("keep_last_ckpt = 0 left the job directory")


def has_level4(c):
    cfg = c.basic("probe", job="probe", keep=0, extra="glbl_dir = %s\nckpt_interval = 10\nckpt_interval_l4 = 1\n"
                  % c.glbl)
    rc, out, _ = c.run(2, ["--iters", "10", "--crpm", cfg])
    if rc == 0:
        return True
    if "needs level-4 (HDF5) support" in out:
        return False
    raise Failed("level-4 probe failed\n" + indent(out))


def scenario_level4(c):
    if not has_level4(c):
        print("level4: skipped (this build has no level-4 support)")
        return
    # snapshot mode: a checkpoint every 40 iterations, every 3rd at level 4
    cfg = c.basic("l4", job="l4", keep=1, extra="glbl_dir = %s\nckpt_interval = 40\nckpt_interval_l4 = 3\n"
                  % c.glbl)
    rc, out, _ = c.run(4, HEAT + ["--crpm", cfg], env={"CRPM_TEST_KILL": "1:after_commit:8"})
    if rc == 0:
        raise Failed("the kill hook did not fire\n" + indent(out))
    l4 = sorted(glob.glob(os.path.join(c.glbl, "l4", "l4-*.h5")))
    if not l4:
        raise Failed("no level-4 file in %s" % os.path.join(c.glbl, "l4"))
    os.unlink(c.container(2, job="l4"))
    # restart from level 4, then die in the 2nd checkpoint after it
    rc, out, _ = c.run(4, HEAT + ["--crpm", cfg], env={"CRPM_TEST_KILL": "1:after_data:2"})
    # snapshot k is taken at the start of iteration 40k-1; the 6th was level 4
    if rc == 0 or "restarted from iteration 239 (level 4)" not in out:
        raise Failed("expected a level-4 restart at iteration 239 and a kill\n" + indent(out))
    # the level-1 containers were re-created at the level-4 restart and hold
    # the 1st checkpoint after it
    out = expect_ok(c.run(4, HEAT + ["--crpm", cfg]), "restart after the level-4 restart")
    if "restarted from iteration 279 (level 1)" not in out or checksum(out) != c.ref:
        raise Failed("expected a level-1 restart at iteration 279 and the reference result\n" + indent(out))
    # keep_last_ckpt = 0: finalize removes level-1 and level-4 files
    cfg = c.basic("l4rm", job="l4", keep=0, extra="glbl_dir = %s\nckpt_interval = 40\nckpt_interval_l4 = 3\n"
                  % c.glbl)
    expect_ok(c.run(4, HEAT + ["--crpm", cfg]), "level-4 run without keep_last_ckpt")
    # verbosity 2: a level-4 line reports the level-4 part (every protected
    # byte) beside the level-1 part
    cfg = c.basic("l4v", job="l4v", keep=0, verbosity=2,
                  extra="glbl_dir = %s\nckpt_interval = 40\nckpt_interval_l4 = 3\n" % c.glbl)
    out = expect_ok(c.run(4, HEAT + ["--crpm", cfg]), "level-4 run at verbosity 2")
    l4 = re.findall(r"^\[crpm\] checkpoint (\d+) \(L4\): (.+) written to level 4 in [0-9.]+ (?:s|ms|us); "
                    r"level 1: .+ written of (.+) protected \(.*%\) in [0-9.]+ (?:s|ms|us)$", out, re.M)
    if [x[0] for x in l4] != ["3", "6", "9", "12", "15"] or any(x[1] != x[2] for x in l4):
        raise Failed("expected level-4 lines for checkpoints 3..15 reporting the protected bytes\n" + indent(out))
    left = glob.glob(os.path.join(c.glbl, "l4", "*")) + glob.glob(os.path.join(c.ckpt, "l4", "*"))
    if left:
        raise Failed("finalize left %s" % left)


SCENARIOS = [scenario_reference, scenario_fewer_ranks, scenario_more_ranks, scenario_corrupt, scenario_missing,
             scenario_foreign_job, scenario_bad_config, scenario_verbose, scenario_level4]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--heat", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    c = Ctx(a.heat, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(SCENARIOS, c, c.workdir, fatal=("reference",))


if __name__ == "__main__":
    sys.exit(main())
