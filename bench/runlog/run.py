#!/usr/bin/python3
"""What the run log ([advanced] log_file) costs a checkpoint, side by side.

bench_runlog on 4 ranks as 4 simulated nodes (node_size = 1, ckpt_dir on
/dev/shm), each rank 16 MiB of which --dirty (default 5 %) changes between
checkpoints, --ckpts checkpoints per run; variants

  l1    every checkpoint at level 1
  l12   levels 1 and 2 in turn

each with the log off and on: one process runs --cycles cycles of a
segment with the log off and one with it on (crpm_init, --ckpts
checkpoints, crpm_finalize), their order swapped every cycle, so both meet
the machine's load alike.  Per variant and level: the median time of the checkpoint call
(the slowest rank's; the first 3 checkpoints of each segment, which fill the
containers, left out), on / off as a ratio (target < 1.01), and the difference in
microseconds; and the log's own time as it measured it inside each call
(log_seconds: completing the previous line's gather, rank 0 formatting and
writing it, posting this one's), against the call's time (target < 1 %).

Then the example run whose picture docs/tools.md shows: levels 1, 1, 2, 1,
1, 3 in turn with some computing between checkpoints, levels 2 and 3 in the
background (async = 1), rank 1 killed at its
28th checkpoint (CRPM_TEST_KILL: builds with -DCRPM_TEST_HOOKS=ON; otherwise
the run is not killed), node 1 lost, the relaunch rebuilds it and runs to the
end; crpm-report draws bench/results/runlog_report.png and prints its table
into runlog.md.

  run.py --bench BUILD/bench/runlog/bench_runlog [--reps N] [--cycles C] [--ckpts K] [--np P]
         [--out bench/results]
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
REPORT = os.path.join(REPO, "apps", "tools", "crpm-report")
NP = 4
WARMUP = 3
VARIANTS = {"l1": "1", "l12": "1,2"}


def config(path, ckpt_dir, job, log, extra=""):
    with open(path, "w") as f:
        f.write("[basic]\nckpt_dir = %s\njob_name = %s\nnode_size = 1\ngroup_size = 4\nverbosity = 1\n%s"
                "[advanced]\n%s" % (ckpt_dir, job, extra, "log_file = %s\n" % log if log else ""))


def launch(a, cfg, args, env=None, check=True, np_=None):
    cmd = [a.mpirun, "-n", str(np_ or NP)] + shlex.split(a.mpi_flags) + [a.bench, "--crpm", cfg] + args
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=e, timeout=600)
    if check and r.returncode != 0:
        sys.exit("bench: %s failed (%d):\n%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:]))
    return r


def calls(out):
    for line in out.splitlines():
        if line.startswith("bench {"):
            return json.loads(line[len("bench "):])["calls"]
    sys.exit("bench: no result line in\n" + out[-2000:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpi-flags", default="--oversubscribe --allow-run-as-root")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--np", type=int, default=NP, help="ranks of the side-by-side runs (the example: 4)")
    ap.add_argument("--ckpts", type=int, default=20, help="checkpoints per segment")
    ap.add_argument("--cycles", type=int, default=6, help="segments of each configuration per process")
    ap.add_argument("--dirty", type=float, default=0.05)
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--quick", action="store_true", help="a smoke run: one short repetition, no example")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.cycles, a.ckpts = 1, 1, WARMUP + 2
    work = tempfile.mkdtemp(prefix="crpm-bench-runlog-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    raw = []
    try:
        for rep in range(a.reps):
            for name, levels in VARIANTS.items():
                d = os.path.join(work, "r")
                shutil.rmtree(d, ignore_errors=True)
                off, on = os.path.join(work, "off.ini"), os.path.join(work, "on.ini")
                config(off, os.path.join(d, "node%n"), "b", None)
                config(on, os.path.join(d, "node%n"), "b", "run.jsonl")
                r = launch(a, off, ["--alt", on, "--cycles", str(a.cycles), "--levels", levels, "--ckpts",
                                    str(a.ckpts), "--dirty", str(a.dirty)], np_=a.np)
                run = {"rep": rep, "variant": name, "calls": calls(r.stdout)}
                # the log's own time per checkpoint, as it measured it (log_seconds)
                with open(os.path.join(d, "node0", "run.jsonl")) as f:
                    ck = [json.loads(x) for x in f if '"ev":"checkpoint"' in x]
                run["self"] = [[e["level"], e["log_seconds"]["max"], e["seconds"]["max"],
                                (e["id"] - 1) % a.ckpts] for e in ck]
                raw.append(run)
                print("rep %d %s: done" % (rep, name), flush=True)
        summary = []
        for name, levels in VARIANTS.items():
            for lv in sorted({int(x) for x in levels.split(",")}):
                med = {}
                for which in (0, 1):  # 0: log off, 1: on
                    ts = [t for run in raw if run["variant"] == name
                          for (w, k, l, t) in run["calls"] if w == which and k >= WARMUP and l == lv]
                    med[which] = statistics.median(ts)
                own = [(x, c) for run in raw if run["variant"] == name
                       for (l, x, c, k) in run["self"] if k >= WARMUP and l == lv]
                summary.append({"variant": name, "level": lv, "median_off_s": med[0], "median_on_s": med[1],
                                "ratio": med[1] / med[0], "diff_us": 1e6 * (med[1] - med[0]),
                                "log_median_us": 1e6 * statistics.median(x for x, _ in own),
                                "log_share": sum(x for x, _ in own) / sum(c for _, c in own)})
        os.makedirs(a.out, exist_ok=True)
        example = {"text": "(not run: --quick)\n", "table": None} if a.quick else example_run(a, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node(), "cpus": os.cpu_count(), "ranks": a.np, "mib_per_rank": 16, "dirty": a.dirty,
            "ckpts": a.ckpts, "cycles": a.cycles, "reps": a.reps, "warmup_left_out": WARMUP}
    with open(os.path.join(a.out, "runlog.json"), "w") as f:
        json.dump({"meta": meta, "summary": summary, "raw": raw, "example": example["table"]}, f, indent=1)
    with open(os.path.join(a.out, "runlog.md"), "w") as f:
        f.write("# The run log's cost (bench/runlog/run.py)\n\n%s, %d CPUs, %d ranks as %d nodes on /dev/shm, "
                "16 MiB per rank, %.0f%% changed per checkpoint; per variant %d processes, each %d cycles of a "
                "segment with the log off and one with it on (crpm_init, %d checkpoints, crpm_finalize; their "
                "order swapped every cycle); the first %d checkpoints of each segment left out.\n\n" % (
                    meta["date"], meta["cpus"], a.np, a.np, 100 * a.dirty, a.reps, a.cycles, a.ckpts, WARMUP))
        f.write("| variant | level | median call, log off | log on | on / off | difference | the log's own time "
                "(median) | its share of the checkpoint time |\n|---|---|---|---|---|---|---|---|\n")
        for s in summary:
            f.write("| %s | %d | %.3f ms | %.3f ms | %.4f | %+.1f us | %.1f us | %.3f%% |\n" % (
                s["variant"], s["level"], 1e3 * s["median_off_s"], 1e3 * s["median_on_s"], s["ratio"], s["diff_us"],
                s["log_median_us"], 100 * s["log_share"]))
        f.write("\nThe side-by-side medians carry the machine's noise (other jobs on its cores); the log's own "
                "time is what it measured inside the calls (log_seconds: writing the previous line, preparing "
                "this one's), summed over the checkpoints and divided by their calls' time.\n")
        f.write("\nThe example run (runlog_report.png), crpm-report's table:\n\n```\n%s```\n" % example["text"])
    for s in summary:
        print("%-4s L%d: off %.3f ms, on %.3f ms, ratio %.4f (%+.1f us); the log's own time %.1f us, %.3f%% of the "
              "checkpoint time" % (s["variant"], s["level"], 1e3 * s["median_off_s"], 1e3 * s["median_on_s"],
                                   s["ratio"], s["diff_us"], s["log_median_us"], 100 * s["log_share"]))


def example_run(a, work):
    """Levels 1,1,2,1,1,3 with computing between checkpoints, a kill and a
    node lost, the relaunch to the end; the report's table and picture."""
    d = os.path.join(work, "ex")
    cfg = os.path.join(work, "ex.ini")
    config(cfg, os.path.join(d, "node%n"), "example", "run.jsonl", "keep_last_ckpt = 1\nl3_parity = 1\nasync = 1\n")
    mt = {"OMPI_MPI_THREAD_LEVEL": "3"}  # MPI_THREAD_MULTIPLE for async = 1 (Open MPI)
    args = ["--levels", "1,1,2,1,1,3", "--ckpts", "60", "--dirty", "0.1", "--compute-ms", "40"]
    launch(a, cfg, args, env=dict(mt, CRPM_TEST_KILL="1:after_commit:28"), check=False)
    shutil.rmtree(os.path.join(d, "node1"), ignore_errors=True)
    launch(a, cfg, args, env=mt)
    log = os.path.join(d, "node0", "run.jsonl")
    shutil.copy(log, os.path.join(a.out, "runlog_example.jsonl"))
    png = os.path.join(a.out, "runlog_report.png")
    js = os.path.join(work, "ex.json")
    r = subprocess.run([a.python, REPORT, log, "--mtbf", "3600", "-o", png, "--json", js], stdout=subprocess.PIPE,
                       text=True, check=True)
    print(r.stdout)
    with open(js) as f:
        return {"text": r.stdout.replace(log, "runlog_example.jsonl"), "table": json.load(f)}


if __name__ == "__main__":
    main()
