#!/usr/bin/python3
"""Restart on another number of ranks (docs/reshape.md), end to end.

The 2-D heat example (apps/examples/heat2d: a 2-D block decomposition, the
grid one global dataset, the iteration counter replicated) prints a digest
of the whole grid that does not depend on the rank count; a run without
libcrpm on 5 ranks gives the reference.  Each scenario has a directory of
its own; "killed" means the whole job SIGKILLed a random moment after its
first committed checkpoint (or its recovery), never by the library.

  l1_chain    level 1, one directory for all ranks: 8 ranks killed, 12
              killed, 4 to the end; every relaunch reports the reshaped
              restart from at least the checkpoint the launch before had
              committed, and the digest is the reference
  l4          level 4: 8 ranks killed after a level-4 checkpoint, every
              node-local file lost: with a byte of the file's global dataset
              flipped, 3 ranks refuse (CRPM_ERR_CORRUPT on every rank, the
              file kept); repaired, 3 ranks restart from the 8-rank file (its
              global dataset h5dump reads with the global shape) and end
              with the reference
  l2_node     level 2, 4 nodes of 2 ranks (ckpt_dir <dir>/node%n): 8 ranks
              killed, node 1 wiped: 6 ranks (nodes 0..2) restart from the
              containers and the partner copies (node 1's from node 2, node
              3's from node 0), the old files go only after the first level-2
              checkpoint committed (a level-1 one before it keeps them), node 3 (not in the new job) keeps its
              files unchanged, and the digest is the reference
  erasure     level 2, 8 ranks as 4 nodes: old rank 1's container and its
              partner copy damaged, a restart on 6 fails with CRPM_ERR_CORRUPT
              on every rank naming it, nothing changed; the container alone
              damaged: it is an erasure, the copy serves, the digest is the
              reference
  l3_node     level 3, 8 ranks as 4 nodes of 2 (group_size 4, l3_parity
              1), killed inside its second checkpoint (l3_applied: old rank
              0's parity at the first epoch, the containers at the second):
              with node 1 wiped, 6 ranks as 3 nodes lack nodes
              1 and 3 (two members of each group, parity 1): CRPM_ERR_MISSING
              on every rank saying level 3 cannot rebuild them, no file
              changed; node 1 wiped and a unit a decode needs damaged (old
              rank 1's parity, needed for old rank 3 after old rank 2 was
              rebuilt; old rank 4's container): CRPM_ERR_CORRUPT on every
              rank, the damaged file reported, no file changed; a kill once the first
              container is rebuilt (reshape_rebuilt) leaves the old files as
              they were; 6 ranks as 6 nodes then rebuild old ranks 2 and 3
              from the survivors and parity (moved over MPI) at the first
              epoch (the containers' previous one) and restart from them,
              killed inside their first checkpoint; the next launch
              restarts from the rebuilt containers without decoding again
              and ends with the reference; no kept file is left;
              with l3_parity 2, a damaged parity file needed by the first
              plan is an erasure, the plan is made again and another parity
              unit serves: the reference
  removal     4 ranks, then 3: the old files outlive a kill before the first
              checkpoint committed (the next launch reshapes again from
              them) and a kill right after it committed (reshape_removing:
              they are still there, byte-identical, and the next launch
              restarts from the new containers at level 1)
  errors      a per-rank array: crpm_init fails with CRPM_ERR_NRANKS on
              every rank, files unchanged; another dataset size or type:
              crpm_recover fails with CRPM_ERR_MISMATCH on every rank, and a
              later correct launch still restores everything; an old
              container missing without a copy: CRPM_ERR_MISSING on every
              rank naming it, the other files unchanged

  fti         FTI's global datasets through libcrpm's FTI layer (fti_vpr.c):
              4 ranks checkpoint at level 1, 3 restart (FTI_Status 3,
              FTI_RecoverDatasetDimension, FTI_AddSubset, FTI_Recover); 3
              ranks at level 4, 5 restart from the file alone
  fortran     the Fortran bindings (rs_f90.f90, Fortran order): 4 ranks
              checkpoint, 3 restart and find every element in place

Prints one line per scenario and "N passed, M failed" last.
"""
import argparse
import hashlib
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402
from crpmtest import Failure, check, tail  # noqa: E402

