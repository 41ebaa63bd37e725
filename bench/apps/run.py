#!/usr/bin/python3
"""Checkpoint overhead of libcrpm against an FTI-level-1-style full checkpoint.

For every application (HPCCG, CoMD, LULESH) one invocation runs four variants
side by side, alternating their order in every repetition so that load
changes on a shared machine hit all of them alike:

  none  no checkpointing (no --crpm)
  crpm  libcrpm level 1, differential container ([advanced] method = differential)
  fti   the same, through the FTI API: the <app>-fti executable (the same
        sources, checkpointing with FTI_Init/FTI_Protect/FTI_Checkpoint...
        on libfti) with an FTI configuration file as FTI users write it;
        its overhead is reported as a ratio to the native API's
  full  the same protected arrays written the way FTI level 1 does it
        ([advanced] method = full: a new per-rank file per checkpoint,
        write() + fsync, then removal of the previous file)

and then measures recovery: a checkpointing run is SIGKILLed (whole process
session) after its second checkpoint and relaunched; the library's recovery
line gives the time to restore the protected state.

Results go to <out>/apps.csv, apps.md (the tables), apps.json (the machine
description and every raw run) and three PNG charts.  See bench/apps/README.md.
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import selectors
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

VARIANTS = ("none", "crpm", "fti", "full")
LABEL = {"none": "no checkpoint", "crpm": "libcrpm L1", "fti": "libcrpm L1, FTI API", "full": "full (FTI L1 style)"}
UNITS = {None: 1, "": 1, "B": 1, "bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

# ---------------------------------------------------------------------------
# Applications.  Sizes: "full" keeps one driver run under ~10 minutes on a
# 2-core machine with tens of MiB of protected state per rank and 8-16
# checkpoints per run; "quick" is a smoke test of the whole pipeline.  One
# rank by default: on a 2-core machine shared with other work, a 2-rank run
# stalls whenever either core is taken, and the run-to-run spread (up to 2x)
# buries the overheads being measured; a single rank leaves a core spare.
# --np 2 runs HPCCG and CoMD on both cores (LULESH needs a cube).
# ---------------------------------------------------------------------------


def hpccg_args(p):
    # --max-iter N runs N-1 iterations.
    return [str(p["nx"]), str(p["ny"]), str(p["nz"]), "--max-iter", str(p["iters"] + 1)]


def comd_args(p):
    return ["-i", str(p["np"]), "-j", "1", "-k", "1", "-x", str(p["cells"]), "-y", str(p["cells"]),
            "-z", str(p["cells"]), "-N", str(p["iters"]), "-n", str(p["iters"])]


def lulesh_args(p):
    return ["-s", str(p["s"]), "-i", str(p["iters"])]


APPS = {
    "hpccg": {
        "target": "apps/hpccg/hpccg",
        "fti_target": "apps/hpccg/hpccg-fti",
        "args": hpccg_args,
        "sizes": {"full": {"np": 1, "nx": 160, "ny": 160, "nz": 160, "iters": 80},
                  "quick": {"np": 1, "nx": 96, "ny": 96, "nz": 96, "iters": 30},
                  "probe": {"np": 1, "nx": 8, "ny": 8, "nz": 8, "iters": 3}},
        "loop": re.compile(r"^Timing: setup [\d.]+ s, solve ([\d.eE+-]+) s"),
        "result": re.compile(r"^Final digest:.*"),
        "recovered": re.compile(r"^crpm: recovered"),
        "ckpt_app": re.compile(r"^Timing: \d+ checkpoint\(s\), ([\d.eE+-]+) s"),
    },
    "comd": {
        "target": "apps/comd/comd",
        "fti_target": "apps/comd/comd-fti",
        "args": comd_args,
        "sizes": {"full": {"np": 1, "cells": 32, "iters": 40},
                  "quick": {"np": 1, "cells": 20, "iters": 20},
                  "probe": {"np": 1, "cells": 8, "iters": 3}},
        "loop": re.compile(r"^Timing: total [\d.]+ s, loop ([\d.eE+-]+) s"),
        "result": re.compile(r"^\s*(Final energy|Final temperature|Final atom count)\b.*"),
        "recovered": re.compile(r"^crpm: restarted"),
        "ckpt_app": re.compile(r"^Timing: force .*, checkpoint ([\d.eE+-]+) s"),
    },
    "lulesh": {
        "target": "apps/lulesh/lulesh",
        "fti_target": "apps/lulesh/lulesh-fti",
        "args": lulesh_args,
        "sizes": {"full": {"np": 1, "s": 64, "iters": 50},
                  "quick": {"np": 1, "s": 36, "iters": 20},
                  "probe": {"np": 1, "s": 8, "iters": 3}},
        "loop": re.compile(r"^Elapsed time\s*=\s*([\d.eE+-]+)"),
        "result": re.compile(r"^\s*State digest\s*=.*"),
        "recovered": re.compile(r"^crpm: restarted"),
        "ckpt_app": re.compile(r"^crpm: \d+ checkpoints in this run, ([\d.eE+-]+) s"),
    },
}

# Library notices (rank 0, verbosity >= 2).  Accepts the exact-bytes form
# ("checkpoint id 5 level 1: wrote 123 of 456 bytes protected ... in 0.01 s")
# as well as the humanised one ("checkpoint 5 (L1): 1.00 MiB written of
# 2.00 MiB protected (50.0%) in 10.0 ms"); times come in s, ms or us.
NUM = r"([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)"
UNIT = r"\s*(B|KiB|MiB|GiB|TiB|bytes)?"
CKPT_RE = re.compile(
    r"checkpoint (?:id )?(-?\d+)\s*(?:\(L(\d)\)|level (\d))\s*:\s*(?:wrote\s+)?" + NUM + UNIT +
    r"\s*(?:written\s+)?of\s+" + NUM + UNIT + r"\s*(?:bytes\s+)?protected.*?\bin\s+" + NUM + r"\s*(s|ms|us)\b")
# A benchmark baseline in effect (CRPM_BENCH_BASELINE in a CRPM_TEST_HOOKS build).
BASELINE_RE = re.compile(r"^\[crpm\] benchmark baseline (\w+):")
RECOVER_RE = re.compile(r"recovered\b.*?\bin\s+" + NUM + r"\s*(s|ms|us)\b")
TIME_UNIT = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
RECOVER_BYTES_RE = re.compile(NUM + UNIT + r"\s*(?:bytes\s+)?per rank")


def to_bytes(num, unit, default_unit=None):
    return float(num) * UNITS[unit if unit else default_unit]


def parse_ckpt_line(line):
    m = CKPT_RE.search(line)
    if not m:
        return None
    cid, l_a, l_b, w, wu, p, pu, secs, su = m.groups()
    # In "wrote W of P bytes", W carries no unit of its own.
    wb = to_bytes(w, wu, pu)
    return {"id": int(cid), "level": int(l_a or l_b), "written": wb, "protected": to_bytes(p, pu),
            "seconds": float(secs) * TIME_UNIT[su]}


def parse_recover_line(line):
    m = RECOVER_RE.search(line)
    if not m or "crpm" not in line:
        return None
    out = {"seconds": float(m.group(1)) * TIME_UNIT[m.group(2)]}
    b = RECOVER_BYTES_RE.search(line)
    if b:
        out["bytes_per_rank"] = to_bytes(b.group(1), b.group(2))
    return out


# ---------------------------------------------------------------------------
# Process handling: every launch gets its own session, so a kill (or a
# timeout) reaches mpirun and every rank it started, and nothing else.
# ---------------------------------------------------------------------------


def session_pids(sid):
    pids = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid:  # field 6 of stat: session id
            pids.append(int(d))
    return pids


def shm_segments(pids):
    """Open MPI shared-memory segments mapped by these processes: a killed
    job cannot remove them, so whoever killed it must."""
    segs = set()
    for pid in pids:
        try:
            with open(f"/proc/{pid}/maps") as f:
                for line in f:
                    path = line.rstrip("\n").split(None, 5)[-1]
                    if os.path.basename(path).startswith("vader_segment."):
                        segs.add(path)
        except OSError:
            pass
    return segs


def kill_session(proc):
    sid = proc.pid  # start_new_session makes the child a session and group leader
    segs = shm_segments(session_pids(sid))
    try:
        os.killpg(sid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    # Ranks that moved to a process group of their own are still in our session.
    for pid in session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.time() + 10
    while session_pids(sid) and time.time() < deadline:
        time.sleep(0.05)
    for path in segs:
        try:
            os.unlink(path)
        except OSError:
            pass


class Launch:
    """A streaming launch: lines can be read with a deadline."""

    def __init__(self, cmd, env):
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.proc.stdout, selectors.EVENT_READ)
        self.buf = b""
        self.lines = []
        self.eof = False

    def next_line(self, deadline):
        """Next output line, None at EOF; raises TimeoutError past deadline."""
        while True:
            nl = self.buf.find(b"\n")
            if nl >= 0:
                line, self.buf = self.buf[:nl].decode(errors="replace"), self.buf[nl + 1:]
                self.lines.append(line)
                return line
            if self.eof:
                if self.buf:
                    line, self.buf = self.buf.decode(errors="replace"), b""
                    self.lines.append(line)
                    return line
                return None
            left = deadline - time.time()
            if left <= 0:
                raise TimeoutError
            if self.sel.select(timeout=min(left, 1.0)):
                chunk = os.read(self.proc.stdout.fileno(), 65536)
                if chunk:
                    self.buf += chunk
                else:
                    self.eof = True

    def wait(self, deadline):
        """Exit code and CPU seconds (user + system) of mpirun and the ranks
        it reaped."""
        while True:
            pid, status, ru = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.proc.returncode = os.waitstatus_to_exitcode(status)
                return self.proc.returncode, ru.ru_utime + ru.ru_stime
            if time.time() > deadline:
                raise TimeoutError
            time.sleep(0.02)

    def kill(self):
        kill_session(self.proc)
        self.close()

    def close(self):
        try:
            self.sel.close()
            self.proc.stdout.close()
        except OSError:
            pass


# ---------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------


class Bench:
    def __init__(self, args):
        self.a = args
        self.tmp = tempfile.mkdtemp(prefix="crpm-bench-apps-")
        self.shm = tempfile.mkdtemp(prefix="crpm-bench-apps-", dir=args.ckpt_root)
        self.mpirun = shutil.which(args.mpirun) or args.mpirun
        self.job_seq = 0

    def cleanup(self):
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.shm, ignore_errors=True)

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("CRPM_")}
        return env

    def variant_env(self, variant):
        """The environment of a run of `variant` (benchmarks with baselines
        add CRPM_BENCH_BASELINE)."""
        return self.env()

    def config(self, variant, ckpt_dir, job, keep=0):
        if variant == "fti":
            return self.fti_config(ckpt_dir, job, keep)
        path = os.path.join(self.tmp, f"{job}.ini")
        text = f"[basic]\nckpt_dir = {ckpt_dir}\njob_name = {job}\nkeep_last_ckpt = {keep}\nverbosity = 2\n"
        if variant == "full":
            text += "[advanced]\nmethod = full\n"
        elif self.a.crpm_advanced:
            text += "[advanced]\n" + "".join(f"{kv}\n" for kv in self.a.crpm_advanced)
        with open(path, "w") as f:
            f.write(text)
        return path

    def fti_config(self, ckpt_dir, job, keep):
        """An FTI configuration file as FTI users write it.  What libcrpm
        gets from it equals the native variant's file: the same ckpt_dir,
        keep_last_ckpt and verbosity (FTI's 2, info, is libcrpm's 2); the
        job name is the layer's ("fti").  No heads; the ckpt_lN intervals
        only drive FTI_Snapshot, which the applications do not call."""
        path = os.path.join(self.tmp, f"{job}.fti")
        text = ("[basic]\n"
                "head            = 0\n"
                "node_size       = 1\n"
                f"ckpt_dir        = {ckpt_dir}/local\n"
                f"glbl_dir        = {ckpt_dir}/global\n"
                f"meta_dir        = {ckpt_dir}/meta\n"
                "ckpt_l1         = 0\n"
                "ckpt_l2         = 0\n"
                "ckpt_l3         = 0\n"
                "ckpt_l4         = 0\n"
                "inline_l2       = 1\n"
                "inline_l3       = 1\n"
                "inline_l4       = 1\n"
                f"keep_last_ckpt  = {keep}\n"
                "group_size      = 1\n"
                "verbosity       = 2\n")
        with open(path, "w") as f:
            f.write(text)
        return path

    def command(self, app, params, variant, cfg):
        spec = APPS[app]
        exe = os.path.join(self.a.build_dir, spec["fti_target" if variant == "fti" else "target"])
        cmd = [self.mpirun] + self.a.mpi_flags.split() + ["-np", str(params["np"]), exe] + spec["args"](params)
        if variant != "none":
            cmd += ["--crpm", cfg, "--ckpt-every", str(self.a.ckpt_every)]
        return cmd

    def new_job(self, app, variant):
        self.job_seq += 1
        job = f"{app}-{variant}-{self.job_seq}"
        return job, os.path.join(self.shm, job)

    def run_once(self, app, params, variant):
        """One complete run; returns the measurements."""
        job, ckdir = self.new_job(app, variant)
        cfg = self.config(variant, ckdir, job) if variant != "none" else None
        cmd = self.command(app, params, variant, cfg)
        t0 = time.time()
        run = Launch(cmd, self.variant_env(variant))
        deadline = t0 + self.a.timeout
        try:
            while run.next_line(deadline) is not None:
                pass
            rc, cpu = run.wait(deadline)
        except TimeoutError:
            run.kill()
            raise RuntimeError(f"{app}/{variant}: timed out after {self.a.timeout} s: {' '.join(cmd)}")
        finally:
            run.close()
        wall = time.time() - t0
        shutil.rmtree(ckdir, ignore_errors=True)
        out = run.lines
        if rc != 0:
            tail = "\n".join(out[-15:])
            raise RuntimeError(f"{app}/{variant}: exit status {rc}: {' '.join(cmd)}\n{tail}")
        spec = APPS[app]
        loop = [float(m.group(1)) for m in map(spec["loop"].search, out) if m]
        if not loop:
            raise RuntimeError(f"{app}/{variant}: no timing line in the output of {' '.join(cmd)}")
        ckpts = [c for c in map(parse_ckpt_line, out) if c]
        if variant != "none" and not ckpts:
            raise RuntimeError(f"{app}/{variant}: no per-checkpoint lines from the library "
                               "(verbosity 2); cannot report bytes written")
        result = [ln.strip() for ln in out if spec["result"].search(ln)]
        # The application's own time around its checkpoint calls (slowest
        # rank): unlike the library's lines it includes the FTI layer.
        app_ck = [float(m.group(1)) for m in map(spec["ckpt_app"].search, out) if m]
        return {"variant": variant, "loop_s": loop[-1], "wall_s": wall, "cpu_s": cpu, "checkpoints": ckpts,
                "ckpt_app_s": app_ck[-1] if app_ck else None, "result_lines": result,
                "baselines": [m.group(1) for m in map(BASELINE_RE.search, out) if m]}

    def probe_full(self, app):
        """Whether the library takes [advanced] method = full and writes
        FTI-style files full-<id>.rank-<r> under <ckpt_dir>/<job>/ (a tiny
        run of `app`), and if not, why."""
        job, ckdir = self.new_job("probe", "full")
        cfg = self.config("full", ckdir, job, keep=1)  # keep the files to look at them
        cmd = self.command(app, APPS[app]["sizes"]["probe"], "full", cfg)
        cmd[cmd.index("--ckpt-every") + 1] = "1"
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=self.env(),
                           timeout=120, start_new_session=True)
        jobdir = os.path.join(ckdir, job)
        files = os.listdir(jobdir) if os.path.isdir(jobdir) else []
        shutil.rmtree(ckdir, ignore_errors=True)
        if p.returncode != 0:
            msg = [ln for ln in p.stdout.decode(errors="replace").splitlines() if "failed" in ln or "rror" in ln]
            return False, "the library refused method = full: " + (msg[0] if msg else f"exit {p.returncode}")
        if not any(re.fullmatch(r"full-\d+\.rank-0", f) for f in files):
            return False, f"method = full wrote no full-<id>.rank-0 file (found: {sorted(files)})"
        return True, ""

    def recovery_once(self, app, params, variant):
        """Kill a checkpointing run after its second checkpoint, relaunch it
        and read the library's recovery line."""
        job, ckdir = self.new_job(app, variant + "-rec")
        cfg = self.config(variant, ckdir, job)
        cmd = self.command(app, params, variant, cfg)
        run = Launch(cmd, self.env())
        deadline = time.time() + self.a.timeout
        seen = 0
        protected = None
        try:
            while seen < 2:
                line = run.next_line(deadline)
                if line is None:
                    raise RuntimeError(f"{app}/{variant}: run ended before its second checkpoint")
                c = parse_ckpt_line(line)
                if c:
                    seen += 1
                    protected = c["protected"]
            killed_after = seen
        finally:
            run.kill()
        rerun = Launch(cmd, self.env())
        deadline = time.time() + self.a.timeout
        rec, app_ok = None, False
        try:
            # The library reports inside crpm_recover, before the app's own notice.
            while not app_ok:
                line = rerun.next_line(deadline)
                if line is None:
                    break
                rec = rec or parse_recover_line(line)
                app_ok = app_ok or bool(APPS[app]["recovered"].search(line))
        except TimeoutError:
            pass
        finally:
            rerun.kill()
            shutil.rmtree(ckdir, ignore_errors=True)
        if not app_ok:
            raise RuntimeError(f"{app}/{variant}: the relaunched run did not restart from the checkpoint:\n" +
                               "\n".join(rerun.lines[-15:]))
        if rec is None:
            return {"variant": variant, "seconds": None, "protected": protected, "killed_after": killed_after,
                    "note": "no recovery line from the library"}
        return {"variant": variant, "seconds": rec["seconds"], "bytes_per_rank": rec.get("bytes_per_rank"),
                "protected": protected, "killed_after": killed_after}


