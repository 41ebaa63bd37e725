#!/usr/bin/python3
"""Crash/restart of an FTI program run with an unchanged FTI configuration.

  fti_crash.py --np N --trials T --seed S --max-kills K --kill-after A:B
               --timeout SEC --workdir DIR [--expect-recovery REGEX]
               [--env NAME=VALUE]...
               -- PROGRAM ARGS...

PROGRAM ARGS is an FTI application and its arguments, among them its FTI
configuration file, whose checkpoint directories are relative (./Local,
./Global, ./Meta as in FTI's examples).  Every run starts in a directory of
its own (DIR/reference, DIR/trial-NNN), so trials never share checkpoints
and the configuration file is never touched.

A reference run without failures gives the RESULT lines.  Each trial
SIGKILLs the whole job (every rank and mpirun) after a random delay in
[A, B] seconds -- or percent of the reference's wall time with A%:B% -- up to
K times, relaunching the same command in the same directory after each kill,
then lets it finish.  A trial passes when the last launch exits 0 with the
reference's RESULT lines (bit hashes of every rank's block) and no launch
printed a PROGRESS line the reference did not.  With --expect-recovery, at
least one launch over all trials must print a line matching REGEX (proof that
recovery was exercised, not only restarts from scratch); while none has, up to
T further trials run.
"""
import argparse
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402


def parse(argv):
    if "--" not in argv:
        sys.exit("fti_crash.py: missing '-- PROGRAM ARGS...'")
    cut = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--trials", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-kills", type=int, required=True)
    p.add_argument("--kill-after", required=True)
    p.add_argument("--timeout", type=float, required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--expect-recovery")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment of every launch (repeatable), e.g. CRPM_FTI_MINUTE=0.5")
    p.add_argument("--keep", action="store_true")
    a = p.parse_args(argv[:cut])
    a.extra_env = dict(x.split("=", 1) for x in a.env)
    a.prog = argv[cut + 1:]  # absolute paths: launches run in other directories
    if not a.prog:
        p.error("no PROGRAM after '--'")
    lo, hi = a.kill_after.split(":")
    a.relative = lo.endswith("%")
    a.lo, a.hi = float(lo.rstrip("%")), float(hi.rstrip("%"))
    return a


def main():
    a = parse(sys.argv[1:])
    root = crpmtest.make_workdir(a.workdir)
    cmd = crpmtest.mpiexec(a.np) + a.prog

    ref_dir = os.path.join(root, "reference")
    os.makedirs(ref_dir)
    r = crpmtest.run_job(cmd, env=crpmtest.job_env(a.extra_env, shm_dir=ref_dir, clear=crpmtest.CRPM_ENV_OVERRIDES), timeout=a.timeout, cwd=ref_dir)
    if r.rc != 0:
        print("reference run %s\n%s" % ("hung" if r.timed_out else "exited %d" % r.rc, crpmtest.tail(r.out)))
        return 1
    ref_result = crpmtest.matching(r.out, "^RESULT ")
    ref_lines = set(crpmtest.complete_lines(r.out))
    if not ref_result:
        print("reference printed no RESULT line\n" + crpmtest.tail(r.out))
        return 1
    lo, hi = (a.lo * r.elapsed / 100, a.hi * r.elapsed / 100) if a.relative else (a.lo, a.hi)
    print("reference: %.2f s, %s; kills after %.2f..%.2f s" % (r.elapsed, ref_result[-1], lo, hi))

    failed, recoveries, never_recovered = 0, 0, False
    t = -1
    while True:
        t += 1
        # with --expect-recovery, further trials (as many again at most) while
        # no kill has come late enough for a recovery: where random kills
        # land depends on the machine's load
        if t >= a.trials and (not a.expect_recovery or recoveries or t >= 2 * a.trials):
            break
        rng = random.Random(a.seed * 1000003 + t)
        d = os.path.join(root, "trial-%03d" % t)
        os.makedirs(d)
        os.chdir(d)  # launches inherit it: the relative directories of the config land here
        status, launches = crpmtest.relaunch_until_done(
            cmd, env_for=lambda i: crpmtest.job_env(a.extra_env, shm_dir=d, clear=crpmtest.CRPM_ENV_OVERRIDES),
            delays=lambda i: rng.uniform(lo, hi) if i < a.max_kills else None,
            timeout=a.timeout, max_launches=a.max_kills + 1)
        os.chdir(root)
        why = ""
        if status != "done":
            why = "%s after %d launches\n%s" % (status, len(launches), crpmtest.tail(launches[-1]["text"]))
        else:
            final = crpmtest.matching(launches[-1]["text"], "^RESULT ")
            if final != ref_result:
                why = "result differs from the reference:\n%s\n  reference:\n%s" % (
                    "\n".join("    | " + x for x in final) or "    (none)",
                    "\n".join("    | " + x for x in ref_result))
            for i, l in enumerate(launches):
                for x in crpmtest.matching(l["text"], "^PROGRESS "):
                    if x not in ref_lines and not why:
                        why = "launch %d printed a progress line the reference never printed: %r" % (i + 1, x)
        if a.expect_recovery:
            recoveries += sum(len(crpmtest.matching(l["text"], a.expect_recovery)) for l in launches)
        runs = ", ".join("killed at %.2fs" % l["killed_after"] if l["killed_after"] is not None
                         else "ran %.2fs" % l["elapsed"] for l in launches)
        print("trial %d: %s (%s)" % (t, "FAILED: " + why if why else "ok", runs))
        if why:
            failed += 1
        else:
            crpmtest.clean_workdir(d, a.keep)
    if a.expect_recovery and recoveries == 0:
        print("FAILED: no launch of any trial printed %r: recovery was never exercised" % a.expect_recovery)
        never_recovered = True
    print("%d passed, %d failed" % (t - failed, failed))
    if failed or never_recovered:
        return 1
    crpmtest.clean_workdir(root, a.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
