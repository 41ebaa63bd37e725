#!/usr/bin/python3
"""Level-3 benchmark: differential Reed-Solomon parity against a full
re-encode of the whole checkpoint (what FTI and SCR do), level 2 and level 1.

For HPCCG, CoMD and LULESH, 8 ranks as 8 simulated nodes (node_size = 1,
ckpt_dir = <dir>/node%n) in two groups of group_size = 4 with l3_parity = 1,
one invocation runs four variants side by side, rotating their order:

  l1      --ckpt-level 1: the level-1 differential checkpoint alone
  l3      --ckpt-level 3: level 1, then old XOR new of the changed blocks
          sent to the parity holders, which add it into their parity
  l3full  --ckpt-level 3 with the baseline l3_full_encode: the whole
          image re-encoded every checkpoint (CRPM_BENCH_BASELINE, read only
          by a libcrpm configured with -DCRPM_TEST_HOOKS=ON)
  l2      --ckpt-level 2: differential partner copies (storage 1x, not M/(K-M))

Reported per application (slowest rank's checkpoint time, all ranks' bytes,
medians from the 3rd checkpoint on): time, bytes sent, parity storage, and
the ratios L3 / full re-encode and L3 / L1.  The library's checkpoint line
also times the level-3 part alone (from level 1's commit to the parity's,
slowest rank): the differential part against a full re-encode's part is the
encoding cost compared without the level-1 checkpoint both share.  Then the rebuild after losing a
node (an l3 run killed after its 3rd checkpoint, node 1 wiped, relaunched):
the library's decode rate per lost rank ("decoded in": the reconstruction
alone, slowest rank), at the application's size and, for the applications
in LARGE (HPCCG: about 36 MiB per rank), at a size where fixed latencies no
longer dominate the rate.  Beside each rebuild, in the same repetition,
bench/l3/rebuild_floor moves the bytes any decode of that size must move by
MPI alone, without coding ("move": every source's bytes leave it once, the
lost rank's image lands in fresh memory) and what copying a replica of it
costs ("copy"): the floor of any level-3 rebuild on this machine.  The ISA-L
encode rate of this machine comes from bench/l3/encode_rate
(results/l3_encode.json).

--rebuild-only skips the checkpoint runs and writes l3_rebuild.json and
l3_rebuild.md instead; --baseline-build DIR runs every rebuild with another
build too (alternating which goes first), for before/after figures taken in
the same conditions.

Targets (issue #15): on LULESH, the level-3 part costs <= 30% of a full
re-encode's and the whole L3 checkpoint <= 2x L1; reconstruction >= 1 GB/s per lost rank.  Results: <out>/l3.json and l3.md.
The driver, launch and parsing code is bench/l2/run.py's.
"""

import argparse
import importlib.util
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
_spec = importlib.util.spec_from_file_location("bench_l2_run", os.path.join(REPO, "bench", "l2", "run.py"))
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)
A = B.A

NP, NODE_SIZE, GROUP, PARITY = 8, 1, 4, 1
VARIANTS = ("l1", "l3", "l3full", "l2")
LEVEL = {"l1": 1, "l3": 3, "l3full": 3, "l2": 2}
LOST_NODE = 1
FLOOR_RE = re.compile(r"^rebuild_floor: \d+ bytes per lost rank, k \d+, \d+ reps: move median [\d.]+ s \(([\d.]+) "
                      r"GB/s\), best [\d.]+ s; copy median [\d.]+ s \(([\d.]+) GB/s\)")
REBUILD_RE = re.compile(r"^\[crpm\] restart: \d+ containers? rebuilt from level-3 parity.*?\(" + A.NUM
                        + r" MiB per lost rank: decoded in " + A.NUM + r" s, " + A.NUM + r" GB/s")
# Rebuild sizes beside the application's own (per rank: nx x ny x nz rows).
LARGE = {"hpccg": {"np": NP, "nx": 128, "ny": 128, "nz": 96, "iters": 60}}


