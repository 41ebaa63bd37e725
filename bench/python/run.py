#!/usr/bin/python3
"""Overhead of the Python binding: the checkpoint time of a Python program
(bench_ckpt.py: crpm package, NumPy arrays) against the same arrays from C
(bench_ckpt, the C API), side by side in one run.

Both programs protect the same float64 arrays per rank, write the same
blocks before every checkpoint and time each crpm_checkpoint / crpm.checkpoint
call as the program sees it (slowest rank).  The variants alternate, in a
rotating order, for --rounds short runs each, so that a shared machine's
changing load falls on both alike.  The first checkpoint of a run fills
the empty container and is reported apart; the others are pooled per variant
and their medians compared, and so are the two runs of each round.  Target (issue 33): python / c <= 1.1.

  bench/python/run.py --bench-c <build>/bench/python/bench_ckpt
                      [--np 2] [--mib 64] [--arrays 8] [--fraction 0.1]
                      [--iters 12] [--rounds 10] [--out bench/results]

The Python side needs the crpm package on PYTHONPATH (<build>/python) or
installed.  Results: <out>/python.json (every time, the summary, the
machine) and <out>/python.md.
"""
import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def mpiexec(np):
    exe = os.environ.get("CRPM_MPIEXEC") or "mpirun"
    flags = os.environ.get("CRPM_MPIEXEC_FLAGS")
    if flags is None:
        flags = "--oversubscribe --allow-run-as-root" if os.path.basename(exe) in ("mpirun", "mpiexec") else ""
    return [exe, "-n", str(np)] + shlex.split(flags)


def run(cmd, env):
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=900)
    lines = [x for x in r.stdout.splitlines() if x.startswith("times ")]
    if r.returncode != 0 or len(lines) != 1:
        sys.exit("run.py: %s failed (rc %d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
    return [float(x) for x in lines[0].split()[1:]]


def machine():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((x.split(":", 1)[1].strip() for x in f if x.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "host": platform.node(),
            "loadavg": os.getloadavg()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench-c", required=True, help="the built bench_ckpt")
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--mib", type=float, default=64)
    p.add_argument("--arrays", type=int, default=8)
    p.add_argument("--fraction", type=float, default=0.1)
    p.add_argument("--iters", type=int, default=12)
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--dir", help="checkpoint directory (default: a fresh one under /dev/shm)")
    p.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    a = p.parse_args()
    if a.iters < 2 or a.rounds < 1:
        p.error("--iters >= 2 and --rounds >= 1")

    base = a.dir or tempfile.mkdtemp(prefix="crpm-bench-python-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    os.makedirs(base, exist_ok=True)
    common = ["--mib", str(a.mib), "--arrays", str(a.arrays), "--fraction", str(a.fraction), "--iters", str(a.iters)]
    cmds = {"c": mpiexec(a.np) + [a.bench_c], "python": mpiexec(a.np) + [a.python, os.path.join(HERE, "bench_ckpt.py")]}
    env = dict(os.environ)
    env.pop("CRPM_CKPT_DIR", None)
    env.pop("CRPM_JOB_NAME", None)
    raw = {v: [] for v in cmds}
    order = list(cmds)
    t_start = time.time()
    try:
        for r in range(a.rounds):
            for v in order[r % 2:] + order[:r % 2]:
                cfg = os.path.join(base, "%s.ini" % v)
                with open(cfg, "w") as f:
                    f.write("[basic]\nckpt_dir = %s\njob_name = bench-%s\nkeep_last_ckpt = 0\nverbosity = 0\n"
                            % (base, v))
                raw[v].append(run(cmds[v] + ["--crpm", cfg] + common, env))
                print("round %d %-6s first %.4f s, then median %.4f s" %
                      (r + 1, v, raw[v][-1][0], statistics.median(raw[v][-1][1:])), flush=True)
    finally:
        if not a.dir:
            shutil.rmtree(base, ignore_errors=True)

    summary = {}
    for v, runs in raw.items():
        later = [t for times in runs for t in times[1:]]
        summary[v] = {"first_median_s": statistics.median(t[0] for t in runs), "median_s": statistics.median(later),
                      "mean_s": statistics.fmean(later), "n": len(later)}
    ratio = summary["python"]["median_s"] / summary["c"]["median_s"]
    # Each round's two runs ran back to back: their ratio cancels the slow
    # drift of a shared machine's load.
    paired = statistics.median(statistics.median(p[1:]) / statistics.median(c[1:])
                               for p, c in zip(raw["python"], raw["c"]))
    first_ratio = summary["python"]["first_median_s"] / summary["c"]["first_median_s"]
    mib_written = a.mib * a.fraction
    table = ["| variant | first checkpoint (fills the container) | later checkpoints, median | mean | samples |",
             "|---|---|---|---|---|"]
    for v in ("c", "python"):
        s = summary[v]
        table.append("| %s | %.2f ms | %.3f ms | %.3f ms | %d |" % (v, 1e3 * s["first_median_s"], 1e3 * s["median_s"],
                                                                 1e3 * s["mean_s"], s["n"]))
    lines = ["# Python binding overhead (bench/python/run.py)", "",
             "%d ranks, %g MiB per rank in %d float64 arrays, %g%% of the 256-byte blocks written before each of "
             "%d level-1 checkpoints (about %.1f MiB changed per rank), %d rounds alternating C and Python." %
             (a.np, a.mib, a.arrays, 100 * a.fraction, a.iters, mib_written, a.rounds), "",
             "Machine: %s, %s cores, Python %s, load average %.1f at the end." %
             (machine()["cpu"] or "?", machine()["cores"], machine()["python"], os.getloadavg()[0]), ""] + table + [
             "", "**python / c = %.3f** (later checkpoints, medians; target <= 1.1); median of the rounds' "
             "ratios %.3f; first checkpoint %.3f." % (ratio, paired, first_ratio), ""]
    print("\n".join(lines))
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "python.json"), "w") as f:
        json.dump({"params": vars(a), "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                   "seconds": time.time() - t_start, "raw": raw, "summary": summary, "ratio": ratio, "paired_ratio": paired,
                   "first_ratio": first_ratio}, f, indent=1)
    with open(os.path.join(a.out, "python.md"), "w") as f:
        f.write("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