TIMEOUT = 60
HEAT = ["--nx", "96", "--ny", "80", "--iters", "400", "--print-every", "50", "--delay-ms", "4"]
DIGEST = re.compile(r"^digest ([0-9a-f]+) after (\d+) iterations")
RESTARTED = re.compile(r"^heat2d: restarted from iteration (\d+) \((.*)\) on (\d+) ranks")
COMMITTED = re.compile(r"^\[crpm\] checkpoint (\d+) \(L(\d)\)")


class Ctx:
    pass


def env(workdir, extra=None):
    return crpmtest.job_env(extra, shm_dir=workdir, clear=crpmtest.CRPM_ENV_OVERRIDES)


def config(path, basic):
    b = {"job_name": "rs", "verbosity": 2, "keep_last_ckpt": 0}
    b.update(basic)
    with open(path, "w") as f:
        f.write("[basic]\n" + "".join("%s = %s\n" % kv for kv in b.items()))
    return path


def files(top, skip=(".lock",)):
    """{relative path: sha256} of every file under top but locks."""
    out = {}
    for d, _, names in os.walk(top):
        for n in names:
            if n.endswith(skip):
                continue
            p = os.path.join(d, n)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, top)] = hashlib.sha256(fh.read()).hexdigest()
    return out


def strip_held(state):
    """The same state with kept names (<name>.held-<run>) mapped back."""
    return {re.sub(r"\.held-[0-9a-z-]+$", "", k): v for k, v in state.items()}


def heat(ctx, np_, cfg, extra=(), slow=False):
    """heat2d on np_ ranks; slow: 4 ms per iteration, so a random kill lands mid-run."""
    args = HEAT if slow else HEAT[:-2]
    return crpmtest.mpiexec(np_) + [ctx.a.heat] + args + ["--crpm", cfg, "--ckpt-every", "20"] + list(extra)


def killed(ctx, cmd, workdir, after=COMMITTED, extra_env=None):
    """Runs cmd and SIGKILLs the whole job a random moment (0..0.6 s) after
    the first line matching `after`; returns its output."""
    job = crpmtest.Job(cmd, env=env(workdir, extra_env))
    t_end = time.time() + TIMEOUT
    while time.time() < t_end and job.wait(0.02 + (time.time() - job.t0)) is None:
        if any(after.search(x) for x in crpmtest.complete_lines(job.text())):
            break
    if job.rc is None:
        time.sleep(ctx.rng.uniform(0.0, 0.6))
    rc = job.wait(0)
    job.kill()
    text = job.text()
    job.remove_log()
    check(rc is None, "the launch was to be killed mid-run but ended (rc %s)\n%s" % (rc, tail(text)))
    return text


def finish(ctx, cmd, workdir, extra_env=None):
    r = crpmtest.run_job(cmd, env=env(workdir, extra_env), timeout=TIMEOUT)
    check(r.rc == 0, "launch failed (rc %s): %s\n%s" % (r.rc, crpmtest.format_cmd(cmd), tail(r.out)))
    d = [m.group(1) for m in map(DIGEST.search, crpmtest.complete_lines(r.out)) if m]
    check(d == [ctx.ref], "digest %s, the reference is %s\n%s" % (d, ctx.ref, tail(r.out)))
    return r.out


def committed(text):
    return [int(m.group(1)) for m in map(COMMITTED.search, crpmtest.complete_lines(text)) if m]


def restarted(text, np_, how):
    """The iteration a launch restarted from (it must say how and on np_ ranks)."""
    m = [m for m in map(RESTARTED.search, crpmtest.complete_lines(text)) if m]
    check(len(m) == 1, "expected one 'restarted' line, found %d\n%s" % (len(m), tail(text)))
    check(m[0].group(2) == how and int(m[0].group(3)) == np_,
          "restarted '%s' on %s ranks, expected '%s' on %d\n%s" % (m[0].group(2), m[0].group(3), how, np_, tail(text)))
    return int(m[0].group(1))


