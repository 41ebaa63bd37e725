#!/usr/bin/python3
"""OpenMP proxy applications: libcrpm against the FTI API at 1..N threads.

One rank of the OpenMP builds of HPCCG and LULESH (hpccg-omp, lulesh-omp and
their -fti twins, built when CMake finds OpenMP) runs with N OpenMP threads
for every N of --threads; the library gets the same N workers (CRPM_THREADS).
For each N, each repetition runs these variants back to back, their order
rotated:

  none  no checkpointing
  crpm  libcrpm level 1 (native API), differential, N workers
  fti   the same sources through the FTI API (FTI_Init/FTI_Protect/
        FTI_Checkpoint on libfti), an FTI configuration file, N workers
  full  libcrpm writing every protected byte each time, as FTI level 1
        does ([advanced] method = full)

and a kill after the second checkpoint plus relaunch measures recovery.
Every variant at one N must print the same results, and the same as the
serial build (run once, untimed) at N = 1; LULESH's must be the serial
build's at every N (its parallel loops write disjoint elements), HPCCG's
depend on N (its dot products add per-thread partial sums).  The
application must report N OpenMP threads and the library N workers.

Thread counts above the cores this process may use are skipped unless
--force.  The ranks are launched with --bind-to none so that their threads
may use every core.  Prints the table and writes <out>/apps_omp.json (the
machine, every raw run) and apps_omp.md.  See bench/apps/README.md.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run as apps  # noqa: E402  (bench/apps/run.py: launches, parsing, machine description)

VARIANTS = ("none", "crpm", "fti", "full")
OMP_APPS = {
    "hpccg": dict(apps.APPS["hpccg"], target="apps/hpccg/hpccg-omp", fti_target="apps/hpccg/hpccg-omp-fti",
                  thread_invariant=False),
    "lulesh": dict(apps.APPS["lulesh"], target="apps/lulesh/lulesh-omp", fti_target="apps/lulesh/lulesh-omp-fti",
                   thread_invariant=True),
}
# full: about 10 s of loop per run on one core; quick: a minute for the whole
# driver at 1,2 threads; smoke: the CTest smoke test, seconds.
SIZES = {
    "full": {"hpccg": {"np": 1, "nx": 160, "ny": 160, "nz": 160, "iters": 80},
             "lulesh": {"np": 1, "s": 64, "iters": 50}},
    "quick": {"hpccg": {"np": 1, "nx": 96, "ny": 96, "nz": 96, "iters": 30},
              "lulesh": {"np": 1, "s": 36, "iters": 20}},
    "smoke": {"hpccg": {"np": 1, "nx": 24, "ny": 24, "nz": 24, "iters": 12},
              "lulesh": {"np": 1, "s": 12, "iters": 12}},
}
LABEL = {"none": "none", "crpm": "libcrpm", "fti": "FTI API", "full": "full"}


WORKERS_RE = re.compile(r"^\[crpm\] (\d+) workers? per rank")
APP_THREADS_RE = re.compile(r"^(?:HPCCG: (\d+) OpenMP thread|Num threads: (\d+))")


class RecordingLaunch(apps.Launch):
    """run.py's launch, keeping the last one for its output lines."""

    last = None

    def __init__(self, cmd, env):
        super().__init__(cmd, env)
        RecordingLaunch.last = self


apps.Launch = RecordingLaunch


class OmpBench(apps.Bench):
    """run.py's launcher with the -omp executables and N threads."""

    threads = 1
    serial = False  # run the serial build (apps/<app>/<app>) instead

    def env(self):
        env = super().env()
        env["OMP_NUM_THREADS"] = str(self.threads)
        env["CRPM_THREADS"] = str(self.threads)
        return env

    def run_once(self, app, params, variant):
        r = super().run_once(app, params, variant)
        if self.serial:
            return r
        t = [int(m.group(1) or m.group(2)) for m in map(APP_THREADS_RE.search, RecordingLaunch.last.lines) if m]
        r["app_threads"] = t[-1] if t else None
        if r["app_threads"] != self.threads:
            raise RuntimeError(f"{app}/{variant}: the application ran {r['app_threads']} OpenMP thread(s), "
                               f"not {self.threads}")
        # The library's own count of its workers (verbosity 2): the thread
        # setting must reach it through either API.
        w = [int(m.group(1)) for m in map(WORKERS_RE.search, RecordingLaunch.last.lines) if m]
        r["library_workers"] = w[-1] if w else None
        if variant != "none" and r["library_workers"] != self.threads:
            raise RuntimeError(f"{app}/{variant}: the library reported {r['library_workers']} worker(s), "
                               f"not the {self.threads} asked for")
        return r

    def command(self, app, params, variant, cfg):
        if self.serial:
            return super().command(app, params, variant, cfg)
        saved = apps.APPS
        apps.APPS = OMP_APPS
        try:
            return super().command(app, params, variant, cfg)
        finally:
            apps.APPS = saved


