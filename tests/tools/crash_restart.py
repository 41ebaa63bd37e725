#!/usr/bin/python3
"""Crash/restart driver for libcrpm applications.

Runs PROGRAM once without failures (the reference), then TRIALS trials.  Each
trial starts with an empty checkpoint directory (CRPM_CKPT_DIR), SIGKILLs the
whole MPI job after a random delay in [A, B] seconds (up to MAX_KILLS times,
keeping the checkpoints), and relaunches until a run exits 0.  A and B may be
given as percentages of the reference run's wall time (--kill-after 15%:85%),
which keeps the kills inside the run however loaded the machine is.  A trial passes
when
  * the final run's lines matching --result equal the reference's, in order;
  * every complete line matching --progress printed by any run of the trial
    appears in the reference output (a restarted run must not print anything
    the failure-free run would not have);
  * no launch hangs past --timeout and no launch fails on its own.

With --hook-kill POINTS:N1-N2 the first launch of every trial also gets
CRPM_TEST_KILL=<rank>:<point>:<n> (rank, point and n drawn at random), which
makes that rank SIGKILL itself at that point of its n-th checkpoint; the kill
timer is not armed for that launch.  With --hook-pair P, a trial's hook also
kills, with probability P, another random rank at before_data of the same
checkpoint: that rank stays one epoch behind while the first may have
committed (after_commit) the checkpoint.

The MPI launcher comes from CRPM_MPIEXEC / CRPM_MPIEXEC_FLAGS (set by CTest's
crpm_add_script_test); the default is "mpirun --oversubscribe
--allow-run-as-root".  The last line printed is "N passed, M failed"; the exit
status is 0 only if every trial passed.

Example:
  crash_restart.py --np 4 --trials 20 --seed 1 --max-kills 2 --kill-after 0.3:1.5 \\
      --result '^checksum ' --progress '^iter ' --timeout 60 --workdir /tmp/w \\
      -- ./crpm_heat --crpm heat.ini --ckpt-every 10
"""
import argparse
import os
import random
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crpmtest  # noqa: E402
from crpmtest import complete_lines, tail  # noqa: E402

HOOK_POINTS = ("before_data", "after_data", "after_commit")


