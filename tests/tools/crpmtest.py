"""Launching, killing and checking MPI jobs in libcrpm's test drivers.

Every Python driver under tests/ imports this module (it sits in tests/tools;
drivers elsewhere add that directory to sys.path).  It knows:

* how to launch: CTest's crpm_add_script_test exports CRPM_MPIEXEC and
  CRPM_MPIEXEC_FLAGS (Open MPI's --oversubscribe --allow-run-as-root) and
  OMPI_MCA_btl_vader_backing_directory; mpiexec() and job_env() turn them
  into a command line and an environment;
* how to stop a job completely: a job runs in a session of its own
  (start_new_session), and kill_job() SIGKILLs every live process of that
  session, mpirun and each rank (Open MPI gives each rank its own process
  group, and a rank outlives a killed mpirun for a moment), plus any
  descendant that left the session, until none is left;
* run_job() (run with a timeout, whole job killed on expiry), Job (start,
  wait, kill), relaunch_until_done() (kill at random moments and relaunch
  until a launch completes), work directories under /dev/shm, and the lines
  a run printed (results, checksums, progress).

Nothing here decides whether a test passed: drivers compare what they get.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time

#: Variables only a libcrpm built with -DCRPM_TEST_HOOKS=ON reads: the kill
#: and pause hooks, skipping the restart's data check, level 3's parity check,
#: the benchmarks' baselines.
TEST_HOOK_VARS = ("CRPM_TEST_KILL", "CRPM_TEST_PAUSE", "CRPM_TEST_SKIP_DATA_CHECK", "CRPM_TEST_L3_VERIFY",
                  "CRPM_TEST_DEVICE",
                  "CRPM_BENCH_BASELINE", "CRPM_TEST_DRAIN_DELAY_MS")

#: Variables a launch must not inherit from the driver's environment unless
#: the driver sets them: the test hooks, and the checkpoint location and job
#: name overrides.
CRPM_ENV_OVERRIDES = TEST_HOOK_VARS + ("CRPM_CKPT_DIR", "CRPM_JOB_NAME")

#: Exit code of a driver that skipped (CTest's SKIP_RETURN_CODE).
SKIP_CODE = 77


class Failure(Exception):
    """A check failed; the message says what was expected and what happened."""


class Skipped(SystemExit):
    """The test needs something this build lacks.  Uncaught, it ends the
    driver with SKIP_CODE (CTest reports the test as skipped); no
    `except Exception` swallows it."""

    def __init__(self, why):
        super().__init__(SKIP_CODE)
        self.why = why


def skip(why):
    """Prints why and raises Skipped."""
    print("SKIPPED: %s" % why, flush=True)
    raise Skipped(why)


def test_hooks_built():
    """Whether libcrpm has the test hooks: CTest says so in CRPM_TEST_HOOKS
    (ON or OFF); a run outside CTest is taken to use a test build."""
    return os.environ.get("CRPM_TEST_HOOKS", "ON").upper() != "OFF"


def require_test_hooks(what):
    """Skips the driver (before it starts anything) unless libcrpm has the
    test hooks that `what` needs."""
    if not test_hooks_built():
        skip("%s needs a libcrpm configured with -DCRPM_TEST_HOOKS=ON (this build has no test hooks)" % what)


def check(cond, msg):
    """Raises Failure(msg) unless cond holds."""
    if not cond:
        raise Failure(msg)


# ---- command line and environment ------------------------------------------

def mpiexec(np=None):
    """The launcher command: CRPM_MPIEXEC (default mpirun), "-n NP" when np is
    given, then CRPM_MPIEXEC_FLAGS.  Without CRPM_MPIEXEC_FLAGS (a run outside
    CTest) Open MPI's mpirun/mpiexec get --oversubscribe --allow-run-as-root,
    which the suite needs as root on a small machine; other launchers none."""
    exe = os.environ.get("CRPM_MPIEXEC") or "mpirun"
    flags = os.environ.get("CRPM_MPIEXEC_FLAGS")
    if flags is None:
        flags = "--oversubscribe --allow-run-as-root" if os.path.basename(exe) in ("mpirun", "mpiexec") else ""
    return [exe] + (["-n", str(np)] if np is not None else []) + shlex.split(flags)


def job_env(env=None, ckpt_dir=None, shm_dir=None, clear=TEST_HOOK_VARS):
    """Environment of a launch: the driver's, minus the names in clear, plus
    env (a dict; None values remove a name); then ckpt_dir sets CRPM_CKPT_DIR.
    shm_dir sets Open MPI's shared-memory backing directory: Open MPI never
    unlinks these files when a job is killed, so crash tests put them in a
    directory they remove (CTest already points it into the build tree).
    A launch that sets a test hook's variable (TEST_HOOK_VARS) in a build
    without the hooks would silently run without it: the driver skips
    instead (Skipped)."""
    e = dict(os.environ)
    for k in clear:
        e.pop(k, None)
    for k, v in (env or {}).items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    if ckpt_dir is not None:
        e["CRPM_CKPT_DIR"] = ckpt_dir
    if shm_dir is not None:
        e["OMPI_MCA_btl_vader_backing_directory"] = shm_dir
    used = [k for k in TEST_HOOK_VARS if e.get(k)]
    if used:
        require_test_hooks(" and ".join(used))
    return e


def format_cmd(cmd):
    """cmd as a shell would read it (for logs)."""
    return " ".join(shlex.quote(str(c)) for c in cmd)


# ---- finding and killing every process of a job ----------------------------

def _stat(pid):
    """(state, ppid, pgrp, session) of pid, or None if it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    fields = st[st.rindex(")") + 2:].split()  # the command name may hold spaces and ')'
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3])


