#!/usr/bin/env python3
"""The fault campaign of issue 38: random schedules of levels 1-4, random
faults, and an oracle that says from the schedule, the files and the damage
which checkpoint a restart must come back from, or that refusing is right.

    run.py --cases 3000 [--seed S]             the large campaign, a table at the end
    run.py --cases 300 --shard 0/6 ...          a shard of the CI sample (CTest)
    run.py --case S:I [--keep] [-v]             one case again (the id a failure prints)

Each case (generate()):
  config    4 ranks on 4 nodes (node_size 1) or on 2 nodes (node_size 2), or
            2 ranks on 2 nodes, or 6 ranks on 3 nodes; group_size/l3_parity
            where the nodes form groups; glbl_dir or not; async 0/1; keep_l4;
  schedule  one level (1-4, what the configuration allows) per checkpoint,
            checkpoint i at iteration i (campaign_app.c);
  faults    run 1: one rank or every rank killed at a point of a checkpoint
            (CRPM_TEST_KILL: before_data ... l3_committed, drain_start,
            drain_committed), the whole job SIGKILLed at a random time, or
            the file system filled before a checkpoint (a small tmpfs, root
            only); then 0, 1 or 2 nodes lost (directories wiped) and files
            erased or damaged (containers, partner copies, parity, level-4
            files; header, tables or data, by tests/integrity/damage_tool);
            the restart itself may be SIGKILLed and relaunched.

The oracle (expect()) reads what each file holds with crpm-inspect before the
damage (a kill inside a checkpoint leaves ranks on different epochs; only the
files tell), applies the damage model and computes the newest checkpoint id
every rank can bring back from some level, twice: `lo` counting only what is
surely usable, `hi` also what may be (the previous epoch of a file whose
metadata was hit, the previous level-3 parity).  The checked launch must
restart from an id in [lo, hi] (below lo: "older than recoverable"), with the
recovered state and the final result bitwise equal to a failure-free run;
when no id is recoverable it must refuse with a message naming the cause and
every checkpoint file kept.  Nothing here reads the library's decision code.
"""
import argparse
import concurrent.futures
import threading
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest as ct  # noqa: E402

JOB = "camp"
MAX_ITERS = 6  # checkpoints per schedule: 3 to this
OUTCOMES = ("passed", "wrong result", "older than recoverable", "wrong refusal", "not rebuilt", "beyond oracle", "hang",
            "crash", "xfail")

# ---- generator -------------------------------------------------------------------

TOPOLOGIES = [  # (ranks, node_size, weight)
    (4, 1, 5), (4, 2, 3), (2, 1, 1), (6, 2, 1)]

CONTAINER_DAMAGE = {"header": ("super", "commit"), "tables": ("slot", "crcs", "crc"), "data": ("data", "chunks")}


