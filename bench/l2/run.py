#!/usr/bin/python3
"""Level-2 benchmark: differential partner copies against level 1 alone and
against an FTI-style level 2 that sends the whole checkpoint.

For HPCCG, CoMD and LULESH (the applications and their output parsers of
bench/apps/run.py), 8 ranks as 4 simulated nodes (node_size = 2, ckpt_dir =
<dir>/node%n), one invocation runs three variants side by side, rotating
their order in every repetition:

  l1      --ckpt-level 1: the level-1 differential checkpoint alone
  l2      --ckpt-level 2: level 1 plus the blocks it wrote, sent to the
          partner rank on the next node and applied to its partner copy
  l2full  --ckpt-level 2 with the baseline l2_full_copy: the whole
          container sent every time (what FTI, SCR and VeloC do); selected
          with CRPM_BENCH_BASELINE, which only a libcrpm configured with
          -DCRPM_TEST_HOOKS=ON reads (no user configuration key)

From the library's verbosity-2 checkpoint lines (slowest rank's time, all
ranks' bytes) it reports per application: the time of a checkpoint (median
from the 3rd on, when both copies of every segment exist) and of all of
them, the bytes sent to partners per checkpoint, and the ratios L2 / L1 time
and L2 bytes / full-copy bytes.  Then the rebuild after losing a node: an l2
run is SIGKILLed after its 3rd checkpoint, node 1's directory removed, and
the job relaunched.  GB/s per lost rank three ways: the library's transfer
time (the sync call that writes the lost containers anew, slowest rank), its
end-to-end time (that plus setting the damaged files aside, the agreements
and reopening), and the extra start-up time against a relaunch that lost
nothing (noisy: whole-job start-up on a shared machine).  The sync of the
partner copies the lost node held comes after and is reported apart.

The floor: bench/l2/transfer_floor moves each application's bytes sent per
level-2 checkpoint (per rank) between the same partners with MPI alone,
between mapped files in the checkpoint directory, all ranks starting
together.  (L1 + that time) / L1 is the least L2 / L1 any level 2 that
sends those bytes could reach here, printed beside L2 / L1.

Targets (issue #14): L2 adds <= 50% to L1's checkpoint time; L2 sends <= 15%
of the full copy's bytes on LULESH; the rebuild runs >= 1 GB/s per lost rank.
Results: <out>/l2.json (every raw run, the summary, the machine) and l2.md.
"""

import argparse
import importlib.util
import json
import os
import re
import shutil
import shlex
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

_spec = importlib.util.spec_from_file_location("bench_apps_run", os.path.join(REPO, "bench", "apps", "run.py"))
A = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(A)

NP, NODE_SIZE = 8, 2
VARIANTS = ("l1", "l2", "l2full")
LEVEL = {"l1": 1, "l2": 2, "l2full": 2}
LABEL = {"l1": "level 1", "l2": "level 2 (differential)", "l2full": "level 2, full copy (FTI style)"}
LOST_NODE = 1

# Per-rank sizes for 8 ranks.  HPCCG's nx ny nz are per rank; CoMD splits its
# cells over the ranks along x; LULESH's -s is per rank (8 = 2^3 ranks).
SIZES = {
    "hpccg": {"full": {"np": NP, "nx": 64, "ny": 64, "nz": 48, "iters": 60},
              "quick": {"np": NP, "nx": 16, "ny": 16, "nz": 8, "iters": 20}},
    "comd": {"full": {"np": NP, "cells": 32, "iters": 40},
             "quick": {"np": NP, "cells": 16, "iters": 20}},
    "lulesh": {"full": {"np": NP, "s": 30, "iters": 40},
               "quick": {"np": NP, "s": 8, "iters": 20}},
}

