#!/usr/bin/python3
"""Restart equivalence of heat_f90 (no crash involved).

  heat_restart_check.py --np N --iters N --stop-at K --workdir DIR
      --keep0 CFG --keep1 CFG -- HEAT ARGS...

Runs, each with its own CRPM_CKPT_DIR under DIR:
  plain      HEAT ARGS --iters N                   (no libcrpm at all)
  reference  HEAT ARGS --iters N --crpm keep0      (checkpointing on)
  first      HEAT ARGS --iters K --crpm keep1      (keeps its last checkpoint)
  resumed    HEAT ARGS --iters N --crpm keep0      (same directory as first)
and requires: identical RESULT lines for plain, reference and resumed (so
checkpointing does not perturb the run and a restart continues it bit for
bit); that `resumed` reports recovering at step K and `first` recovers
nothing; and that every PROGRESS line of first and resumed is one of the
reference's, with resumed printing only steps after K.
"""
import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit("heat_restart_check.py: missing '-- HEAT ARGS...'")
    cut = argv.index("--")
    prog = argv[cut + 1:]
    p = argparse.ArgumentParser()
    p.add_argument("--np", type=int, required=True)
    p.add_argument("--iters", type=int, required=True)
    p.add_argument("--stop-at", type=int, required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--keep0", required=True)
    p.add_argument("--keep1", required=True)
    p.add_argument("--timeout", type=float, default=60)
    a = p.parse_args(argv[:cut])
    if not prog or not 0 < a.stop_at < a.iters:
        p.error("need a program and 0 < --stop-at < --iters")

    a.workdir = crpmtest.make_workdir(a.workdir)
    failures = []

    def run(name, ckpt, extra):
        env = crpmtest.job_env(ckpt_dir=os.path.join(a.workdir, ckpt))
        r = crpmtest.run_job(crpmtest.mpiexec(a.np) + prog + extra, env=env, timeout=a.timeout)
        if r.timed_out:
            sys.exit("%s: hung (over %.0f s)" % (name, a.timeout))
        out = r.out
        if r.rc != 0:
            sys.exit("%s: exit code %d\n%s" % (name, r.rc, out))
        lines = out.splitlines()
        print("%s: %s" % (name, " / ".join(x for x in lines if x.startswith("RESULT steps="))))
        return lines

    def results(lines):
        return [x for x in lines if x.startswith("RESULT ")]

    def progress(lines):
        return [x for x in lines if x.startswith("PROGRESS ")]

    n, k = str(a.iters), str(a.stop_at)
    plain = run("plain", "plain", ["--iters", n])
    ref = run("reference", "ref", ["--iters", n, "--crpm", a.keep0])
    first = run("first", "resume", ["--iters", k, "--crpm", a.keep1])
    resumed = run("resumed", "resume", ["--iters", n, "--crpm", a.keep0])

    if not results(ref):
        failures.append("reference printed no RESULT line")
    if results(plain) != results(ref):
        failures.append("checkpointing changed the result:\n  %s\n  vs\n  %s" % (results(plain), results(ref)))
    if results(resumed) != results(ref):
        failures.append("resumed run differs from the reference:\n  %s\n  vs\n  %s" % (results(resumed),
                                                                                     results(ref)))
    if any("recovered" in x for x in first):
        failures.append("first run recovered although its directory was empty")
    want = "heat_f90: recovered at step %d" % a.stop_at
    if want not in resumed:
        failures.append("resumed run did not print %r" % want)
    ref_progress = set(progress(ref))
    for name, lines in (("first", first), ("resumed", resumed)):
        for x in progress(lines):
            if x not in ref_progress:
                failures.append("%s printed a progress line the reference did not: %r" % (name, x))
    for x in progress(resumed):
        m = re.search(r"step=(\d+)", x)
        if not m or int(m.group(1)) <= a.stop_at:
            failures.append("resumed run repeated work before step %d: %r" % (a.stop_at, x))
    if not progress(resumed):
        failures.append("resumed run printed no progress")

    for f in failures:
        print("FAILED: " + f)
    if not failures:
        print("restart equivalence: ok")
        crpmtest.clean_workdir(a.workdir)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
