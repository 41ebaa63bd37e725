#!/usr/bin/python3
"""The Python package crpm on 2 ranks (the build tree's package, found
through PYTHONPATH as CTest sets it):

  api         api_app.py's phases: write (many dtypes and shapes, recover in
              place), restart (a new launch recovers them, per rank), errors
              (every family of crpm.Error, ERR_REMOTE, ValueError for
              non-contiguous and read-only arrays, kept-alive arrays, the
              context manager)
  same_as_c   apps/examples/heat_py prints exactly what the C heat example
              prints (residuals and checksum)
  stop        heat.py with CRPM_END_TIME in the past: snapshot() returns
              SNAP_EXIT at iteration 0 on every rank; then a HALT file
              mid-run: it stops at iteration N > 0, and the relaunch resumes
              from N and ends with the C example's checksum
  global_heap global_heap_app.py's phases: a global dataset written on 2
              ranks and recovered on 3 (STATUS_RESHAPED), heap arrays in roots
              recovered in place and after a relaunch
  async       async = 1: test() False after a level-2 checkpoint, True
              after wait(); arrays written at once never reach the copy
              (a node lost, level 2 restores the checkpointed values)
  install     cmake --install into a scratch prefix: the package lands in
              the prefix's site-packages and loads the prefix's libcrpm
  pip         pip install of a copy of python/ into a virtual environment
              (offline: --no-index --no-build-isolation): imports and runs

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402

TIMEOUT = 120
NP = 2
HEAT_ARGS = ["--nx", "96", "--ny", "64", "--iters", "400", "--print-every", "50"]
SMOKE = """
import sys
from mpi4py import MPI
import numpy as np
import crpm
a = np.arange(1000.0)
with crpm.init(sys.argv[1]):
    crpm.protect(7, a)
    crpm.checkpoint(1)
    a[:] = 0
    crpm.recover()
assert a[999] == 999.0
if MPI.COMM_WORLD.rank == 0:
    print("smoke:", crpm._lib.lib._name, flush=True)
"""


class Ctx:
    def __init__(self, a):
        self.a = a
        self.py = sys.executable
        self.app = os.path.join(os.path.dirname(os.path.abspath(__file__)), "api_app.py")

    def dir(self, name):
        return crpmtest.make_workdir(os.path.join(self.a.workdir, name))

    def ini(self, d, **extra):
        path = os.path.join(d, "run.ini")
        with open(path, "w") as f:
            f.write("[basic]\nckpt_dir = %s\njob_name = pyheat\nverbosity = 1\n" % os.path.join(d, "ckpt"))
            for k, v in extra.items():
                f.write("%s = %s\n" % (k, v))
        return path

    def mpi(self, d, cmd, env=None, np=NP):
        e = {"CRPM_END_TIME": None, "SLURM_JOB_END_TIME": None}
        e.update(env or {})
        r = crpmtest.run_job(crpmtest.mpiexec(np) + cmd, env=crpmtest.job_env(e, shm_dir=d), timeout=TIMEOUT)
        check(not r.timed_out, "hung for over %d s: %s" % (TIMEOUT, crpmtest.format_cmd(cmd)))
        return r

    def heat_py(self, d, args, env=None):
        return self.mpi(d, [self.py, self.a.heat_py] + args, env)


def results(out):
    return crpmtest.matching(out, "^(iter |checksum )")


def scenario_api(c):
    d = c.dir("api")
    for phase in ("write", "restart", "errors"):
        r = c.mpi(d, [c.py, c.app, phase, d])
        check(r.rc == 0 and re.search(r"^%s: ok$" % phase, r.out, re.M),
              "phase %s failed (rc %s)\n%s" % (phase, r.rc, tail(r.out, 30)))
    check(not os.path.exists(os.path.join(d, "ckpt", "pyapi", "rank-0.crpm")),
          "the restart phase's finalize did not remove the checkpoints")


def scenario_same_as_c(c):
    d = c.dir("same")
    rc_ = c.mpi(d, [c.a.heat] + HEAT_ARGS)
    rp = c.heat_py(d, HEAT_ARGS)
    check(rc_.rc == 0 and rp.rc == 0, "runs failed: C %s, Python %s\n%s" % (rc_.rc, rp.rc, tail(rp.out)))
    check(results(rc_.out) and results(rp.out) == results(rc_.out),
          "Python and C differ:\n%s\n--- C:\n%s" % (tail(rp.out), tail(rc_.out)))


ASYNC = """
import sys
from mpi4py import MPI
import numpy as np
import crpm
r = MPI.COMM_WORLD.rank
a = np.arange(50000.0) + r
with crpm.init(sys.argv[1]):
    crpm.protect(1, a)
    if sys.argv[2] == "write":
        crpm.checkpoint(1, crpm.L2)
        busy = crpm.test()
        a[:] = -1.0  # at once: the background reads the committed copy
        crpm.wait()
        print("rank %d test %s %s" % (r, busy, crpm.test()), flush=True)
    else:
        crpm.recover()
        print("rank %d recovered %s status %d" % (r, bool((a == np.arange(50000.0) + r).all()), crpm.status()),
              flush=True)