# The library's checkpoint line of a level-2 checkpoint also says how much
# was sent to partners ("...; 1.20 MiB sent to partners"), summed over ranks.
SENT_RE = re.compile(A.NUM + A.UNIT + r"\s*(?:bytes\s+)?sent\b")
# The library's rebuild line: the transfer alone (the sync call, slowest
# rank) and end to end (set-aside, agreements and reopening included).
REBUILD_RE = re.compile(r"^\[crpm\] restart: .*rebuilt from partner copies, ([\d.]+) MiB per rank: transfer ([\d.]+) s "
                        r"\(([\d.]+) GB/s per lost rank\), end to end ([\d.]+) s \(([\d.]+) GB/s per lost rank\)")
# The sync that follows: partner copies the lost node held, rebuilt by their owners.
RESYNC_RE = re.compile(r"^\[crpm\] restart: partner copies brought up to date, ([\d.]+) MiB from the busiest rank "
                       r"in ([\d.]+) s")
_parse_ckpt_line = A.parse_ckpt_line


# ...and the time of the level-2/3 part alone, after level 1 committed
# ("... in 12.6 ms (level 3 part 0.91 ms)").
PART_RE = re.compile(r"\(level \d part " + A.NUM + r"\s*(s|ms|us)\)")


def parse_ckpt_line(line):
    """bench/apps' parser, plus the bytes sent and the level-2/3 part's
    seconds (None if the line has none)."""
    c = _parse_ckpt_line(line)
    if c is not None:
        m = SENT_RE.search(line)
        c["sent"] = A.to_bytes(m.group(1), m.group(2), "B") if m else None
        m = PART_RE.search(line)
        c["part_seconds"] = float(m.group(1)) * A.TIME_UNIT[m.group(2)] if m else None
    return c


# Bench.run_once reads the checkpoint lines through the module's parser.
A.parse_ckpt_line = parse_ckpt_line


def need_baselines(what):
    """Under CTest in a build without the test hooks the baseline cannot
    run: skip (CTest's SKIP_RETURN_CODE), saying why."""
    if os.environ.get("CRPM_TEST_HOOKS", "ON").upper() == "OFF":
        print(f"SKIPPED: {what} needs a libcrpm configured with -DCRPM_TEST_HOOKS=ON (this build has no test hooks)")
        sys.exit(77)


