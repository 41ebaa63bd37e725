#!/usr/bin/python3
"""The run log ([advanced] log_file) and crpm-report (docs/tools.md).

MPI scenarios (--group mpi): 4 ranks as 4 simulated nodes (node_size = 1,
ckpt_dir = <dir>/node%n) run tests/runlog/runlog_app.c.

  kill_restart   levels 1,2,1,3 in turn; rank 1 killed after its 7th
                 commit (level 1, after a level-2 checkpoint), node 1 lost, the relaunch restarts with node 1
                 rebuilt from level 2 or 3 and runs to the end.  The log:
                 every line JSON; the first launch's checkpoints 1..6 at
                 their levels; the restart line (not fresh, rank 1 back from
                 the level crpm_status names, the others from level 1, one
                 rank rebuilt, the rebuild's phase with bytes); the recovery
                 with every protected byte; the second launch's checkpoint
                 lines against every rank's crpm_get_stats (count, bytes
                 written and sent and seconds summed over ranks, protected
                 bytes, min <= median <= max), the parts (level 1's data
                 pass; levels 2 and 3 sent bytes; the level-1 and level
                 parts add up to the bytes written); the end line's totals.
                 Then crpm-report on it: the table's numbers (--json) against
                 the log, Young's optimum, the PNG's size and panels, the
                 restart in the text; a copy with a torn last line gives the
                 same numbers and says one line was skipped
  l3_rebuild     every checkpoint at level 3, rank 2 killed, its node lost:
                 the restart line's L3 rebuild phase on every rank
  failure        a checkpoint at level 4 without glbl_dir: a failure line
                 with the code and message every rank returned
  drains         async = 1: each level-2 checkpoint's drain line (sent
                 bytes), the checkpoint line marked async
  interval_stop  crpm_snapshot with ckpt_interval_s = auto: interval lines
                 (Daly's formula on the logged cost and MTBF), then a
                 relaunch with a HALT file: the stop line (reason halt)
  off            no log_file: no log appears
  compare        --compare of the kill_restart log and a method = full run:
                 both rows, the ratio, a PNG of two panels

Report scenarios (--group report, no MPI): crpm-report's usage errors and a
log without events.

Python scenario (--group python, tests/runlog/progress_app.py):

  python_progress  crpm.set_progress(every = 0) through a level-2 restore:
                   the restored rank's reports grow to done == total > 0,
                   the restart line's bytes cover them; crpm.stats() on
                   every rank against the log's checkpoint lines

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import glob
import json
import math
import os
import shutil
import struct
import sys
import zlib

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402
from crpmtest import check, tail  # noqa: E402

NP = 4
TIMEOUT = 90
LEVELS = [1, 2, 1, 3]
APP_ARGS = ["--n", "32768", "--window", "2048", "--iters", "12", "--levels", ",".join(map(str, LEVELS))]


class Ctx:
    def __init__(self, a, workdir):
        self.app, self.report, self.workdir = a.app, a.report, workdir
        self.progress_app = getattr(a, "progress_app", None)
        self.py = os.environ.get("CRPM_PYTHON3") or "/usr/bin/python3"
        self.main_log = None

    def config(self, name, extra="", log="run.jsonl", basic=""):
        path = os.path.join(self.workdir, name + ".ini")
        with open(path, "w") as f:
            f.write("[basic]\nckpt_dir = %s\njob_name = %s\nnode_size = 1\ngroup_size = 4\nl3_parity = 1\n"
                    "verbosity = 1\n%s[advanced]\n%s%s" % (
                        os.path.join(self.workdir, name, "node%n"), name, basic,
                        "log_file = %s\n" % log if log else "", extra))
        return path

    def node(self, name, k):
        return os.path.join(self.workdir, name, "node%d" % k)

    def run(self, cfg, args=(), env=None, expect=0, np_=NP):
        e = crpmtest.job_env(env, shm_dir=self.workdir, clear=crpmtest.CRPM_ENV_OVERRIDES)
        cmd = crpmtest.mpiexec(np_) + [self.app, "--crpm", cfg] + list(args)
        r = crpmtest.run_job(cmd, env=e, timeout=TIMEOUT)
        check(not r.timed_out, "hung: %s\n%s" % (crpmtest.format_cmd(cmd), tail(r.out, 20)))
        if expect is not None:
            check((r.rc == 0) == (expect == 0), "%s: exit code %s, expected %s\n%s" % (
                crpmtest.format_cmd(cmd), r.rc, "0" if expect == 0 else "a failure", tail(r.out, 25)))
        return r

    def tool(self, args, expect=0):
        cmd = [self.py, self.report] + list(args)
        r = crpmtest.run_job(cmd, timeout=120, separate_stderr=True)
        check(r.rc == expect, "%s: exit code %s, expected %d\n--- stdout\n%s--- stderr\n%s" % (
            crpmtest.format_cmd(cmd), r.rc, expect, r.out[-3000:], r.err[-3000:]))
        return r


def read_log(path):
    with open(path) as f:
        lines = f.read().split("\n")
    check(lines[-1] == "", "%s does not end with a newline" % path)
    evs = []
    for i, line in enumerate(lines[:-1]):
        try:
            evs.append(json.loads(line))
        except ValueError:
            raise crpmtest.Failure("%s line %d is not JSON: %r" % (path, i + 1, line[:200]))
    return evs


def stats_of(out):
    line = crpmtest.one_line(out, r"^stats \{", "stats line")
    return json.loads(line[len("stats "):])


def close(a, b, rel=1e-6, what=""):
    check(abs(a - b) <= rel * max(abs(a), abs(b), 1e-12), "%s: %r != %r" % (what, a, b))


def agg_ok(ev, key):
    a = ev[key]
    check(a["min"] <= a["med"] <= a["max"] <= a["sum"] + 1e-12 or a["sum"] < 0,
          "%s of checkpoint %s: min <= median <= max <= sum fails: %r" % (key, ev.get("id"), a))
    return a


def launches(evs):
    """The log cut at each restart line."""
    out = []
    for e in evs:
        if e["ev"] == "restart":
            out.append([])
        check(out, "the log does not start with a restart line: %r" % evs[:1])
        out[-1].append(e)
    return out


def png_info(path):
    """(width, height, {tEXt key: value}) of a PNG, from its chunks."""
    with open(path, "rb") as f:
        data = f.read()
    check(data[:8] == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % path)
    pos, w, h, text = 8, 0, 0, {}
    while pos + 8 <= len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])[0]
        check(zlib.crc32(kind + body) & 0xffffffff == crc, "%s: bad CRC in chunk %r" % (path, kind))
        if kind == b"IHDR":
            w, h = struct.unpack(">II", body[:8])
        elif kind == b"tEXt":
            k, v = body.split(b"\0", 1)
            text[k.decode("latin-1")] = v.decode("latin-1")
        elif kind == b"IEND":
            break
        pos += 12 + n
    return w, h, text, len(data)


# ---- MPI scenarios ------------------------------------------------------------
def scenario_kill_restart(c):
    crpmtest.require_test_hooks("killing rank 1 after a commit (CRPM_TEST_KILL)")
    cfg = c.config("kr", basic="keep_last_ckpt = 1\n")
    r = c.run(cfg, APP_ARGS, env={"CRPM_TEST_KILL": "1:after_commit:7"}, expect=1)
    shutil.rmtree(c.node("kr", 1))  # node 1 lost with its container and the partner copy it held
    r = c.run(cfg, APP_ARGS)
    status = int(crpmtest.number_after(r.out, r"runlog_app: status (\d+)"))
    check(status in (2, 3), "expected a restart from level 2 or 3, got status %d\n%s" % (status, tail(r.out)))
    st = stats_of(r.out)
    log = os.path.join(c.node("kr", 0), "run.jsonl")
    check(os.path.isfile(log), "no log at %s (a relative log_file is in rank 0's ckpt_dir)" % log)
    evs = read_log(log)
    runs = launches(evs)
    check(len(runs) == 2, "expected 2 launches, got %d: %s" % (len(runs), [e["ev"] for e in evs]))
    first, second = runs
    # ---- the first launch: fresh, checkpoints 1..5 at least, at their levels
    check(first[0]["fresh"] and first[0]["status"] == 0, "first launch not fresh: %r" % first[0])
    ids = [e["id"] for e in first if e["ev"] == "checkpoint"]
    check(len(ids) >= 6 and ids == list(range(1, len(ids) + 1)), "first launch's checkpoints: %r" % ids)
    for e in first + second:
        check(e["ranks"] == NP and e["job"] == "kr", "ranks or job wrong in %r" % e)
        if e["ev"] == "checkpoint":
            check(e["level"] == LEVELS[(e["id"] - 1) % len(LEVELS)], "checkpoint %d at level %d" % (e["id"], e["level"]))
            check(e["ok"] is True and e["async"] == 0 and e["tracking"] == "compare", "flags of %r" % e)
    # ---- the restart line
    rs = second[0]
    check(not rs["fresh"] and rs["status"] == status and rs["source"] == "L1", "restart line: %r" % rs)
    check(rs["by_rank"] == [1, status, 1, 1], "by_rank %r, expected rank 1 from level %d" % (rs["by_rank"], status))
    check(rs["rebuilt"] == 1 and rs["back_from"] == {"1": 3, str(status): 1}, "rebuilt/back_from: %r" % rs)
    want = "L2 sync" if status == 2 else "L3 rebuild"
    ph = [p for p in rs["phases"] if p["what"] == want]
    check(ph and ph[0]["bytes"]["max"] > 0 and ph[0]["seconds"]["max"] > 0, "no %s phase with bytes: %r" % (
        want, rs["phases"]))
    check(rs["seconds"]["min"] > 0 and rs["t0"] < rs["t"], "restart's time: %r" % rs)
    # the epoch went on from the checkpoint restored
    restored = rs["id"]
    check(restored in ids, "restored checkpoint %r not one of the first launch's %r" % (restored, ids))
    rec = [e for e in second if e["ev"] == "recover"]
    check(len(rec) == 1 and rec[0]["id"] == restored, "recover line: %r" % rec)
    check(rec[0]["bytes"]["sum"] == sum(st["protected_bytes"]), "recovered bytes %r, protected %r" % (
        rec[0]["bytes"], st["protected_bytes"]))
    # ---- the second launch's checkpoints against crpm_get_stats
    ck = [e for e in second if e["ev"] == "checkpoint"]
    check([e["id"] for e in ck] == list(range(restored + 1, 13)), "second launch's ids: %r" % [e["id"] for e in ck])
    check(all(n == len(ck) for n in st["checkpoints"]), "stats count %r, log %d" % (st["checkpoints"], len(ck)))
    for key, field in (("written", "bytes_written"), ("sent", "bytes_sent")):
        check(sum(agg_ok(e, key)["sum"] for e in ck) == sum(st[field]), "%s: log %r, stats %r" % (
            key, sum(e[key]["sum"] for e in ck), st[field]))
        check(max(e[key]["max"] for e in ck) <= max(st[field]), "%s max beyond the stats" % key)
    close(sum(e["seconds"]["sum"] for e in ck), sum(st["seconds"]), 1e-6, "seconds summed over ranks")
    close(sum(e["compared"]["sum"] for e in ck), sum(st["bytes_compared"]), 0, "bytes compared")
    for e in ck:
        agg_ok(e, "seconds")
        check(e["protected"]["sum"] == sum(st["protected_bytes"]), "protected in %d: %r" % (e["id"], e["protected"]))
        parts = e["parts"]
        check("data" in parts and "commit" in parts, "parts of %d: %r" % (e["id"], sorted(parts)))
        lv = "L%d" % e["level"]
        if e["level"] > 1:
            check(lv in parts and parts[lv]["sent"]["sum"] > 0, "level %s part of %d: %r" % (lv, e["id"], parts))
            check(parts[lv]["sent"]["sum"] == e["sent"]["sum"], "%d: the level sent all the bytes sent" % e["id"])
        else:
            check(set(parts) == {"data", "commit"}, "level-1 checkpoint %d has parts %r" % (e["id"], sorted(parts)))
        check(sum(p["written"]["sum"] for p in parts.values()) == e["written"]["sum"],
              "%d: the parts' bytes %r do not add up to %r" % (e["id"], {k: p["written"]["sum"] for k, p in parts.items()},
                                                           e["written"]["sum"]))
        dirty = parts["data"]["written"]["max"] / e["protected"]["max"]
        check(0 < e["dirty"]["max"] <= 1 and abs(e["dirty"]["max"] - dirty) < 0.5, "dirty of %d: %r" % (
            e["id"], e["dirty"]))
        check(parts["data"]["seconds"]["max"] <= e["seconds"]["max"] + 1e-9, "data pass longer than the call")
    end = second[-1]
    check(end["ev"] == "end" and end["checkpoints"]["sum"] == sum(st["checkpoints"]), "end line: %r" % end)
    close(end["checkpoint_seconds"]["sum"], sum(st["seconds"]), 1e-6, "end line's seconds")
    c.main_log = log
    report_on(c, log, evs)


def report_on(c, log, evs):
    """crpm-report on the kill_restart log: numbers, picture, torn copy."""
    out_png = os.path.join(c.workdir, "report.png")
    out_json = os.path.join(c.workdir, "report.json")
    r = c.tool([log, "-o", out_png, "--json", out_json, "--mtbf", "3600"])
    with open(out_json) as f:
        rep = json.load(f)
    ck = [e for e in evs if e["ev"] == "checkpoint" and e["ok"]]
    check(rep["checkpoints"] == len(ck), "report counts %d checkpoints, the log has %d" % (rep["checkpoints"], len(ck)))
    check(rep["launches"] == 2 and len(rep["restarts"]) == 1, "launches/restarts: %r" % rep["restarts"])
    for lv in sorted({e["level"] for e in ck}):
        mine = [e for e in ck if e["level"] == lv]
        x = rep["levels"][str(lv)]
        secs = sorted(e["seconds"]["max"] for e in mine)
        med = secs[len(secs) // 2] if len(secs) % 2 else 0.5 * (secs[len(secs) // 2 - 1] + secs[len(secs) // 2])
        check(x["count"] == len(mine), "L%d count %d, log %d" % (lv, x["count"], len(mine)))
        close(x["median_s"], med, 1e-9, "L%d median" % lv)
        close(x["worst_s"], secs[-1], 1e-9, "L%d worst" % lv)
        check(x["l1_bytes"] == sum(e["parts"]["data"]["written"]["sum"] for e in mine), "L%d level-1 bytes" % lv)
        if lv > 1:
            check(x["level_sent"] == sum(e["parts"]["L%d" % lv]["sent"]["sum"] for e in mine), "L%d sent" % lv)
        close(x["young_s"], math.sqrt(2 * med * 3600), 1e-9, "L%d Young's interval" % lv)
        # the table prints the count and the optimum
        row = [l for l in r.out.splitlines() if l.startswith("L%d " % lv)]
        check(row and row[0].split()[1] == str(len(mine)), "table row of L%d: %r" % (lv, row))
    check("restart: checkpoint" in r.out and "Young" in r.out, "report text lacks the restart or the formula:\n" + r.out)
    w, h, text, size = png_info(out_png)
    check((w, h) == (1000, 900) and size > 20000, "picture %dx%d, %d bytes" % (w, h, size))
    desc = text.get("Description", "")
    for panel in ("checkpoint time", "bytes per level", "background drains and application"):
        check(panel in desc, "the picture lacks the panel %r (%r)" % (panel, desc))
    # a torn last line (a crash in the middle of a write) is skipped
    torn = os.path.join(c.workdir, "torn.jsonl")
    with open(log) as f, open(torn, "w") as g:
        text_log = f.read()
        g.write(text_log + text_log.splitlines()[-2][:37])
    tj = os.path.join(c.workdir, "torn.json")
    r2 = c.tool([torn, "--json", tj, "--mtbf", "3600"])
    with open(tj) as f:
        rep2 = json.load(f)
    check("1 line skipped" in r2.out and rep2["skipped"] == 1, "torn line not reported:\n" + r2.out)
    rep2.pop("skipped")
    rep.pop("skipped")
    check(rep2["levels"] == rep["levels"] and rep2["checkpoints"] == rep["checkpoints"],
          "a torn last line changed the numbers")


def scenario_l3_rebuild(c):
    """Every checkpoint at level 3, a node lost: the restart line's level-3
    rebuild."""
    crpmtest.require_test_hooks("killing rank 2 after a commit (CRPM_TEST_KILL)")
    cfg = c.config("l3", basic="keep_last_ckpt = 1\n")
    args = ["--n", "32768", "--window", "2048", "--iters", "6", "--levels", "3"]
    c.run(cfg, args, env={"CRPM_TEST_KILL": "2:after_commit:4"}, expect=1)
    shutil.rmtree(c.node("l3", 2))
    r = c.run(cfg, args)
    check("runlog_app: status 3" in r.out, "expected a level-3 restart\n" + tail(r.out))
    evs = read_log(os.path.join(c.node("l3", 0), "run.jsonl"))
    rs = [e for e in evs if e["ev"] == "restart"][-1]
    check(rs["by_rank"] == [1, 1, 3, 1] and rs["rebuilt"] == 1, "restart line %r" % rs)
    ph = [p for p in rs["phases"] if p["what"] == "L3 rebuild"]
    check(ph and ph[0]["bytes"]["min"] > 0 and ph[0]["bytes"]["max"] <= 32768 * 8 * 4, "L3 rebuild phase %r" % (
        rs["phases"],))


def scenario_failure(c):
    cfg = c.config("fl")
    r = c.run(cfg, ["--levels", "1,4", "--iters", "4"], expect=1)
    evs = read_log(os.path.join(c.node("fl", 0), "run.jsonl"))
    fails = [e for e in evs if e["ev"] == "failure"]
    check(len(fails) == 1, "expected one failure line: %r" % [e["ev"] for e in evs])
    f = fails[0]
    check(f["where"] == "checkpoint" and f["id"] == 2 and f["level"] == 4 and f["code"] < 0, "failure: %r" % f)
    check("level 4" in f["message"] and f["message"] in r.out, "failure message %r not the one returned:\n%s" % (
        f["message"], tail(r.out)))
    check([e["id"] for e in evs if e["ev"] == "checkpoint"] == [1], "checkpoint lines: %r" % evs)


def scenario_drains(c):
    cfg = c.config("dr", basic="async = 1\n")
    r = c.run(cfg, ["--levels", "1,2", "--iters", "6", "--mt", "--async-wait"])
    st = stats_of(r.out)
    evs = read_log(os.path.join(c.node("dr", 0), "run.jsonl"))
    if "run synchronously" in r.out:
        crpmtest.skip("this MPI has no MPI_THREAD_MULTIPLE: async = 1 runs synchronously")
    ck = [e for e in evs if e["ev"] == "checkpoint"]
    dr = [e for e in evs if e["ev"] == "drain"]
    check([e["id"] for e in dr] == [2, 4, 6] and all(e["level"] == 2 and e["ok"] for e in dr), "drains: %r" % dr)
    check(all(e["async"] == 1 for e in ck if e["level"] == 2), "level-2 checkpoints not marked async")
    check(all("L2" not in e["parts"] for e in ck), "a level-2 part in the call although it drained")
    for d in dr:
        check(d["sent"]["sum"] > 0 and d["lag"]["max"] >= d["seconds"]["max"] > 0, "drain %r" % d)
    check(sum(d["sent"]["sum"] for d in dr) == sum(st["bytes_sent"]), "drains sent %r, stats %r" % (
        [d["sent"]["sum"] for d in dr], st["bytes_sent"]))


def daly(c_, m):
    if c_ >= 2 * m:
        return m
    r = c_ / (2 * m)
    return max(math.sqrt(2 * c_ * m) * (1 + math.sqrt(r) / 3 + r / 9) - c_, 0)


def scenario_interval_stop(c):
    cfg = c.config("iv", basic="ckpt_interval_s = auto\nmtbf_s = 0.5\nkeep_last_ckpt = 1\n")
    c.run(cfg, ["--snapshot", "--iters", "40"])
    log = os.path.join(c.node("iv", 0), "run.jsonl")
    evs = read_log(log)
    iv = [e for e in evs if e["ev"] == "interval"]
    ck = [e for e in evs if e["ev"] == "checkpoint"]
    check(iv and len(iv) == len(ck), "%d interval lines for %d checkpoints" % (len(iv), len(ck)))
    for e in iv:
        check(e["level"] == 1 and e["mtbf"] == 0.5 and e["formula"] == "daly", "interval line %r" % e)
        close(e["interval"], daly(e["cost_avg"], 0.5), 1e-6, "interval of %r" % e)
    # the next launch finds a halt request: the stop line names it
    with open(os.path.join(c.node("iv", 0), "iv", "HALT"), "w") as f:
        f.write("test\n")
    c.run(cfg, ["--snapshot", "--iters", "80"])
    stops = [e for e in read_log(log) if e["ev"] == "stop"]
    check(len(stops) == 1 and stops[0]["reasons"] == ["halt"] and "halt" in stops[0]["why"], "stop: %r" % stops)


def scenario_off(c):
    cfg = c.config("off", log=None)
    c.run(cfg, ["--iters", "3"])
    found = glob.glob(os.path.join(c.workdir, "off", "**", "*.jsonl"), recursive=True)
    check(not found, "a log without log_file: %r" % found)


def scenario_compare(c):
    if not c.main_log:
        crpmtest.skip("needs the log of kill_restart")
    cfg = c.config("full", extra="method = full\n")
    c.run(cfg, APP_ARGS[:-2] + ["--levels", "1"])
    other = os.path.join(c.node("full", 0), "run.jsonl")
    out_png = os.path.join(c.workdir, "compare.png")
    out_json = os.path.join(c.workdir, "compare.json")
    r = c.tool(["--compare", c.main_log, other, "-o", out_png, "--json", out_json])
    with open(out_json) as f:
        a, b = json.load(f)
    check(b["levels"]["1"]["count"] == 12 and all(
        e["method"] == "full" for e in read_log(other) if e["ev"] == "checkpoint"), "full run: %r" % b["levels"])
    ratio = b["levels"]["1"]["median_s"] / a["levels"]["1"]["median_s"]
    row = [l for l in r.out.splitlines() if l.startswith("L1 ")]
    check(row and ("%.3g" % ratio) in row[0], "compare row %r lacks the ratio %.3g" % (row, ratio))
    # a full copy writes every protected byte at each checkpoint
    check(b["levels"]["1"]["l1_bytes"] > a["levels"]["1"]["l1_bytes"], "full run wrote less than the differential")
    w, h, text, _ = png_info(out_png)
    check((w, h) == (1000, 400) and "median checkpoint time" in text.get("Description", ""), "compare picture")


def scenario_python_progress(c):
    """crpm.set_progress on every rank through a level-2 restore, and
    crpm.stats() against the run log."""
    crpmtest.require_test_hooks("killing rank 1 after a commit (CRPM_TEST_KILL)")
    cfg = c.config("py", basic="keep_last_ckpt = 1\n")
    out = os.path.join(c.workdir, "py-out")
    os.makedirs(out, exist_ok=True)
    cmd = [c.py, c.progress_app, "--crpm", cfg, "--out", out, "--iters", "6", "--levels", "1,2"]
    env = crpmtest.job_env({"CRPM_TEST_KILL": "1:after_commit:3"}, shm_dir=c.workdir,
                           clear=crpmtest.CRPM_ENV_OVERRIDES)
    r = crpmtest.run_job(crpmtest.mpiexec(NP) + cmd, env=env, timeout=TIMEOUT)
    check(r.rc not in (0, None), "the kill did not fire: %s\n%s" % (r.rc, tail(r.out)))
    shutil.rmtree(c.node("py", 1))
    env = crpmtest.job_env(shm_dir=c.workdir, clear=crpmtest.CRPM_ENV_OVERRIDES)
    r = crpmtest.run_job(crpmtest.mpiexec(NP) + cmd, env=env, timeout=TIMEOUT)
    check(r.rc == 0, "relaunch failed (%s)\n%s" % (r.rc, tail(r.out, 25)))
    res = []
    for k in range(NP):
        with open(os.path.join(out, "progress-%d.json" % k)) as f:
            res.append(json.load(f))
    check(all(x["status"] == 2 for x in res), "statuses %r" % [x["status"] for x in res])
    reps = [x for x in res[1]["reports"] if x[0] == "L2 sync"]
    check(len(reps) >= 2, "rank 1 (restored from its partner copy) got %d progress reports: %r" % (
        len(reps), res[1]["reports"][:5]))
    # one phase per file restored (the container, the partner copy it held): each ends with done == total
    phases, cur = [], []
    for x in reps:
        cur.append(x)
        if x[4] == 0 and x[1] == x[2]:
            phases.append(cur)
            cur = []
    check(phases and not cur, "a phase without its end report: %r" % reps)
    for ph_ in phases:
        done = [x[1] for x in ph_]
        check(all(a <= b for a, b in zip(done, done[1:])), "done goes back: %r" % done)
        check(ph_[-1][1] > 0 and all(x[1] <= x[2] and x[3] >= 0 for x in ph_), "reports %r" % ph_)
    # the restart line counts the same bytes for rank 1's restore
    evs = read_log(os.path.join(c.node("py", 0), "run.jsonl"))
    rs = [e for e in evs if e["ev"] == "restart"][-1]
    ph = [p for p in rs["phases"] if p["what"] == "L2 sync"][0]
    mine = sum(x[1] for x in res[1]["reports"] if x[0] == "L2 sync" and x[1] == x[2] and x[4] == 0)
    check(ph["bytes"]["max"] >= mine > 0, "restart line's L2 sync bytes %r, rank 1 reported %d" % (ph["bytes"], mine))
    # crpm.stats() is crpm_get_stats: the log's lines of this launch add up to it
    ck = [e for e in launches(evs)[-1] if e["ev"] == "checkpoint"]
    check(all(x["total"]["checkpoints"] == len(ck) for x in res), "stats().total.checkpoints vs %d lines" % len(ck))
    check(sum(x["total"]["bytes_written"] for x in res) == sum(e["written"]["sum"] for e in ck), "bytes written")
    check(sum(x["total"]["bytes_sent"] for x in res) == sum(e["sent"]["sum"] for e in ck), "bytes sent")


# ---- report scenarios ----------------------------------------------------------
def scenario_usage(c):
    c.tool([], expect=2)
    c.tool(["a", "b"], expect=2)
    c.tool(["--compare", "a"], expect=2)
    empty = os.path.join(c.workdir, "empty.jsonl")
    with open(empty, "w") as f:
        f.write('{"ev":"checkpoint","t":1')  # only a torn line
    r = c.tool([empty], expect=1)
    check("no event" in r.err, "empty log: %r" % r.err)
    c.tool([os.path.join(c.workdir, "missing.jsonl")], expect=1)


MPI = [scenario_kill_restart, scenario_l3_rebuild, scenario_failure, scenario_drains, scenario_interval_stop, scenario_off,
       scenario_compare]
REPORT = [scenario_usage]
PYTHON = [scenario_python_progress]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--app")
    ap.add_argument("--report", required=True)
    ap.add_argument("--workdir")
    ap.add_argument("--group", choices=("mpi", "report", "python"), default="mpi")
    ap.add_argument("--progress-app")
    ap.add_argument("--only")
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        crpmtest.skip("crpm-report needs matplotlib (Debian: python3-matplotlib)")
    workdir = crpmtest.make_workdir(a.workdir, prefix="crpm-runlog-")
    c = Ctx(a, workdir)
    groups = {"mpi": MPI, "report": REPORT, "python": PYTHON}
    rc = crpmtest.run_scenarios(groups[a.group], c, workdir, a.only)
    return rc


if __name__ == "__main__":
    sys.exit(main())
