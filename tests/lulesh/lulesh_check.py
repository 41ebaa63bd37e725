#!/usr/bin/python3
"""Runs LULESH and checks its results.

  lulesh_check.py --np N [--iterations I] [--energy E] [--same-as NP:ARGS]
                  [--crpm CFG --ckpt-every K --partial P] -- LULESH ARGS...

Always: the run exits 0, prints the "Run completed" block, and the plane-0
energy symmetry differences are tiny.
--iterations / --energy: the iteration count and the printed final origin
  energy (exact text, e.g. 2.720531e+04) must be these.
--same-as NP:ARGS: the same global problem decomposed differently (NP ranks,
  ARGS replacing the program's arguments) must give the same iteration count
  and origin energy.
--crpm CFG (CFG must keep its last checkpoint): with checkpoints every K
  cycles the result block, state digest included, is unchanged and the
  expected number of checkpoints is taken; then a run stopped after P cycles
  (-i P) and a relaunch, which must restart from the last checkpoint at or
  before P, end with the same result block as the run without checkpoints.
Checkpoints go to a fresh directory through CRPM_CKPT_DIR.
"""
import argparse
import os
import re
import shlex
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402

RESULT_KEYS = ("Problem size", "MPI tasks", "Iteration count", "Final Origin Energy", "MaxAbsDiff",
               "TotalAbsDiff", "MaxRelDiff", "State digest")


Failure = crpmtest.Failure


def run(np_, prog, env, timeout, what):
    cmd = crpmtest.mpiexec(np_) + prog
    print("$ " + crpmtest.format_cmd(cmd), flush=True)
    r = crpmtest.run_job(cmd, env=env, timeout=timeout)
    if r.timed_out:
        raise Failure("%s: hung for over %d s" % (what, timeout))
    if r.rc != 0:
        raise Failure("%s: exit code %d\n%s" % (what, r.rc, r.out))
    return r.out


def results(out, what):
    """The result block as an ordered list of (key, value text)."""
    found = {}
    for line in out.splitlines():
        m = re.match(r"^ +([A-Za-z][A-Za-z0-9 ]*?) += +(\S+)\s*$", line)
        if m and m.group(1) in RESULT_KEYS:
            found[m.group(1)] = m.group(2)
    if "Run completed:" not in out or any(k not in found for k in RESULT_KEYS):
        raise Failure("%s: incomplete result block\n%s" % (what, out))
    return [(k, found[k]) for k in RESULT_KEYS]


def show(res):
    return "\n".join("    %-20s = %s" % kv for kv in res)


def same(a, b, what):
    if a != b:
        raise Failure("%s differs:\n%s\n  expected:\n%s" % (what, show(a), show(b)))


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("lulesh_check.py: missing '-- LULESH ARGS...'")
    cut = argv.index("--")
    prog = argv[cut + 1:]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--iterations", type=int)
    ap.add_argument("--energy")
    ap.add_argument("--max-abs-diff", type=float, default=1e-10)
    ap.add_argument("--total-abs-diff", type=float, default=1e-9)
    ap.add_argument("--max-rel-diff", type=float, default=1e-10)
    ap.add_argument("--same-as", metavar="NP:ARGS")
    ap.add_argument("--crpm", metavar="CFG")
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--partial", type=int, help="cycles of the run that is restarted")
    ap.add_argument("--timeout", type=int, default=120, help="seconds per launch")
    a = ap.parse_args(argv[:cut])
    if not prog:
        ap.error("no program after '--'")
    if a.crpm and (a.partial is None or a.ckpt_every < 1 or a.partial < a.ckpt_every):
        ap.error("--crpm needs --ckpt-every K >= 1 and --partial P >= K")

    env = crpmtest.job_env()
    tmp = crpmtest.make_workdir(prefix="crpm-lulesh-")
    try:
        base = results(run(a.np, prog, env, a.timeout, "run without checkpoints"), "run without checkpoints")
        print(show(base), flush=True)
        r = dict(base)
        if a.iterations is not None and int(r["Iteration count"]) != a.iterations:
            raise Failure("iteration count %s, expected %d" % (r["Iteration count"], a.iterations))
        if a.energy is not None and r["Final Origin Energy"] != a.energy:
            raise Failure("final origin energy %s, expected %s" % (r["Final Origin Energy"], a.energy))
        for key, lim in (("MaxAbsDiff", a.max_abs_diff), ("TotalAbsDiff", a.total_abs_diff),
                         ("MaxRelDiff", a.max_rel_diff)):
            if not float(r[key]) <= lim:  # also rejects nan
                raise Failure("symmetry check: %s = %s exceeds %g" % (key, r[key], lim))

        if a.same_as:
            np2, args2 = a.same_as.split(":", 1)
            other = results(run(int(np2), prog[:1] + shlex.split(args2), env, a.timeout, "other decomposition"),
                            "other decomposition")
            pick = lambda res: [kv for kv in res if kv[0] in ("Iteration count", "Final Origin Energy")]
            same(pick(other), pick(base), "result of %s ranks with %s" % (np2, args2))
            print("same iteration count and energy with %s ranks: %s" % (np2, args2), flush=True)

        if a.crpm:
            crpm_args = ["--crpm", a.crpm, "--ckpt-every", str(a.ckpt_every)]
            env["CRPM_CKPT_DIR"] = os.path.join(tmp, "full")
            out = run(a.np, prog + crpm_args, env, a.timeout, "run with checkpoints")
            same(results(out, "run with checkpoints"), base, "result with checkpoints")
            want = int(r["Iteration count"]) // a.ckpt_every
            m = re.search(r"^crpm: (\d+) checkpoints in this run", out, re.M)
            if not m or int(m.group(1)) != want:
                raise Failure("expected 'crpm: %d checkpoints in this run'\n%s" % (want, out))
            print("checkpoints every %d cycles: same result, %d checkpoints" % (a.ckpt_every, want), flush=True)

            env["CRPM_CKPT_DIR"] = os.path.join(tmp, "restart")
            out = run(a.np, prog + crpm_args + ["-i", str(a.partial)], env, a.timeout, "partial run")
            if int(dict(results(out, "partial run"))["Iteration count"]) != a.partial:
                raise Failure("partial run did not stop after %d cycles\n%s" % (a.partial, out))
            out = run(a.np, prog + crpm_args, env, a.timeout, "restarted run")
            at = a.partial // a.ckpt_every * a.ckpt_every
            if not re.search(r"^crpm: restarted from cycle %d " % at, out, re.M):
                raise Failure("expected a restart from cycle %d\n%s" % (at, out))
            same(results(out, "restarted run"), base, "result after restart")
            print("restart from cycle %d: same result, state digest included" % at, flush=True)
    except Failure as e:
        print("FAILED: %s" % e, flush=True)
        return 1
    finally:
        crpmtest.clean_workdir(tmp)
    print("passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
