#!/usr/bin/env python3
"""The tools on containers they cannot or must not write (issue 17):
  --case live      crpm-export and crpm-inspect read a container a process is
                   checkpointing into (live_writer): every export equals one
                   committed epoch exactly, inspect never reports corruption;
  --case readonly  a readable read-only container (0444, read by a user who
                   may not write it) is inspected and exported;
  --case special   a FIFO and /dev/zero given as files fail within a second.
--app is the live_writer program."""
import os
import re
import stat
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from l4common import Failure, check, main, run

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


def run_as(cmd, uid, expect=0, timeout=60):
    if uid is None:
        return run(cmd, expect=expect, timeout=timeout)

    def drop():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True,
                       timeout=timeout, preexec_fn=drop)
    check(p.returncode == expect, "%s as uid %d exited %d (wanted %d)\n%s%s" %
          (" ".join(cmd), uid, p.returncode, expect, p.stdout, p.stderr))
    return p


def live(a, work):
    container = os.path.join(work, "rank-0.crpm")
    w = subprocess.Popen([a.app, "write", container, "12"], stdout=subprocess.PIPE, universal_newlines=True)
    try:
        check(w.stdout.readline().strip() == "READY", "the writer did not start")
        exports = inspects = 0
        ids = set()
        t0 = time.time()
        while w.poll() is None and time.time() - t0 < 11:
            ids.add(export_and_check(a, container, os.path.join(work, "e.h5")))
            exports += 1
            p = run([a.inspect] + (["--verify"] if inspects % 2 else []) + [container], expect=None)
            check(p.returncode == 0 and "status:         OK" in p.stdout,
                  "crpm-inspect reported a healthy live container as bad:\n%s%s" % (p.stdout, p.stderr))
            inspects += 1
        out, _ = w.communicate(timeout=30)
        check(w.returncode == 0, "the writer failed: " + out)
        last = int(re.search(r"DONE (\d+)", out).group(1))
        print("%d exports (%d distinct epochs) and %d inspections during %d checkpoints: consistent" %
              (exports, len(ids), inspects, last))
        check(exports >= 10 and len(ids) >= 5, "too few exports overlapped the live job")
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
    os.chmod(work, 0o777)  # the export's output directory
    uid = NOBODY if os.geteuid() == 0 else None  # root could write a 0444 file
    p = run_as([a.inspect, container], uid)
    check("status:         OK" in p.stdout and "committed:      epoch 1, checkpoint id 1" in p.stdout,
          "inspect of a read-only container:\n" + p.stdout)
    check(export_and_check(a, container, os.path.join(work, "ro.h5"), uid) == 1, "export of a read-only container")
    check(os.stat(container).st_mode & 0o777 == 0o444, "mode changed")


def special(a, work):
    fifo = os.path.join(work, "rank-0.crpm")
    os.mkfifo(fifo)
    for tool in ([a.inspect, fifo], [a.inspect, "/dev/zero"], [a.inspect, "-q", fifo],
                 [a.export, "-o", os.path.join(work, "x.h5"), fifo],
                 [a.export, "-o", os.path.join(work, "x.h5"), "/dev/zero"]):
        t0 = time.time()
        p = run(tool, expect=1, timeout=10)
        dt = time.time() - t0
        check(dt < 1.0, "%s took %.1f s" % (" ".join(tool), dt))
        check(re.search(r"FIFO|device", p.stderr), "%s: no clear reason:\n%s" % (" ".join(tool), p.stderr))
    check(stat.S_ISFIFO(os.stat(fifo).st_mode), "the FIFO was replaced")


def body(a, work):
    check(a.inspect and a.export, "--inspect and --export are required")
    {"live": live, "readonly": readonly, "special": special}[CASE](a, work)


if __name__ == "__main__":
    main(body)
