#!/usr/bin/env python3
"""The tools on containers they cannot or must not write (issue 17):
  --case live      crpm-export and crpm-inspect read a container a process is
                   checkpointing into (live_writer): every export equals one
                   committed epoch exactly, inspect never reports corruption;
  --case readonly  a readable read-only container (0444, read by a user who
                   may not write it) is inspected and exported;
  --case special   a FIFO and /dev/zero given as files are refused, never
                   waited on.
--app is the live_writer program."""
import os
import re
import shutil
import stat
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from l4common import Failure, check, crpmtest, main, run

CASE = "live"
if "--case" in sys.argv:
    i = sys.argv.index("--case")
    CASE = sys.argv[i + 1]
    del sys.argv[i:i + 2]

NOBODY = 65534


def export_and_check(a, container, out, as_user=None):
    p = run_as([a.export, "-o", out, container], as_user)
    m = re.search(r"checkpoint id (\d+), epoch (\d+)", p.stdout)
    check(m, "export output:\n" + p.stdout)
    run([a.app, "check", out, m.group(1)])
    return int(m.group(1))


def run_as(cmd, uid, expect=0, timeout=60, env=None):
    if uid is None:
        return run(cmd, expect=expect, timeout=timeout)

    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=timeout, preexec_fn=drop, env=env)
    check(p.returncode == expect, "%s as uid %d exited %d (wanted %d)\n%s%s" %
          (" ".join(cmd), uid, p.returncode, expect, p.stdout, p.stderr))
    return p


def others_reach(path):
    """Whether a user who is neither owner nor group member can read path:
    every directory above it searchable by others, the file readable."""
    path = os.path.realpath(path)
    d = os.path.dirname(path)
    while True:
        if not os.stat(d).st_mode & stat.S_IXOTH:
            return False
        if d == os.path.dirname(d):
            break
        d = os.path.dirname(d)
    return bool(os.stat(path).st_mode & stat.S_IROTH)