class L3Bench(B.L2Bench):
    BASELINE = {"l3full": "l3_full_encode"}

    def config(self, variant, ckpt_dir, job, keep=0):
        path = os.path.join(self.tmp, f"{job}.ini")
        text = (f"[basic]\nckpt_dir = {ckpt_dir}/node%n\njob_name = {job}\nnode_size = {NODE_SIZE}\n"
                f"group_size = {GROUP}\nl3_parity = {PARITY}\nkeep_last_ckpt = {keep}\nverbosity = 2\n")
        adv = list(self.a.crpm_advanced)
        if adv:
            text += "[advanced]\n" + "".join(f"{kv}\n" for kv in adv)
        with open(path, "w") as f:
            f.write(text)
        return path

    def command(self, app, params, variant, cfg):
        return A.Bench.command(self, app, params, "crpm", cfg) + ["--ckpt-level", str(LEVEL[variant])]

    def rebuild_once(self, app, params, build_dir=None):
        job, ckdir = self.new_job(app, "rebuild")
        cfg = self.config("l3", ckdir, job, keep=1)
        saved = self.a.build_dir
        self.a.build_dir = build_dir or saved
        try:
            cmd = self.command(app, params, "l3", cfg)
        finally:
            self.a.build_dir = saved
        rec_app = A.APPS[app]["recovered"]
        out = {}
        try:
            seen = [0]

            def third(line):
                seen[0] += B.parse_ckpt_line(line) is not None
                return seen[0] >= 3
            run, _ = self.timed_start(cmd, third, f"{app}/rebuild first run")
            run.kill()
            nd = os.path.join(ckdir, f"node{LOST_NODE}")
            out["lost_bytes"] = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(nd) for f in fs)
            shutil.rmtree(nd)
            run, secs = self.timed_start(cmd, lambda ln: bool(rec_app.search(ln)), f"{app}/rebuild")
            run.kill()
            reb = [m for m in map(REBUILD_RE.search, run.lines) if m]
            out["start_to_recovered_s"] = secs
            out["rebuilt_mib_per_rank"] = float(reb[-1].group(1)) if reb else None
            out["decode_s"] = float(reb[-1].group(2)) if reb else None
            out["rebuild_gbps_printed"] = float(reb[-1].group(3)) if reb else None
            out["rebuild_line"] = reb[-1].group(0) if reb else None
            out["library_lines"] = [ln for ln in run.lines if ln.startswith("[crpm] restart")][-6:]
        finally:
            shutil.rmtree(ckdir, ignore_errors=True)
        return out

    def floor_once(self, nbytes, reps=3):
        """GB/s per lost rank of rebuild_floor for nbytes: (move, copy)."""
        exe = os.path.join(self.a.build_dir, "bench", "l3", "rebuild_floor")
        cmd = ([self.a.mpirun] + shlex.split(self.a.mpi_flags) + ["-np", str(NP), exe, "--bytes", str(int(nbytes)),
                                                                 "--dir", self.a.ckpt_root, "--group", str(GROUP),
                                                                 "--parity", str(PARITY), "--reps", str(reps)])
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env(), text=True,
                           timeout=self.a.timeout)
        m = next(filter(None, map(FLOOR_RE.search, p.stdout.splitlines())), None)
        if p.returncode != 0 or not m:
            raise RuntimeError(f"rebuild_floor failed ({p.returncode}):\n{p.stdout[-2000:]}")
        return float(m.group(1)), float(m.group(2))


def parity_storage(n_protected):
    """Extra storage per rank of each redundancy scheme, as a share of the data."""
    return {"l2": 1.0, "l3": PARITY / (GROUP - PARITY)}


def rebuild_summary(row, rebuilds):
    """Medians of each rebuild set ("app", "large", and "baseline_*" for the
    same with the baseline build)."""
    for key, rs in rebuilds.items():
        if rs:
            row[f"rebuild_{key}_gbps"] = B.median([r["rebuild_gbps_printed"] for r in rs])
            row[f"rebuild_{key}_decode_s"] = B.median([r["decode_s"] for r in rs])
            row[f"rebuild_{key}_mib"] = B.median([r["rebuilt_mib_per_rank"] for r in rs])
            row[f"rebuild_{key}_floor_move_gbps"] = B.median([r.get("floor_move_gbps") for r in rs])
            row[f"rebuild_{key}_floor_copy_gbps"] = B.median([r.get("floor_copy_gbps") for r in rs])
    row["rebuild_gbps_printed"] = row.get("rebuild_app_gbps")
    return row