def job_pids(leader):
    """Live (non-zombie) processes of the job started as `leader` (a process
    that called setsid, as Job does): every process of its session, and every
    descendant of those, in case one started a session of its own."""
    procs = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = _stat(int(d))
            if st:
                procs[int(d)] = st
    # Not "pid == leader": once reaped, that pid may belong to a stranger.
    members = {pid for pid, st in procs.items() if st[3] == leader}
    grew = True
    while grew:  # add children of members until nothing changes
        grew = False
        for pid, st in procs.items():
            if pid not in members and st[1] in members:
                members.add(pid)
                grew = True
    return sorted(pid for pid in members if procs[pid][0] != "Z")


def kill_job(proc, deadline=15.0):
    """SIGKILLs every process of the job whose launcher is proc (a Popen made
    with start_new_session=True) and waits until none is alive, then reaps
    proc.  Returns False if processes were still alive after `deadline`
    seconds.  Killing only mpirun is not enough: ranks run on for a moment
    and may still write checkpoints while the next launch starts."""
    leader = proc.pid
    end = time.time() + deadline
    while True:
        pids = job_pids(leader)
        if proc.poll() is None and leader not in pids:
            pids.append(leader)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if time.time() > end:
            return False
        time.sleep(0.02)
    proc.wait()
    return True


# ---- one launch ---------------------------------------------------------------

