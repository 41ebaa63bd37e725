#!/usr/bin/env python3
"""Runs one MPI program for the `fti` ITF module (tests/fti-itf/modules/fti).

    launch.py --np N --timeout S -- program args...

The job runs in a session of its own and, when it outlives the timeout, every
process of it is killed (tests/tools/crpmtest.py: mpirun and each rank).  Its
output goes to stdout; the exit code is the job's, or 124 on a timeout.
Checkpoint location and job name overrides are not inherited: the program's
FTI configuration file decides, as it does under FTI.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if not cmd:
        ap.error("no program given")
    env = crpmtest.job_env(clear=crpmtest.CRPM_ENV_OVERRIDES)
    r = crpmtest.run_job(crpmtest.mpiexec(a.np) + cmd, env=env, timeout=a.timeout)
    sys.stdout.write(r.out)
    if r.rc is None:
        sys.stdout.write("[fti-itf] killed after %.0f s: the job did not end\n" % a.timeout)
        return 124
    return r.rc if r.rc >= 0 else 128 - r.rc


if __name__ == "__main__":
    sys.exit(main())