class L2Bench(A.Bench):
    #: variant -> the library's baseline it runs (CRPM_BENCH_BASELINE)
    BASELINE = {"l2full": "l2_full_copy"}

    def variant_env(self, variant):
        env = self.env()
        if variant in self.BASELINE:
            env["CRPM_BENCH_BASELINE"] = self.BASELINE[variant]
        return env

    def run_once(self, app, params, variant):
        r = super().run_once(app, params, variant)
        want = self.BASELINE.get(variant)
        if want and want not in r["baselines"]:
            raise RuntimeError(f"{app}/{variant}: libcrpm did not run the baseline {want}: it needs a build configured "
                               "with -DCRPM_TEST_HOOKS=ON")
        return r

    def config(self, variant, ckpt_dir, job, keep=0):
        path = os.path.join(self.tmp, f"{job}.ini")
        text = (f"[basic]\nckpt_dir = {ckpt_dir}/node%n\njob_name = {job}\nnode_size = {NODE_SIZE}\n"
                f"keep_last_ckpt = {keep}\nverbosity = 2\n")
        adv = list(self.a.crpm_advanced)
        if adv:
            text += "[advanced]\n" + "".join(f"{kv}\n" for kv in adv)
        with open(path, "w") as f:
            f.write(text)
        return path

    def command(self, app, params, variant, cfg):
        return super().command(app, params, "crpm", cfg) + ["--ckpt-level", str(LEVEL[variant])]

    def timed_start(self, cmd, until, what):
        """Launches cmd and reads lines until until(line) holds; returns the
        launch, the lines and the seconds to that line."""
        t0 = time.time()
        run = A.Launch(cmd, self.env())
        deadline = t0 + self.a.timeout
        while True:
            line = run.next_line(deadline)
            if line is None:
                run.kill()
                raise RuntimeError(f"{what}: ended early:\n" + "\n".join(run.lines[-15:]))
            if until(line):
                return run, time.time() - t0

    def rebuild_once(self, app, params):
        """Kill an l2 run after its 3rd checkpoint; relaunch once with nothing
        lost and once more after losing node LOST_NODE (killed again each
        time after its recovery)."""
        job, ckdir = self.new_job(app, "rebuild")
        # keep_last_ckpt: a first run that ends before the kill still leaves a checkpoint
        cfg = self.config("l2", ckdir, job, keep=1)
        cmd = self.command(app, params, "l2", cfg)
        rec_app = A.APPS[app]["recovered"]
        out = {}
        try:
            seen = [0]

            def third(line):
                seen[0] += parse_ckpt_line(line) is not None
                return seen[0] >= 3
            run, _ = self.timed_start(cmd, third, f"{app}/rebuild first run")
            run.kill()
            for case in ("intact", "lost"):
                nd = os.path.join(ckdir, f"node{LOST_NODE}", job)
                if case == "lost":
                    own = [f for f in os.listdir(nd) if re.fullmatch(r"rank-\d+\.crpm", f)]
                    out["lost_ranks"] = len(own)
                    out["lost_container_bytes"] = sum(os.path.getsize(os.path.join(nd, f)) for f in own)
                    out["lost_partner_bytes"] = sum(os.path.getsize(os.path.join(nd, f)) for f in os.listdir(nd)
                                                    if f.startswith("partner-"))
                    shutil.rmtree(os.path.join(ckdir, f"node{LOST_NODE}"))
                run, secs = self.timed_start(cmd, lambda ln: bool(rec_app.search(ln)), f"{app}/rebuild {case}")
                run.kill()
                rec = [A.parse_recover_line(ln) for ln in run.lines]
                rec = [r for r in rec if r]
                reb = [m for m in map(REBUILD_RE.search, run.lines) if m]
                rsy = [m for m in map(RESYNC_RE.search, run.lines) if m]
                out[case] = {"start_to_recovered_s": secs, "recover": rec[-1] if rec else None,
                             "rebuild_mib_per_rank": float(reb[-1].group(1)) if reb else None,
                             "rebuild_transfer_s": float(reb[-1].group(2)) if reb else None,
                             "rebuild_gbps_transfer": float(reb[-1].group(3)) if reb else None,
                             "rebuild_end_to_end_s": float(reb[-1].group(4)) if reb else None,
                             "rebuild_gbps_end_to_end": float(reb[-1].group(5)) if reb else None,
                             "rebuild_line": reb[-1].group(0) if reb else None,
                             "resync_mib": float(rsy[-1].group(1)) if rsy else None,
                             "resync_s": float(rsy[-1].group(2)) if rsy else None,
                             "library_lines": [ln for ln in run.lines if ln.startswith("[crpm]")
                                               and "checkpoint" not in ln.split(":")[0]][-12:]}
        finally:
            shutil.rmtree(ckdir, ignore_errors=True)
        extra = out["lost"]["start_to_recovered_s"] - out["intact"]["start_to_recovered_s"]
        per_rank = out["lost_container_bytes"] / max(1, out["lost_ranks"])
        out["extra_start_s"] = extra
        out["gbps_per_lost_rank_from_extra_time"] = per_rank / extra / 1e9 if extra > 0 else None
        return out


FLOOR_RE = re.compile(r"^transfer_floor: \d+ bytes per rank, \d+ reps: median ([\d.]+) s, best ([\d.]+) s")


