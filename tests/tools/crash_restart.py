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
import shlex
import shutil
import signal
import subprocess
import sys
import time

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


def launcher():
    exe = os.environ.get("CRPM_MPIEXEC") or "mpirun"
    flags = os.environ.get("CRPM_MPIEXEC_FLAGS")
    if flags is None:
        flags = "--oversubscribe --allow-run-as-root" if os.path.basename(exe) in ("mpirun", "mpiexec") else ""
    return [exe], shlex.split(flags)


def session_pids(sid):
    """Live (non-zombie) processes of session sid.  Open MPI puts every rank in
    a process group of its own, so the session is what holds the whole job."""
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rindex(")") + 2:].split()
        if fields[0] != "Z" and int(fields[3]) == sid:
            pids.append(int(d))
    return pids


def kill_job(proc):
    sid = proc.pid
    deadline = time.time() + 15
    while True:
        pids = session_pids(sid)
        if proc.poll() is None and sid not in pids:
            pids.append(sid)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.time() > deadline:
            return False
        time.sleep(0.02)
    proc.wait()
    return True


class Launch:
    def __init__(self, args, prog, env, out_path):
        self.out_path = out_path
        mpiexec, flags = launcher()
        cmd = mpiexec + ["-n", str(args.np)] + flags + prog
        self.out = open(out_path, "wb")
        self.t0 = time.time()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self.out, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True)

    def wait(self, limit):
        """Returns the exit code, or None if still running after limit s."""
        try:
            return self.proc.wait(timeout=max(0.0, limit - (time.time() - self.t0)))
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        ok = kill_job(self.proc)
        self.out.close()
        return ok

    def finish(self):
        # Ranks can outlive mpirun for a moment; none may touch the
        # checkpoints while the next launch starts.
        kill_job(self.proc)
        self.out.close()

    def text(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")


def complete_lines(text):
    lines = text.split("\n")
    return lines[:-1]  # the last element is empty or an unfinished line


def tail(text, n=15):
    return "\n".join("    | " + line for line in text.rstrip("\n").split("\n")[-n:])


def base_env(args, ckpt_dir):
    env = dict(os.environ)
    env.update(args.extra_env)
    env["CRPM_CKPT_DIR"] = ckpt_dir
    env.pop("CRPM_TEST_KILL", None)
    # Open MPI's shared-memory files of killed jobs are never unlinked: keep
    # them in the trial's directory, which is removed with it.
    env["OMPI_MCA_btl_vader_backing_directory"] = os.path.dirname(os.path.abspath(ckpt_dir))
    return env


def run_reference(args, prog):
    d = os.path.join(args.workdir, "reference")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    l = Launch(args, prog, base_env(args, os.path.join(d, "ckpt")), os.path.join(d, "run.out"))
    rc = l.wait(args.timeout)
    if rc is None:
        l.kill()
        sys.exit("reference run hung (over %.0f s)\n%s\n0 passed, %d failed" % (args.timeout, tail(l.text()),
                                                                               args.trials))
    l.finish()
    text = l.text()
    if rc != 0:
        sys.exit("reference run failed with exit code %d\n%s\n0 passed, %d failed" % (rc, tail(text), args.trials))
    lines = complete_lines(text)
    result = [x for x in lines if args.result_re.search(x)]
    if not result:
        sys.exit("reference run printed no line matching --result %r\n%s\n0 passed, %d failed" % (
            args.result, tail(text), args.trials))
    elapsed = time.time() - l.t0
    if not args.keep:
        shutil.rmtree(os.path.join(d, "ckpt"), ignore_errors=True)
    return result, set(lines), elapsed


def run_trial(args, prog, t, ref_result, ref_lines):
    rng = random.Random(args.seed * 1000003 + t)
    d = os.path.join(args.workdir, "trial-%03d" % t)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    ckpt = os.path.join(d, "ckpt")
    events, texts = [], []
    kills, launches = 0, 0
    t_start = time.time()
    hook = None
    if args.hook:
        pts, n1, n2 = args.hook
        r, n = rng.randrange(args.np), rng.randint(n1, n2)
        hook = "%d:%s:%d" % (r, rng.choice(pts), n)
        if args.np > 1 and rng.random() < args.hook_pair:
            hook += ",%d:before_data:%d" % ((r + rng.randrange(1, args.np)) % args.np, n)
    while True:
        env = base_env(args, ckpt)
        use_hook = hook is not None and launches == 0
        if use_hook:
            env["CRPM_TEST_KILL"] = hook
        arm = not use_hook and kills < args.max_kills
        delay = rng.uniform(*args.kill_range) if arm else None
        if launches >= args.max_kills + 2:
            return False, "too many launches", events, texts
        l = Launch(args, prog, env, os.path.join(d, "run-%d.out" % launches))
        launches += 1
        rc = l.wait(delay if arm else args.timeout)
        if rc is None and arm:
            if not l.kill():
                return False, "could not kill launch %d" % launches, events, texts
            kills += 1
            events.append("killed at %.2fs" % delay)
            texts.append(l.text())
            continue
        if rc is None:
            l.kill()
            texts.append(l.text())
            return False, "launch %d hung (over %.0f s)\n%s" % (launches, args.timeout, tail(texts[-1])), events, texts
        l.finish()
        texts.append(l.text())
        if rc != 0:
            if use_hook:
                events.append("hook %s fired (exit %d)" % (hook, rc))
                continue
            return False, "launch %d failed with exit code %d\n%s" % (launches, rc, tail(texts[-1])), events, texts
        if use_hook:
            events.append("hook %s did not fire" % hook)
        break
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
    events.append("%d launches, %.1f s" % (launches, time.time() - t_start))
    if not args.keep:
        shutil.rmtree(d, ignore_errors=True)
    return True, "", events, texts


def main():
    args, prog = parse_args(sys.argv[1:])
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