class Job:
    """One launch of cmd in a session of its own.  Output goes to out_path
    (stdout and stderr merged) or, without it, to a temporary file; text()
    reads it, also after a kill.

        job = Job(mpiexec(4) + prog, env=job_env(ckpt_dir=d), out_path=log)
        rc = job.wait(10)          # None: still running after 10 s
        if rc is None: job.kill()
        else: job.finish()         # reaps stray ranks of a finished job
    """

    def __init__(self, cmd, env=None, out_path=None, cwd=None):
        self.cmd = list(cmd)
        self._tmp = out_path is None
        if self._tmp:
            fd, out_path = tempfile.mkstemp(prefix="crpmtest-", suffix=".out")
            os.close(fd)
        self.out_path = out_path
        self.out = open(out_path, "wb")
        self.t0 = time.time()
        self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=self.out, stderr=subprocess.STDOUT,
                                     env=env, cwd=cwd, start_new_session=True)
        self.rc = None
        self.elapsed = None

    def wait(self, limit):
        """Waits until `limit` seconds after the start; returns the exit code,
        or None if the job is still running."""
        try:
            self.rc = self.proc.wait(timeout=max(0.0, limit - (time.time() - self.t0)))
        except subprocess.TimeoutExpired:
            return None
        self.elapsed = time.time() - self.t0
        return self.rc

    def kill(self):
        """Kills every process of the job (see kill_job); True on success."""
        ok = kill_job(self.proc)
        if self.elapsed is None:
            self.elapsed = time.time() - self.t0
        self.out.close()
        return ok

    def finish(self):
        """After a normal exit: makes sure no rank lingers, closes the log."""
        return self.kill()

    def text(self):
        """Everything the job printed so far (the job writes the file itself)."""
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def remove_log(self):
        if self._tmp:
            try:
                os.unlink(self.out_path)
            except OSError:
                pass


class Result:
    """What run_job returns: rc (None if it hung and was killed), out (stdout,
    with stderr merged unless separate_stderr), err, elapsed seconds, cmd."""

    def __init__(self, cmd, rc, out, err, elapsed):
        self.cmd, self.rc, self.out, self.err, self.elapsed = cmd, rc, out, err, elapsed

    @property
    def timed_out(self):
        return self.rc is None

    @property
    def lines(self):
        return self.out.splitlines()


def run_job(cmd, env=None, timeout=60, separate_stderr=False, cwd=None):
    """Runs cmd (e.g. mpiexec(np) + prog) in its own session, waits at most
    timeout seconds, and on expiry kills every process of it (rc None).
    Returns a Result; never raises on a bad exit code."""
    t0 = time.time()
    err_dest = subprocess.PIPE if separate_stderr else subprocess.STDOUT
    proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err_dest,
                            env=env, cwd=cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
        kill_job(proc)  # ranks that outlive mpirun
    except subprocess.TimeoutExpired:
        kill_job(proc)
        out, err = proc.communicate()
        rc = None
    dec = (lambda b: b.decode("utf-8", "replace") if b is not None else "")
    return Result(list(cmd), rc, dec(out), dec(err), time.time() - t0)


# ---- kill and relaunch until done -------------------------------------------

def relaunch_until_done(cmd, env_for, delays, timeout, max_launches, log_for=None, tolerate=None):
    """Launches cmd again and again until a launch exits by itself.

    env_for(i)   -> the environment of launch i (0-based); e.g. a test kill
                    hook on launch 0 only;
    delays(i)    -> seconds after which launch i is killed, or None to let it
                    run (up to timeout);
    log_for(i)   -> the output file of launch i (None: a temporary file);
    max_launches -> give up after this many launches;
    tolerate(i, rc) -> True if launch i may exit non-zero and be relaunched
                    (e.g. a rank killed itself through CRPM_TEST_KILL).

    Returns (status, launches): status is "done" (the last launch exited 0),
    "failed" (exited non-zero), "hung" (ran past timeout, killed), "unkillable"
    (kill_job gave up) or "too many launches"; launches is a list of dicts
    {"rc", "killed_after" (None unless killed by the timer), "text",
    "elapsed"}, one per launch, in order.

    The whole job is killed each time (kill_job), so no rank of launch i is
    alive when launch i + 1 starts."""
    launches = []
    for i in range(max_launches):
        delay = delays(i)
        job = Job(cmd, env=env_for(i), out_path=log_for(i) if log_for else None)
        rc = job.wait(delay if delay is not None else timeout)
        entry = {"rc": rc, "killed_after": None, "text": "", "elapsed": 0.0}
        launches.append(entry)
        if rc is None:
            ok = job.kill()
            entry.update(text=job.text(), elapsed=job.elapsed)
            job.remove_log()
            if not ok:
                return "unkillable", launches
            if delay is None:
                return "hung", launches
            entry["killed_after"] = delay
            continue
        job.finish()
        entry.update(text=job.text(), elapsed=job.elapsed)
        job.remove_log()
        if rc != 0 and tolerate and tolerate(i, rc):
            continue
        return ("done" if rc == 0 else "failed"), launches
    return "too many launches", launches