def transfer_floor(a, env, per_rank_bytes, reps):
    """Median and best seconds of transfer_floor for per_rank_bytes (None, None
    when there is nothing to send); raises when the tool fails."""
    if not per_rank_bytes:
        return None, None
    exe = os.path.join(a.build_dir, "bench", "l2", "transfer_floor")
    cmd = ([a.mpirun] + shlex.split(a.mpi_flags) + ["-np", str(NP), exe, "--bytes", str(int(per_rank_bytes)),
                                                   "--node-size", str(NODE_SIZE), "--dir", a.ckpt_root,
                                                   "--reps", str(reps)])
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, text=True,
                       timeout=a.timeout)
    m = next(filter(None, map(FLOOR_RE.search, p.stdout.splitlines())), None)
    if p.returncode != 0 or not m:
        raise RuntimeError(f"transfer_floor failed ({p.returncode}):\n{p.stdout[-2000:]}")
    return float(m.group(1)), float(m.group(2))


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def recover_gbps(rec):
    """GB/s per rank of crpm_recover's own line (None without one)."""
    if not rec or not rec.get("seconds") or not rec.get("bytes_per_rank"):
        return None
    return rec["bytes_per_rank"] / rec["seconds"] / 1e9


def summarize(app, runs, rebuilds, floor=(None, None)):
    by = {v: [r for r in runs if r["variant"] == v] for v in VARIANTS}
    row = {"app": app, "floor_transfer_s": floor[0], "floor_transfer_best_s": floor[1]}
    for v in VARIANTS:
        rs = by[v]
        if not rs:
            continue
        cks = [r["checkpoints"] for r in rs]
        row[f"{v}_n_ckpt"] = len(cks[0])
        row[f"{v}_levels"] = sorted({c["level"] for ck in cks for c in ck})
        row[f"{v}_ckpt_total_s"] = median([sum(c["seconds"] for c in ck) for ck in cks])
        row[f"{v}_ckpt_steady_s"] = median([median([c["seconds"] for c in ck[2:]]) for ck in cks])
        row[f"{v}_written_steady_B"] = median([median([c["written"] for c in ck[2:]]) for ck in cks])
        row[f"{v}_sent_steady_B"] = median([median([c["sent"] for c in ck[2:]]) for ck in cks])
        row[f"{v}_sent_total_B"] = median([sum(c["sent"] or 0 for c in ck) if any(c["sent"] is not None for c in ck)
                                           else None for ck in cks])
        row[f"{v}_protected_B"] = cks[0][-1]["protected"]
        row[f"{v}_loop_s"] = median([r["loop_s"] for r in rs])
    row["l2_over_l1_time_steady"] = A.ratio(row.get("l2_ckpt_steady_s"), row.get("l1_ckpt_steady_s"))
    fl = row.get("floor_transfer_s")
    row["floor_over_l1_time_steady"] = (None if fl is None or row.get("l1_ckpt_steady_s") is None else
                                        A.ratio(row["l1_ckpt_steady_s"] + fl, row["l1_ckpt_steady_s"]))
    row["l2_over_l1_time_total"] = A.ratio(row.get("l2_ckpt_total_s"), row.get("l1_ckpt_total_s"))
    row["l2full_over_l1_time_steady"] = A.ratio(row.get("l2full_ckpt_steady_s"), row.get("l1_ckpt_steady_s"))
    row["l2_over_full_bytes_steady"] = A.ratio(row.get("l2_sent_steady_B"), row.get("l2full_sent_steady_B"))
    row["l2_over_full_bytes_total"] = A.ratio(row.get("l2_sent_total_B"), row.get("l2full_sent_total_B"))
    if rebuilds:
        for k in ("rebuild_gbps_transfer", "rebuild_gbps_end_to_end", "rebuild_transfer_s", "rebuild_end_to_end_s",
                  "rebuild_mib_per_rank", "resync_s", "resync_mib"):
            row[k] = median([r["lost"][k] for r in rebuilds])
        # the fastest relaunch: what the code does when the shared machine lets it run
        for k in ("rebuild_gbps_transfer", "rebuild_gbps_end_to_end"):
            xs = [r["lost"][k] for r in rebuilds if r["lost"][k] is not None]
            row[k + "_best"] = max(xs) if xs else None
        row["rebuild_gbps_from_extra_time"] = median([r["gbps_per_lost_rank_from_extra_time"] for r in rebuilds])
        row["rebuild_extra_start_s"] = median([r["extra_start_s"] for r in rebuilds])
        row["recover_gbps_lost"] = median([recover_gbps(r["lost"]["recover"]) for r in rebuilds])
        row["lost_container_bytes_per_rank"] = median([r["lost_container_bytes"] / max(1, r["lost_ranks"])
                                                       for r in rebuilds])
    return row