def summarize(app, runs, rebuilds):
    med = B.median
    row = {"app": app}
    for v in VARIANTS:
        cks = [r["checkpoints"] for r in runs if r["variant"] == v]
        if not cks:
            continue
        row[f"{v}_ckpt_steady_s"] = med([med([c["seconds"] for c in ck[2:]]) for ck in cks])
        row[f"{v}_ckpt_total_s"] = med([sum(c["seconds"] for c in ck) for ck in cks])
        row[f"{v}_sent_steady_B"] = med([med([c["sent"] for c in ck[2:]]) for ck in cks])
        row[f"{v}_protected_B"] = cks[0][-1]["protected"]
        if v != "l1":
            row[f"{v}_part_steady_s"] = med([med([c["part_seconds"] for c in ck[2:]]) for ck in cks])
    row["l3_over_full_time"] = A.ratio(row.get("l3_ckpt_steady_s"), row.get("l3full_ckpt_steady_s"))
    row["l3_over_full_part"] = A.ratio(row.get("l3_part_steady_s"), row.get("l3full_part_steady_s"))
    row["l3_over_l1_time"] = A.ratio(row.get("l3_ckpt_steady_s"), row.get("l1_ckpt_steady_s"))
    row["l3_over_l2_time"] = A.ratio(row.get("l3_ckpt_steady_s"), row.get("l2_ckpt_steady_s"))
    row["l3_over_full_bytes"] = A.ratio(row.get("l3_sent_steady_B"), row.get("l3full_sent_steady_B"))
    row["storage_share"] = parity_storage(row.get("l1_protected_B"))
    return rebuild_summary(row, rebuilds)


def rebuild_cell(r, key):
    """'GB/s (MiB per lost rank)' of one rebuild set, '-' if not measured."""
    g = r.get(f"rebuild_{key}_gbps")
    return "-" if g is None else "{} ({}; floor {})".format(B.fmt(g), B.fmt(r.get(f"rebuild_{key}_mib"), "{:.1f}"),
                                                             B.fmt(r.get(f"rebuild_{key}_floor_move_gbps")))