def reachable_tools(a, work):
    """Copies of the tools, and of the shared libraries they load that the
    other user could not read where they lie, in work/bin and work/lib: the
    build tree may lie under a directory only its owner can enter (a 0700
    home or mktemp -d).  Returns (inspect, export, environment)."""
    bindir, libdir = os.path.join(work, "bin"), os.path.join(work, "lib")
    os.makedirs(bindir)
    os.makedirs(libdir)
    tools = []
    for exe in (a.inspect, a.export):
        dst = os.path.join(bindir, os.path.basename(exe))
        shutil.copy(exe, dst)
        os.chmod(dst, 0o755)
        tools.append(dst)
        ldd = subprocess.run(["ldd", exe], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        for lib in re.findall(r"=> (/\S+)", ldd.stdout):
            if not others_reach(lib):
                shutil.copy(lib, os.path.join(libdir, os.path.basename(lib)))
    for d in (work, bindir, libdir):
        os.chmod(d, 0o755)
    for f in os.listdir(libdir):
        os.chmod(os.path.join(libdir, f), 0o644)
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    return tools[0], tools[1], env


def live(a, work):
    container = os.path.join(work, "rank-0.crpm")
    stop = container + ".stop"
    # The writer checkpoints until told to stop (at most 300 s), so that the
    # exports below overlap it however slowly this machine runs them.
    w = subprocess.Popen([a.app, "write", container, "300", stop], stdout=subprocess.PIPE, universal_newlines=True)
    try:
        check(w.stdout.readline().strip() == "READY", "the writer did not start")
        exports = inspects = 0
        ids = set()
        while w.poll() is None and (exports < 10 or len(ids) < 5) and exports < 200:
            ids.add(export_and_check(a, container, os.path.join(work, "e.h5")))
            exports += 1
            p = run([a.inspect] + (["--verify"] if inspects % 2 else []) + [container], expect=None)
            check(p.returncode == 0 and "status:         OK" in p.stdout,
                  "crpm-inspect reported a healthy live container as bad:\n%s%s" % (p.stdout, p.stderr))
            inspects += 1
        live_now = w.poll() is None
        open(stop, "w").close()
        out, _ = w.communicate(timeout=60)
        check(w.returncode == 0, "the writer failed: " + out)
        last = int(re.search(r"DONE (\d+)", out).group(1))
        print("%d exports (%d distinct epochs) and %d inspections during %d checkpoints: consistent" %
              (exports, len(ids), inspects, last))
        check(live_now, "the writer ended before the exports were done")
        check(exports >= 10 and len(ids) >= 5, "%d exports saw only %d epochs of a job checkpointing all along"
              % (exports, len(ids)))
        # Idle container: the last epoch.
        check(export_and_check(a, container, os.path.join(work, "e.h5")) == last, "export of the final state")
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def readonly(a, work):
    container = os.path.join(work, "rank-0.crpm")
    run([a.app, "write", container, "0"])
    os.chmod(container, 0o444)
    uid = NOBODY if os.geteuid() == 0 else None  # root could write a 0444 file
    inspect, export, env = a.inspect, a.export, None
    if uid is not None:
        inspect, export, env = reachable_tools(a, work)
        if not others_reach(container):
            crpmtest.skip("another user cannot reach %s (a directory above it is closed to others), so the "
                          "container cannot be read as one" % work)
        try:
            probe = subprocess.run([inspect, container], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   universal_newlines=True, timeout=60, env=env,
                                   preexec_fn=lambda: (os.setgroups([]), os.setgid(uid), os.setuid(uid)))
        except subprocess.TimeoutExpired:
            raise Failure("crpm-inspect as uid %d did not finish within 60 s" % uid)
        except (OSError, subprocess.SubprocessError) as e:  # setuid refused, or exec as that user
            crpmtest.skip("cannot run a program as uid %d here (%s)" % (uid, e))
        print("inspect as uid %d: exit %d" % (uid, probe.returncode))
    outdir = os.path.join(work, "out")
    os.makedirs(outdir)
    os.chmod(outdir, 0o777)  # the export's output directory
    p = run_as([inspect, container], uid, env=env)
    check("status:         OK" in p.stdout and "committed:      epoch 1, checkpoint id 1" in p.stdout,
          "inspect of a read-only container:\n" + p.stdout)
    out = os.path.join(outdir, "ro.h5")
    q = run_as([export, "-o", out, container], uid, env=env)
    m = re.search(r"checkpoint id (\d+), epoch (\d+)", q.stdout)
    check(m, "export output:\n" + q.stdout)
    run([a.app, "check", out, m.group(1)])
    check(int(m.group(1)) == 1, "export of a read-only container")
    check(os.stat(container).st_mode & 0o777 == 0o444, "mode changed")


def special(a, work):
    fifo = os.path.join(work, "rank-0.crpm")
    os.mkfifo(fifo)
    for tool in ([a.inspect, fifo], [a.inspect, "/dev/zero"], [a.inspect, "-q", fifo],
                 [a.export, "-o", os.path.join(work, "x.h5"), fifo],
                 [a.export, "-o", os.path.join(work, "x.h5"), "/dev/zero"]):
        # refused at once, never blocked in open(2); the time limit only
        # catches a tool that blocks (it would wait forever), so it leaves a
        # loaded machine room
        t0 = time.time()
        p = run(tool, expect=1, timeout=60)
        print("%s: refused after %.2f s" % (" ".join(tool), time.time() - t0))
        check(re.search(r"FIFO|device", p.stderr), "%s: no clear reason:\n%s" % (" ".join(tool), p.stderr))
    check(stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced")


def body(a, work):
    check(a.inspect and a.export, "--inspect and --export are required")
    {"live": live, "readonly": readonly, "special": special}[CASE](a, work)


if __name__ == "__main__":
    main(body)