"""


def scenario_async(c):
    """async = 1 (mpi4py initialises MPI_THREAD_MULTIPLE): test() after a
    level-2 checkpoint is False (the drain held by CRPM_TEST_DRAIN_DELAY_MS),
    True after wait(); the arrays written at once are not what the copy holds:
    node 1 lost, the relaunch recovers the checkpointed values from level 2."""
    crpmtest.require_test_hooks("holding a drain in flight (CRPM_TEST_DRAIN_DELAY_MS)")
    d = c.dir("async")
    cfg = os.path.join(d, "run.ini")
    with open(cfg, "w") as f:
        f.write("[basic]\nckpt_dir = %s/node%%n\njob_name = pyasync\nnode_size = 1\nasync = 1\n"
                "keep_last_ckpt = 1\nverbosity = 1\n" % d)
    script = os.path.join(d, "async_app.py")
    with open(script, "w") as f:
        f.write(ASYNC)
    r = c.mpi(d, [c.py, script, cfg, "write"], {"CRPM_TEST_DRAIN_DELAY_MS": "300"})
    for k in range(NP):
        check(r.rc == 0 and "rank %d test False True" % k in r.out, "rank %d: test() not False, then True after "
              "wait() (rc %s)\n%s" % (k, r.rc, tail(r.out)))
    shutil.rmtree(os.path.join(d, "node1"))
    r = c.mpi(d, [c.py, script, cfg, "verify"])
    for k in range(NP):
        check(r.rc == 0 and "rank %d recovered True status 2" % k in r.out, "rank %d: not checkpoint 1's values "
              "from level 2 (rc %s)\n%s" % (k, r.rc, tail(r.out)))


def scenario_stop(c):
    d = c.dir("stop")
    cfg = c.ini(d, ckpt_interval=25)
    ref = c.mpi(d, [c.a.heat] + HEAT_ARGS)
    # The end of the allocation already passed: stop at the first snapshot.
    r = c.heat_py(d, HEAT_ARGS + ["--crpm", cfg], {"CRPM_END_TIME": str(int(time.time()) - 60)})
    check(r.rc == 0 and re.search(r"^heat: stopped at iteration 0 on every rank", r.out, re.M),
          "no stop at iteration 0 (rc %s)\n%s" % (r.rc, tail(r.out)))
    check(not crpmtest.matching(r.out, "^checksum "), "a stopped run printed a result")
    check(os.path.exists(os.path.join(d, "ckpt", "pyheat", ".crpm-stopped")), "no .crpm-stopped marker")
    # A halt request mid-run: the relaunch resumes from where it stopped.
    halt = os.path.join(d, "ckpt", "pyheat", "HALT")
    env = crpmtest.job_env({"CRPM_END_TIME": None, "SLURM_JOB_END_TIME": None}, shm_dir=d)
    job = crpmtest.Job(crpmtest.mpiexec(NP) + [c.py, c.a.heat_py] + HEAT_ARGS + ["--delay-us", "3000", "--crpm", cfg],
                       env=env, out_path=os.path.join(d, "halt.out"))
    end = time.time() + TIMEOUT
    while not crpmtest.matching(job.text(), "^iter ") and job.proc.poll() is None and time.time() < end:
        time.sleep(0.02)
    open(halt, "w").close()
    rc = job.wait(TIMEOUT)
    job.kill()
    out = job.text()
    m = re.search(r"^heat: stopped at iteration (\d+) on every rank", out, re.M)
    check(rc == 0 and m and 0 < int(m.group(1)) < 400, "no stop mid-run after HALT (rc %s)\n%s" % (rc, tail(out)))
    os.unlink(halt)
    r = c.heat_py(d, HEAT_ARGS + ["--crpm", cfg])
    check(r.rc == 0 and re.search(r"^heat: restarted from iteration %s " % m.group(1), r.out, re.M),
          "the relaunch did not resume from iteration %s (rc %s)\n%s" % (m.group(1), r.rc, tail(r.out)))
    check(crpmtest.matching(r.out, "^checksum ") == crpmtest.matching(ref.out, "^checksum "),
          "the resumed run's checksum differs from the C example's")


def scenario_global_heap(c):
    d = c.dir("global_heap")
    app = os.path.join(os.path.dirname(os.path.abspath(__file__)), "global_heap_app.py")
    for phase, n in (("gwrite", 2), ("gread", 3), ("hwrite", 2), ("hread", 2)):
        r = c.mpi(d, [c.py, app, phase, d], np=n)
        check(r.rc == 0 and re.search(r"^%s: ok$" % phase, r.out, re.M),
              "phase %s on %d ranks failed (rc %s)\n%s" % (phase, n, r.rc, tail(r.out, 30)))


def scenario_install(c):
    d = c.dir("install")
    prefix = os.path.join(d, "prefix")
    r = subprocess.run([c.a.cmake, "--install", c.a.build, "--prefix", prefix], capture_output=True, text=True)
    check(r.returncode == 0, "cmake --install failed:\n%s" % tail(r.stdout + r.stderr))
    site = os.path.join(prefix, c.a.sitedir)
    check(os.path.exists(os.path.join(site, "crpm", "__init__.py")) and
          os.path.exists(os.path.join(site, "crpm", "_consts.py")), "package not installed in %s" % site)
    script = os.path.join(d, "smoke.py")
    with open(script, "w") as f:
        f.write(SMOKE)
    env = {"PYTHONPATH": site, "CRPM_LIBRARY": None}
    r = c.mpi(d, [c.py, script, c.ini(d)], env)
    check(r.rc == 0, "the installed package failed (rc %s)\n%s" % (r.rc, tail(r.out)))
    m = re.search(r"^smoke: (.*)$", r.out, re.M)
    check(m and os.path.realpath(m.group(1)).startswith(os.path.realpath(prefix)),
          "the installed package loaded %s, not the prefix's library\n%s" % (m.group(1) if m else "nothing", tail(r.out)))


def scenario_pip(c):
    d = c.dir("pip")
    src = os.path.join(d, "src")
    shutil.copytree(os.path.join(c.a.source, "python"), src, ignore=shutil.ignore_patterns("build", "*.egg-info",
                                                                                          "__pycache__"))
    venv = os.path.join(d, "venv")
    r = subprocess.run([c.py, "-m", "venv", "--system-site-packages", venv], capture_output=True, text=True)
    if r.returncode != 0:
        print("  (skipped: no venv module: %s)" % r.stderr.strip().splitlines()[-1:])
        return
    lib = os.path.realpath(os.path.join(c.a.build, "lib", "libcrpm.so"))  # this build's, whatever its version
    env = dict(os.environ, CRPM_INCLUDE_DIR=os.path.join(c.a.source, "include"), CRPM_LIBRARY=lib,
               PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.pop("PYTHONPATH", None)
    r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "--no-build-isolation", src],
                       capture_output=True, text=True, env=env)
    check(r.returncode == 0, "pip install failed:\n%s" % tail(r.stdout + r.stderr))
    script = os.path.join(d, "smoke.py")
    with open(script, "w") as f:
        f.write(SMOKE)
    r = c.mpi(d, [os.path.join(venv, "bin", "python"), script, c.ini(d)], {"PYTHONPATH": None, "CRPM_LIBRARY": None})
    check(r.rc == 0 and "smoke: " + lib in r.out, "the pip-installed package failed (rc %s)\n%s" % (r.rc, tail(r.out)))


SCENARIOS = [scenario_api, scenario_same_as_c, scenario_async, scenario_stop, scenario_global_heap, scenario_install,
             scenario_pip]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heat", required=True, help="the C heat example")
    p.add_argument("--heat-py", required=True, help="apps/examples/heat_py/heat.py")
    p.add_argument("--build", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--cmake", required=True)
    p.add_argument("--sitedir", required=True, help="the package's install folder, relative to the prefix")
    p.add_argument("--workdir", required=True)
    p.add_argument("--only")
    a = p.parse_args()
    crpmtest.make_workdir(a.workdir)
    return crpmtest.run_scenarios(SCENARIOS, Ctx(a), a.workdir, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