def usable_cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def summarize(runs, recs):
    """One row per (app, threads, variant)."""
    rows = []
    for (app, n), rr in sorted(runs.items()):
        for v in VARIANTS:
            mine = [r for r in rr if r["variant"] == v]
            if not mine:
                continue
            row = {"app": app, "threads": n, "variant": v, "reps": len(mine),
                   "loop_s": med([r["loop_s"] for r in mine]), "wall_s": med([r["wall_s"] for r in mine])}
            if v != "none":
                none = [r for r in rr if r["variant"] == "none"]
                pairs = [a["loop_s"] - b["loop_s"] for a, b in zip(mine, none)]
                row["overhead_s"] = med(pairs)
                row["n_ckpt"] = len(mine[0]["checkpoints"])
                row["protected_bytes"] = mine[0]["checkpoints"][-1]["protected"]
                row["ckpt_total_s"] = med([sum(c["seconds"] for c in r["checkpoints"]) for r in mine])
                row["ckpt_each_s"] = med([statistics.mean(c["seconds"] for c in r["checkpoints"]) for r in mine])
                # From the third on: the first two fill the container's two copies.
                row["ckpt_steady_s"] = med([med([c["seconds"] for c in r["checkpoints"][2:]]) for r in mine])
                row["ckpt_app_s"] = med([r.get("ckpt_app_s") for r in mine])
                row["written_bytes_per_ckpt"] = med([statistics.mean(c["written"] for c in r["checkpoints"])
                                                     for r in mine])
                row["recovery_s"] = med([x["seconds"] for x in recs.get((app, n), []) if x["variant"] == v])
            rows.append(row)
    get = {(r["app"], r["threads"], r["variant"]): r for r in rows}
    for r in rows:
        c = get.get((r["app"], r["threads"], "crpm"))
        one = get.get((r["app"], 1, r["variant"]))
        if r["variant"] in ("fti", "full") and c:
            for k in ("ckpt_steady_s", "ckpt_each_s", "loop_s", "recovery_s"):
                if r.get(k) is not None and c.get(k):
                    r[k[:-2] + "_ratio_to_crpm"] = r[k] / c[k]
        if one and r["threads"] != 1:
            for k in ("ckpt_steady_s", "loop_s"):
                if r.get(k) and one.get(k):
                    r[k[:-2] + "_speedup_vs_1"] = one[k] / r[k]
    return rows


def fmt(x, f):
    return "-" if x is None else f.format(x)