def not_behind(prev, text, np_, how):
    it = restarted(text, np_, how)
    last = max(committed(prev) or [0])
    check(it >= last, "restarted from iteration %d, but checkpoint %d had been committed" % (it, last))
    return it


# ---- scenarios -------------------------------------------------------------------
def scenario_l1_chain(ctx):
    w = crpmtest.make_workdir(os.path.join(ctx.work, "l1_chain"))
    cfg = config(os.path.join(w, "c.ini"), {"ckpt_dir": os.path.join(w, "ckpt")})
    t8 = killed(ctx, heat(ctx, 8, cfg, slow=True), w)
    t12 = killed(ctx, heat(ctx, 12, cfg, slow=True), w, after=RESTARTED)
    not_behind(t8, t12, 12, "reshaped")
    t4 = finish(ctx, heat(ctx, 4, cfg), w)
    not_behind(t12 if committed(t12) else t8, t4, 4, "reshaped")


def scenario_l4(ctx):
    if not ctx.a.l4:
        return
    w = crpmtest.make_workdir(os.path.join(ctx.work, "l4"))
    cfg = config(os.path.join(w, "c.ini"), {"ckpt_dir": os.path.join(w, "ckpt"), "glbl_dir": os.path.join(w, "g")})
    t8 = killed(ctx, heat(ctx, 8, cfg, ["--level", "4"], slow=True), w)
    shutil.rmtree(os.path.join(w, "ckpt"))
    # the 8 ranks' file holds the grid as one dataset of its global shape
    job = os.path.join(w, "g", "rs")
    h5 = sorted(f for f in os.listdir(job) if f.endswith(".h5"))
    check(h5, "no level-4 file in %s" % job)
    out = subprocess.run(["h5dump", "-d", "/temperature", "-s", "0,0", "-c", "2,2", os.path.join(job, h5[-1])],
                         capture_output=True, text=True).stdout
    check("SIMPLE { ( 80, 96 ) / ( 80, 96 ) }" in out and re.search(r"\(0,0\): 100, 100", out),
          "h5dump does not show an 80 x 96 grid with its top edge at 100:\n%s" % out)
    # a damaged piece of each file's global dataset: refused on every rank, the files kept
    good = {}
    for name in h5:
        path = os.path.join(job, name)
        good[path] = open(path, "rb").read()
        data = bytearray(good[path])
        at = data.find(struct.pack("<d", 100.0) * 40)
        check(at > 0, "no top edge found in %s" % path)
        data[at + 77] ^= 0x08
        with open(path, "wb") as f:
            f.write(data)
    r = crpmtest.run_job(heat(ctx, 3, cfg), env=env(w), timeout=TIMEOUT)
    check(r.rc not in (0, None) and all("heat2d rank %d: crpm_init failed: checkpoint data is corrupt" % k in r.out
                                        for k in range(3)), "damaged level-4 files were not refused on every rank\n%s"
          % tail(r.out))
    for path, data in good.items():
        check(os.path.exists(path), "the damaged level-4 file %s was removed" % path)
        with open(path, "wb") as f:
            f.write(data)
    t3 = finish(ctx, heat(ctx, 3, cfg), w)
    it = not_behind(t8, t3, 3, "reshaped")
    check("[crpm] restart on 3 ranks from the level-4 checkpoint %d of 8 ranks" % it in t3,
          "the restart was not from the 8-rank level-4 file\n%s" % tail(t3))