def fmt(x, f="{:.2f}"):
    return "-" if x is None else f.format(x)


def mib(b):
    return None if b is None else b / (1 << 20)


def table(rows):
    t = ["| app | protected (MiB, all ranks) | per checkpoint, 3rd on: L1 / L2 / L2 full (ms) | **L2 / L1** "
         "| floor: (L1 + MPI alone) / L1 | L2 full / L1 | sent per checkpoint: L2 / L2 full (MiB) "
         "| **L2 / full bytes** (3rd on / all) | rebuild per lost rank (GB/s): transfer / end to end / from start-up time |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        t.append("| {} | {} | {} / {} / {} | **{}** | {} | {} | {} / {} | **{}** / {} | {} / {} / {} |".format(
            A.APP_NAME[r["app"]], fmt(mib(r.get("l1_protected_B")), "{:.1f}"),
            *(fmt(None if r.get(f"{v}_ckpt_steady_s") is None else 1e3 * r[f"{v}_ckpt_steady_s"], "{:.2f}")
              for v in VARIANTS),
            fmt(r.get("l2_over_l1_time_steady")), fmt(r.get("floor_over_l1_time_steady")),
            fmt(r.get("l2full_over_l1_time_steady")),
            fmt(mib(r.get("l2_sent_steady_B")), "{:.3f}"), fmt(mib(r.get("l2full_sent_steady_B")), "{:.3f}"),
            fmt(r.get("l2_over_full_bytes_steady"), "{:.1%}"), fmt(r.get("l2_over_full_bytes_total"), "{:.1%}"),
            fmt(r.get("rebuild_gbps_transfer")), fmt(r.get("rebuild_gbps_end_to_end")),
            fmt(r.get("rebuild_gbps_from_extra_time"))))
    return "\n".join(t)