# ---- work directories ---------------------------------------------------------

def run_scenarios(scenarios, ctx, workdir, only=None, fatal=()):
    """Runs each scenario_<name>(ctx), printing "<name>: ok (t s)" or
    "<name>: FAILED: why", then "N passed, M failed"; a failure of a scenario
    named in `fatal` fails all the others without running them.  `only`
    runs one scenario.  A scenario that needs what the build lacks prints
    why (skip) and "<name>: SKIPPED"; then the driver's code is SKIP_CODE unless
    another scenario failed.  The work dir is removed unless something
    failed.  Returns the exit code for the driver."""
    passed = failed = skipped = 0
    for s in scenarios:
        name = s.__name__[len("scenario_"):]
        if only and name != only:
            continue
        t0 = time.time()
        try:
            s(ctx)
            passed += 1
            print("%s: ok (%.1f s)" % (name, time.time() - t0), flush=True)
        except Failure as e:
            failed += 1
            print("%s: FAILED: %s" % (name, e), flush=True)
            if name in fatal:
                failed += len(scenarios) - 1
                break
        except Skipped as e:
            skipped += 1
            print("%s: SKIPPED (above)" % name, flush=True)
    clean_workdir(workdir, keep=failed > 0)
    print("%d passed, %d failed%s" % (passed, failed, ", %d skipped" % skipped if skipped else ""))
    return 1 if failed else SKIP_CODE if skipped else 0


def shm_base():
    """The build's choice for checkpoints and work files (CRPM_TEST_SHM, set
    by CTest: /dev/shm when it has room, else a directory in the build tree,
    cmake/CrpmTesting.cmake); outside CTest /dev/shm (tmpfs, the suite's
    stand-in for persistent memory) or /tmp."""
    d = os.environ.get("CRPM_TEST_SHM")
    if d and os.path.isdir(d):
        return d
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else "/tmp"


def make_workdir(path=None, prefix="crpm-test-", base=None):
    """An empty work directory: `path` (emptied first) or a fresh one named
    prefix... under base (default shm_base()).  Returns its absolute path."""
    if path:
        path = os.path.abspath(path)
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path
    return tempfile.mkdtemp(prefix=prefix, dir=base or shm_base())


def clean_workdir(path, keep=False):
    """Removes path and everything in it, unless keep."""
    if keep or not path:
        return
    shutil.rmtree(path, ignore_errors=True)


# ---- reading output -----------------------------------------------------------

def complete_lines(text):
    """Lines ended by a newline (a killed job may leave half a line)."""
    return text.split("\n")[:-1]


def matching(text, regex):
    """Complete lines of text that match regex (a string or compiled), in order."""
    r = re.compile(regex) if isinstance(regex, str) else regex
    return [x for x in complete_lines(text) if r.search(x)]


def one_line(text, regex, what="line"):
    """The single complete line matching regex; Failure if there are 0 or 2+."""
    m = matching(text, regex)
    check(len(m) == 1, "expected one %s matching %r, found %d\n%s" % (what, getattr(regex, "pattern", regex),
                                                                       len(m), tail(text)))
    return m[0]


def number_after(text, regex):
    """The number captured by regex's first group in the last matching line
    (int if it looks like one, else float); Failure if no line matches."""
    r = re.compile(regex) if isinstance(regex, str) else regex
    found = None
    for x in complete_lines(text):
        m = r.search(x)
        if m:
            found = m.group(1)
    check(found is not None, "no line matching %r\n%s" % (r.pattern, tail(text)))
    return int(found) if re.fullmatch(r"[-+]?\d+", found) else float(found)


def tail(text, n=15, prefix="    | "):
    """The last n lines of text, indented, for failure messages."""
    return "\n".join(prefix + line for line in text.rstrip("\n").split("\n")[-n:])
