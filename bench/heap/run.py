#!/usr/bin/python3
"""Persistent-heap benchmark: map workloads side by side, and malloc speed.

  run.py --build BUILD [--keys N] [--seconds S] [--rounds R] [--quick]
         [--out bench/results]

Runs bench_map (one process per variant, the variants in turn, rotated each
round, medians of the rounds) on std::unordered_map ("umap") and std::map
("map") with 8-byte keys and values, Zipf 0.99 keys:

  plain     std containers, no persistence (the baseline)
  tracked   libcrpm heap, change_tracking = pagemap
  compare   libcrpm heap, change_tracking = compare
  fullcopy  libcrpm heap written whole at every checkpoint (method = full)
  pmemobj   transactional hash map on PMDK libpmemobj (umap only)

workloads read-only, read-heavy (5% updates), balanced (50%), insert, one
checkpoint every 128 ms of CPU time; then balanced at 32 and 512 ms; then a
lower-bound pass (tracked, the changed 256-byte blocks counted at every
checkpoint); then bench_malloc against glibc.  Prints the tables with ratios
and the targets of issue 28, writes heap_map.json / heap_map.md and
heap_malloc.json under --out.  libcrpm and libpmemobj both persist with
cache-line flushes (persistence = pmem, PMEM_IS_PMEM_FORCE=1) into /dev/shm.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

VARIANTS = ["plain", "tracked", "compare", "fullcopy", "pmemobj"]
WORKLOADS = ["read-only", "read-heavy", "balanced", "insert"]


def run_map(a, variant, structure, workloads, interval=128, lower=False, seconds=None):
    cmd = [os.path.join(a.build, "bench/heap/bench_map"), "--variant", variant, "--structure", structure,
           "--keys", str(a.keys), "--seconds", str(seconds or a.seconds), "--interval-ms", str(interval),
           "--workloads", ",".join(workloads), "--dir", a.dir, "--warmup", str(a.warmup)]
    if lower:
        cmd.append("--lower-bound")
    env = dict(os.environ, PMEM_IS_PMEM_FORCE="1")
    t0 = time.time()
    launcher = [os.environ.get("CRPM_MPIEXEC", "mpiexec"), "-n", "1"] + os.environ.get(
        "CRPM_MPIEXEC_FLAGS", "--oversubscribe --allow-run-as-root").split()
    p = subprocess.run(launcher + cmd, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=1800)
    if p.returncode == 77:
        return []
    if p.returncode != 0:
        sys.exit("bench_map %s %s failed (%d):\n%s%s" % (variant, structure, p.returncode, p.stdout, p.stderr))
    rows = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    print("  %-8s %-4s %-30s %5.1f s wall: %s" % (variant, structure, ",".join(workloads), time.time() - t0,
          ", ".join("%s %.2f Mops/s" % (r["workload"], r["mops"]) for r in rows)), flush=True)
    return rows


def med(rows, key):
    v = [r[key] for r in rows]
    return statistics.median(v) if v else None


def group(rows, **kw):
    return [r for r in rows if all(r.get(k) == v for k, v in kw.items())]


def fmt_bytes(b):
    if b is None or b < 0:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if b < 1024 or unit == "GiB":
            return "%.1f %s" % (b, unit) if unit != "B" else "%.0f B" % b
        b /= 1024.0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--keys", type=int, default=4000000)
    ap.add_argument("--seconds", type=float, default=1.5, help="CPU seconds per workload")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--dir", default="/dev/shm")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "../results"))
    ap.add_argument("--quick", action="store_true", help="a short run: 200k keys, 0.3 s, one round")
    ap.add_argument("--smoke", action="store_true", help="the test suite's: 20k keys, 0.05 s, no sweep")
    a = ap.parse_args()
    a.warmup = 1.5
    if a.quick:
        a.keys, a.seconds, a.rounds, a.warmup = 200000, 0.3, 1, 0.3
    if a.smoke:
        a.keys, a.seconds, a.rounds, a.warmup = 20000, 0.05, 1, 0.05
    rows = []
    print("map workloads: %d keys, %.1f CPU s per workload, %d round(s)" % (a.keys, a.seconds, a.rounds), flush=True)
    for r in range(a.rounds):
        for s in ("umap", "map"):
            vs = [v for v in VARIANTS if s == "umap" or v != "pmemobj"]
            k = r % len(vs)
            for v in vs[k:] + vs[:k]:
                rows += run_map(a, v, s, WORKLOADS)
    sweep = []
    for s in ("umap", "map") if not a.smoke else ():
        for iv in (32, 512):
            for v in ("tracked", "compare", "fullcopy"):
                sweep += run_map(a, v, s, ["balanced"], interval=iv)
    lower = []
    for s in ("umap", "map"):
        lower += run_map(a, "tracked", s, WORKLOADS if not a.smoke else ["balanced"], lower=True)

    lines, verdicts = [], []
    lines.append("## Map workloads, one checkpoint every 128 ms (Mops/s per CPU second, median of %d; "
                 "%d keys, Zipf 0.99)" % (a.rounds, a.keys))
    lines.append("")
    lines.append("| structure | workload | " + " | ".join(VARIANTS) + " | tracked/plain | tracked/pmemobj |")
    lines.append("|---|---|" + "---|" * (len(VARIANTS) + 2))
    for s in ("umap", "map"):
        for w in WORKLOADS:
            m = {v: med(group(rows, variant=v, structure=s, workload=w), "mops") for v in VARIANTS}
            tp = m["tracked"] / m["plain"] if m["tracked"] and m["plain"] else None
            td = m["tracked"] / m["pmemobj"] if m["tracked"] and m["pmemobj"] else None
            lines.append("| %s | %s | %s | %s | %s |" % (s, w, " | ".join("%.2f" % m[v] if m[v] else "-" for v in VARIANTS),
                         "%.3f" % tp if tp else "-", "%.1fx" % td if td else "-"))
    lines.append("")
    lines.append("## Checkpoints at 128 ms: bytes written and time (median)")
    lines.append("")
    lines.append("| structure | workload | variant | written per checkpoint | per operation | compared per checkpoint "
                 "| checkpoint time (mean) |")
    lines.append("|---|---|---|---|---|---|---|")
    for s in ("umap", "map"):
        for w in WORKLOADS:
            for v in ("tracked", "compare", "fullcopy"):
                g = group(rows, variant=v, structure=s, workload=w)
                if g:
                    lines.append("| %s | %s | %s | %s | %.1f B | %s | %.1f ms |" % (
                        s, w, v, fmt_bytes(med(g, "bytes_per_ckpt")), med(g, "bytes_per_op"),
                        fmt_bytes(med(g, "compared_per_ckpt")), 1000 * med(g, "ckpt_s_mean")))
    lines.append("")
    lines.append("## Interval sweep, balanced workload (Mops/s; plain and pmemobj from the 128-ms runs)")
    lines.append("")
    lines.append("| structure | interval | tracked | compare | fullcopy | plain | tracked/plain |")
    lines.append("|---|---|---|---|---|---|---|")
    for s in ("umap", "map"):
        p = med(group(rows, variant="plain", structure=s, workload="balanced"), "mops")
        for iv in (32, 128, 512):
            src = rows if iv == 128 else sweep
            m = {v: med(group(src, variant=v, structure=s, workload="balanced", interval_ms=iv), "mops")
                 for v in ("tracked", "compare", "fullcopy")}
            lines.append("| %s | %d ms | %s | %s | %s | %.2f | %s |" % (
                s, iv, *["%.2f" % m[v] if m[v] else "-" for v in ("tracked", "compare", "fullcopy")], p,
                "%.3f" % (m["tracked"] / p) if m["tracked"] and p else "-"))
    lines.append("")
    lines.append("## Bytes written against the 256-byte lower bounds (tracked, one pass)")
    lines.append("")
    lines.append("Bound 1: the 256-B blocks that changed since the previous checkpoint.  Bound 2: those that "
                 "differ from the state two checkpoints back, which the NVM copy written into holds (any "
                 "failure-atomic scheme that keeps the committed copy intact writes them).")
    lines.append("")
    lines.append("| structure | workload | written per op | bound 1 per op | bound 2 per op | / bound 1 | / bound 2 |")
    lines.append("|---|---|---|---|---|---|---|")
    for x in lower:
        if x["checkpoints"] and x["oracle_bytes_per_ckpt"] > 0:
            per_op = x["checkpoints"] / x["ops"]
            w, b1, b2 = x["bytes_per_ckpt"], x["oracle_bytes_per_ckpt"], x["oracle2_bytes_per_ckpt"]
            lines.append("| %s | %s | %.1f B | %.1f B | %.1f B | %.2f | %.2f |" % (
                x["structure"], x["workload"], w * per_op, b1 * per_op, b2 * per_op, w / b1, w / b2 if b2 else 0))

    # the targets of issue 28
    pb = med(group(rows, variant="plain", structure="umap", workload="balanced"), "mops")
    tb = med(group(rows, variant="tracked", structure="umap", workload="balanced"), "mops")
    db = med(group(rows, variant="pmemobj", structure="umap", workload="balanced"), "mops")
    pm = med(group(rows, variant="plain", structure="map", workload="balanced"), "mops")
    tm = med(group(rows, variant="tracked", structure="map", workload="balanced"), "mops")
    bal = [x for x in lower if x["workload"] == "balanced" and x["oracle_bytes_per_ckpt"] > 0]
    verdicts.append("balanced within 15%% of plain at 128 ms: unordered_map %.1f%% slower, map %.1f%% slower: %s" % (
        100 * (1 - tb / pb), 100 * (1 - tm / pm), "met" if tb >= 0.85 * pb and tm >= 0.85 * pm else "NOT met"))
    if db and all(group(rows, variant="pmemobj", structure="umap", workload=w) for w in WORKLOADS):
        ratios = [med(group(rows, variant="tracked", structure="umap", workload=w), "mops") /
                  med(group(rows, variant="pmemobj", structure="umap", workload=w), "mops") for w in WORKLOADS]
        verdicts.append("at least 3x pmemobj: %s: %s" % (", ".join("%s %.1fx" % (w, r) for w, r in zip(WORKLOADS, ratios)),
                        "met" if min(ratios) >= 3 else "NOT met on %s" % ", ".join(
                            w for w, r in zip(WORKLOADS, ratios) if r < 3)))
    for x in bal:
        r1 = x["bytes_per_ckpt"] / x["oracle_bytes_per_ckpt"]
        r2 = x["bytes_per_ckpt"] / x["oracle2_bytes_per_ckpt"]
        verdicts.append("bytes per op within 1.5x of the 256-B bound, %s balanced: %.2fx bound 1 (%s), %.2fx bound 2" % (
            x["structure"], r1, "met" if r1 <= 1.5 else "NOT met", r2))
    lines.append("")
    lines.append("## Targets")
    lines.append("")
    lines += ["- " + v for v in verdicts]

    # malloc against glibc
    mj = os.path.join(a.out, "heap_malloc.json")
    mops = "20000" if a.smoke else "200000" if a.quick else "2000000"
    p = subprocess.run([os.path.join(a.build, "bench/heap/bench_malloc"), mops, "3" if a.quick or a.smoke else "5", mj],
                       stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("bench_malloc failed:\n" + p.stdout)
    lines.append("")
    lines.append("## crpm_heap against glibc malloc (CPU ns per operation, bench_malloc)")
    lines.append("")
    lines.append("```")
    lines += [x for x in p.stdout.splitlines() if not x.startswith("heap:")]
    lines.append("```")

    text = "\n".join(lines) + "\n"
    print("\n" + text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "heap_map.json"), "w") as f:
        json.dump({"keys": a.keys, "seconds": a.seconds, "rounds": a.rounds, "runs": rows, "sweep": sweep,
                   "lower_bound": lower, "targets": verdicts}, f, indent=1)
    with open(os.path.join(a.out, "heap_map.md"), "w") as f:
        f.write("# bench/heap/run.py --keys %d --seconds %g --rounds %d\n\n" % (a.keys, a.seconds, a.rounds))
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