def table(rows):
    get = {(r["app"], r["threads"], r["variant"]): r for r in rows}
    keys = sorted({(r["app"], r["threads"]) for r in rows}, key=lambda k: (list(OMP_APPS).index(k[0]), k[1]))

    def trio(a, n, key, f, scale=1.0, vs=("crpm", "fti", "full")):
        return " / ".join(fmt(None if get.get((a, n, v), {}).get(key) is None
                              else get[(a, n, v)][key] * scale, f) for v in vs)

    lines = ["| app | threads | loop: none / libcrpm / FTI API / full (s) | overhead: libcrpm / FTI API / full (s) "
             "| per checkpoint, 3rd on: libcrpm / FTI API / full (ms) | all checkpoints: libcrpm / FTI API / full (s) "
             "| **FTI API / libcrpm** per checkpoint | **full / libcrpm** per checkpoint "
             "| libcrpm per checkpoint: speed-up over 1 thread | recovery: libcrpm / FTI API (ms) |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for a, n in keys:
        c = get.get((a, n, "crpm"), {})
        lines.append("| {} | {} | {} | {} | {} | {} | **{}** | **{}** | {} | {} |".format(
            apps.APP_NAME[a], n, trio(a, n, "loop_s", "{:.2f}", vs=("none", "crpm", "fti", "full")),
            trio(a, n, "overhead_s", "{:.2f}"), trio(a, n, "ckpt_steady_s", "{:.1f}", 1e3),
            trio(a, n, "ckpt_total_s", "{:.3f}"),
            fmt(get.get((a, n, "fti"), {}).get("ckpt_steady_ratio_to_crpm"), "{:.2f}"),
            fmt(get.get((a, n, "full"), {}).get("ckpt_steady_ratio_to_crpm"), "{:.2f}"),
            fmt(c.get("ckpt_steady_speedup_vs_1"), "{:.2f}"),
            trio(a, n, "recovery_s", "{:.1f}", 1e3, vs=("crpm", "fti"))))
    return "\n".join(lines)


def check_results(runs, serial):
    """Same result lines for every variant at one thread count; the serial
    build's at one thread, and at every thread count for a thread-invariant
    app."""
    for (app, n), rr in runs.items():
        ref = rr[0]["result_lines"]
        for r in rr:
            if r["result_lines"] != ref:
                raise RuntimeError(f"{app}, {n} thread(s): {r['variant']} printed {r['result_lines']}, "
                                   f"{rr[0]['variant']} printed {ref}")
        if app in serial and (n == 1 or OMP_APPS[app]["thread_invariant"]) and ref != serial[app]:
            raise RuntimeError(f"{app}, {n} thread(s): printed {ref}, the serial build {serial[app]}")


def parse_threads(s):
    try:
        ns = sorted({int(x) for x in s.split(",") if x})
    except ValueError:
        ns = []
    if not ns or ns[0] < 1:
        raise argparse.ArgumentTypeError(f"bad thread list {s!r}")
    return ns


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.environ.get("CRPM_BUILD_DIR", os.path.join(apps.REPO, "build")))
    ap.add_argument("--threads", type=parse_threads, default=parse_threads("1,2,4,8,16"),
                    help="comma-separated OpenMP thread counts (default 1,2,4,8,16)")
    ap.add_argument("--force", action="store_true", help="also run thread counts above the usable cores")
    ap.add_argument("--apps", default="hpccg,lulesh")
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition, no recovery (the CTest test)")
    ap.add_argument("--reps", type=int, help="repetitions (default 3; quick and smoke 1)")
    ap.add_argument("--recovery-reps", type=int, help="kill/relaunch measurements (default 1, smoke 0)")
    ap.add_argument("--no-full", action="store_true", help="leave out the method = full variant")
    ap.add_argument("--ckpt-every", type=int, help="iterations between checkpoints (default 5, smoke 2)")
    ap.add_argument("--ckpt-root", default="/dev/shm")
    ap.add_argument("--out-dir", default=os.path.join(apps.REPO, "bench", "results"))
    ap.add_argument("--mpirun", default=os.environ.get("CRPM_MPIEXEC", "mpirun"))
    ap.add_argument("--mpi-flags", default=os.environ.get("CRPM_MPIEXEC_FLAGS",
                                                          "--oversubscribe --allow-run-as-root"))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per launch")
    ap.add_argument("--note", default="", help="a remark on the machine, written with the results")
    a = ap.parse_args(sys.argv[1:] + shlex.split(os.environ.get("BENCH_APPS_OMP_ARGS", "")))
    mode = "smoke" if a.smoke else "quick" if a.quick else "full"
    reps = a.reps if a.reps is not None else (1 if mode != "full" else 3)
    rec_reps = a.recovery_reps if a.recovery_reps is not None else (0 if mode == "smoke" else 1)
    a.ckpt_every = a.ckpt_every or (2 if mode == "smoke" else 5)
    if reps < 1:
        ap.error("--reps must be at least 1")
    if "--bind-to" not in a.mpi_flags:
        a.mpi_flags += " --bind-to none"  # Open MPI binds 1-2 ranks to one core each by default
    a.build_dir = os.path.abspath(a.build_dir)
    a.ckpt_root = os.path.abspath(a.ckpt_root)
    a.crpm_advanced = []

    cores = usable_cores()
    threads = [n for n in a.threads if n <= cores or a.force]
    skipped = [n for n in a.threads if n not in threads]
    if skipped:
        print(f"skipping {','.join(map(str, skipped))} thread(s): {cores} usable core(s) (--force runs them)",
              flush=True)
    names = [x for x in a.apps.split(",") if x]
    for app in names:
        if app not in OMP_APPS:
            ap.error(f"unknown app {app!r} (known: {', '.join(OMP_APPS)})")
    params, variants = {}, {}
    for app in names:
        exe = os.path.join(a.build_dir, OMP_APPS[app]["target"])
        if not os.access(exe, os.X_OK):
            print(f"skipping {app}: {exe} is not built (OpenMP not found, or make {os.path.basename(exe)})",
                  flush=True)
            continue
        params[app] = dict(SIZES[mode][app])
        vs = [v for v in VARIANTS if not (v == "full" and a.no_full)]
        if not os.access(os.path.join(a.build_dir, OMP_APPS[app]["fti_target"]), os.X_OK):
            print(f"{app}: variant 'fti' unavailable ({OMP_APPS[app]['fti_target']} is not built)", flush=True)
            vs.remove("fti")
        variants[app] = vs
    if not params or not threads:
        sys.exit("nothing to measure")

    os.makedirs(a.out_dir, exist_ok=True)
    machine = apps.machine_info(a)
    machine["usable_cores"] = cores
    bench = OmpBench(a)
    runs, recs = {}, {}
    t0 = time.time()
    serial = {}
    try:
        # The serial build's results, the reference (it is not timed).
        bench.serial = True
        for app in params:
            if os.access(os.path.join(a.build_dir, apps.APPS[app]["target"]), os.X_OK):
                serial[app] = bench.run_once(app, params[app], "none")["result_lines"]
        bench.serial = False
        for n in threads:
            bench.threads = n
            for rep in range(reps):
                for app in params:
                    vs = variants[app]
                    for v in vs[rep % len(vs):] + vs[:rep % len(vs)]:
                        r = bench.run_once(app, params[app], v)
                        runs.setdefault((app, n), []).append(r)
                        ck = r["checkpoints"]
                        print(f"[{n} thread(s), rep {rep + 1}/{reps}] {app:6s} {v:4s}: loop {r['loop_s']:7.3f} s, "
                              f"wall {r['wall_s']:6.2f} s"
                              + (f", {len(ck)} checkpoints, {sum(c['seconds'] for c in ck):.3f} s in them"
                                 if ck else ""), flush=True)
            for _ in range(rec_reps):
                for app in params:
                    for v in variants[app]:
                        if v in ("crpm", "fti"):
                            x = bench.recovery_once(app, params[app], v)
                            recs.setdefault((app, n), []).append(x)
                            print(f"[{n} thread(s), recovery] {app:6s} {v:4s}: "
                                  + fmt(x["seconds"], "{:.4f} s") + f" for {x['protected'] / 2**20:.1f} MiB",
                                  flush=True)
        check_results(runs, serial)
    finally:
        bench.cleanup()
    machine["loadavg_end"] = os.getloadavg()
    machine["driver_seconds"] = round(time.time() - t0, 1)
    rows = summarize(runs, recs)
    desc = (f"{machine.get('cores')} cores ({machine.get('cpu', '?')}), {cores} usable, Linux {machine.get('kernel')}, "
            f"checkpoints in {a.ckpt_root} ({machine.get('ckpt_fs', '?')}); one rank, {mode} sizes, medians of {reps} "
            f"repetitions (variants alternating), checkpoint every {a.ckpt_every} iterations; load average "
            f"{machine['loadavg_start'][0]:.1f} at start, {machine['loadavg_end'][0]:.1f} at end; "
            f"{machine.get('date')}, commit {machine.get('git_head', '?')}" + (f"; {a.note}" if a.note else ""))
    out = {"machine": machine, "mode": mode, "reps": reps, "recovery_reps": rec_reps, "ckpt_every": a.ckpt_every,
           "threads": threads, "skipped_threads": skipped, "command": " ".join(sys.argv), "note": a.note,
           "params": params, "serial_results": serial, "summary": rows,
           "runs": [{"app": k[0], "threads": k[1], **r} for k, rr in sorted(runs.items()) for r in rr],
           "recovery": [{"app": k[0], "threads": k[1], **r} for k, rr in sorted(recs.items()) for r in rr]}
    with open(os.path.join(a.out_dir, "apps_omp.json"), "w") as f:
        json.dump(out, f, indent=1)
    t = table(rows)
    with open(os.path.join(a.out_dir, "apps_omp.md"), "w") as f:
        f.write(t + "\n\n" + desc + "\n")
    print()
    print(t)
    print()
    print(desc)
    print(f"\nwrote {a.out_dir}/apps_omp.json, apps_omp.md; measuring took {machine['driver_seconds']:.0f} s")


if __name__ == "__main__":
    main()
