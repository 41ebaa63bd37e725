#!/usr/bin/python3
"""Self-test of crpmtest.py with real mpiexec jobs of 2 ranks (Python ranks,
no libcrpm): run_job output and exit codes, a timeout that kills every rank,
Job.kill leaving no rank alive, relaunch_until_done resuming a job that keeps
its progress in a file, the output helpers, and skipping what a build
without the test hooks cannot run.  Prints "N passed, M failed"."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import crpmtest  # noqa: E402
from crpmtest import check  # noqa: E402

PY = sys.executable or "python3"

# A rank: records its pid, prints, then sleeps `sleep` seconds (or counts to
# `steps` in 0.05 s steps, persisting the count in state-<rank>).
RANK = r"""
import os, sys, time
d, sleep, steps = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
r = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
open(os.path.join(d, "pid-%d" % os.getpid()), "w").close()
print("rank %s up" % r, flush=True)
if steps:
    p = os.path.join(d, "state-" + r)
    k = int(open(p).read()) if os.path.exists(p) else 0
    while k < steps:
        time.sleep(0.05)
        k += 1
        with open(p + ".tmp", "w") as f:
            f.write(str(k))
        os.replace(p + ".tmp", p)
        print("step %d" % k, flush=True)
    print("checksum %d" % (k * 7), flush=True)
else:
    time.sleep(sleep)