def scenario_l2_node(ctx):
    w = crpmtest.make_workdir(os.path.join(ctx.work, "l2_node"))
    cfg = config(os.path.join(w, "c.ini"), {"ckpt_dir": os.path.join(w, "node%n"), "node_size": 2})
    t8 = killed(ctx, heat(ctx, 8, cfg, ["--level", "2"], slow=True), w)
    shutil.rmtree(os.path.join(w, "node1"))
    node3 = files(os.path.join(w, "node3"))
    # crpm_snapshot every 20 iterations, every 2nd checkpoint level 2: level 1 first
    cfg6 = config(os.path.join(w, "c6.ini"), {"ckpt_dir": os.path.join(w, "node%n"), "node_size": 2,
                                             "ckpt_interval": 20, "ckpt_interval_l2": 2})
    t6 = finish(ctx, crpmtest.mpiexec(6) + [ctx.a.heat] + HEAT[:-2] + ["--crpm", cfg6], w)
    not_behind(t8, t6, 6, "reshaped")
    # the old files had partner copies: removed inside the first level-2
    # checkpoint, once committed (printed just before it), not by a level-1 one
    lines = t6.splitlines()
    gone = [i for i, x in enumerate(lines) if "restart on 6 ranks complete" in x]
    ck = [(i, COMMITTED.search(x).group(2)) for i, x in enumerate(lines) if COMMITTED.search(x)]
    l2 = [i for i, lv in ck if lv == "2"]
    check(len(gone) == 1 and ck and ck[0][1] == "1" and ck[0][0] < gone[0] and l2 and l2[0] == gone[0] + 1,
          "the old files were not removed by the first level-2 checkpoint (after a level-1 one)\n%s" % tail(t6))
    check(files(os.path.join(w, "node3")) == node3, "node 3 (not in the 6-rank job) had its files changed")


def scenario_removal(ctx):
    w = crpmtest.make_workdir(os.path.join(ctx.work, "removal"))
    ck = os.path.join(w, "ckpt")
    cfg = config(os.path.join(w, "c.ini"), {"ckpt_dir": ck, "keep_last_ckpt": 1})
    first = crpmtest.mpiexec(4) + [ctx.a.heat] + HEAT[:4] + ["--iters", "200", "--crpm", cfg, "--ckpt-every", "100"]
    r = crpmtest.run_job(first, env=env(w), timeout=TIMEOUT)
    check(r.rc == 0, "the 4-rank run failed\n%s" % tail(r.out))
    saved = files(ck)
    shutil.copytree(ck, ck + ".orig")
    for point, n, how in (("after_data", 1, "reshaped"), ("reshape_removing", 1, "level 1")):
        shutil.rmtree(ck)
        shutil.copytree(ck + ".orig", ck)
        k = crpmtest.run_job(heat(ctx, 3, cfg), env=env(w, {"CRPM_TEST_KILL": "0:%s:%d" % (point, n)}),
                             timeout=TIMEOUT)
        check(k.rc not in (0, None), "the hooked launch (%s) did not die\n%s" % (point, tail(k.out)))
        now = files(ck)
        held = {p: h for p, h in now.items() if ".held-" in p}
        check(strip_held(held) == saved, "%s: the 4-rank files are not all kept unchanged: %s" % (point, sorted(now)))
        t = finish(ctx, heat(ctx, 3, cfg), w)
        check(restarted(t, 3, how) >= 200, "%s: restarted before the kept checkpoint\n%s" % (point, tail(t)))


def damage(path):
    """Flips a byte inside every stored copy of the top edge (48 values of
    100.0) in a container or partner copy of rank 1 of 8."""
    with open(path, "r+b") as f:
        data = bytearray(f.read())
        pat = struct.pack("<d", 100.0) * 48
        at = [m.start() for m in re.finditer(re.escape(pat), data)]
        check(at, "%s: no top edge found to damage" % path)
        for i in at:
            data[i + 101] ^= 0x10
        f.seek(0)
        f.write(data)


