#!/usr/bin/python3
"""Asynchronous levels (async = 1, docs/async.md): what the application waits
for, side by side in one run.

For HPCCG, CoMD and LULESH (bench/apps/run.py's programs and parsers), 8
ranks as 4 simulated nodes (node_size = 2, ckpt_dir = <dir>/node%n on
/dev/shm), a checkpoint every 5 steps at level 2 and every 4th at level 4
(--ckpt-l4-every 4), four variants, their order rotated in every repetition:

  none   no checkpointing
  l1     every checkpoint at level 1 only (the reference for the blocking time)
  sync   levels 2 and 4 as above, async = 0 (MPI_Init: MPI_THREAD_SINGLE)
  async  the same with async = 1 (OMPI_MPI_THREAD_LEVEL=3: MPI_THREAD_MULTIPLE)
  sync4, async4  level 1 at every checkpoint and level 4 at every 4th, no
         level 2: with async the next checkpoint's level 1 runs beside the
         level-4 drain (with level 2 holding the epoch before it may not:
         docs/async.md, "Crash consistency")

each with glbl_dir (level 4) on /dev/shm and on a local disk directory
(--slow-dir, default /var/tmp: the virtual disk of this machine; level 4
syncs its file through MPI_File_sync, so the disk's flush is in its time).

Per variant: the application's time in crpm_checkpoint calls per checkpoint
(slowest rank: the blocking time, waits for a previous drain included), the
whole loop's time and its overhead against `none`, and (async) how often and
how long a checkpoint waited for the drain before it (backpressure).  Ratios:
async blocking / l1 blocking (target <= 1.2) and async overhead against sync.

Mind the machine: on 2 cores 8 ranks already oversubscribe the CPUs, so the
background thread has no spare core and competes with the ranks; the
figures then measure that competition, not the overlap a spare core gives.

  run.py --build-dir BUILD [--reps N] [--quick] [--slow-dir DIR|""] [--out bench/results]

(--slow-dir "": glbl_dir on /dev/shm only.)

Results: <out>/async.json (every raw run, the summary, the machine) and
async.md.
"""
import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
_spec = importlib.util.spec_from_file_location("bench_apps_run", os.path.join(REPO, "bench", "apps", "run.py"))
A = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(A)

NP, NODE_SIZE, EVERY, L4_EVERY = 8, 2, 5, 4
VARIANTS = ("none", "l1", "sync", "async", "sync4", "async4")
SIZES = {
    "hpccg": {"full": {"np": NP, "nx": 48, "ny": 48, "nz": 32, "iters": 60},
              "quick": {"np": NP, "nx": 16, "ny": 16, "nz": 8, "iters": 20}},
    "comd": {"full": {"np": NP, "cells": 24, "iters": 60},
             "quick": {"np": NP, "cells": 16, "iters": 20}},
    "lulesh": {"full": {"np": NP, "s": 16, "iters": 60},
               "quick": {"np": NP, "s": 6, "iters": 20}},
}
WAITED_RE = re.compile(r"^\[crpm\] checkpoint -?\d+ waited " + A.NUM + r" (s|ms|us) ", re.M)


