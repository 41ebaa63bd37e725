#!/usr/bin/env python3
"""Run the HPCCG proxy and check its printed results.

  hpccg_check.py --np N [--expect LINE ...] [--crpm CFG --ckpt-every K]
                 [--timeout S] -- HPCCG ARGS...

1. A run without checkpointing must exit 0 and print every --expect line
   (whole lines, in the given order).
2. With --crpm (CFG must set keep_last_ckpt = 1): a run with checkpointing
   must print the same result lines as run 1 and report the expected number
   of checkpoints; a relaunch must then recover the last checkpoint, print
   only iteration lines of run 1 and end with the same results.

Lines starting with "Timing:" or "crpm:" are measurements or notices and are
not compared.  MPI launch settings come from CRPM_MPIEXEC and
CRPM_MPIEXEC_FLAGS (set by crpm_add_script_test).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402

ITER_RE = re.compile(r"^Iteration = (\d+) ")


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def launch(np_, cmd, timeout, env):
    full = crpmtest.mpiexec(np_) + cmd
    print("+ " + crpmtest.format_cmd(full), flush=True)
    r = crpmtest.run_job(full, env=env, timeout=timeout, separate_stderr=True)
    if r.timed_out:
        fail("timed out after %s s" % timeout)
    sys.stdout.write(r.out)
    if r.err:
        sys.stdout.write("[stderr]\n" + r.err)
    if r.rc != 0:
        fail("exit status %d" % r.rc)
    return r.lines


def results(lines):
    return [l for l in lines if not l.startswith(("Timing:", "crpm:"))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--crpm")
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--max-iter", type=int, default=150)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("missing program")
    cmd = cmd + ["--max-iter", str(a.max_iter)]

    env = crpmtest.job_env()
    ref = launch(a.np, cmd, a.timeout, env)
    pos = 0
    for want in a.expect:
        try:
            pos = ref.index(want, pos) + 1
        except ValueError:
            fail("expected line not printed (in order): %r" % want)
    ref_res = results(ref)
    if not any(l.startswith("Final digest:") for l in ref_res):
        fail("no 'Final digest:' line")
    if not a.crpm:
        print("PASS", flush=True)
        return

    ckdir = crpmtest.make_workdir(prefix="hpccg-check-")
    try:
        env["CRPM_CKPT_DIR"] = ckdir
        env["CRPM_JOB_NAME"] = "hpccg_check"
        ccmd = cmd + ["--crpm", a.crpm, "--ckpt-every", str(a.ckpt_every)]
        run1 = launch(a.np, ccmd, a.timeout, env)
        if results(run1) != ref_res:
            fail("results with checkpointing differ from the run without")
        n_ckpt = (a.max_iter - 1) // a.ckpt_every
        m = [re.match(r"^Timing: (\d+) checkpoint\(s\)", l) for l in run1]
        counts = [int(x.group(1)) for x in m if x]
        if counts != [n_ckpt]:
            fail("expected %d checkpoints to be reported, got %s" % (n_ckpt, counts))
        if any(l.startswith("crpm: recovered") for l in run1):
            fail("first run with a fresh checkpoint directory recovered something")

        # keep_last_ckpt = 1 left the last checkpoint: a relaunch resumes there.
        run2 = launch(a.np, ccmd, a.timeout, env)
        last = n_ckpt * a.ckpt_every
        if ("crpm: recovered level-1 checkpoint of iteration %d" % last) not in run2:
            fail("relaunch did not recover the checkpoint of iteration %d" % last)
        res2 = results(run2)
        ref_iters = [l for l in ref_res if ITER_RE.match(l)]
        iters2 = [l for l in res2 if ITER_RE.match(l)]
        if iters2 != [l for l in ref_iters if int(ITER_RE.match(l).group(1)) > last]:
            fail("relaunch printed iteration lines %s" % iters2)
        if [l for l in res2 if not ITER_RE.match(l)] != [l for l in ref_res if not ITER_RE.match(l)]:
            fail("results after restart differ from the failure-free run")
    finally:
        crpmtest.clean_workdir(ckdir)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