def targets(rows):
    """The issue's targets, each with its figure and whether it is met (None:
    not measured)."""
    out = []
    for r in rows:
        x = r.get("l2_over_l1_time_steady")
        out.append({"app": r["app"], "target": "L2 checkpoint time <= 1.5 x L1", "value": x,
                    "met": None if x is None else x <= 1.5, "floor": r.get("floor_over_l1_time_steady")})
        x = r.get("l2_over_full_bytes_steady")
        if r["app"] == "lulesh":
            out.append({"app": r["app"], "target": "L2 bytes sent <= 15% of the full copy's", "value": x,
                        "met": None if x is None else x <= 0.15})
        for k, what in (("rebuild_gbps_transfer", "transfer"), ("rebuild_gbps_end_to_end", "end to end")):
            x = r.get(k)
            out.append({"app": r["app"], "target": f"rebuild >= 1 GB/s per lost rank ({what})", "value": x,
                        "met": None if x is None else x >= 1.0})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.environ.get("CRPM_BUILD_DIR", os.path.join(REPO, "build")))
    ap.add_argument("--apps", default="hpccg,comd,lulesh")
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition (smoke test)")
    ap.add_argument("--reps", type=int, help="repetitions of each variant (default 3, quick 1; 0: rebuild only)")
    ap.add_argument("--rebuild-reps", type=int, help="node-loss relaunches per app (default 2, quick 1)")
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--set", action="append", default=[], metavar="APP.KEY=VALUE")
    ap.add_argument("--crpm-advanced", action="append", default=[], metavar="KEY=VALUE",
                    help="extra [advanced] setting for every variant")
    ap.add_argument("--ckpt-root", default="/dev/shm")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpi-flags", default=os.environ.get("CRPM_MPIEXEC_FLAGS", "--oversubscribe --allow-run-as-root"))
    ap.add_argument("--timeout", type=float, default=300.0)
    a = ap.parse_args()
    mode = "quick" if a.quick else "full"
    reps = a.reps if a.reps is not None else (1 if a.quick else 3)  # 0: the rebuild alone
    rreps = a.rebuild_reps if a.rebuild_reps is not None else (1 if a.quick else 2)
    a.build_dir, a.ckpt_root = os.path.abspath(a.build_dir), os.path.abspath(a.ckpt_root)
    if reps > 0:
        need_baselines("the full-copy level 2 (l2full)")
    params = {}
    for app in a.apps.split(","):
        if app not in SIZES:
            ap.error(f"unknown app {app!r}")
        if not os.access(os.path.join(a.build_dir, A.APPS[app]["target"]), os.X_OK):
            sys.exit(f"{app} is not built in {a.build_dir}")
        params[app] = dict(SIZES[app][mode])
    for s in a.set:
        m = re.fullmatch(r"(\w+)\.(\w+)=(\d+)", s)
        if not m or m.group(1) not in params or m.group(2) not in params[m.group(1)]:
            ap.error(f"bad --set {s!r}")
        params[m.group(1)][m.group(2)] = int(m.group(3))

    machine = A.machine_info(a)
    bench = L2Bench(a)
    t_start = time.time()
    runs = {x: [] for x in params}
    rebuilds = {x: [] for x in params}
    problems = []
    try:
        for rep in range(reps):
            for app in params:
                order = VARIANTS[rep % 3:] + VARIANTS[:rep % 3]
                for v in order:
                    r = bench.run_once(app, params[app], v)
                    r["variant"] = v
                    runs[app].append(r)
                    ck = r["checkpoints"]
                    sent = [c["sent"] for c in ck]
                    print(f"[rep {rep + 1}/{reps}] {app:6s} {v:6s}: {len(ck)} checkpoints, "
                          f"{sum(c['seconds'] for c in ck):.3f} s in them, levels {sorted({c['level'] for c in ck})}"
                          + (f", {mib(sum(s for s in sent if s)):.2f} MiB sent" if any(s is not None for s in sent)
                             else ", no bytes-sent figure"), flush=True)
        for app in [x for x in params if runs[x]]:
            ref = next(r["result_lines"] for r in runs[app] if r["variant"] == "l1")
            for r in runs[app]:
                if r["result_lines"] != ref:
                    problems.append(f"{app}/{r['variant']}: results differ from level 1's: {r['result_lines']}")
                want = {LEVEL[r["variant"]]}
                if {c["level"] for c in r["checkpoints"]} != want:
                    problems.append(f"{app}/{r['variant']}: checkpoint lines of levels "
                                    f"{sorted({c['level'] for c in r['checkpoints']})}, expected {sorted(want)}")
                if r["variant"] != "l1" and any(c["sent"] is None for c in r["checkpoints"]):
                    problems.append(f"{app}/{r['variant']}: the library's level-2 checkpoint lines carry no "
                                    "'<size> sent' figure (bytes sent to partners)")
        for rep in range(rreps):
            for app in params:
                r = bench.rebuild_once(app, params[app])
                rebuilds[app].append(r)
                print(f"[rebuild {rep + 1}/{rreps}] {app:6s}: node {LOST_NODE} lost ({r['lost_ranks']} ranks, "
                      f"{mib(r['lost_container_bytes']):.1f} MiB of containers): start-up +{r['extra_start_s']:.3f} s"
                      f", {fmt(r['lost']['rebuild_gbps_transfer'])} GB/s transfer, "
                      f"{fmt(r['lost']['rebuild_gbps_end_to_end'])} GB/s end to end", flush=True)
                if r["lost"]["rebuild_gbps_transfer"] is None:
                    problems.append(f"{app}: no rebuild line with GB/s from the library after losing a node; its "
                                    f"lines: {r['lost']['library_lines']}")
                if r["lost"]["resync_s"] is None:
                    problems.append(f"{app}: no line about the partner copies brought up to date after losing a "
                                    f"node; its lines: {r['lost']['library_lines']}")
    finally:
        bench.cleanup()
    floors = {}
    for app in [x for x in params if runs[x]]:
        sent = median([median([c["sent"] for c in r["checkpoints"][2:]]) for r in runs[app] if r["variant"] == "l2"])
        floors[app] = transfer_floor(a, bench.env(), sent / NP if sent else None, 3 if a.quick else 20)
        print(f"[floor] {app:6s}: MPI alone moving {fmt(mib(sent / NP if sent else None), '{:.2f}')} MiB per rank "
              f"to the partner: {fmt(None if floors[app][0] is None else 1e3 * floors[app][0])} ms median", flush=True)
    machine["loadavg_end"] = os.getloadavg()
    machine["driver_seconds"] = round(time.time() - t_start, 1)
    rows = [summarize(app, runs[app], rebuilds[app], floors.get(app, (None, None))) for app in params]
    tg = targets(rows)
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, "l2.json"), "w") as f:
        json.dump({"benchmark": "level 2", "machine": machine, "mode": mode, "reps": reps, "rebuild_reps": rreps,
                   "ranks": NP, "node_size": NODE_SIZE, "ckpt_every": a.ckpt_every, "params": params,
                   "command": " ".join(sys.argv), "summary": rows, "targets": tg, "problems": problems,
                   "runs": runs, "rebuilds": rebuilds}, f, indent=1)
    desc = (f"{NP} ranks as {NP // NODE_SIZE} nodes of {NODE_SIZE}, {machine.get('cores')} cores "
            f"({machine.get('cpu', '?')}), checkpoints in {a.ckpt_root} ({machine.get('ckpt_fs', '?')}); {mode} "
            f"sizes, medians of {reps} rotating repetitions, checkpoint every {a.ckpt_every} iterations; load "
            f"{machine['loadavg_start'][0]:.1f} at start, {machine['loadavg_end'][0]:.1f} at end; "
            f"{machine.get('date')}, commit {machine.get('git_head', '?')}")
    lines = [table(rows), "", desc, ""]
    for r in rows:
        if r.get("rebuild_gbps_transfer") is not None:
            lines.append("- {}: rebuild of {} MiB per lost rank over {} relaunches: transfer {} GB/s median, {} best; "
                         "end to end {} median, {} best; then resyncing the partner copies the lost node held: {} s".format(
                             A.APP_NAME[r["app"]], fmt(r.get("rebuild_mib_per_rank"), "{:.1f}"), len(rebuilds[r["app"]]),
                             fmt(r.get("rebuild_gbps_transfer")), fmt(r.get("rebuild_gbps_transfer_best")),
                             fmt(r.get("rebuild_gbps_end_to_end")), fmt(r.get("rebuild_gbps_end_to_end_best")),
                             fmt(r.get("resync_s"), "{:.3f}")))
    lines.append("")
    for t in tg:
        lines.append("- {}: {}: {} ({}){}".format(
            A.APP_NAME[t["app"]], t["target"], fmt(t["value"], "{:.3f}"),
            {True: "met", False: "NOT met", None: "not measured"}[t["met"]],
            "" if t.get("floor") is None else "; MPI alone moving the same bytes: {:.3f}".format(t["floor"])))
    text = "\n".join(lines)
    with open(os.path.join(a.out_dir, "l2.md"), "w") as f:
        f.write(text + "\n")
    print("\n" + text)
    for p in problems:
        print("PROBLEM: " + p)
    print(f"\nwrote {a.out_dir}/l2.json, l2.md; took {machine['driver_seconds']:.0f} s")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