"""


def rank_pids(d):
    return [int(n[4:]) for n in os.listdir(d) if n.startswith("pid-")]


def alive(pid):
    st = crpmtest._stat(pid)
    return st is not None and st[0] != "Z"


def wait_for_ranks(d, n, limit=30):
    end = time.time() + limit
    while len(rank_pids(d)) < n:
        check(time.time() < end, "ranks did not start within %d s" % limit)
        time.sleep(0.05)


def prog(d, sleep=0.0, steps=0):
    return [PY, "-c", RANK, d, str(sleep), str(steps)]


def t_run(work):
    d = crpmtest.make_workdir(os.path.join(work, "run"))
    r = crpmtest.run_job(crpmtest.mpiexec(2) + prog(d), env=crpmtest.job_env(), timeout=60)
    check(r.rc == 0, "exit code %s\n%s" % (r.rc, crpmtest.tail(r.out)))
    check(sorted(crpmtest.matching(r.out, r"^rank \d up$")) == ["rank 0 up", "rank 1 up"],
          "both ranks printed\n" + crpmtest.tail(r.out))
    r = crpmtest.run_job([PY, "-c", "import sys; print('x'); sys.exit(3)"], timeout=30)
    check(r.rc == 3 and r.lines == ["x"], "exit code 3 and output of a plain command: %s %r" % (r.rc, r.out))


def t_timeout(work):
    d = crpmtest.make_workdir(os.path.join(work, "timeout"))
    t0 = time.time()
    # 20 s: both ranks start in that time even on a loaded machine; the job
    # would run 600 s
    r = crpmtest.run_job(crpmtest.mpiexec(2) + prog(d, sleep=600), env=crpmtest.job_env(), timeout=20)
    check(r.timed_out, "a 600 s job did not time out after 20 s (rc %s)" % r.rc)
    check(time.time() - t0 < 120, "timeout took %.1f s" % (time.time() - t0))
    pids = rank_pids(d)
    check(len(pids) == 2, "two ranks started: %s" % pids)
    check(not any(alive(p) for p in pids), "ranks alive after the timeout: %s" % [p for p in pids if alive(p)])


def t_kill(work):
    d = crpmtest.make_workdir(os.path.join(work, "kill"))
    job = crpmtest.Job(crpmtest.mpiexec(2) + prog(d, sleep=120), env=crpmtest.job_env())
    wait_for_ranks(d, 2)
    check(job.wait(0.5) is None, "job ended early")
    check(job.kill(), "kill gave up")
    pids = rank_pids(d)
    left = [p for p in pids if alive(p)]
    check(not left, "ranks %s still alive right after Job.kill" % left)
    check(not crpmtest.job_pids(job.proc.pid), "job_pids not empty after kill")
    job.remove_log()


def t_relaunch(work):
    d = crpmtest.make_workdir(os.path.join(work, "relaunch"))
    kills = [1.5, 1.5]  # the job needs 40 x 0.05 s = 2 s plus start-up

    status, launches = crpmtest.relaunch_until_done(
        crpmtest.mpiexec(2) + prog(d, steps=40), lambda i: crpmtest.job_env(),
        lambda i: kills[i] if i < len(kills) else None, timeout=60, max_launches=4)
    texts = "\n".join(x["text"] for x in launches)
    check(status == "done", "status %s\n%s" % (status, crpmtest.tail(texts)))
    check(len(launches) >= 2 and launches[0]["killed_after"] == 1.5,
          "the first launch was killed at 1.5 s: %s" % [(x["rc"], x["killed_after"]) for x in launches])
    check(crpmtest.matching(launches[-1]["text"], r"^checksum ") == ["checksum 280"] * 2, "final checksums")
    check(crpmtest.one_line("a\nchecksum 1\nb\n", r"^checksum ") == "checksum 1", "one_line")
    check(crpmtest.number_after(launches[-1]["text"], r"^step (\d+)") == 40, "last step 40")
    if any(crpmtest.matching(x["text"], r"^step ") for x in launches[:-1]):
        check(len(crpmtest.matching(launches[-1]["text"], r"^step ")) < 80,
              "the last launch resumed instead of starting over")
    check(not any(alive(p) for p in rank_pids(d)), "ranks alive after the loop")
    status, launches = crpmtest.relaunch_until_done(
        [PY, "-c", "import sys; sys.exit(5)"], lambda i: None, lambda i: None, timeout=30, max_launches=3,
        tolerate=lambda i, rc: i == 0)
    check(status == "failed" and len(launches) == 2, "tolerate: %s after %d launches" % (status, len(launches)))


def t_skip(work):
    """A launch that sets a test hook's variable is skipped, never run
    without it, when CTest says the build has no hooks; with hooks it runs.
    run_scenarios reports a skipped scenario and returns the skip code
    unless another failed."""
    saved = os.environ.get("CRPM_TEST_HOOKS")
    try:
        for var in crpmtest.TEST_HOOK_VARS:
            os.environ["CRPM_TEST_HOOKS"] = "ON"
            check(crpmtest.job_env({var: "1"})[var] == "1", "%s with hooks" % var)
            os.environ["CRPM_TEST_HOOKS"] = "OFF"
            check(crpmtest.job_env({"OTHER": "1"})["OTHER"] == "1", "a launch without hook variables")
            try:
                crpmtest.job_env({var: "1"})
                raise crpmtest.Failure("%s without hooks was not skipped" % var)
            except crpmtest.Skipped as e:
                check(e.code == crpmtest.SKIP_CODE and var in e.why, "skip code and reason: %r" % (e.why,))

        def scenario_plain(ctx):
            pass

        def scenario_hook(ctx):
            crpmtest.job_env({"CRPM_TEST_KILL": "0:after_commit:1"})

        def scenario_bad(ctx):
            raise crpmtest.Failure("expected")
        d = crpmtest.make_workdir(os.path.join(work, "skip"))
        check(crpmtest.run_scenarios([scenario_plain, scenario_hook], None, d) == crpmtest.SKIP_CODE,
              "a skipped scenario makes the driver skip")
        d = crpmtest.make_workdir(os.path.join(work, "skipfail"))
        check(crpmtest.run_scenarios([scenario_hook, scenario_bad], None, d) == 1, "a failure outweighs a skip")
        crpmtest.clean_workdir(d)
        os.environ["CRPM_TEST_HOOKS"] = "ON"
        d = crpmtest.make_workdir(os.path.join(work, "noskip"))
        check(crpmtest.run_scenarios([scenario_plain, scenario_hook], None, d) == 0, "with hooks nothing is skipped")
    finally:
        if saved is None:
            os.environ.pop("CRPM_TEST_HOOKS", None)
        else:
            os.environ["CRPM_TEST_HOOKS"] = saved


def main():
    work = crpmtest.make_workdir(prefix="crpmtest-selftest-")
    passed = failed = 0
    for t in (t_run, t_timeout, t_kill, t_relaunch, t_skip):
        t0 = time.time()
        try:
            t(work)
            passed += 1
            print("%s: ok (%.1f s)" % (t.__name__[2:], time.time() - t0), flush=True)
        except crpmtest.Failure as e:
            failed += 1
            print("%s: FAILED: %s" % (t.__name__[2:], e), flush=True)
    crpmtest.clean_workdir(work, keep=failed > 0)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
