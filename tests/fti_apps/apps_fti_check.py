#!/usr/bin/python3
"""The FTI-API build of a proxy application computes what the native one does.

  apps_fti_check.py --np N --native EXE --fti EXE --result REGEX --recovered REGEX
                    [--expect TEXT ...] [--ckpt-every K] [--timeout S] -- APP ARGS...

1. The native executable without checkpointing: exits 0, prints every
   --expect text (each inside some line, in order) and at least one line
   matching --result (stripped, these are the reference results).
2. The native executable checkpointing every K steps (libcrpm config,
   verbosity 2): the same results; its library checkpoint lines are counted.
3. The FTI executable with an FTI configuration file as FTI users write one
   (keep_last_ckpt = 1): the same results, as many library checkpoints as the
   native run (and FTI_Finalize's level-4 copy of the last one in the global
   directory, as FTI keeps it), no recovery.
4. The FTI executable relaunched with the unchanged file: it must recover
   (a line matching --recovered, found through FTI_Status and FTI_Recover)
   and end with the same results again.

Checkpoints go to a fresh directory under /dev/shm, removed at the end.  MPI
launch settings come from CRPM_MPIEXEC / CRPM_MPIEXEC_FLAGS (CTest).
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402

CKPT_LINE = re.compile(r"^\[crpm\] checkpoint -?\d+ \(L\d\):")

FTI_CONFIG = """# FTI configuration (FTI's usual [basic] layout)
[basic]
head            = 0
node_size       = 1
ckpt_dir        = {d}/Local
glbl_dir        = {d}/Global
meta_dir        = {d}/Meta
ckpt_l1         = 0
ckpt_l2         = 0
ckpt_l3         = 0
ckpt_l4         = 0
inline_l2       = 1
inline_l3       = 1
inline_l4       = 1
keep_last_ckpt  = 1
group_size      = 1
verbosity       = 2
"""


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def launch(np_, cmd, timeout, env, what):
    full = crpmtest.mpiexec(np_) + cmd
    print("+ " + crpmtest.format_cmd(full), flush=True)
    r = crpmtest.run_job(full, env=env, timeout=timeout)
    sys.stdout.write(r.out)
    if r.timed_out:
        fail("%s: timed out after %s s" % (what, timeout))
    if r.rc != 0:
        fail("%s: exit status %d" % (what, r.rc))
    return r.lines


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--native", required=True)
    ap.add_argument("--fti", required=True)
    ap.add_argument("--result", required=True, help="regex of the result lines to compare")
    ap.add_argument("--recovered", required=True, help="regex of the application's restart notice")
    ap.add_argument("--expect", action="append", default=[])
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=90)
    ap.add_argument("args", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    args = a.args[1:] if a.args and a.args[0] == "--" else a.args
    result_re, recovered_re = re.compile(a.result), re.compile(a.recovered)

    def results(lines):
        return [l.strip() for l in lines if result_re.search(l)]

    def checkpoints(lines):
        return sum(1 for l in lines if CKPT_LINE.search(l))

    work = crpmtest.make_workdir(prefix="crpm-fti-apps-")
    try:
        env = crpmtest.job_env(env={"CRPM_CKPT_DIR": None, "CRPM_JOB_NAME": None})
        ref_lines = launch(a.np, [a.native] + args, a.timeout, env, "native, no checkpoints")
        pos = 0
        for want in a.expect:
            hit = next((i for i in range(pos, len(ref_lines)) if want in ref_lines[i]), None)
            if hit is None:
                fail("reference figure not printed (in order): %r" % want)
            pos = hit + 1
        ref = results(ref_lines)
        if not ref:
            fail("no result line matches %r" % a.result)

        ini = os.path.join(work, "native.ini")
        with open(ini, "w") as f:
            f.write("[basic]\nckpt_dir = %s/native\njob_name = native\nkeep_last_ckpt = 0\nverbosity = 2\n" % work)
        ck = ["--crpm", None, "--ckpt-every", str(a.ckpt_every)]
        ck[1] = ini
        nat = launch(a.np, [a.native] + args + ck, a.timeout, env, "native, checkpointing")
        if results(nat) != ref:
            fail("native results with checkpointing differ from the run without:\n%s\nvs\n%s" % (results(nat), ref))
        n_native = checkpoints(nat)
        if n_native < 2:
            fail("the native run took %d checkpoint(s); the test needs at least 2" % n_native)

        cfg = os.path.join(work, "app.fti")
        with open(cfg, "w") as f:
            f.write(FTI_CONFIG.format(d=work))
        ck[1] = cfg
        run1 = launch(a.np, [a.fti] + args + ck, a.timeout, env, "FTI API, checkpointing")
        if results(run1) != ref:
            fail("FTI-API results differ from the native ones:\n%s\nvs\n%s" % (results(run1), ref))
        # keep_last_ckpt = 1 with a global directory: FTI_Finalize writes the
        # last checkpoint there at level 4 (as FTI moves it), one checkpoint more
        flushed = any("keep_last_ckpt = 1: the last checkpoint is written to" in l for l in run1)
        if checkpoints(run1) != n_native + flushed:
            fail("the FTI-API run took %d checkpoints, the native one %d%s" % (
                checkpoints(run1), n_native, " and FTI_Finalize one at level 4" if flushed else ""))
        if any(recovered_re.search(l) for l in run1):
            fail("the FTI-API run recovered something from a fresh checkpoint directory")
        where = os.path.join(work, "Global" if flushed else "Local")
        suffix = ".h5" if flushed else ".crpm"
        found = [os.path.join(dp, fn) for dp, _, fns in os.walk(where) for fn in fns if fn.endswith(suffix)]
        if len(found) != (1 if flushed else a.np):
            fail("expected the last checkpoint (keep_last_ckpt = 1) under %s, found %s" % (where, found))

        run2 = launch(a.np, [a.fti] + args + ck, a.timeout, env, "FTI API, relaunch")
        if not any(recovered_re.search(l) for l in run2):
            fail("the relaunch with the unchanged FTI config did not recover")
        if results(run2) != ref:
            fail("FTI-API results after the restart differ:\n%s\nvs\n%s" % (results(run2), ref))
    finally:
        crpmtest.clean_workdir(work)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