def scenario_erasure(ctx):
    w = crpmtest.make_workdir(os.path.join(ctx.work, "erasure"))
    cfg = config(os.path.join(w, "c.ini"), {"ckpt_dir": os.path.join(w, "node%n"), "node_size": 2,
                                           "keep_last_ckpt": 1})
    first = crpmtest.mpiexec(8) + [ctx.a.heat] + HEAT[:4] + ["--iters", "200", "--crpm", cfg, "--ckpt-every", "100",
                                                              "--level", "2"]
    r = crpmtest.run_job(first, env=env(w), timeout=TIMEOUT)
    check(r.rc == 0, "the 8-rank run failed\n%s" % tail(r.out))
    cont, copy = os.path.join(w, "node0", "rs", "rank-1.crpm"), os.path.join(w, "node1", "rs", "partner-1.crpm")
    keep = os.path.join(w, "orig")
    os.makedirs(keep)
    for n in ("node0", "node1", "node2", "node3"):
        shutil.copytree(os.path.join(w, n), os.path.join(keep, n))
    # container and copy damaged: refused on every rank, nothing changed
    damage(cont)
    damage(copy)
    before = {n: files(os.path.join(w, n)) for n in ("node0", "node1", "node2", "node3")}
    r = crpmtest.run_job(heat(ctx, 6, cfg), env=env(w), timeout=TIMEOUT)
    check(r.rc not in (0, None), "a restart from a damaged container and copy did not fail\n%s" % tail(r.out))
    for k in range(6):
        check("heat2d rank %d: crpm_init failed: checkpoint data is corrupt" % k in r.out,
              "rank %d did not report the damage\n%s" % (k, tail(r.out)))
    check("old rank(s) 1 " in r.out, "the message does not name old rank 1\n%s" % tail(r.out))
    check({n: files(os.path.join(w, n)) for n in before} == before, "a refused restart changed the files")
    # the container alone damaged: an erasure, its partner copy serves
    shutil.copyfile(os.path.join(keep, "node1", "rs", "partner-1.crpm"), copy)
    t = finish(ctx, heat(ctx, 6, cfg), w)
    check(restarted(t, 6, "reshaped") == 200, "not restarted from checkpoint 200\n%s" % tail(t))
    check("not using %s" % cont in t, "the damaged container was not reported\n%s" % tail(t))