def run_once(a, app, params, variant, glbl, work):
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    spec = A.APPS[app]
    cmd = shlex.split(a.mpirun) + ["-n", str(NP)] + shlex.split(a.mpi_flags)
    cmd += [os.path.join(a.build_dir, spec["target"])] + spec["args"](params)
    env = dict(os.environ)
    for k in ("CRPM_TEST_KILL", "CRPM_TEST_DRAIN_DELAY_MS", "CRPM_BENCH_BASELINE", "OMPI_MPI_THREAD_LEVEL"):
        env.pop(k, None)
    env["OMPI_MCA_btl_vader_backing_directory"] = work
    if variant != "none":
        g = os.path.join(glbl, "crpm-async-glbl-%d" % os.getpid())
        shutil.rmtree(g, ignore_errors=True)
        cfg = os.path.join(work, "crpm.ini")
        with open(cfg, "w") as f:
            f.write("[basic]\nckpt_dir = %s/node%%n\nglbl_dir = %s\njob_name = %s\nnode_size = %d\nverbosity = 2\n"
                    "async = %d\n" % (work, g, app, NODE_SIZE, variant.startswith("async")))
        level = "2" if variant in ("sync", "async") else "1"
        cmd += ["--crpm", cfg, "--ckpt-every", str(EVERY), "--ckpt-level", level]
        if variant != "l1":
            cmd += ["--ckpt-l4-every", str(L4_EVERY)]
        if variant.startswith("async"):
            env["OMPI_MPI_THREAD_LEVEL"] = "3"
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=a.timeout)
    wall = time.time() - t0
    out = p.stdout.decode("utf-8", "replace")
    if variant != "none":
        shutil.rmtree(g, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    if p.returncode != 0:
        raise RuntimeError("%s %s: exit %d\n%s" % (app, variant, p.returncode, out[-3000:]))
    loop = [m for m in map(spec["loop"].search, out.splitlines()) if m]
    ck = [m for m in map(spec["ckpt_app"].search, out.splitlines()) if m]
    res = [m.group(0) for m in map(spec["result"].search, out.splitlines()) if m]
    waits = [float(n) * A.TIME_UNIT[u] for n, u in WAITED_RE.findall(out)]
    nck = params["iters"] // EVERY if variant != "none" else 0
    bg = len(re.findall(r"committed in the background", out))
    return {"app": app, "variant": variant, "glbl": glbl, "wall_s": wall, "loop_s": float(loop[-1].group(1)),
            "ckpt_s": float(ck[-1].group(1)) if ck else 0.0, "checkpoints": nck, "waits": len(waits),
            "waited_s": sum(waits), "background_commits": bg, "result": res}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs, app, glbl):
    rows = {}
    for v in VARIANTS:
        rs = [r for r in runs if r["app"] == app and r["variant"] == v and (v == "none" or r["glbl"] == glbl)]
        if not rs:
            continue
        rows[v] = {"loop_s": med([r["loop_s"] for r in rs]),
                   "block_per_ckpt_s": med([r["ckpt_s"] / r["checkpoints"] for r in rs if r["checkpoints"]]),
                   "waits": med([r["waits"] for r in rs]), "waited_s": med([r["waited_s"] for r in rs]),
                   "n": len(rs)}
    none = rows.get("none", {}).get("loop_s")
    for v, row in rows.items():
        row["overhead"] = (row["loop_s"] - none) / none if none and v != "none" else None
    s = {"app": app, "glbl": glbl, "rows": rows}
    try:
        s["async_block_over_l1"] = rows["async"]["block_per_ckpt_s"] / rows["l1"]["block_per_ckpt_s"]
        s["sync_block_over_l1"] = rows["sync"]["block_per_ckpt_s"] / rows["l1"]["block_per_ckpt_s"]
        s["async_loop_over_sync"] = rows["async"]["loop_s"] / rows["sync"]["loop_s"]
    except (KeyError, TypeError, ZeroDivisionError):
        pass
    try:
        s["async4_block_over_l1"] = rows["async4"]["block_per_ckpt_s"] / rows["l1"]["block_per_ckpt_s"]
        s["sync4_block_over_l1"] = rows["sync4"]["block_per_ckpt_s"] / rows["l1"]["block_per_ckpt_s"]
    except (KeyError, TypeError, ZeroDivisionError):
        pass
    return s


def fmt(x, f="{:.3f}"):
    return "-" if x is None else f.format(x)


def table(summaries):
    out = ["| app | glbl_dir | variant | loop s | overhead | blocking per checkpoint | waits (total s) |",
           "|---|---|---|---:|---:|---:|---:|"]
    for s in summaries:
        for v in VARIANTS:
            r = s["rows"].get(v)
            if not r:
                continue
            out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                s["app"], s["glbl"], v, fmt(r["loop_s"]),
                "-" if r["overhead"] is None else "%+.1f%%" % (100 * r["overhead"]),
                "-" if r["block_per_ckpt_s"] is None else "%.2f ms" % (1e3 * r["block_per_ckpt_s"]),
                "-" if not v.startswith("async") else "%s (%s)" % (fmt(r["waits"], "{:.0f}"), fmt(r["waited_s"]))))
    out += ["", "| app | glbl_dir | sync blocking / L1 | async blocking / L1 (target <= 1.2) | async loop / sync loop "
            "| sync4 / L1 | async4 / L1 |", "|---|---|---:|---:|---:|---:|---:|"]
    for s in summaries:
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            s["app"], s["glbl"], fmt(s.get("sync_block_over_l1"), "{:.2f}"), fmt(s.get("async_block_over_l1"), "{:.2f}"),
            fmt(s.get("async_loop_over_sync"), "{:.2f}"), fmt(s.get("sync4_block_over_l1"), "{:.2f}"),
            fmt(s.get("async4_block_over_l1"), "{:.2f}")))
    return "\n".join(out)