# ---------------------------------------------------------------------------
# Statistics, output
# ---------------------------------------------------------------------------


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def paired_median(a, b):
    """Median of the per-repetition differences a[i] - b[i] (each repetition
    ran all variants back to back) and a robust standard error of it
    (1.4826 MAD ~ sigma; the median's error is ~1.25 sigma/sqrt(n))."""
    pairs = [x - y for x, y in zip(a, b)]
    if not pairs:
        return None, None
    m = statistics.median(pairs)
    err = None
    if len(pairs) > 1:
        err = 1.25 * 1.4826 * statistics.median(abs(x - m) for x in pairs) / len(pairs) ** 0.5
    return m, err


def ratio(a, b):
    return a / b if a is not None and b else None


def summarize(app, params, runs, recs):
    np_ = params["np"]
    by = {v: [r for r in runs if r["variant"] == v] for v in VARIANTS}
    reps = len(by["none"])
    t = {v: median([r["loop_s"] for r in by[v]]) for v in VARIANTS}
    rows = []
    for v in VARIANTS:
        if not by[v]:
            continue
        row = {"app": app, "variant": v, "np": np_, "reps": len(by[v]),
               "params": " ".join(f"{k}={val}" for k, val in params.items()),
               "time_s": t[v], "time_min_s": min(r["loop_s"] for r in by[v]),
               "time_max_s": max(r["loop_s"] for r in by[v]),
               "wall_s": median([r["wall_s"] for r in by[v]]),
               "cpu_s": median([r["cpu_s"] for r in by[v]]),
               "rel_time": t[v] / t["none"] if t["none"] else None}
        if v == "none":
            row["overhead_s"] = 0.0
        else:
            # Paired: each repetition ran all variants back to back.
            ov, err = paired_median([r["loop_s"] for r in by[v]], [r["loop_s"] for r in by["none"]])
            row["overhead_s"] = ov
            if err is not None:
                row["overhead_err_s"] = err
            row["overhead_pct_of_time"] = 100.0 * row["overhead_s"] / t["none"]
            cpairs = [by[v][i]["cpu_s"] - by["none"][i]["cpu_s"] for i in range(min(reps, len(by[v])))]
            row["overhead_cpu_s"] = median(cpairs)
            row["ckpt_call_s"] = median([sum(c["seconds"] for c in r["checkpoints"]) for r in by[v]])
            row["ckpt_app_s"] = median([r.get("ckpt_app_s") for r in by[v]])
            # libcrpm's first two checkpoints fill both copies of every
            # segment; later ones show the steady state.
            row["ckpt_call_first2_s"] = median([sum(c["seconds"] for c in r["checkpoints"][:2]) for r in by[v]])
            row["ckpt_call_steady_each_s"] = median([median([c["seconds"] for c in r["checkpoints"][2:]])
                                                     for r in by[v]])
            ck = by[v][0]["checkpoints"]
            row["n_ckpt"] = len(ck)
            row["protected_bytes"] = ck[-1]["protected"]
            row["protected_bytes_per_rank"] = ck[-1]["protected"] / np_
            row["written_bytes_per_ckpt"] = median([statistics.mean(c["written"] for c in r["checkpoints"])
                                                    for r in by[v]])
            row["written_bytes_first_ckpt"] = ck[0]["written"]
            row["written_bytes_steady_ckpt"] = (statistics.mean(c["written"] for c in ck[2:])
                                                if len(ck) > 2 else None)
            row["written_pct_of_protected"] = 100.0 * row["written_bytes_per_ckpt"] / row["protected_bytes"]
            rr = [x for x in recs if x["variant"] == v]
            secs = median([x["seconds"] for x in rr])
            row["recovery_s"] = secs
            # The library reports the largest rank's protected bytes and the slowest rank's time.
            per_rank = median([x.get("bytes_per_rank") for x in rr]) or row["protected_bytes_per_rank"]
            row["recovery_gbps_per_rank"] = per_rank / secs / 1e9 if secs else None
            row["recovery_note"] = "; ".join(sorted({x["note"] for x in rr if x.get("note")}))
        rows.append(row)
    full = next((r for r in rows if r["variant"] == "full"), None)
    native = next((r for r in rows if r["variant"] == "crpm"), None)
    fti = next((r for r in rows if r["variant"] == "fti"), None)
    if native and fti:
        # The FTI API against the native one: the ratio of the overheads and
        # the paired difference of the loop times, whose error is the noise
        # the ratio has to be read against.
        d, derr = paired_median([r["loop_s"] for r in by["fti"]], [r["loop_s"] for r in by["crpm"]])
        fti["fti_minus_native_s"] = d
        fti["fti_minus_native_err_s"] = derr
        if native["overhead_s"] and native["overhead_s"] > 0:
            fti["fti_overhead_ratio"] = fti["overhead_s"] / native["overhead_s"]
            if derr is not None:
                fti["fti_overhead_ratio_err"] = derr / native["overhead_s"]
        if derr is not None:
            fti["fti_within_noise"] = abs(d) <= 2 * derr
        fti["fti_ckpt_app_ratio"] = ratio(fti.get("ckpt_app_s"), native.get("ckpt_app_s"))
        fti["fti_ckpt_call_ratio"] = ratio(fti.get("ckpt_call_s"), native.get("ckpt_call_s"))
        fti["fti_ckpt_steady_ratio"] = ratio(fti.get("ckpt_call_steady_each_s"),
                                             native.get("ckpt_call_steady_each_s"))
        fti["fti_recovery_ratio"] = ratio(fti.get("recovery_s"), native.get("recovery_s"))
    for r in rows:
        if r["variant"] == "crpm" and full:
            if full["overhead_s"] and full["overhead_s"] > 0:
                r["overhead_vs_full_pct"] = 100.0 * r["overhead_s"] / full["overhead_s"]
            if full["overhead_cpu_s"] and full["overhead_cpu_s"] > 0:
                r["overhead_cpu_vs_full_pct"] = 100.0 * r["overhead_cpu_s"] / full["overhead_cpu_s"]
            if full.get("ckpt_call_s"):
                r["ckpt_call_vs_full_pct"] = 100.0 * r["ckpt_call_s"] / full["ckpt_call_s"]
            if full.get("ckpt_call_steady_each_s"):
                r["ckpt_call_steady_vs_full_pct"] = (100.0 * r["ckpt_call_steady_each_s"] /
                                                     full["ckpt_call_steady_each_s"])
            r["written_vs_full_pct"] = 100.0 * r["written_bytes_per_ckpt"] / full["written_bytes_per_ckpt"]
    return rows