def l3_choices(nodes):
    out = []
    for k in range(2, nodes + 1):
        if nodes % k == 0:
            for m in range(1, k // 2 + 1):
                out.append((k, m))
    return out


def generate(seed, idx, allow_fill, l4=True):
    """Case idx of campaign `seed`: a dict that says everything a run needs
    (l4 False: a build without parallel HDF5, no glbl_dir)."""
    rng = random.Random("%s:%d" % (seed, idx))
    tops = [t for t in TOPOLOGIES for _ in range(t[2])]
    np_, nsize, _ = rng.choice(tops)
    nodes = (np_ + nsize - 1) // nsize
    cfg = {"np": np_, "node_size": nsize, "nodes": nodes, "async": int(rng.random() < 0.3),
           "glbl": rng.random() < 0.8, "keep_l4": rng.choice((1, 1, 2))}
    cfg["glbl"] = cfg["glbl"] and l4
    l3 = l3_choices(nodes)
    if l3 and rng.random() < 0.8:
        cfg["group_size"], cfg["l3_parity"] = rng.choice(l3)
    levels = [1] + ([2] if nodes >= 2 else []) + ([3] if "group_size" in cfg else []) + ([4] if cfg["glbl"] else [])
    n = rng.randint(3, MAX_ITERS)
    weights = {1: 2, 2: 2, 3: 2, 4: 1}
    pool = [lv for lv in levels for _ in range(weights[lv])]
    sched = [rng.choice(pool) for _ in range(n)]
    tags = []
    # crpm_snapshot with ckpt_interval = 1 and intervals per level (a rng of
    # its own, so the other cases of a seed stay as they were)
    srng = random.Random("%s:%d:snapshot" % (seed, idx))
    if srng.random() < 0.15:
        iv = {lv: (srng.choice((0, 2, 3)) if lv in levels else 0) for lv in (2, 3, 4)}
        cfg["snapshot"] = iv
        sched = [4 if iv[4] and i % iv[4] == 0 else 3 if iv[3] and i % iv[3] == 0 else
                 2 if iv[2] and i % iv[2] == 0 else 1 for i in range(1, n + 1)]
        tags.append("snapshot")
    # run 1's fault
    kill = None
    f = rng.random()
    if allow_fill and f < 0.06:
        k = rng.randint(1, n)
        cfg["fill"] = k
        tags.append("fill")
    elif f < 0.55:
        ck = rng.randint(1, n)  # the rank's ck-th checkpoint of run 1
        lv = sched[ck - 1]
        points = ["before_data", "after_data", "after_commit"]
        if lv in (2, 3):
            points += ["l%d_sent" % lv, "l%d_applied" % lv, "l%d_committed" % lv]
        if cfg["async"] and lv > 1:
            points += ["drain_start", "drain_committed"]
        pt = rng.choice(points)
        who = "all" if rng.random() < 0.3 else rng.randrange(np_)
        kill = {"point": pt, "n": ck, "who": who}
        tags.append("kill_%s:%s" % ("all" if who == "all" else "one", pt))
    elif f < 0.75:
        kill = {"timer": round(rng.uniform(0.3, 1.6), 2)}
        tags.append("kill_timer")
    else:
        tags.append("no_kill")
    # node losses: within what some level may survive, or beyond
    lost = []
    r = rng.random()
    if nodes >= 2 and r < 0.35:
        lost = [rng.randrange(nodes)]
    elif nodes >= 2 and r < 0.5:
        lost = rng.sample(range(nodes), 2)
    if lost:
        tags.append("lost_%d_nodes" % len(lost))
    # erased and damaged files: (what, which, how)
    hits = []
    for _ in range(rng.choice((0, 0, 0, 1, 1, 2))):
        kind = rng.choice(("rank", "rank", "partner", "parity", "l4"))
        how = rng.choice(("erase", "header", "tables", "data"))
        hits.append({"kind": kind, "how": how, "pick": rng.random(), "seed": rng.randrange(1 << 30)})
        tags.append("%s_%s" % ("erase" if how == "erase" else "damage_" + how, kind))
    restart_kill = round(rng.uniform(0.1, 1.2), 2) if rng.random() < 0.15 else None
    if restart_kill:
        tags.append("kill_restart")
    tags.append("async" if cfg["async"] else "sync")
    return {"id": "%s:%d" % (seed, idx), "cfg": cfg, "sched": "".join(map(str, sched)), "kill": kill, "lost": lost,
            "hits": hits, "restart_kill": restart_kill, "tags": tags}


# ---- configuration and launches --------------------------------------------------

def write_ini(case, d):
    c = case["cfg"]
    lines = ["[basic]", "ckpt_dir = %s/node%%n" % d, "job_name = %s" % JOB, "node_size = %d" % c["node_size"],
             "keep_last_ckpt = 1", "async = %d" % c["async"], "keep_l4 = %d" % c["keep_l4"]]
    if c["glbl"]:
        lines.append("glbl_dir = %s/glbl" % d)
    if "snapshot" in c:
        lines.append("ckpt_interval = 1")
        lines += ["ckpt_interval_l%d = %d" % (lv, c["snapshot"][lv]) for lv in (2, 3, 4) if c["snapshot"][lv]]
    if "group_size" in c:
        lines += ["group_size = %d" % c["group_size"], "l3_parity = %d" % c["l3_parity"]]
    path = os.path.join(d, "cfg.ini")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def launch(ctx, case, d, env=None, kill_after=None, extra=(), sched=None):
    """One launch; returns (rc or None when killed by the timer or hung, text, how) with
    how in ("exit", "killed", "hung")."""
    cmd = ct.mpiexec(case["cfg"]["np"]) + [ctx.app, "--crpm", os.path.join(d, "cfg.ini"),
                                           "--sched", sched or case["sched"]]
    cmd += list(extra) + (["--snapshot"] if "snapshot" in case["cfg"] else [])
    e = ct.job_env(env or {}, shm_dir=ctx.shm)
    # the output lies beside the case's directory: a full file system there must not cut it
    with ctx.lock:
        ctx.nlaunch += 1
        out = "%s.launch-%d.out" % (d, ctx.nlaunch)
    job = ct.Job(cmd, env=e, out_path=out)
    limit = kill_after if kill_after is not None else ctx.timeout
    rc = job.wait(limit)
    if rc is None:
        job.kill()
        text, how = job.text(), ("killed" if kill_after is not None else "hung")
    else:
        job.finish()
        text, how = job.text(), "exit"
    if not ctx.keep:
        os.unlink(job.out_path)
    return rc, text, how


def reference(ctx, np_, n):
    """States after iterations 1..n of a failure-free run, and its result (the
    state after the last iteration: the program's state depends on the
    iteration alone).  One run of MAX_ITERS iterations per rank count serves
    every schedule."""
    with ctx.ref_lock:
        if np_ not in ctx.refs:
            ctx.refs[np_] = make_reference(ctx, np_)
    states = dict((i, v) for i, v in ctx.refs[np_].items() if i <= n)
    states[0] = None  # a fresh start has no recovered state line
    return states, states[n]


def make_reference(ctx, np_):
    """The states a failure-free run of np_ ranks prints after each iteration."""
    d = ct.make_workdir(os.path.join(ctx.work, "ref-%d" % np_))
    case = {"cfg": {"np": np_, "node_size": 1, "async": 0, "keep_l4": 1, "glbl": False}, "sched": "1" * MAX_ITERS}
    write_ini(case, d)
    rc, text, _ = launch(ctx, case, d)
    states = {int(m.group(1)): m.group(2) for m in re.finditer(r"campaign: ckpt (\d+) level \d state (\w+)", text)}
    res = re.search(r"^result (\w+)", text, re.M)
    ct.check(rc == 0 and res and len(states) == MAX_ITERS and states[MAX_ITERS] == res.group(1),
             "reference run failed:\n" + ct.tail(text))
    ct.clean_workdir(d)
    return states


# ---- facts from the files ----------------------------------------------------------

def job_files(d):
    """Checkpoint files under d: {path: (kind, owner rank or l4 id, node or None)}."""
    out = {}
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            m = re.fullmatch(r"(rank|partner|parity)-(\d+)\.crpm", f)
            node = re.search(r"/node(\d+)/", p)
            if m:
                out[p] = (m.group(1), int(m.group(2)), int(node.group(1)) if node else None)
            m = re.fullmatch(r"l4-(\d+)\.h5", f)
            if m:
                out[p] = ("l4", int(m.group(1)), None)
    return out


def inspect(ctx, path):
    """What crpm-inspect --verify says of one file: {"ok", "cur", "prev_ok", "codewords"}."""
    r = subprocess.run([ctx.inspect, "--verify", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
    t = r.stdout.decode("utf-8", "replace")
    info = {"ok": r.returncode == 0, "cur": None, "prev_ok": False, "codewords": None, "epoch": None}
    m = re.search(r"^committed:\s+epoch (\d+), checkpoint id (-?\d+)", t, re.M)
    if m and int(m.group(1)) > 0:  # epoch 0: created, nothing committed yet
        info["epoch"], info["cur"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"^previous epoch:\s+(\S+)", t, re.M)
    info["prev_ok"] = bool(m and m.group(1) == "recoverable")
    m = re.search(r"codewords: ([\d, ]+);", t)
    if m:
        info["codewords"] = [int(x) for x in m.group(1).replace(",", " ").split()]
    m = re.search(r"checkpoint id (\d+)\s+epoch (\d+)", t)
    if m and "level-4 file" in t:
        info["cur"], info["epoch"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"parity of the job's epoch (\d+)", t)
    if m and int(m.group(1)) > 0:
        info["cur"] = int(m.group(1))  # the job epoch (= the checkpoint id in this program)
    return info


def file_sig(p):
    st = os.stat(p)
    return (st.st_size, st.st_mtime_ns)


class Facts:
    """Per checkpoint file: the ids it surely gives (C) and may give (P)."""

    def __init__(self):
        self.files = {}  # path -> dict(kind, who, node, C, P, sig)
        self.max_committed = None  # the newest id any file held before the damage
        self.touched = False  # a file was lost, erased or damaged

    def add(self, path, kind, who, node, info, l3prev):
        C, P = set(), set()
        if info["ok"] and info["cur"] is not None:
            C.add(info["cur"])
            if kind in ("rank", "partner") and info["prev_ok"] and info["cur"] >= 1:
                C.add(info["cur"] - 1)
            if kind == "parity" and info["prev_ok"] and l3prev.get(info["cur"]) is not None:
                P.add(l3prev[info["cur"]])
        P |= C
        if info["cur"] is not None and info["ok"] and kind != "parity":
            self.max_committed = max(self.max_committed or 0, info["cur"])
        self.files[path] = {"kind": kind, "who": who, "node": node, "C": C, "P": P, "info": info}

    def summary(self, base):
        """One line per file: what it holds and what it surely (C) and possibly (P) gives."""
        out = []
        for p, f in sorted(self.files.items()):
            i = f["info"]
            out.append("\n          %s: %s%s C %s P %s" % (
                os.path.relpath(p, base), "id %s" % i["cur"] if i["ok"] else "INVALID",
                " +prev" if i["prev_ok"] else "", sorted(f["C"]), sorted(f["P"])))
        return "".join(out)

    def damage(self, path, cls, prev_too):
        self.touched = True
        f = self.files[path]
        cur = f["info"]["cur"]
        if cls == "none":
            return
        if cls == "erase" or prev_too or f["kind"] == "l4":
            f["C"], f["P"] = set(), set()
        elif cls == "data":
            f["C"].discard(cur)
            f["P"].discard(cur)
        else:  # metadata: the committed epoch is gone, the previous one may be intact
            f["C"] = set()
            f["P"].discard(cur)


def oracle(case, facts, any_files):
    """(lo, hi): newest id every rank surely / possibly brings back; None when none; lo = hi = 0
    when no checkpoint file of the job exists (a fresh start is right)."""
    c = case["cfg"]
    np_, nsize = c["np"], c["node_size"]
    if not any_files:
        return 0, 0
    own = {r: [set(), set()] for r in range(np_)}
    partner = {r: [set(), set()] for r in range(np_)}
    parity = {r: [set(), set()] for r in range(np_)}
    l4 = [set(), set()]
    for f in facts.files.values():
        tgt = {"rank": own, "partner": partner, "parity": parity}.get(f["kind"])
        if f["kind"] == "l4":
            l4[0] |= f["C"]
            l4[1] |= f["P"]
        elif f["who"] < np_:
            tgt[f["who"]][0] |= f["C"]
            tgt[f["who"]][1] |= f["P"]
    ids = set()
    for f in facts.files.values():
        ids |= f["P"]
    node_of = lambda r: r // nsize  # noqa: E731

    def l3_ok(r, x, k):
        if "group_size" not in c:
            return False
        K, M = c["group_size"], c["l3_parity"]
        g, local = node_of(r) // K, r % nsize
        members = [(g * K + j) * nsize + local for j in range(K)]
        if any(m >= np_ for m in members):
            return False
        has = lambda m: x in own[m][k] or x in partner[m][k]  # noqa: E731
        if k == 0:
            # surely: at most M members lack the epoch, in their data or their parity
            return sum(not has(m) or x not in parity[m][k] for m in members) <= M
        # possibly: at most M of the units of every codeword are missing
        # (codeword cw has parity on group nodes cw..cw+M-1, data from the
        # others: with K = 2, M = 1 the parity alone holds the data)
        for cw in range(K):
            holders = {(cw + t) % K for t in range(M)}
            er = 0
            for j, m in enumerate(members):
                if j in holders:
                    er += x not in parity[m][k]
                else:
                    er += not has(m)
            if er > M:
                return False
        return True

    def all_ranks(x, k):
        for r in range(np_):
            if x in own[r][k] or x in partner[r][k] or x in l4[k] or l3_ok(r, x, k):
                continue
            return False
        return True

    res = []
    for k in (0, 1):
        good = [x for x in ids if x > 0 and all_ranks(x, k)]
        res.append(max(good) if good else None)
    # No checkpoint ever committed anywhere: a fresh start is the answer.  The
    # first checkpoint committed only somewhere (a kill inside it) may or may
    # not have been the job's: a fresh start or a refusal.
    if facts.max_committed is None:
        # a file lost or damaged may have held one for all the library knows
        return (0 if not facts.touched else None), 0
    if res[1] is None and facts.max_committed <= 1:
        res[1] = 0
    return res[0], res[1]


# ---- one case --------------------------------------------------------------------

class Verdict(Exception):
    def __init__(self, outcome, why):
        super().__init__(why)
        self.outcome, self.why = outcome, why


def l3_prev_map(sched):
    """For each checkpoint id at level 3, the id of the level-3 checkpoint before it."""
    out, last = {}, None
    for i, lv in enumerate(sched, 1):
        if lv == "3":
            out[i] = last
            last = i
    return out


def gather_facts(ctx, case, d, old=None):
    facts = Facts()
    l3prev = l3_prev_map(case["sched"])
    infos = {p: inspect(ctx, p) for p in job_files(d)}
    # parity records the job epoch; the other files say which id each epoch had
    ids_of = {i["epoch"]: i["cur"] for p, i in infos.items() if i["epoch"] and i["cur"] is not None
              and "parity-" not in p}
    for p, (kind, who, node) in sorted(job_files(d).items()):
        info = infos[p]
        if kind == "parity" and info["cur"] is not None:
            info["cur"] = ids_of.get(info["cur"], info["cur"])
        facts.add(p, kind, who, node, info, l3prev)
        if old and p in old.files and old.files[p].get("sig") == file_sig(p):
            # unchanged since we damaged it: what we know of the damage holds
            facts.files[p] = old.files[p]
        facts.files[p]["sig"] = file_sig(p)
    if old:
        facts.touched = old.touched
    if old and old.max_committed is not None:
        facts.max_committed = max(facts.max_committed or 0, old.max_committed)
    return facts


def pick(rng_val, items):
    return items[int(rng_val * len(items)) % len(items)] if items else None


def apply_faults(ctx, case, d, facts, log):
    """Wipes the case's lost nodes, erases and damages its files; facts follow."""
    for nd in case["lost"]:
        facts.touched = True
        nd_dir = os.path.join(d, "node%d" % nd)
        for p in list(facts.files):
            if p.startswith(nd_dir + "/"):
                facts.damage(p, "erase", False)
                del facts.files[p]
        shutil.rmtree(nd_dir, ignore_errors=True)
        log.append("wiped node%d" % nd)
    for h in case["hits"]:
        # a file hit once is not hit again (the tool cannot open every damaged file)
        cands = sorted(p for p, f in facts.files.items() if f["kind"] == h["kind"] and os.path.exists(p)
                       and not f.get("hit"))
        p = pick(h["pick"], cands)
        if not p:
            log.append("no %s file to hit" % h["kind"])
            continue
        if h["how"] == "erase":
            facts.touched = True
            os.unlink(p)
            del facts.files[p]
            log.append("erased %s" % p)
            continue
        if h["kind"] == "l4":
            args = [ctx.damage, "--l4", p, "data" if h["how"] == "data" else "any", str(h["seed"])]
        else:
            kinds = CONTAINER_DAMAGE[h["how"]]
            args = [ctx.damage, p, kinds[h["seed"] % len(kinds)], str(h["seed"])]
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=60)
        out = r.stdout.decode("utf-8", "replace").strip()
        log.append(out)
        if r.returncode == 3:
            continue
        if r.returncode != 0:
            raise Verdict("crash", "damage tool failed: %s" % out)
        m = re.search(r"\[class (\w+)\]", out)
        facts.damage(p, m.group(1) if m else "meta", "previous epoch too" in out)
        facts.files[p]["hit"] = True
        facts.files[p]["sig"] = file_sig(p)


def snapshot_files(d):
    """inode -> (size, mtime) of every checkpoint file, to show that a refusal kept them."""
    out = {}
    for p in job_files(d):
        st = os.stat(p)
        out[st.st_ino] = (p, st.st_size, st.st_mtime_ns)
    return out


def parse_run(text):
    st = re.search(r"^campaign: status (-?\d+)", text, re.M)
    rs = re.search(r"^campaign: restarted from (\d+) state (\w+)", text, re.M)
    res = re.search(r"^result (\w+)", text, re.M)
    fails = re.findall(r"^campaign rank \d+: (\S+) failed: (.*)$", text, re.M)
    return (int(st.group(1)) if st else None, (int(rs.group(1)), rs.group(2)) if rs else None,
            res.group(1) if res else None, fails)


# the codes a refusal for lost or damaged checkpoints may give (crpm_types.h):
# CORRUPT, FORMAT, TRUNCATED, EPOCH, MISSING; the message must name the files
CAUSES = (-6, -8, -9, -14, -17)


def code_of(msg):
    m = re.match(r".*? \((-\d+)\): ", msg)
    return int(m.group(1)) if m else None


def mount_fill(d):
    """A small tmpfs over d (root only); False when that is impossible here."""
    os.makedirs(d, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", d], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return r.returncode == 0


def run_case(ctx, case):
    """Runs one case; returns (outcome, detail)."""
    d = os.path.join(ctx.work, "case-" + case["id"].replace(":", "-"))
    if os.path.ismount(d):
        subprocess.run(["umount", d])
    ct.make_workdir(d)
    mounted = False
    log = []
    try:
        if "fill" in case["cfg"]:
            mounted = mount_fill(d)
            if not mounted:
                return "skipped", "cannot mount a tmpfs to fill (needs root)"
        write_ini(case, d)
        states, final = reference(ctx, case["cfg"]["np"], len(case["sched"]))
        return check_case(ctx, case, d, states, final, log)
    except Verdict as v:
        return v.outcome, v.why + ("\n    " + "\n    ".join(log) if log else "")
    finally:
        keep = ctx.keep
        if mounted:
            subprocess.run(["umount", "-l", d])
        if not keep:
            ct.clean_workdir(d)


def check_case(ctx, case, d, states, final, log):
    c = case["cfg"]
    env, extra, kill_after = {}, [], None
    k = case["kill"]
    if k and "timer" in k:
        kill_after = k["timer"]
    elif k:
        who = range(c["np"]) if k["who"] == "all" else [k["who"]]
        env["CRPM_TEST_KILL"] = ",".join("%d:%s:%d" % (r, k["point"], k["n"]) for r in who)
    if "fill" in c:
        extra = ["--fill-at", str(c["fill"]), "--fill-file", os.path.join(d, "filler")]
    rc, text, how = launch(ctx, case, d, env=env, kill_after=kill_after, extra=extra)
    log.append("run 1: %s rc %s" % (how, rc))
    if how == "hung":
        raise Verdict("hang", "run 1 hung (%s)\n%s" % (case["id"], ct.tail(text)))
    st, rs, res, fails = parse_run(text)
    if "fill" in c:
        os.unlink(os.path.join(d, "filler")) if os.path.exists(os.path.join(d, "filler")) else None
        if rc != 0 and not fails:
            raise Verdict("crash", "full file system: run 1 died without an error (rc %s)\n%s" % (rc, ct.tail(text)))
        if fails and not any(code_of(f[1]) == -4 and re.search(r"space|full", f[1], re.I) for f in fails):
            raise Verdict("wrong result", "full file system: the error does not name the cause: %s" % fails[0][1])
        case["fill_passed"] = True  # what follows is an ordinary restart: --xfail fill no longer covers it
    elif how == "exit" and rc != 0 and not k:
        raise Verdict("crash", "run 1 failed without a fault\n%s" % ct.tail(text))
    elif how == "exit" and rc == 0 and res != final:
        raise Verdict("wrong result", "run 1 result %s, expected %s" % (res, final))
    elif how == "exit" and rc != 0 and fails:
        raise Verdict("crash", "run 1: a library error, not the kill: %s" % (fails[0],))
    facts = gather_facts(ctx, case, d)
    kinds_before = {f["kind"] for f in facts.files.values()}  # levels in use before the faults
    apply_faults(ctx, case, d, facts, log)
    lo, hi = oracle(case, facts, bool(job_files(d)))
    log.append("facts after the damage: " + facts.summary(d))
    log.append("oracle: lo %s hi %s" % (lo, hi))
    runs = 2
    before = snapshot_files(d)
    # a restart expected from a level-2/3 checkpoint first runs no further
    # than it (to check the redundancy it leaves); redo: the whole run at once
    # (crpm_snapshot counts its levels anew after a restart: the schedule's level of an id is known
    # only for the first run)
    redo = "snapshot" in c or not (lo is not None and lo == hi and lo > 0 and not case["restart_kill"]
                                   and kinds_before & {"partner", "parity"}
                                   and (case["lost"] or case["hits"] or case["kill"]))
    short_sched = None if redo else case["sched"][:lo]
    final_all = final
    if short_sched:
        final = states[lo]
    if case["restart_kill"]:
        rc, text, how = launch(ctx, case, d, kill_after=case["restart_kill"])
        log.append("run 2 (to be killed at %.2f s): %s rc %s" % (case["restart_kill"], how, rc))
        if how == "killed":
            facts2 = gather_facts(ctx, case, d, old=facts)
            lo2, hi2 = oracle(case, facts2, bool(job_files(d)))
            log.append("oracle after the killed restart: lo %s hi %s" % (lo2, hi2))
            if lo is not None and (lo2 is None or lo2 < lo):
                raise Verdict("older than recoverable", "a restart killed at %.2f s left the newest recoverable "
                              "checkpoint at %s, it was %s before" % (case["restart_kill"], lo2, lo))
            lo, hi = lo2, hi2
            runs = 3
            before = snapshot_files(d)
            rc, text, how = launch(ctx, case, d)
            log.append("run 3: %s rc %s" % (how, rc))
    else:
        rc, text, how = launch(ctx, case, d, sched=short_sched)
        log.append("run 2%s: %s rc %s" % (" (restart only)" if short_sched else "", how, rc))
    got, detail = judge(case, d, rc, text, how, lo, hi, before, states, final)
    if got is None:
        return "passed", detail
    # Full redundancy after the restart (issue 38): where partner copies
    # (parity containers) were in use before the faults, every rank's copy
    # (its parity) holds the checkpoint the job restarted from, erased ones
    # rebuilt and older ones resynced, so that the next node loss costs
    # nothing.  Checked after a launch that restarts and ends at once, then
    # the job is run to the end.
    # A restart from a level-4 file starts new containers (a new run of the
    # job): the node-level levels are written again by the next checkpoint
    # at their level, and the library says so (docs/levels.md); the check
    # applies to restarts that resumed the containers.
    st = re.search(r"^campaign: status (-?\d+)$", text or "", re.M)
    from_l4 = st is not None and int(st.group(1)) == 4
    if not redo:
        facts3 = gather_facts(ctx, case, d)
        for kind in sorted(kinds_before & {"partner", "parity"} if not from_l4 else ()):
            short = [r for r in range(c["np"]) if not any(f["kind"] == kind and f["who"] == r and got in f["C"]
                                                          for f in facts3.files.values())]
            if short:
                raise Verdict("not rebuilt", "after the restart from %d the %s of rank(s) %s do(es) not hold it" %
                              (got, "partner copies" if kind == "partner" else "parity", short))
        lo, hi = oracle(case, facts3, True)
        before = snapshot_files(d)
        rc, text, how = launch(ctx, case, d)
        log.append("run to the end: %s rc %s" % (how, rc))
        got2, detail2 = judge(case, d, rc, text, how, lo, hi, before, states, final_all)
        detail += "; then " + detail2
    return "passed", detail


def judge(case, d, rc, text, how, lo, hi, before, states, final):
    """The verdict on a checked launch: (None, why) for a right refusal, (id, why) for a
    right restart from id; raises Verdict otherwise."""
    if how == "hung":
        raise Verdict("hang", "the restart hung\n%s" % ct.tail(text))
    st, rs, res, fails = parse_run(text)
    if rc != 0:
        if not fails:
            raise Verdict("crash", "the restart died (rc %s) without an error\n%s" % (rc, ct.tail(text)))
        if lo is not None:
            raise Verdict("wrong refusal", "refused although checkpoint %s is recoverable: %s" % (lo, fails[0][1]))
        if not any(code_of(f[1]) in CAUSES and re.search(r"rank|/", f[1]) for f in fails):
            raise Verdict("wrong refusal", "the refusal does not name a cause: %s" % fails[0][1])
        if True:
            after = snapshot_files(d)
            gone = [p for ino, (p, sz, mt) in before.items() if ino not in after or after[ino][1:] != (sz, mt)]
            if gone:
                raise Verdict("wrong refusal", "the refusal changed or removed %s" % ", ".join(gone))
        return None, "refused: %s" % fails[0][1]
    got = rs[0] if rs else 0
    if st is None or res is None:
        raise Verdict("crash", "the restart printed no status or result\n%s" % ct.tail(text))
    if rs and states.get(got) != rs[1]:
        raise Verdict("wrong result", "restarted from %d with state %s, the failure-free run had %s" %
                      (got, rs[1], states.get(got)))
    if res != final:
        raise Verdict("wrong result", "result %s, the failure-free run's is %s" % (res, final))
    if hi is None:
        raise Verdict("wrong result", "restarted from %s (status %s) although nothing is recoverable (oracle)" %
                      (got, st))
    if lo is not None and got < lo:
        raise Verdict("older than recoverable", "restarted from %d (status %s), checkpoint %d is recoverable" %
                      (got, st, lo))
    if got > hi:
        raise Verdict("beyond oracle", "restarted from %d (status %s), the oracle allows at most %d" % (got, st, hi))
    return got, "restarted from %d (status %s; oracle %s..%s)" % (got, st, lo, hi)



# ---- the campaign ----------------------------------------------------------------

class Ctx:
    pass


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.environ.get("CRPM_BUILD_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                                              "build")
    build = os.path.normpath(build)
    ap.add_argument("--app", default=os.path.join(build, "tests", "campaign", "campaign_app"))
    ap.add_argument("--inspect", default=os.path.join(build, "apps", "tools", "crpm-inspect"))
    ap.add_argument("--damage", default=os.path.join(build, "tests", "campaign", "campaign_damage"))
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", default="38")
    ap.add_argument("--shard", default="0/1", help="i/n: run the cases whose index is i modulo n")
    ap.add_argument("--case", action="append", default=[], help="S:I, run only that case (repeatable)")
    ap.add_argument("--timeout", type=float, default=40.0, help="seconds a launch may run before it counts as hung")
    ap.add_argument("--no-fill", action="store_true", help="leave out the full-file-system class")
    ap.add_argument("--no-l4", action="store_true", help="no level 4 (a build without parallel HDF5)")
    ap.add_argument("--xfail", default="", help="comma-separated tags whose failures are expected (reported as xfail)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="start no case after this many seconds (the table covers the cases run)")
    ap.add_argument("--jobs", type=int, default=1, help="cases run at a time (each launches its own MPI jobs)")
    ap.add_argument("--keep", action="store_true", help="keep every case's directory")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    ct.require_test_hooks("the fault campaign (CRPM_TEST_KILL)")
    ctx = Ctx()
    ctx.app, ctx.inspect, ctx.damage = (os.path.abspath(x) for x in (a.app, a.inspect, a.damage))
    ctx.timeout, ctx.keep = a.timeout, a.keep
    ctx.work = ct.make_workdir(a.workdir, prefix="crpm-campaign-")
    ctx.shm = os.path.join(ctx.work, "ompi")
    os.makedirs(ctx.shm, exist_ok=True)
    ctx.refs = {}
    ctx.nlaunch = 0
    ctx.lock, ctx.ref_lock = threading.Lock(), threading.Lock()
    allow_fill = not a.no_fill and os.geteuid() == 0
    if a.case:
        cases = [generate(x.rsplit(":", 1)[0], int(x.rsplit(":", 1)[1]), allow_fill, not a.no_l4) for x in a.case]
    else:
        i, n = (int(x) for x in a.shard.split("/"))
        cases = [generate(a.seed, k, allow_fill, not a.no_l4) for k in range(a.cases) if k % n == i]
    xfail = set(t for t in a.xfail.split(",") if t)
    table = {}
    failures = []
    t0 = time.time()
    ran = 0

    def one(case):
        t1 = time.time()
        try:
            outcome, detail = run_case(ctx, case)
        except ct.Failure as e:
            outcome, detail = "crash", str(e)
        return case, outcome, detail, time.time() - t1

    def results():
        """(case, outcome, detail, seconds) in order; --jobs N runs N cases at a time."""
        if a.jobs <= 1:
            for case in cases:
                if a.max_seconds is not None and time.time() - t0 > a.max_seconds:
                    return
                yield one(case)
            return
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            pending = list(cases)
            running = set()
            while pending or running:
                while pending and len(running) < a.jobs and (a.max_seconds is None or
                                                              time.time() - t0 <= a.max_seconds):
                    running.add(pool.submit(one, pending.pop(0)))
                if not running:
                    return
                done, running = concurrent.futures.wait(running, return_when=concurrent.futures.FIRST_COMPLETED)
                for f in done:
                    yield f.result()

    for case, outcome, detail, secs in results():
        ran += 1
        tags = set(case["tags"]) - ({"fill"} if case.get("fill_passed") else set())
        if outcome not in ("passed", "skipped") and xfail & tags:
            outcome, detail = "xfail", detail
        rows = ["all"] + case["tags"] + ["levels " + "".join(sorted(set(case["sched"])))]
        for t in rows:
            table.setdefault(t, {o: 0 for o in OUTCOMES + ("cases", "skipped")})
            table[t]["cases"] += 1
            table[t][outcome] += 1
        line = "case %s: %s (%.1f s) sched %s cfg %s kill %s lost %s hits %s restart_kill %s" % (
            case["id"], outcome, secs, case["sched"], json.dumps(case["cfg"], sort_keys=True),
            case["kill"], case["lost"], [(h["how"], h["kind"]) for h in case["hits"]], case["restart_kill"])
        if outcome not in ("passed", "skipped", "xfail"):
            failures.append(case["id"])
            print(line + "\n    " + detail.replace("\n", "\n    "), flush=True)
        elif a.verbose or outcome == "xfail":
            print(line + ("\n    " + detail.replace("\n", "\n    ") if a.verbose or outcome == "xfail" else ""),
                  flush=True)
    if ran < len(cases):
        print("stopped after %.0f s (--max-seconds): %d of %d cases run" % (time.time() - t0, ran, len(cases)))
    print("\n%-34s %6s %6s %6s %6s %6s %7s %6s %5s %5s %5s %5s" % (
        "fault class", "cases", "passed", "wrong", "older", "refuse", "rebuilt", "beyond", "hang", "crash", "xfail",
        "skip"))
    for t in sorted(table, key=lambda x: (x != "all", x)):
        r = table[t]
        print("%-34s %6d %6d %6d %6d %6d %7d %6d %5d %5d %5d %5d" % (
            t, r["cases"], r["passed"], r["wrong result"], r["older than recoverable"], r["wrong refusal"],
            r["not rebuilt"], r["beyond oracle"], r["hang"], r["crash"], r["xfail"], r["skipped"]))
    print("\n%d cases in %.0f s; %d failed%s" % (ran, time.time() - t0, len(failures),
                                                ": " + " ".join(failures) if failures else ""))
    if failures:
        print("reproduce one: %s --app %s --inspect %s --damage %s --case %s -v --keep" % (
            sys.argv[0], a.app, a.inspect, a.damage, failures[0]))
    ct.clean_workdir(ctx.work, keep=a.keep)  # a failure is rerun alone with --case ... --keep
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