def table(rows):
    f, mib = B.fmt, B.mib
    t = ["| app | protected (MiB) | per checkpoint (ms): L1 / L3 / L3 full re-encode / L2 | level-3 part (ms): "
         "L3 / full | **L3 part / full part** | L3 / full (whole checkpoint) | **L3 / L1** | "
         "sent per checkpoint (MiB): L3 / full / L2 | rebuild, GB/s per lost rank (MiB per lost rank; "
         "floor: MPI alone moving the same bytes): app size / large |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def ms(key):
        return f(None if r.get(key) is None else 1e3 * r[key])
    for r in rows:
        t.append("| {} | {} | {} / {} / {} / {} | {} / {} | **{}** | {} | **{}** | {} / {} / {} | {} |".format(
            A.APP_NAME[r["app"]], f(mib(r.get("l1_protected_B")), "{:.1f}"),
            *(ms(f"{v}_ckpt_steady_s") for v in VARIANTS), ms("l3_part_steady_s"), ms("l3full_part_steady_s"),
            f(r.get("l3_over_full_part")), f(r.get("l3_over_full_time")), f(r.get("l3_over_l1_time")),
            *(f(mib(r.get(f"{v}_sent_steady_B")), "{:.2f}") for v in ("l3", "l3full", "l2")),
            rebuild_cell(r, "app") + " / " + rebuild_cell(r, "large")))
    return "\n".join(t)


def rebuild_table(rows):
    t = ["| app | rebuild, app size: GB/s per lost rank (MiB per lost rank; decoded in s) | floor, app size: "
         "move / copy GB/s | large size | floor, large size | baseline build, app size | baseline build, large size |",
         "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        cells = []
        for key in ("app", "large", "baseline_app", "baseline_large"):
            g = r.get(f"rebuild_{key}_gbps")
            cells.append("-" if g is None else "{} ({}; {})".format(
                B.fmt(g), B.fmt(r.get(f"rebuild_{key}_mib"), "{:.1f}"), B.fmt(r.get(f"rebuild_{key}_decode_s"),
                                                                               "{:.3f}")))
            if not key.startswith("baseline"):
                cells.append("{} / {}".format(B.fmt(r.get(f"rebuild_{key}_floor_move_gbps")),
                                             B.fmt(r.get(f"rebuild_{key}_floor_copy_gbps"))))
        t.append("| {} | {} |".format(A.APP_NAME[r["app"]], " | ".join(cells)))
    return "\n".join(t)


def targets(rows):
    out = []
    for r in rows:
        if r["app"] == "lulesh":
            # the level-3 part against a full re-encode's (both after the same level-1 checkpoint)
            x = r.get("l3_over_full_part")
            out.append({"app": r["app"], "target": "L3 time <= 30% of a full re-encode (level-3 part)", "value": x,
                        "met": None if x is None else x <= 0.30})
            x = r.get("l3_over_l1_time")
            out.append({"app": r["app"], "target": "L3 time <= 2 x L1", "value": x,
                        "met": None if x is None else x <= 2.0})
        for key, what in (("app", "app size"), ("large", "large size")):
            x = r.get(f"rebuild_{key}_gbps")
            if x is None and key == "large":
                continue
            mb = r.get(f"rebuild_{key}_mib")
            out.append({"app": r["app"], "target": "reconstruction >= 1 GB/s per lost rank ({}, {} MiB per lost "
                        "rank)".format(what, B.fmt(mb, "{:.1f}")), "value": x, "met": None if x is None else x >= 1.0,
                        "floor": r.get(f"rebuild_{key}_floor_move_gbps"),
                        "copy_floor": r.get(f"rebuild_{key}_floor_copy_gbps")})
    return out


def write_results(a, stem, payload, table_text, desc):
    """<stem>.json (payload) and <stem>.md (table, description, targets);
    prints the Markdown and the problems; the exit status."""
    os.makedirs(a.out_dir, exist_ok=True)
    with open(os.path.join(a.out_dir, f"{stem}.json"), "w") as f:
        json.dump(payload, f, indent=1)
    lines = [table_text, "", desc, ""]
    for t in payload["targets"]:
        lines.append("- {}: {}: {} ({}){}".format(
            A.APP_NAME[t["app"]], t["target"], B.fmt(t["value"], "{:.3f}"),
            {True: "met", False: "NOT met", None: "not measured"}[t["met"]],
            "" if t.get("floor") is None else "; MPI alone moving the same bytes: {:.3f}, copying them once: {:.3f}"
            .format(t["floor"], t["copy_floor"])))
    text = "\n".join(lines)
    with open(os.path.join(a.out_dir, f"{stem}.md"), "w") as f:
        f.write(text + "\n")
    print("\n" + text)
    for p in payload["problems"]:
        print("PROBLEM: " + p)
    return 1 if payload["problems"] else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.environ.get("CRPM_BUILD_DIR", os.path.join(REPO, "build")))
    ap.add_argument("--apps", default="hpccg,comd,lulesh")
    ap.add_argument("--quick", action="store_true", help="small sizes, one repetition (smoke test)")
    ap.add_argument("--reps", type=int)
    ap.add_argument("--rebuild-reps", type=int)
    ap.add_argument("--rebuild-only", action="store_true",
                    help="only the rebuilds (no checkpoint runs): writes l3_rebuild.json and l3_rebuild.md")
    ap.add_argument("--no-large", action="store_true", help="no rebuild at the large sizes")
    ap.add_argument("--large-set", action="append", default=[], metavar="APP.KEY=N",
                    help="a parameter of a large rebuild size, e.g. hpccg.nz=48")
    ap.add_argument("--baseline-build", metavar="DIR", help="every rebuild also with this build (before/after)")
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--crpm-advanced", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--ckpt-root", default="/dev/shm")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpi-flags", default=os.environ.get("CRPM_MPIEXEC_FLAGS", "--oversubscribe --allow-run-as-root"))
    ap.add_argument("--timeout", type=float, default=300.0)
    a = ap.parse_args()
    a.set = []
    mode = "quick" if a.quick else "full"
    reps = a.reps if a.reps is not None else (1 if a.quick else 3)
    rreps = a.rebuild_reps if a.rebuild_reps is not None else 1
    a.build_dir, a.ckpt_root = os.path.abspath(a.build_dir), os.path.abspath(a.ckpt_root)
    params = {app: dict(B.SIZES[app][mode]) for app in a.apps.split(",")}
    large = {} if a.no_large else {app: dict(LARGE[app]) for app in params if app in LARGE}
    for s in a.large_set:
        m = re.fullmatch(r"(\w+)\.(\w+)=(\d+)", s)
        if not m or m.group(1) not in large or m.group(2) not in large[m.group(1)]:
            ap.error(f"bad --large-set {s!r}")
        large[m.group(1)][m.group(2)] = int(m.group(3))
    builds = [("", a.build_dir)] + ([("baseline_", os.path.abspath(a.baseline_build))] if a.baseline_build else [])
    if a.rebuild_only:
        reps = 0
    if reps > 0:
        B.need_baselines("the full re-encode of level 3 (l3full)")
    machine = A.machine_info(a)
    bench = L3Bench(a)
    t_start = time.time()
    runs = {x: [] for x in params}
    rebuilds = {x: {} for x in params}
    problems = []
    try:
        for rep in range(reps):
            for app in params:
                order = VARIANTS[rep % 4:] + VARIANTS[:rep % 4]
                for v in order:
                    r = bench.run_once(app, params[app], v)
                    r["variant"] = v
                    runs[app].append(r)
                    ck = r["checkpoints"]
                    print(f"[rep {rep + 1}/{reps}] {app:6s} {v:6s}: {len(ck)} checkpoints, "
                          f"{sum(c['seconds'] for c in ck):.3f} s in them", flush=True)
        for app in [x for x in params if runs[x]]:
            ref = next(r["result_lines"] for r in runs[app] if r["variant"] == "l1")
            for r in runs[app]:
                if r["result_lines"] != ref:
                    problems.append(f"{app}/{r['variant']}: results differ from level 1's")
                if {c["level"] for c in r["checkpoints"]} != {LEVEL[r["variant"]]}:
                    problems.append(f"{app}/{r['variant']}: checkpoints of levels "
                                    f"{sorted({c['level'] for c in r['checkpoints']})}")
        for rep in range(rreps):
            for app in params:
                sizes = [("app", params[app])] + ([("large", large[app])] if app in large else [])
                order = builds if rep % 2 == 0 else builds[::-1]
                for size, p in sizes:
                    for prefix, bdir in order:
                        key = prefix + size
                        r = bench.rebuild_once(app, p, bdir)
                        r["params"] = p
                        if not prefix and r.get("rebuilt_mib_per_rank"):
                            r["floor_move_gbps"], r["floor_copy_gbps"] = bench.floor_once(
                                r["rebuilt_mib_per_rank"] * 2**20, 1 if a.quick else 3)
                        rebuilds[app].setdefault(key, []).append(r)
                        print(f"[rebuild {rep + 1}/{rreps}] {app:6s} {key:14s}: {B.fmt(r['rebuild_gbps_printed'])} "
                              f"GB/s per lost rank, {B.fmt(r['rebuilt_mib_per_rank'], '{:.1f}')} MiB per lost rank, "
                              f"decoded in {B.fmt(r['decode_s'], '{:.3f}')} s; floor: move "
                              f"{B.fmt(r.get('floor_move_gbps'))}, copy {B.fmt(r.get('floor_copy_gbps'))} GB/s",
                              flush=True)
                        if r["rebuild_gbps_printed"] is None:
                            problems.append(f"{app}/{key}: no level-3 rebuild line; the library said: "
                                            f"{r['library_lines']}")
    finally:
        bench.cleanup()
    machine["loadavg_end"] = os.getloadavg()
    machine["driver_seconds"] = round(time.time() - t_start, 1)
    if a.rebuild_only:
        rows = [rebuild_summary({"app": app}, rebuilds[app]) for app in params]
        tg = [t for t in targets(rows) if t["target"].startswith("reconstruction")]
        desc = (f"{NP} ranks as {NP // NODE_SIZE} nodes, groups of {GROUP}, l3_parity {PARITY}, node {LOST_NODE} "
                f"lost; {machine.get('cores')} cores; {mode} app sizes, large: {large}; medians of {rreps}"
                f"{' alternating with the baseline build ' + a.baseline_build if a.baseline_build else ''}; load "
                f"{machine['loadavg_start'][0]:.1f} at start, {machine['loadavg_end'][0]:.1f} at end; "
                f"{machine.get('date')}, commit {machine.get('git_head', '?')}.")
        return write_results(a, "l3_rebuild", {
            "benchmark": "level-3 rebuild", "machine": machine, "mode": mode, "ranks": NP, "node_size": NODE_SIZE,
            "group_size": GROUP, "l3_parity": PARITY, "params": params, "large": large,
            "baseline_build": a.baseline_build, "command": " ".join(sys.argv), "summary": rows, "targets": tg,
            "problems": problems, "rebuilds": rebuilds}, rebuild_table(rows), desc)
    rows = [summarize(app, runs[app], rebuilds[app]) for app in params]
    tg = targets(rows)
    enc = os.path.join(REPO, "bench", "results", "l3_encode.json")
    isal = json.load(open(enc)) if os.path.exists(enc) else None
    desc = (f"{NP} ranks as {NP // NODE_SIZE} nodes, groups of {GROUP}, l3_parity {PARITY}; {machine.get('cores')} "
            f"cores; {mode} sizes, medians of {reps} rotating repetitions; load {machine['loadavg_start'][0]:.1f} "
            f"at start, {machine['loadavg_end'][0]:.1f} at end; {machine.get('date')}, commit "
            f"{machine.get('git_head', '?')}. Extra storage per rank: L2 1.00x the data, L3 "
            f"{PARITY / (GROUP - PARITY):.2f}x.")
    return write_results(a, "l3", {
        "benchmark": "level 3", "machine": machine, "mode": mode, "reps": reps, "ranks": NP, "node_size": NODE_SIZE,
        "group_size": GROUP, "l3_parity": PARITY, "params": params, "large": large, "command": " ".join(sys.argv),
        "summary": rows, "targets": tg, "problems": problems, "isal_encode": isal, "runs": runs,
        "rebuilds": rebuilds}, table(rows), desc)


if __name__ == "__main__":
    sys.exit(main())