CSV_FIELDS = ["app", "variant", "np", "params", "reps", "time_s", "time_min_s", "time_max_s", "wall_s", "cpu_s",
              "rel_time", "overhead_s", "overhead_err_s", "overhead_pct_of_time", "overhead_vs_full_pct",
              "overhead_cpu_s", "overhead_cpu_vs_full_pct", "ckpt_app_s", "ckpt_call_s", "ckpt_call_vs_full_pct",
              "ckpt_call_first2_s", "ckpt_call_steady_each_s", "ckpt_call_steady_vs_full_pct", "n_ckpt",
              "protected_bytes", "protected_bytes_per_rank", "written_bytes_per_ckpt", "written_bytes_first_ckpt",
              "written_bytes_steady_ckpt",
              "written_pct_of_protected", "written_vs_full_pct", "recovery_s", "recovery_gbps_per_rank",
              "recovery_note", "fti_overhead_ratio", "fti_overhead_ratio_err", "fti_minus_native_s",
              "fti_minus_native_err_s", "fti_within_noise", "fti_ckpt_app_ratio", "fti_ckpt_call_ratio",
              "fti_ckpt_steady_ratio", "fti_recovery_ratio"]


def machine_info(args):
    info = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "hostname": platform.node(), "kernel": platform.release(), "machine": platform.machine(),
            "cores": os.cpu_count(), "ckpt_root": args.ckpt_root}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    info["memory_bytes"] = int(line.split()[1]) * 1024
        info["loadavg_start"] = os.getloadavg()
        with open("/proc/mounts") as f:
            mounts = [ln.split() for ln in f]
        best = max((m for m in mounts if args.ckpt_root.startswith(m[1])), key=lambda m: len(m[1]), default=None)
        if best:
            info["ckpt_fs"] = best[2]
    except OSError:
        pass
    try:
        v = subprocess.run([args.mpirun, "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=30).stdout.decode(errors="replace").splitlines()
        info["mpi"] = v[0].strip() if v else ""
        g = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, timeout=30)
        info["git_head"] = g.stdout.decode().strip()
        # Uncommitted library sources make a run irreproducible from the commit alone.
        g = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--", "lib", "include"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
        info["git_lib_changes"] = [ln[3:] for ln in g.stdout.decode().splitlines()]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return info


def mib(b):
    return None if b is None else b / (1 << 20)


def fmt(x, f="{:.3f}"):
    return "-" if x is None else f.format(x)


APP_NAME = {"hpccg": "HPCCG", "comd": "CoMD", "lulesh": "LULESH"}


def table(rows):
    """Two Markdown tables, one row per app, as quoted in docs/performance.md."""
    get = {(r["app"], r["variant"]): r for r in rows}
    apps = [a for a in APPS if (a, "none") in get]

    def pair(a, key, f, scale=1.0):
        c, u = get.get((a, "crpm"), {}).get(key), get.get((a, "full"), {}).get(key)
        return "{} / {}".format(fmt(None if c is None else c * scale, f), fmt(None if u is None else u * scale, f))

    def pct(a, key):
        return fmt(get.get((a, "crpm"), {}).get(key), "**{:.0f} %**")

    t1 = ["| app | time: none / libcrpm / full (s) | overhead: libcrpm / full (s) | libcrpm % of full "
          "| in checkpoint calls: libcrpm / full (s) | % of full | per checkpoint, 3rd on: libcrpm / full (ms) "
          "| % of full |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for a in apps:
        n, c, u = get[(a, "none")], get.get((a, "crpm"), {}), get.get((a, "full"), {})
        times = " / ".join(fmt(x.get("time_s"), "{:.2f}") for x in (n, c, u))
        ov = []
        for x in (c, u):
            o = fmt(x.get("overhead_s"), "{:.2f}")
            if x.get("overhead_err_s") is not None:
                o += " ± " + fmt(x["overhead_err_s"], "{:.2f}")
            ov.append(o)
        t1.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            APP_NAME[a], times, " / ".join(ov), pct(a, "overhead_vs_full_pct"), pair(a, "ckpt_call_s", "{:.3f}"),
            pct(a, "ckpt_call_vs_full_pct"), pair(a, "ckpt_call_steady_each_s", "{:.1f}", 1e3),
            pct(a, "ckpt_call_steady_vs_full_pct")))
    t2 = ["| app | ranks | protected per rank (MiB) | checkpoints | written per checkpoint: libcrpm / full (MiB) "
          "| libcrpm, % of protected: mean / 3rd on | recovery: libcrpm / full (ms) "
          "| recovery per rank: libcrpm / full (GB/s) |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for a in apps:
        c = get.get((a, "crpm")) or get.get((a, "full")) or {}
        steady = c.get("written_bytes_steady_ckpt")
        t2.append("| {} | {} | {} | {} | {} | {} | {} | {} |".format(
            APP_NAME[a], c.get("np", "-"), fmt(mib(c.get("protected_bytes_per_rank")), "{:.1f}"),
            c.get("n_ckpt", "-"), pair(a, "written_bytes_per_ckpt", "{:.2f}", 1.0 / (1 << 20)),
            "{} / {}".format(fmt(c.get("written_pct_of_protected"), "{:.0f} %"),
                             fmt(None if steady is None else 100.0 * steady / c["protected_bytes"], "{:.1f} %")),
            pair(a, "recovery_s", "{:.1f}", 1e3), pair(a, "recovery_gbps_per_rank", "{:.2f}")))
    out = "\n".join(t1) + "\n\n" + "\n".join(t2)
    t3 = ["| app | overhead: native / FTI API (s) | FTI API − native, paired (s) | **overhead ratio** FTI API / native "
          "| in checkpoint calls, app-timed: native / FTI API (s) | **checkpoint time ratio** "
          "| library checkpoint time ratio: all / 3rd on | recovery: native / FTI API (ms) |",
          "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for a in apps:
        c, f = get.get((a, "crpm")), get.get((a, "fti"))
        if not c or not f:
            continue

        def pm(x, e, fm):
            return fmt(x, fm) + ("" if e is None else " ± " + fmt(e, fm))

        t3.append("| {} | {} / {} | {} | **{}** | {} / {} | **{}** | {} / {} | {} / {} |".format(
            APP_NAME[a], fmt(c.get("overhead_s"), "{:.2f}"), fmt(f.get("overhead_s"), "{:.2f}"),
            pm(f.get("fti_minus_native_s"), f.get("fti_minus_native_err_s"), "{:.2f}"),
            pm(f.get("fti_overhead_ratio"), f.get("fti_overhead_ratio_err"), "{:.2f}"),
            fmt(c.get("ckpt_app_s"), "{:.3f}"), fmt(f.get("ckpt_app_s"), "{:.3f}"),
            fmt(f.get("fti_ckpt_app_ratio"), "{:.2f}"), fmt(f.get("fti_ckpt_call_ratio"), "{:.2f}"),
            fmt(f.get("fti_ckpt_steady_ratio"), "{:.2f}"),
            fmt(None if c.get("recovery_s") is None else 1e3 * c["recovery_s"], "{:.1f}"),
            fmt(None if f.get("recovery_s") is None else 1e3 * f["recovery_s"], "{:.1f}")))
    if len(t3) > 2:
        out += "\n\n" + "\n".join(t3)
    return out


def charts(rows, runs, out_dir, machine, ckpt_every):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    apps = [a for a in APPS if any(r["app"] == a for r in rows)]
    get = {(r["app"], r["variant"]): r for r in rows}
    colors = {"none": "#9e9e9e", "crpm": "#1f77b4", "fti": "#2ca02c", "full": "#d62728"}
    sub = (f"{machine.get('cores')} cores, {mib(machine.get('memory_bytes', 0)) / 1024:.0f} GiB, "
           f"Linux {machine.get('kernel')}, checkpoints in {machine.get('ckpt_root')}")

    # Relative execution time, normalised to the run without checkpoints.
    fig, ax = plt.subplots(figsize=(7, 4.2))
    shown = [v for v in VARIANTS if any((a, v) in get for a in apps)]
    w = 0.8 / len(shown)
    for i, v in enumerate(shown):
        xs, ys = [], []
        for j, a in enumerate(apps):
            r = get.get((a, v))
            if r and r["rel_time"] is not None:
                xs.append(j + (i - (len(shown) - 1) / 2) * w)
                ys.append(r["rel_time"])
        bars = ax.bar(xs, ys, w, label=LABEL[v], color=colors[v])
        ax.bar_label(bars, fmt="%.3f", fontsize=7, padding=2)
    ax.axhline(1.0, color="black", lw=0.6)
    ax.set_xticks(range(len(apps)), [APP_NAME[a] for a in apps])
    ax.set_ylabel("execution time / time without checkpoints")
    lo = min([r["rel_time"] for r in rows if r["rel_time"]] + [1.0])
    hi = max([r["rel_time"] for r in rows if r["rel_time"]] + [1.0])
    ax.set_ylim(max(0.0, lo - 0.1), hi + 0.25 * (hi - lo + 0.1))
    ax.set_title(f"Relative execution time, checkpoint every {ckpt_every} iterations\n" + sub, fontsize=9)
    ax.legend(fontsize=8, loc="upper center", ncol=len(shown))
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "apps_time.png"), dpi=120)
    plt.close(fig)

    # Bytes written per checkpoint (all ranks) against the protected bytes.
    fig, ax = plt.subplots(figsize=(7, 4.2))
    series = [("protected", "protected state", "#7f7f7f", lambda a: get.get((a, "crpm"), get.get((a, "full"))),
               "protected_bytes"),
              ("full", LABEL["full"], colors["full"], lambda a: get.get((a, "full")), "written_bytes_per_ckpt"),
              ("crpm", LABEL["crpm"] + " (mean)", colors["crpm"], lambda a: get.get((a, "crpm")),
               "written_bytes_per_ckpt"),
              ("crpm-steady", LABEL["crpm"] + " (3rd checkpoint on)", "#aec7e8", lambda a: get.get((a, "crpm")),
               "written_bytes_steady_ckpt")]
    w = 0.2
    for i, (_, lab, col, pick, key) in enumerate(series):
        xs, ys = [], []
        for j, a in enumerate(apps):
            r = pick(a)
            if r and r.get(key):
                xs.append(j + (i - 1.5) * w)
                ys.append(mib(r[key]))
        bars = ax.bar(xs, ys, w, label=lab, color=col)
        ax.bar_label(bars, fmt="%.3g", fontsize=6, padding=2)
    ax.set_yscale("log")
    vals = [b.get_height() for c in ax.containers for b in c if b.get_height() > 0]
    if vals:
        import math
        ax.set_ylim(10 ** math.floor(math.log10(min(vals) / 2)), max(vals) * 30)
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda y, _: f"{y:g}"))
    ax.set_xticks(range(len(apps)), [APP_NAME[a] for a in apps])
    ax.set_ylabel("MiB written per checkpoint (all ranks, log scale)")
    ax.set_title("Bytes written per checkpoint\n" + sub, fontsize=9)
    ax.legend(fontsize=7, loc="upper center", ncol=2)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "apps_bytes.png"), dpi=120)
    plt.close(fig)

    # Time of each checkpoint call in a run (median over repetitions):
    # where libcrpm's warm-up ends and its steady state begins.
    fig, axes = plt.subplots(1, len(apps), figsize=(3.2 * len(apps), 3.4), squeeze=False)
    for ax, a in zip(axes[0], apps):
        for v in ("full", "crpm", "fti"):
            rr = [r for r in runs[a] if r["variant"] == v]
            if not rr:
                continue
            n = min(len(r["checkpoints"]) for r in rr)
            ys = [1e3 * statistics.median(r["checkpoints"][i]["seconds"] for r in rr) for i in range(n)]
            ax.plot(range(1, n + 1), ys, marker="o" if v != "fti" else "x", ms=3, color=colors[v], label=LABEL[v],
                    ls="-" if v != "fti" else "--")
        ax.set_title(APP_NAME[a], fontsize=9)
        ax.set_xlabel("checkpoint number", fontsize=8)
        ax.set_ylim(0, None)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("time in crpm_checkpoint (ms)", fontsize=8)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Time of each checkpoint (median of the repetitions)", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "apps_ckpt.png"), dpi=120)
    plt.close(fig)