def damage_segments(ctx, path):
    """Flips byte 100 of every data segment of a container file (committed
    and backup copies alike: where the data of its first array begins)."""
    out = subprocess.run([ctx.a.inspect, path], capture_output=True, text=True).stdout
    m = re.search(r"file size:\s+(\d+) \(metadata (\d+), (\d+) data segments\)", out)
    check(m, "crpm-inspect does not describe %s:\n%s" % (path, out))
    size, meta, n = map(int, m.groups())
    with open(path, "r+b") as f:
        for i in range(n):
            at = meta + i * ((size - meta) // n) + 100
            f.seek(at)
            b = f.read(1)[0]
            f.seek(at)
            f.write(bytes([b ^ 0x10]))


def scenario_l3_node(ctx):
    if not ctx.a.inspect:
        return
    w = crpmtest.make_workdir(os.path.join(ctx.work, "l3_node"))
    nodes = ["node%d" % i for i in range(4)]
    cfg = config(os.path.join(w, "c.ini"), {"ckpt_dir": os.path.join(w, "node%n"), "node_size": 2,
                                           "group_size": 4, "l3_parity": 1})
    # killed inside the second level-3 checkpoint (40): old rank 0's parity
    # still at the first, the containers at the second
    k = crpmtest.run_job(heat(ctx, 8, cfg, ["--level", "3"]), env=env(w, {"CRPM_TEST_KILL": "0:l3_applied:2"}),
                         timeout=TIMEOUT)
    check(k.rc not in (0, None) and committed(k.out) == [20], "the 8-rank run was not killed inside checkpoint 40\n%s"
          % tail(k.out))
    keep = os.path.join(w, "orig")
    for n in nodes:
        shutil.copytree(os.path.join(w, n), os.path.join(keep, n))

    def reset():
        for n in nodes:
            shutil.rmtree(os.path.join(w, n), ignore_errors=True)
            shutil.copytree(os.path.join(keep, n), os.path.join(w, n))
        shutil.rmtree(os.path.join(w, "node1"))

    def state():
        return {n: files(os.path.join(w, n), skip=(".lock", ".tmp")) for n in nodes}

    cfg6 = config(os.path.join(w, "c6.ini"), {"ckpt_dir": os.path.join(w, "node%n"), "node_size": 2})
    cfg6n = config(os.path.join(w, "c6n.ini"), {"ckpt_dir": os.path.join(w, "node%n"), "node_size": 1})
    # nodes 1 (wiped) and 3 (not in a job of 3 nodes): two members of each group lost, parity 1
    reset()
    before = state()
    r = crpmtest.run_job(heat(ctx, 6, cfg6), env=env(w), timeout=TIMEOUT)
    check(r.rc not in (0, None), "a restart with two nodes of a group lost did not fail\n%s" % tail(r.out))
    for k in range(6):
        check("heat2d rank %d: crpm_init failed: some ranks have no checkpoint container" % k in r.out,
              "rank %d did not report the missing containers\n%s" % (k, tail(r.out)))
    check("level-3 parity cannot rebuild them" in r.out, "the message does not say why level 3 cannot\n%s"
          % tail(r.out))
    check(state() == before, "a refused restart changed the files")
    # node 1 wiped and a unit the decode needs damaged: old rank 1's parity
    # (codeword 0 of old rank 3, rebuilt after old rank 2, whose file must go
    # again) or old rank 4's container (a survivor): refused, never decoded
    for name in ("parity-1.crpm", "rank-4.crpm"):
        reset()
        damage_segments(ctx, os.path.join(w, "node2" if name == "rank-4.crpm" else "node0", "rs", name))
        before = state()
        r = crpmtest.run_job(heat(ctx, 6, cfg6n), env=env(w), timeout=TIMEOUT)
        check(r.rc not in (0, None), "a rebuild from a damaged %s did not fail\n%s" % (name, tail(r.out)))
        for k in range(6):
            check("heat2d rank %d: crpm_init failed: checkpoint data is corrupt" % k in r.out,
                  "rank %d did not report the damage\n%s" % (k, tail(r.out)))
        check("not using %s to rebuild from level 3" % name in r.out and "failed their checksums" in r.out,
              "the damaged %s was not reported\n%s" % (name, tail(r.out)))
        check(state() == before, "a refused restart changed the files")
    # node 1 wiped: killed once the first container is rebuilt, the old files stay as they were
    reset()
    before = state()
    k = crpmtest.run_job(heat(ctx, 6, cfg6n), env=env(w, {"CRPM_TEST_KILL": "2:reshape_rebuilt:1"}), timeout=TIMEOUT)
    check(k.rc not in (0, None), "the launch killed while rebuilding did not die\n%s" % tail(k.out))
    check(state() == before, "a kill while rebuilding changed the old files")
    # 6 ranks as 6 nodes: old ranks 2 and 3 rebuilt from nodes 0, 2 and 3
    # (at the epoch of checkpoint 20: old rank 2's codeword 0 needs old rank 0's
    # parity), killed inside the new job's first checkpoint ...
    k = crpmtest.run_job(heat(ctx, 6, cfg6n), env=env(w, {"CRPM_TEST_KILL": "0:after_data:1"}), timeout=TIMEOUT)
    check(k.rc not in (0, None) and restarted(k.out, 6, "reshaped") == 20,
          "not restarted from checkpoint 20, then killed\n%s" % tail(k.out))
    check("[crpm] restart on 6 ranks: rebuilt old rank(s) 2, 3 from level-3 parity at epoch 1 " in k.out,
          "old ranks 2 and 3 were not rebuilt from level 3 at epoch 1\n%s" % tail(k.out))
    # ... the next launch restarts from the containers rebuilt, without decoding again
    t6 = finish(ctx, heat(ctx, 6, cfg6n), w)
    check(restarted(t6, 6, "reshaped") == 20 and "rebuilt old rank(s)" not in t6,
          "not restarted from checkpoint 20 and the rebuilt containers\n%s" % tail(t6))
    left = [p for n in nodes for p in files(os.path.join(w, n), skip=(".lock",)) if ".held-" in p]
    check(not left, "kept files left after the job finished: %s" % left)
    # l3_parity 2: a damaged parity unit is an erasure, another parity unit serves
    p2 = os.path.join(w, "p2", "node%n")
    cfg = config(os.path.join(w, "p2.ini"), {"ckpt_dir": p2, "node_size": 2, "group_size": 4, "l3_parity": 2,
                                             "keep_last_ckpt": 1})
    r = crpmtest.run_job(crpmtest.mpiexec(8) + [ctx.a.heat] + HEAT[:4] + ["--iters", "200", "--crpm", cfg,
                                                                         "--ckpt-every", "100", "--level", "3"],
                         env=env(w), timeout=TIMEOUT)
    check(r.rc == 0, "the 8-rank run with l3_parity 2 failed\n%s" % tail(r.out))
    shutil.rmtree(os.path.join(w, "p2", "node1"))
    damage_segments(ctx, os.path.join(w, "p2", "node2", "rs", "parity-4.crpm"))
    t = finish(ctx, heat(ctx, 6, config(os.path.join(w, "p2n.ini"), {"ckpt_dir": p2, "node_size": 1})), w)
    check(restarted(t, 6, "reshaped") == 200 and "not using parity-4.crpm to rebuild from level 3" in t and
          "rebuilt old rank(s) 2, 3 from level-3 parity" in t,
          "with l3_parity 2 the damaged parity was not replaced by another unit\n%s" % tail(t))


def rs(ctx, np_, cfg, *args):
    return crpmtest.mpiexec(np_) + [ctx.a.app, "--crpm", cfg] + list(args)


def every_rank_failed(out, np_, call, text):
    for r in range(np_):
        pat = "rs_app rank %d: %s failed: %s" % (r, call, text)
        check(any(x.startswith(pat) for x in out.splitlines()), "rank %d did not report '%s'\n%s" % (r, pat,
                                                                                                   tail(out)))


def scenario_errors(ctx):
    w = crpmtest.make_workdir(os.path.join(ctx.work, "errors"))
    ck = os.path.join(w, "ckpt")
    cfg = config(os.path.join(w, "c.ini"), {"ckpt_dir": ck, "keep_last_ckpt": 1})
    run = lambda cmd: crpmtest.run_job(cmd, env=env(w), timeout=TIMEOUT)  # noqa: E731
    # per-rank state
    check(run(rs(ctx, 4, cfg, "--per-rank")).rc == 0, "checkpointing run failed")
    before = files(ck)
    r = run(rs(ctx, 2, cfg, "--per-rank"))
    check(r.rc not in (0, None), "a per-rank array did not fail the restart on 2 ranks\n%s" % tail(r.out))
    every_rank_failed(r.out, 2, "crpm_init", "checkpoint was written by a different number of ranks")
    check("array 7 is per-rank state" in r.out, "the message does not name the per-rank array\n%s" % tail(r.out))
    check(files(ck) == before, "a refused restart changed the files")
    # another size, another type: refused at recovery, nothing lost
    shutil.rmtree(ck)
    check(run(rs(ctx, 4, cfg)).rc == 0, "checkpointing run failed")
    saved = files(ck)
    for bad in (["--ny", "63"], ["--float"]):
        r = run(rs(ctx, 2, cfg, *bad))
        check(r.rc not in (0, None) and "rs_app: restart reshaped" in r.out, "%s: not refused\n%s" % (bad, tail(r.out)))
        every_rank_failed(r.out, 2, "crpm_recover", "protected arrays differ from the saved checkpoint")
        kept = strip_held({p: h for p, h in files(ck).items() if ".held-" in p})
        check(kept == saved, "%s: the saved files are not all kept unchanged" % bad)
    r = run(rs(ctx, 2, cfg))
    check(r.rc == 0 and "rs_app: data ok" in r.out, "the correct launch did not restore the data\n%s" % tail(r.out))
    # an old container lost, no copy
    shutil.rmtree(ck)
    check(run(rs(ctx, 4, cfg)).rc == 0, "checkpointing run failed")
    os.unlink(os.path.join(ck, "rs", "rank-2.crpm"))
    before = files(ck)
    r = run(rs(ctx, 3, cfg))
    check(r.rc not in (0, None), "a lost container did not fail the restart\n%s" % tail(r.out))
    every_rank_failed(r.out, 3, "crpm_init", "some ranks have no checkpoint container")
    check("old rank(s) 2 " in r.out, "the message does not name old rank 2\n%s" % tail(r.out))
    check(files(ck) == before, "a refused restart changed the files")


def scenario_fti(ctx):
    if not ctx.a.fti:
        return
    w = crpmtest.make_workdir(os.path.join(ctx.work, "fti"))
    cfgf = os.path.join(w, "vpr.fti")
    with open(cfgf, "w") as f:
        f.write("[basic]\nhead = 0\nckpt_dir = %s\nglbl_dir = %s\nkeep_last_ckpt = 1\nverbosity = 2\n"
                % (os.path.join(w, "local"), os.path.join(w, "global")))
    for level, shape in ((1, (4, 3)), (4, (3, 5))):
        first, then = shape
        shutil.rmtree(os.path.join(w, "local"), ignore_errors=True)
        shutil.rmtree(os.path.join(w, "global"), ignore_errors=True)
        r = crpmtest.run_job(crpmtest.mpiexec(first) + [ctx.a.fti, cfgf, str(level)], env=env(w), timeout=TIMEOUT)
        check(r.rc == 0 and "fti_vpr: checkpointed" in r.out, "FTI checkpoint failed\n%s" % tail(r.out))
        if level == 4:
            shutil.rmtree(os.path.join(w, "local"))
        r = crpmtest.run_job(crpmtest.mpiexec(then) + [ctx.a.fti, cfgf, str(level)], env=env(w), timeout=TIMEOUT)
        check(r.rc == 0 and "fti_vpr: status 3 on %d ranks" % then in r.out and "fti_vpr: data ok" in r.out,
              "level %d, %d -> %d ranks: FTI's global datasets were not restored\n%s" % (level, first, then,
                                                                                       tail(r.out)))


def scenario_fortran(ctx):
    if not ctx.a.f90:
        return
    w = crpmtest.make_workdir(os.path.join(ctx.work, "fortran"))
    ck = os.path.join(w, "ckpt")
    cfg = config(os.path.join(w, "c.ini"), {"ckpt_dir": ck, "keep_last_ckpt": 1, "glbl_dir": os.path.join(w, "g")})
    r = crpmtest.run_job(crpmtest.mpiexec(4) + [ctx.a.f90, cfg], env=env(w), timeout=TIMEOUT)
    check(r.rc == 0 and "rs_f90: checkpointed" in r.out, "the Fortran checkpoint failed\n%s" % tail(r.out))
    r = crpmtest.run_job(crpmtest.mpiexec(3) + [ctx.a.f90, cfg], env=env(w), timeout=TIMEOUT)
    check(r.rc == 0 and "rs_f90: data ok on 3 ranks" in r.out, "Fortran boxes not restored on 3 ranks\n%s"
          % tail(r.out))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heat", required=True)
    ap.add_argument("--app", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--seed", type=int, default=30)
    ap.add_argument("--no-l4", dest="l4", action="store_false")
    ap.add_argument("--fti", help="tests/reshape/fti_vpr.c, built with the FTI layer")
    ap.add_argument("--f90", help="tests/reshape/rs_f90.f90, built with the Fortran bindings")
    ap.add_argument("--inspect", help="crpm-inspect (l3_node damages a parity file's data segments)")
    ap.add_argument("--only")
    a = ap.parse_args()
    ctx = Ctx()
    ctx.a = a
    ctx.rng = random.Random(a.seed)
    ctx.work = crpmtest.make_workdir(a.workdir)
    print("seed %d" % a.seed, flush=True)
    ref = crpmtest.run_job(crpmtest.mpiexec(5) + [a.heat] + HEAT[:-2], env=env(ctx.work), timeout=TIMEOUT)
    d = [m.group(1) for m in map(DIGEST.search, crpmtest.complete_lines(ref.out)) if m]
    if ref.rc != 0 or len(d) != 1:
        print("reference run failed:\n%s" % tail(ref.out))
        return 1
    ctx.ref = d[0]
    scen = [scenario_l1_chain, scenario_l4, scenario_l2_node, scenario_l3_node, scenario_erasure, scenario_removal, scenario_errors, scenario_fti, scenario_fortran]
    return crpmtest.run_scenarios(scen, ctx, ctx.work, only=a.only)


if __name__ == "__main__":
    sys.exit(main())