def thread_cost(a, reps):
    """bench/async/mpi_threads: MPI with MPI_THREAD_SINGLE vs MULTIPLE, alternated."""
    exe = os.path.join(a.build_dir, "bench", "async", "mpi_threads")
    res = {"single": {}, "multiple": {}}
    for _ in range(reps):
        for lv in ("single", "multiple"):
            for np_ in (2, NP):
                cmd = shlex.split(a.mpirun) + ["-n", str(np_)] + shlex.split(a.mpi_flags) + [exe, lv, "2000"]
                out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     timeout=a.timeout).stdout.decode()
                for line in out.splitlines():
                    f = line.split()
                    if len(f) >= 5 and f[0] == "threads" and f[2] == "pingpong" and np_ == 2:
                        res[lv].setdefault("pingpong_%s_us" % f[3], []).append(float(f[4]))
                        res[lv].setdefault("pingpong_%s_MBps" % f[3], []).append(float(f[5]))
                    elif len(f) >= 5 and f[0] == "threads" and f[2] == "allreduce" and np_ == NP:
                        res[lv].setdefault("allreduce8_%dranks_us" % NP, []).append(float(f[4]))
    return {lv: {k: statistics.median(v) for k, v in d.items()} for lv, d in res.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--apps", default="hpccg,comd,lulesh")
    ap.add_argument("--slow-dir", default="/var/tmp")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpi-flags", default="--oversubscribe --allow-run-as-root")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    a = ap.parse_args()
    size = "quick" if a.quick else "full"
    work = os.path.join("/dev/shm", "crpm-async-bench-%d" % os.getpid())
    glbls = ["/dev/shm"] + ([a.slow_dir] if a.slow_dir else [])
    runs = []
    t0 = time.time()
    for rep in range(a.reps):
        for app in a.apps.split(","):
            params = SIZES[app][size]
            order = [("none", None)] + [(v, g) for g in glbls for v in VARIANTS[1:]]
            k = rep % len(order)
            for v, g in order[k:] + order[:k]:
                r = run_once(a, app, params, v, g or "/dev/shm", work)
                r["rep"] = rep
                runs.append(r)
                print("rep %d %s %-5s %-9s loop %.3f s, checkpoints %.3f s, %d waits (%.3f s), %d background" % (
                    rep, app, v, g or "", r["loop_s"], r["ckpt_s"], r["waits"], r["waited_s"],
                    r["background_commits"]), flush=True)
    # bitwise: every variant of an app prints the same result lines
    for app in a.apps.split(","):
        rs = {tuple(r["result"]) for r in runs if r["app"] == app}
        if len(rs) != 1:
            print("WARNING: %s: the variants' results differ: %s" % (app, rs))
    summaries = [summarize(runs, app, g) for app in a.apps.split(",") for g in glbls]
    threads = thread_cost(a, a.reps)
    md = ["# Asynchronous levels: blocking time and overhead (bench/async/run.py)", "",
          "%s, %s, %d CPUs; %d ranks as %d nodes, a checkpoint every %d steps at level 2, every %dth at level 4; "
          "median of %d repetitions (%s sizes); %.0f s in all." % (
              datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), platform.node(), os.cpu_count(), NP,
              NP // NODE_SIZE, EVERY, L4_EVERY, a.reps, size, time.time() - t0), "",
          "No spare core: 8 ranks share %d CPUs, so the background thread competes with the ranks." % os.cpu_count(),
          "", table(summaries), "", "## MPI_THREAD_SINGLE vs MPI_THREAD_MULTIPLE (bench/async/mpi_threads.c)", "",
          "| measure | single | multiple | multiple / single |", "|---|---:|---:|---:|"]
    for k in sorted(threads["single"]):
        s, m = threads["single"][k], threads["multiple"].get(k)
        md.append("| %s | %.3f | %s | %s |" % (k, s, fmt(m), fmt(m / s if m and s else None, "{:.2f}")))
    text = "\n".join(md) + "\n"
    print(text)
    os.makedirs(a.out, exist_ok=True)
    name = "async_quick" if a.quick else "async"
    with open(os.path.join(a.out, name + ".md"), "w") as f:
        f.write(text)
    with open(os.path.join(a.out, name + ".json"), "w") as f:
        json.dump({"machine": {"node": platform.node(), "cpus": os.cpu_count(), "date": datetime.datetime.now()
                               .isoformat()}, "size": size, "reps": a.reps, "summary": summaries,
                   "mpi_threads": threads, "runs": runs}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