def check_same_results(app, runs):
    """The checkpointing variants must compute exactly what the plain run does."""
    ref = next(r["result_lines"] for r in runs if r["variant"] == "none")
    for r in runs:
        if r["result_lines"] != ref:
            raise RuntimeError(f"{app}/{r['variant']}: result lines differ from the run without checkpoints:\n"
                               f"{r['result_lines']}\nvs\n{ref}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.environ.get("CRPM_BUILD_DIR", os.path.join(REPO, "build")),
                    help="CMake build directory with the hpccg, comd and lulesh targets built")
    ap.add_argument("--apps", default="hpccg,comd,lulesh", help="comma-separated subset")
    ap.add_argument("--quick", action="store_true", help="small sizes, two repetitions (smoke test, about a minute)")
    ap.add_argument("--reps", type=int, help="repetitions of each variant (default 5, quick 2)")
    ap.add_argument("--recovery-reps", type=int, help="kill/relaunch measurements per app and variant "
                    "(default 2, quick 1; 0 skips them)")
    ap.add_argument("--ckpt-every", type=int, default=5)
    ap.add_argument("--iters", type=int, help="override every app's iteration count")
    ap.add_argument("--np", type=int, help="override the rank count of HPCCG and CoMD (LULESH needs a cube)")
    ap.add_argument("--set", action="append", default=[], metavar="APP.KEY=VALUE",
                    help="override a size parameter, e.g. lulesh.s=48 or hpccg.nz=64")
    ap.add_argument("--crpm-advanced", action="append", default=[], metavar="KEY=VALUE",
                    help="extra [advanced] setting for the libcrpm variant, e.g. change_tracking=pagemap")
    ap.add_argument("--ckpt-root", default="/dev/shm", help="where checkpoint directories are made")
    ap.add_argument("--out-dir", default=os.path.join(REPO, "bench", "results"))
    ap.add_argument("--mpirun", default="mpirun")
    ap.add_argument("--mpi-flags", default=os.environ.get("CRPM_MPIEXEC_FLAGS", "--oversubscribe --allow-run-as-root"))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per launch")
    ap.add_argument("--no-charts", action="store_true")
    ap.add_argument("--from-json", metavar="APPS_JSON",
                    help="measure nothing: redo the tables and charts of an earlier apps.json into --out-dir")
    # `make bench-apps BENCH_APPS_ARGS=...` passes options through the environment.
    args = ap.parse_args(sys.argv[1:] + shlex.split(os.environ.get("BENCH_APPS_ARGS", "")))
    if args.from_json:
        with open(args.from_json) as f:
            d = json.load(f)
        d.setdefault("ckpt_root", d["machine"].get("ckpt_root", "?"))
        report(args.out_dir, d, charts_too=not args.no_charts)
        return
    if args.reps is not None and args.reps < 1:
        ap.error("--reps must be at least 1")
    mode = "quick" if args.quick else "full"
    reps = args.reps if args.reps is not None else (2 if args.quick else 5)
    rec_reps = args.recovery_reps if args.recovery_reps is not None else (1 if args.quick else 2)
    args.build_dir = os.path.abspath(args.build_dir)
    args.ckpt_root = os.path.abspath(args.ckpt_root)

    params = {}
    for app in args.apps.split(","):
        if app not in APPS:
            ap.error(f"unknown app {app!r} (known: {', '.join(APPS)})")
        exe = os.path.join(args.build_dir, APPS[app]["target"])
        if not os.access(exe, os.X_OK):
            print(f"skipping {app}: {exe} is not built (make {app} in {args.build_dir})", flush=True)
            continue
        p = dict(APPS[app]["sizes"][mode])
        if args.iters:
            p["iters"] = args.iters
        if args.np and app != "lulesh":
            p["np"] = args.np
        params[app] = p
    for s in args.set:
        m = re.fullmatch(r"(\w+)\.(\w+)=(\d+)", s)
        if not m or m.group(1) not in params or m.group(2) not in params[m.group(1)]:
            ap.error(f"bad --set {s!r}")
        params[m.group(1)][m.group(2)] = int(m.group(3))
    if not params:
        sys.exit("no application is built; nothing to measure")

    os.makedirs(args.out_dir, exist_ok=True)
    machine = machine_info(args)
    bench = Bench(args)
    t_start = time.time()
    try:
        variants = list(VARIANTS)
        ok, why = bench.probe_full(next(iter(params)))
        if not ok:
            print(f"variant 'full' unavailable ({why}); measuring none and crpm only", flush=True)
            variants.remove("full")
        # The FTI-API variant needs <app>-fti, and it cannot carry the native
        # variant's extra [advanced] settings (an FTI file has no such keys).
        app_variants = {}
        for app in params:
            vs = list(variants)
            fexe = os.path.join(args.build_dir, APPS[app]["fti_target"])
            if args.crpm_advanced:
                vs.remove("fti")
            elif not os.access(fexe, os.X_OK):
                print(f"{app}: variant 'fti' unavailable ({fexe} is not built)", flush=True)
                vs.remove("fti")
            app_variants[app] = vs
        if args.crpm_advanced:
            print("variant 'fti' skipped: --crpm-advanced settings have no FTI configuration key", flush=True)
        runs = {a: [] for a in params}
        for rep in range(reps):
            for app in params:
                # Rotate the order so that no variant always runs first (or last).
                vs = app_variants[app]
                order = vs[rep % len(vs):] + vs[:rep % len(vs)]
                for v in order:
                    r = bench.run_once(app, params[app], v)
                    runs[app].append(r)
                    n = len(r["checkpoints"])
                    print(f"[rep {rep + 1}/{reps}] {app:6s} {v:4s}: loop {r['loop_s']:8.3f} s, wall "
                          f"{r['wall_s']:7.2f} s, {n} checkpoint(s)"
                          + (f", {sum(c['seconds'] for c in r['checkpoints']):.3f} s in them" if n else ""),
                          flush=True)
        for app in params:
            check_same_results(app, runs[app])
        recs = {a: [] for a in params}
        for rep in range(rec_reps):
            for app in params:
                for v in [x for x in app_variants[app] if x != "none"]:
                    r = bench.recovery_once(app, params[app], v)
                    recs[app].append(r)
                    s = r["seconds"]
                    print(f"[recovery {rep + 1}/{rec_reps}] {app:6s} {v:4s}: "
                          + (f"{s:.4f} s for {mib(r['protected']):.1f} MiB protected"
                             if s is not None else r["note"]), flush=True)
    finally:
        bench.cleanup()
    machine["loadavg_end"] = os.getloadavg()
    machine["driver_seconds"] = round(time.time() - t_start, 1)

    report(args.out_dir, {"machine": machine, "mode": mode, "reps": reps, "recovery_reps": rec_reps,
                          "ckpt_every": args.ckpt_every, "ckpt_root": args.ckpt_root,
                          "crpm_advanced": args.crpm_advanced, "command": " ".join(sys.argv), "params": params,
                          "runs": runs, "recovery": recs}, charts_too=not args.no_charts)


