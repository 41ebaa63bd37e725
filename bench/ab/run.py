#!/usr/bin/python3
"""Two builds of libcrpm side by side: the checkpoint time of levels 1, 2
and 3 with one build against another (before and after a change to the
code that runs the levels), in one invocation, alternating which build goes
first in every repetition.

For each application (bench/apps/run.py's HPCCG, CoMD, LULESH) and level,
each build runs the application once per repetition with the setup of the
level's own benchmark: level 1 and 2 as bench/l2/run.py runs them (8 ranks
as 4 nodes), level 3 as bench/l3/run.py does (8 ranks as 8 nodes, groups
of 4, one parity).  From the library's verbosity-2 checkpoint lines (slowest
rank) it takes the median checkpoint time from the 3rd checkpoint on and,
for levels 2 and 3, the median time of the level's own part (after level 1
committed).  Reported: the medians over the repetitions per build, and the
median of the per-repetition ratios new / old (paired: both builds of a
repetition ran back to back, so they saw about the same load).

    bench/ab/run.py --build-dir build --baseline-build /tmp/base/build \\
        --out-dir bench/results --name arch2_ab

Results: <out>/<name>.json (every run) and <name>.md.
"""

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, path))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


L3 = load("bench_l3_run", "bench/l3/run.py")
L2 = L3.B
A = L2.A

#: level -> (bench class, sizes, the level's variant in that bench)
SETUP = {1: (L2.L2Bench, L2.SIZES, "l1"), 2: (L2.L2Bench, L2.SIZES, "l2"), 3: (L3.L3Bench, L2.SIZES, "l3")}


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def steady(ckpts, key):
    """Median of a checkpoint field from the 3rd checkpoint on."""
    return median([c.get(key) for c in ckpts[2:]])


def run_one(benches, a, app, level, build):
    cls, sizes, variant = SETUP[level]
    bench = benches[level]
    saved = bench.a.build_dir
    bench.a.build_dir = build
    try:
        r = bench.run_once(app, sizes[app]["quick" if a.quick else "full"], variant)
    finally:
        bench.a.build_dir = saved
    return {"ckpt_s": steady(r["checkpoints"], "seconds"), "part_s": steady(r["checkpoints"], "part_seconds"),
            "n_ckpt": len(r["checkpoints"]), "loop_s": r["loop_s"], "result": r["result_lines"]}


def fmt(x, f="{:.3f}"):
    return "-" if x is None else f.format(x)


def summarize(runs, apps, levels):
    rows = []
    for app in apps:
        for level in levels:
            rs = [r for r in runs if r["app"] == app and r["level"] == level]
            row = {"app": app, "level": level}
            for b in ("new", "old"):
                for k in ("ckpt_s", "part_s"):
                    row[f"{b}_{k}"] = median([r[b][k] for r in rs])
            for k in ("ckpt_s", "part_s"):
                row[f"ratio_{k}"] = median([r["new"][k] / r["old"][k] for r in rs
                                            if r["new"][k] and r["old"][k]])
            row["reps"] = len(rs)
            row["same_results"] = all(r["new"]["result"] == r["old"]["result"] for r in rs)
            rows.append(row)
    return rows


def table(rows):
    t = ["| app | level | checkpoint, 3rd on (ms): new / old | **new / old** (paired median) "
         "| level's part (ms): new / old | **new / old** | reps | same results |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    ms = lambda x: None if x is None else 1e3 * x  # noqa: E731
    for r in rows:
        t.append("| {} | {} | {} / {} | **{}** | {} / {} | **{}** | {} | {} |".format(
            A.APP_NAME[r["app"]], r["level"], fmt(ms(r["new_ckpt_s"])), fmt(ms(r["old_ckpt_s"])),
            fmt(r["ratio_ckpt_s"], "{:.2f}"), fmt(ms(r["new_part_s"])), fmt(ms(r["old_part_s"])),
            fmt(r["ratio_part_s"], "{:.2f}"), r["reps"], "yes" if r["same_results"] else "**no**"))
    return "\n".join(t)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", required=True, help="the new build")
    ap.add_argument("--baseline-build", required=True, help="the old build")
    ap.add_argument("--apps", default="hpccg,comd,lulesh")
    ap.add_argument("--levels", default="1,2,3")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="the benchmarks' small sizes")
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--ckpt-root", default="/dev/shm")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--name", default="ab")
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpi-flags", default=os.environ.get("CRPM_MPIEXEC_FLAGS", "--oversubscribe --allow-run-as-root"))
    ap.add_argument("--timeout", type=float, default=600.0)
    a = ap.parse_args()
    a.crpm_advanced = []
    a.set = []
    apps = a.apps.split(",")
    levels = [int(x) for x in a.levels.split(",")]
    builds = {"new": os.path.abspath(a.build_dir), "old": os.path.abspath(a.baseline_build)}
    benches = {lv: SETUP[lv][0](a) for lv in levels}
    runs = []
    t0 = time.time()
    try:
        for rep in range(a.reps):
            order = ("new", "old") if rep % 2 == 0 else ("old", "new")
            for app in apps:
                for level in levels:
                    r = {"rep": rep, "app": app, "level": level, "order": list(order)}
                    for b in order:
                        r[b] = run_one(benches, a, app, level, builds[b])
                    runs.append(r)
                    print(f"rep {rep} {app} L{level}: new {fmt(r['new']['ckpt_s'])} s, old {fmt(r['old']['ckpt_s'])} s",
                          flush=True)
    finally:
        for b in benches.values():
            b.cleanup()
    rows = summarize(runs, apps, levels)
    md = table(rows)
    print(md)
    os.makedirs(a.out_dir, exist_ok=True)
    info = A.machine_info(a) if hasattr(A, "machine_info") else {}
    with open(os.path.join(a.out_dir, a.name + ".json"), "w") as f:
        json.dump({"builds": builds, "reps": a.reps, "quick": a.quick, "ckpt_every": a.ckpt_every,
                   "seconds": time.time() - t0, "machine": info, "summary": rows, "runs": runs}, f, indent=1)
    with open(os.path.join(a.out_dir, a.name + ".md"), "w") as f:
        f.write(f"# {a.name}: new build against old, side by side\n\n"
                f"`bench/ab/run.py --reps {a.reps}{' --quick' if a.quick else ''} --ckpt-every {a.ckpt_every}`; "
                f"new: `{builds['new']}`, old: `{builds['old']}`.\n"
                "Alternating which build runs first; medians over the repetitions, ratios paired by repetition.\n\n"
                + md + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