def parse_args(argv):
    if "--" not in argv:
        sys.exit("crash_restart.py: missing '-- PROGRAM ARGS...' (see --help)")
    cut = argv.index("--")
    prog = argv[cut + 1:]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                usage="%(prog)s [options] -- PROGRAM ARGS...")
    p.add_argument("--np", type=int, required=True, help="MPI ranks")
    p.add_argument("--trials", type=int, required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-kills", type=int, required=True, help="timer kills per trial")
    p.add_argument("--kill-after", required=True, metavar="A:B",
                   help="kill delay range in seconds, or in %% of the reference run's time")
    p.add_argument("--result", required=True, metavar="REGEX", help="lines that must equal the reference's")
    p.add_argument("--progress", metavar="REGEX", help="lines that must appear in the reference output")
    p.add_argument("--timeout", type=float, required=True, help="seconds allowed for one launch")
    p.add_argument("--workdir", required=True)
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment for every run (repeatable)")
    p.add_argument("--hook-kill", metavar="POINTS:N1-N2",
                   help="e.g. after_data,after_commit:1-5 (points from %s)" % ", ".join(HOOK_POINTS))
    p.add_argument("--hook-pair", type=float, default=0.0, metavar="P",
                   help="probability that a second rank dies at before_data of the same checkpoint")
    p.add_argument("--keep", action="store_true", help="keep checkpoint directories and logs of passed trials")
    a = p.parse_args(argv[:cut])
    if not prog:
        p.error("no PROGRAM after '--'")
    try:
        parts = a.kill_after.split(":")
        assert len(parts) == 2
        a.kill_relative = [x.endswith("%") for x in parts]
        lo, hi = (float(x.rstrip("%")) for x in parts)
        assert 0 <= lo and (a.kill_relative[0] != a.kill_relative[1] or lo <= hi)
    except (ValueError, AssertionError):
        p.error("--kill-after wants A:B (seconds, or N% of the reference time) with 0 <= A <= B")
    a.kill_range = (lo, hi)
    a.extra_env = {}
    for e in a.env:
        if "=" not in e:
            p.error("--env wants NAME=VALUE, got %r" % e)
        k, v = e.split("=", 1)
        a.extra_env[k] = v
    a.hook = None
    if a.hook_kill:
        m = re.fullmatch(r"([a-z_,]+):(\d+)-(\d+)", a.hook_kill)
        pts = m.group(1).split(",") if m else []
        if not m or not pts or any(x not in HOOK_POINTS for x in pts) or not 1 <= int(m.group(2)) <= int(
                m.group(3)):
            p.error("--hook-kill wants POINTS:N1-N2, e.g. after_data,after_commit:1-5")
        a.hook = (pts, int(m.group(2)), int(m.group(3)))
    try:
        a.result_re = re.compile(a.result)
        a.progress_re = re.compile(a.progress) if a.progress else None
    except re.error as e:
        p.error("bad regular expression: %s" % e)
    if a.np < 1 or a.trials < 0 or a.max_kills < 0 or a.timeout <= 0:
        p.error("--np >= 1, --trials >= 0, --max-kills >= 0 and --timeout > 0 required")
    return a, prog


def base_env(args, ckpt_dir):
    # Open MPI's shared-memory files of killed jobs are never unlinked: keep
    # them in the trial's directory, which is removed with it.
    return crpmtest.job_env(args.extra_env, ckpt_dir=ckpt_dir,
                            shm_dir=os.path.dirname(os.path.abspath(ckpt_dir)))


def run_reference(args, prog):
    d = crpmtest.make_workdir(os.path.join(args.workdir, "reference"))
    job = crpmtest.Job(crpmtest.mpiexec(args.np) + prog, env=base_env(args, os.path.join(d, "ckpt")),
                       out_path=os.path.join(d, "run.out"))
    rc = job.wait(args.timeout)
    if rc is None:
        job.kill()
        sys.exit("reference run hung (over %.0f s)\n%s\n0 passed, %d failed" % (args.timeout, tail(job.text()),
                                                                               args.trials))
    job.finish()
    text = job.text()
    if rc != 0:
        sys.exit("reference run failed with exit code %d\n%s\n0 passed, %d failed" % (rc, tail(text), args.trials))
    lines = complete_lines(text)
    result = [x for x in lines if args.result_re.search(x)]
    if not result:
        sys.exit("reference run printed no line matching --result %r\n%s\n0 passed, %d failed" % (
            args.result, tail(text), args.trials))
    if not args.keep:
        shutil.rmtree(os.path.join(d, "ckpt"), ignore_errors=True)
    return result, set(lines), job.elapsed


def run_trial(args, prog, t, ref_result, ref_lines):
    rng = random.Random(args.seed * 1000003 + t)
    d = crpmtest.make_workdir(os.path.join(args.workdir, "trial-%03d" % t))
    ckpt = os.path.join(d, "ckpt")
    t_start = time.time()
    hook = None
    if args.hook:
        pts, n1, n2 = args.hook
        r, n = rng.randrange(args.np), rng.randint(n1, n2)
        hook = "%d:%s:%d" % (r, rng.choice(pts), n)
        if args.np > 1 and rng.random() < args.hook_pair:
            hook += ",%d:before_data:%d" % ((r + rng.randrange(1, args.np)) % args.np, n)

    def env_for(i):
        env = base_env(args, ckpt)
        if hook is not None and i == 0:
            env["CRPM_TEST_KILL"] = hook
        return env

    def delay_for(i):
        # The hook launch is not timed; every other launch is, until
        # max_kills timer kills have happened (all earlier launches but the
        # hook launch were timer kills, or the loop would have ended).
        if hook is not None and i == 0:
            return None
        kills = i - (1 if hook is not None else 0)
        return rng.uniform(*args.kill_range) if kills < args.max_kills else None

    status, launches = crpmtest.relaunch_until_done(
        crpmtest.mpiexec(args.np) + prog, env_for, delay_for, args.timeout, args.max_kills + 2,
        log_for=lambda i: os.path.join(d, "run-%d.out" % i),
        tolerate=lambda i, rc: hook is not None and i == 0)
    events, texts = [], [x["text"] for x in launches]
    for i, x in enumerate(launches):
        if x["killed_after"] is not None:
            events.append("killed at %.2fs" % x["killed_after"])
        elif hook is not None and i == 0 and x["rc"] is not None:
            events.append("hook %s fired (exit %d)" % (hook, x["rc"]) if x["rc"] != 0 else
                          "hook %s did not fire" % hook)
    n = len(launches)
    if status == "too many launches":
        return False, "too many launches", events, texts
    if status == "unkillable":
        return False, "could not kill launch %d" % n, events, texts
    if status == "hung":
        return False, "launch %d hung (over %.0f s)\n%s" % (n, args.timeout, tail(texts[-1])), events, texts
    if status == "failed":
        return False, "launch %d failed with exit code %d\n%s" % (n, launches[-1]["rc"], tail(texts[-1])), \
            events, texts
    final = [x for x in complete_lines(texts[-1]) if args.result_re.search(x)]
    if final != ref_result:
        return False, "result differs from the reference:\n%s\n  reference:\n%s" % (
            "\n".join("    | " + x for x in final) or "    (no result line)",
            "\n".join("    | " + x for x in ref_result)), events, texts
    if args.progress_re:
        for i, text in enumerate(texts):
            for x in complete_lines(text):
                if args.progress_re.search(x) and x not in ref_lines:
                    return False, "launch %d printed a progress line the reference never printed: %r" % (
                        i + 1, x), events, texts
    events.append("%d launches, %.1f s" % (n, time.time() - t_start))
    crpmtest.clean_workdir(d, keep=args.keep)
    return True, "", events, texts


def main():
    args, prog = parse_args(sys.argv[1:])
    if args.hook:
        crpmtest.require_test_hooks("--hook-kill (CRPM_TEST_KILL)")
    args.workdir = os.path.abspath(args.workdir)
    os.makedirs(args.workdir, exist_ok=True)
    ref_result, ref_lines, ref_time = run_reference(args, prog)
    args.kill_range = tuple(x * ref_time / 100 if rel else x for x, rel in zip(args.kill_range, args.kill_relative))
    if args.kill_range[0] > args.kill_range[1]:
        args.kill_range = (args.kill_range[1], args.kill_range[0])
    print("reference: %.1f s, result: %s; kills after %.2f to %.2f s" % (
        ref_time, " / ".join(ref_result), args.kill_range[0], args.kill_range[1]), flush=True)
    passed = failed = timer_kills = hook_kills = 0
    for t in range(args.trials):
        ok, why, events, _ = run_trial(args, prog, t, ref_result, ref_lines)
        timer_kills += sum(e.startswith("killed at") for e in events)
        hook_kills += sum(e.startswith("hook") and "fired" in e for e in events)
        if ok:
            passed += 1
            print("trial %d: ok (%s)" % (t, ", ".join(events)), flush=True)
        else:
            failed += 1
            print("trial %d: FAILED (%s): %s\n  logs in %s" % (t, ", ".join(events), why,
                                                            os.path.join(args.workdir, "trial-%03d" % t)),
                  flush=True)
    if failed == 0 and not args.keep:
        shutil.rmtree(os.path.join(args.workdir, "reference"), ignore_errors=True)
        try:
            os.rmdir(args.workdir)
        except OSError:
            pass
    print("%d launches killed by the timer, %d by the test hook" % (timer_kills, hook_kills))
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 and passed == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