def report(out_dir, d, charts_too=True):
    """Summary, CSV, JSON, Markdown and charts from the raw measurements in d."""
    machine = d["machine"]
    rows = []
    for app in d["params"]:
        rows += summarize(app, d["params"][app], d["runs"][app], d["recovery"][app])
    d["summary"] = rows
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "apps.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    with open(os.path.join(out_dir, "apps.json"), "w") as f:
        json.dump(d, f, indent=1)
    if charts_too:
        charts(rows, d["runs"], out_dir, machine, d["ckpt_every"])
    mem = machine.get("memory_bytes", 0) / (1 << 30)
    desc = (f"{machine.get('cores')} cores ({machine.get('cpu', '?')}), {mem:.0f} GiB, Linux "
            f"{machine.get('kernel')}, checkpoints in {d['ckpt_root']} ({machine.get('ckpt_fs', '?')}); "
            f"{d['mode']} sizes, medians of {d['reps']} alternating repetitions, checkpoint every "
            f"{d['ckpt_every']} iterations; load average {machine['loadavg_start'][0]:.1f} at start, "
            f"{machine['loadavg_end'][0]:.1f} at end; {machine.get('date')}, commit {machine.get('git_head', '?')}"
            + (" with uncommitted library changes" if machine.get("git_lib_changes") else "")
            + (f"; libcrpm [advanced] {', '.join(d['crpm_advanced'])}" if d.get("crpm_advanced") else ""))
    with open(os.path.join(out_dir, "apps.md"), "w") as f:
        f.write(table(rows) + "\n\n" + desc + "\n")
    print()
    print(table(rows))
    print()
    print(desc)
    for r in rows:
        if r["variant"] == "fti" and "fti_minus_native_s" in r:
            print("{}: FTI API / native API: overhead ratio {} ({} s paired difference, {}), checkpoint time "
                  "ratio {} (app-timed), {} (library)".format(
                      APP_NAME[r["app"]], fmt(r.get("fti_overhead_ratio"), "{:.2f}")
                      + ("" if r.get("fti_overhead_ratio_err") is None else
                         " ± " + fmt(r["fti_overhead_ratio_err"], "{:.2f}")),
                      fmt(r["fti_minus_native_s"], "{:+.3f}")
                      + ("" if r.get("fti_minus_native_err_s") is None else
                         " ± " + fmt(r["fti_minus_native_err_s"], "{:.3f}")),
                      {True: "within noise", False: "NOT within noise", None: "noise unknown"}[
                          r.get("fti_within_noise")],
                      fmt(r.get("fti_ckpt_app_ratio"), "{:.2f}"), fmt(r.get("fti_ckpt_call_ratio"), "{:.2f}")))
    pngs = ", apps_time.png, apps_bytes.png, apps_ckpt.png" if charts_too else ""
    print(f"\nwrote {out_dir}/apps.csv, apps.json, apps.md{pngs}; measuring took {machine['driver_seconds']:.0f} s")


if __name__ == "__main__":
    main()
