#!/usr/bin/python3
"""A relaunch must resume, not start over.

The crash test compares final results only, which a program that ignores its
checkpoints also passes.  This runs PROGRAM once (reference), then once more
killed (every rank) as soon as it prints a line matching --kill-after, and relaunches it with
the unchanged arguments: the relaunch must print a line matching --resumed
whose first number is > 0, and the same --result lines as the reference.
Usage: resume_check.py --np 4 --workdir DIR --result RE --resumed RE --kill-after RE -- PROGRAM ARGS...
"""
import argparse
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402  (Job: mpiexec from CTest's settings, kill of every rank)


def main():
    cut = sys.argv.index("--")
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--resumed", required=True)
    ap.add_argument("--kill-after", required=True)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args(sys.argv[1:cut])
    prog = sys.argv[cut + 1:]
    a.workdir = os.path.abspath(a.workdir)
    shutil.rmtree(a.workdir, ignore_errors=True)

    def launch(name, ckpt):
        os.makedirs(ckpt, exist_ok=True)
        env = dict(os.environ, CRPM_CKPT_DIR=ckpt, OMPI_MCA_btl_vader_backing_directory=ckpt)
        return crpmtest.Job(crpmtest.mpiexec(a.np) + prog, env=env, out_path=os.path.join(a.workdir, name + ".out"))

    ref = launch("reference", os.path.join(a.workdir, "ref"))
    rc = ref.wait(a.timeout)
    ref.finish()
    t_ref = time.time() - ref.t0
    result = [x for x in ref.text().split("\n") if re.search(a.result, x)]
    if rc != 0 or not result:
        print("reference run failed (exit %s)\n%s" % (rc, crpmtest.tail(ref.text())))
        return 1
    ckpt = os.path.join(a.workdir, "run")
    first = launch("killed", ckpt)
    while not re.search(a.kill_after, first.text(), re.M):
        if first.wait(0.02) is not None:
            print("the run ended without printing %r\n%s" % (a.kill_after, crpmtest.tail(first.text())))
            return 1
    first.kill()
    t_kill = time.time() - first.t0
    second = launch("relaunch", ckpt)
    rc = second.wait(a.timeout)
    second.finish()
    text = second.text()
    m = re.search(a.resumed, text)
    n = int(re.search(r"\d+", m.group(0)).group(0)) if m and re.search(r"\d+", m.group(0)) else 0
    final = [x for x in text.split("\n") if re.search(a.result, x)]
    print("reference %.1f s, killed at %.1f s; relaunch: %s" % (t_ref, t_kill,
                                                                m.group(0) if m else "no resume line"))
    if rc != 0 or n <= 0 or final != result:
        print("FAILED: exit %s, resumed at %d, result %s (reference %s)\n%s" % (rc, n, final, result,
                                                                              crpmtest.tail(text)))
        return 1
    shutil.rmtree(a.workdir, ignore_errors=True)
    print("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
