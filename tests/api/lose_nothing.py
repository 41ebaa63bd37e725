#!/usr/bin/python3
"""Ownership and safe-fallback scenarios, driven through the heat example.

  concurrent   a second launch of a running job is refused on every rank
               ("in use") and changes nothing; the first finishes with the
               failure-free result
  orphans      mpirun alone is killed and the job relaunched at once, again
               and again, beside its lingering ranks: never corrupt, never a
               wrong result; a refusal that says "in use" is fine, and the
               next launch after the ranks die succeeds
  mixed        a rank's container replaced by the same rank's file of another
               run of the job (same epoch, same id) is refused on every rank
  special      a FIFO or /dev/zero as the configuration fails at once
  geometry     a wrong segment_size beside an older level-4 file is an error
               on every rank and touches no file; the right one resumes
               level 1
  l4corrupt    a corrupt level-4 file as the only checkpoint is an error,
               not a fresh start, unless on_unrecoverable = fresh

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import glob
import hashlib
import os
import random
import shutil
import re
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402
from error_cases import Ctx, Failed, checksum, expect_error, expect_ok, has_level4, indent  # noqa: E402

LONG = ["--nx", "512", "--ny", "512", "--iters", "6000", "--print-every", "1000", "--ckpt-every", "50"]
BAD = re.compile(r"corrupt|cannot be reconciled|different checkpoints|checksum mismatch", re.I)


def digest(paths):
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(p.encode())
        with open(p, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def launch(c, np, args):
    e = crpmtest.job_env(None, clear=crpmtest.CRPM_ENV_OVERRIDES)
    return crpmtest.Job(crpmtest.mpiexec(np) + [c.heat] + args, env=e)


def wait_for(pred, limit, what):
    t0 = time.time()
    while time.time() - t0 < limit:
        if pred():
            return
        time.sleep(0.05)
    raise Failed("timed out waiting for %s" % what)


def scenario_concurrent(c):
    ref = checksum(expect_ok(c.run(4, LONG[:8]), "reference without checkpoints"))
    cfg = c.basic("conc", job="conc", keep=1, extra="[advanced]\nlock_wait_s = 1\n")
    first = launch(c, 4, LONG + ["--crpm", cfg])
    try:
        wait_for(lambda: os.path.exists(c.container(3, job="conc")), 60, "the first job's containers")
        rc, out, secs = c.run(4, LONG + ["--crpm", cfg])
        expect_error((rc, out, secs), 4, lambda r: "in use by another job")
        rc = first.wait(120)
        if rc is None:
            raise Failed("the first job did not finish\n" + indent(first.text()))
        out = first.text()
    finally:
        first.kill()
    if rc != 0 or checksum(out) != ref:
        raise Failed("the first job was disturbed (exit %s)\n%s" % (rc, indent(out)))


def scenario_orphans(c):
    ref = checksum(expect_ok(c.run(4, LONG[:8]), "reference without checkpoints"))
    cfg = c.basic("orph", job="orph", keep=0, extra="[advanced]\nlock_wait_s = 0\n")
    rng = random.Random(11)
    busy = 0
    for i in range(6):
        job = launch(c, 4, LONG + ["--crpm", cfg])
        rc = job.wait(rng.uniform(1.5, 4.0))
        if rc is None:
            os.kill(job.proc.pid, signal.SIGKILL)  # mpirun only: its ranks linger for a moment
            job.proc.wait()
        out = job.text()
        busy += "in use by another job" in out
        if BAD.search(out):
            raise Failed("launch %d reported damage\n%s" % (i, indent(out, 30)))
        if rc == 0 and checksum(out) != ref:
            raise Failed("launch %d finished with a wrong result\n%s" % (i, indent(out)))
        job.kill()  # reap what is left only after the next launch had its chance
    out = expect_ok(c.run(4, LONG + ["--crpm", cfg]), "final launch")
    if checksum(out) != ref or BAD.search(out):
        raise Failed("final result differs from the failure-free run\n" + indent(out))
    print("orphans: %d of 6 relaunches refused as in use" % busy)


def scenario_mixed(c):
    cfg = c.basic("mixed", job="mixed", keep=1)
    args = ["--iters", "600", "--print-every", "100", "--ckpt-every", "20", "--crpm", cfg]
    saved = os.path.join(c.workdir, "rank-2.other-run")
    for run in range(2):
        shutil.rmtree(os.path.join(c.ckpt, "mixed"), ignore_errors=True)
        rc, out, _ = c.run(4, args, env={"CRPM_TEST_KILL": "1:after_commit:6"})
        if rc == 0:
            raise Failed("the kill hook did not fire\n" + indent(out))
        if run == 0:
            shutil.copyfile(c.container(2, job="mixed"), saved)
    shutil.copyfile(saved, c.container(2, job="mixed"))
    expect_error(c.run(4, args), 4, lambda r: "different runs|another run")


def scenario_special(c):
    fifo = os.path.join(c.workdir, "fifo.ini")
    os.mkfifo(fifo)
    for cfg in (fifo, "/dev/zero"):
        rc, out, secs = c.run(2, ["--iters", "10", "--crpm", cfg])
        expect_error((rc, out, secs), 2, lambda r: "not a regular file|cannot open")
        if secs > 20:
            raise Failed("%s took %.1f s to fail" % (cfg, secs))


def scenario_longpath(c):
    # a ckpt_dir of about 4,000 characters under a regular file: the message
    # names the path and must still end with its reason
    deep = c.workdir
    while len(deep) < 3700:
        deep = os.path.join(deep, "d" * 200)
    os.makedirs(os.path.dirname(deep), exist_ok=True)
    open(deep, "w").close()
    deep = os.path.join(deep, "e" * (4000 - len(deep) - 1))
    cfg = c.basic("longpath", job="j", keep=0)
    # one rank: lines this long from several ranks interleave in the output
    rc, out, secs = c.run(1, ["--iters", "10", "--crpm", cfg], env={"CRPM_CKPT_DIR": deep})
    expect_error((rc, out, secs), 1, lambda r: "Not a directory")


def l4_setup(c, name, keep=1):
    return c.basic(name, job=name, keep=keep, extra="glbl_dir = %s\nckpt_interval = 40\nckpt_interval_l4 = 3\n"
                   % c.glbl)


def scenario_geometry(c):
    if not has_level4(c):
        print("geometry: skipped (no level-4 support)")
        return
    ref = checksum(expect_ok(c.run(4, ["--iters", "600", "--print-every", "100"]), "reference"))
    cfg = l4_setup(c, "geom")
    rc, out, _ = c.run(4, ["--iters", "600", "--print-every", "100", "--crpm", cfg],
                       env={"CRPM_TEST_KILL": "1:after_commit:8"})
    if rc == 0 or not glob.glob(os.path.join(c.glbl, "geom", "l4-*.h5")):
        raise Failed("setup: expected a kill after a level-4 checkpoint\n" + indent(out))
    files = glob.glob(os.path.join(c.ckpt, "geom", "*.crpm")) + glob.glob(os.path.join(c.glbl, "geom", "*"))
    before = digest(files)
    wrong = c.cfg("geomwrong", open(cfg).read() + "[advanced]\nsegment_size = 64K\n")
    expect_error(c.run(4, ["--iters", "600", "--print-every", "100", "--crpm", wrong]), 4,
                 lambda r: "segment|geometry|cannot be opened")
    after = glob.glob(os.path.join(c.ckpt, "geom", "*.crpm*")) + glob.glob(os.path.join(c.glbl, "geom", "*"))
    if sorted(after) != sorted(files) or digest(after) != before:
        raise Failed("the refused launch changed files:\n%s\n%s" % (sorted(files), sorted(after)))
    out = expect_ok(c.run(4, ["--iters", "600", "--print-every", "100", "--crpm", cfg]), "relaunch, right config")
    if "(level 1)" not in out or checksum(out) != ref:
        raise Failed("expected a level-1 restart and the reference result\n" + indent(out))


def scenario_l4corrupt(c):
    if not has_level4(c):
        print("l4corrupt: skipped (no level-4 support)")
        return
    ref = checksum(expect_ok(c.run(4, ["--iters", "600", "--print-every", "100"]), "reference"))
    cfg = l4_setup(c, "l4c")
    rc, out, _ = c.run(4, ["--iters", "600", "--print-every", "100", "--crpm", cfg],
                       env={"CRPM_TEST_KILL": "1:after_commit:4"})
    l4 = sorted(glob.glob(os.path.join(c.glbl, "l4c", "l4-*.h5")))
    if rc == 0 or len(l4) != 1:
        raise Failed("setup: expected one level-4 file and a kill\n" + indent(out))
    for p in glob.glob(os.path.join(c.ckpt, "l4c", "rank-*.crpm")):
        os.unlink(p)
    size = os.path.getsize(l4[0])
    with open(l4[0], "r+b") as f:  # the data sits in the second half of the file
        for off in range(size // 2, size - 64, 4096):
            f.seek(off)
            b = f.read(1)
            f.seek(off)
            f.write(bytes([b[0] ^ 0x5A]))
    expect_error(c.run(4, ["--iters", "600", "--print-every", "100", "--crpm", cfg]), 4,
                 lambda r: "corrupt")
    if not os.path.exists(l4[0]):
        raise Failed("the corrupt level-4 file was removed")
    fresh = c.cfg("l4cfresh", open(cfg).read() + "[advanced]\non_unrecoverable = fresh\n")
    out = expect_ok(c.run(4, ["--iters", "600", "--print-every", "100", "--crpm", fresh]), "opt-in fresh start")
    if checksum(out) != ref or "restarted" in out:
        raise Failed("expected a fresh start with the reference result\n" + indent(out))


SCENARIOS = [scenario_concurrent, scenario_orphans, scenario_mixed, scenario_special, scenario_longpath, scenario_geometry, scenario_l4corrupt]


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--heat", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--only", help="run one scenario")
    a = ap.parse_args()
    c = Ctx(a.heat, crpmtest.make_workdir(a.workdir))
    return crpmtest.run_scenarios(SCENARIOS, c, c.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
