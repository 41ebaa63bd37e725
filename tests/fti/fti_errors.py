#!/usr/bin/python3
"""Error cases and messages of libcrpm's FTI layer.

Runs the semantics program, then FTI_Init on bad FTI configuration files:
each must fail on every rank with a message naming the file and the line,
without hanging; a configuration with keys that do not apply must run with
one warning; no configuration file is ever modified.
Usage: fti_errors.py --semantics EXE --init-only EXE --config-dir DIR --workdir DIR
"""
import argparse
import os
import shlex
import shutil
import subprocess
import sys

failures = []


def launcher():
    exe = os.environ.get("CRPM_MPIEXEC") or "mpirun"
    flags = os.environ.get("CRPM_MPIEXEC_FLAGS")
    if flags is None:
        flags = "--oversubscribe --allow-run-as-root"
    return [exe] + shlex.split(flags)


def run(np, argv, cwd, env=None, timeout=90):
    e = dict(os.environ)
    e.pop("CRPM_CKPT_DIR", None)
    e.pop("CRPM_JOB_NAME", None)
    e["OMPI_MCA_btl_vader_backing_directory"] = cwd
    e.update(env or {})
    cmd = [launcher()[0], "-n", str(np)] + launcher()[1:] + argv
    try:
        p = subprocess.run(cmd, cwd=cwd, env=e, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout, start_new_session=True)
    except subprocess.TimeoutExpired as x:
        return None, (x.stdout or b"").decode("utf-8", "replace")
    return p.returncode, p.stdout.decode("utf-8", "replace")


def expect(name, ok, out):
    print("%s: %s" % (name, "ok" if ok else "FAILED"), flush=True)
    if not ok:
        failures.append(name)
        lines = out.rstrip().split("\n")
        shown = [x for x in lines if "CHECK failed" in x][:10] + lines[-15:]
        print("\n".join("    | " + x for x in shown))


GOOD = """[basic]
head = 0
node_size = 2
ckpt_dir = ./Local
glbl_dir = ./Global
meta_dir = ./Meta
ckpt_l1 = 3
ckpt_l2 = 5
ckpt_l3 = 7
ckpt_l4 = 11
verbosity = 2
"""

# name -> (configuration text, [texts that must all appear], FTI_Init's return)
BAD = {
    "syntax": ("[basic]\nckpt_dir = ./Local\nthis line has no equals sign\n",
               ["bad.fti, line 3: syntax error"], -1),
    "no_ckpt_dir": ("[basic]\nglbl_dir = ./Global\nckpt_l1 = 1\n", ["bad.fti: ckpt_dir is missing"], -1),
    "interval": (GOOD.replace("ckpt_l1 = 3", "ckpt_l1 = ten"),
                 ["bad.fti, line 7: bad value 'ten' for ckpt_l1: expected minutes"], -1),
    "negative": (GOOD.replace("ckpt_l4 = 11", "ckpt_l4 = -2"), ["line 10: bad value '-2' for ckpt_l4"], -1),
    "head": (GOOD.replace("head = 0", "head = 2"), ["line 2: bad value '2' for head: expected 0 or 1"], -1),
    "verbosity": (GOOD.replace("verbosity = 2", "verbosity = 9"), ["line 11: bad value '9' for verbosity"], -1),
    "duplicate": (GOOD + "ckpt_dir = ./Other\n", ["line 12: duplicate key 'ckpt_dir' (first set on line 4)"], -1),
    "l4_no_glbl": (GOOD.replace("glbl_dir = ./Global\n", ""), ["ckpt_l4 = 11 needs glbl_dir"], -1),
    "node_size": (GOOD.replace("node_size = 2", "node_size = 0"), ["bad value '0' for node_size"], -1),
}


def levels(a):
    """FTI levels 2 and 3 on one node and on several: level 1, libcrpm's
    level 2 or, when the nodes form whole groups of group_size (default 4)
    with the same number of ranks each, libcrpm's level 3; each substitution
    said once; FTI's node_size makes the nodes; a '%' in ckpt_dir is taken
    literally, as FTI does."""
    one_node = GOOD.replace("node_size = 2", "node_size = 4")
    no_size = GOOD.replace("node_size = 2\n", "")
    g2 = GOOD + "group_size = 2\n"
    g2_n1 = g2.replace("node_size = 2", "node_size = 1")
    no_l3 = "level 3 is taken as level 2 (a partner copy on the next node): level 3 needs whole groups of group_size = "
    cases = [  # name, config, ranks, FTI level, libcrpm level, notice, topology line
        ("one node (node_size = 4)", one_node, 4, 2, 1,
         "levels 2 and 3 are taken as level 1: the job runs on one node (4 ranks, node_size in the configuration)",
         "4 ranks on 1 node (node_size from the configuration)"),
        ("one node (MPI shared-memory nodes)", no_size, 3, 3, 1,
         "levels 2 and 3 are taken as level 1: the job runs on one node (3 ranks, MPI shared-memory nodes)",
         "3 ranks on 1 node (MPI shared-memory nodes)"),
        ("level 2 on 2 nodes", GOOD, 4, 2, 2, None, "4 ranks on 2 nodes (node_size from the configuration)"),
        ("level 3 on 2 nodes, group_size 4 by default", GOOD, 4, 3, 2,
         no_l3 + "4 nodes with the same number of ranks each, and the job has 2 nodes; said once", "4 ranks on 2 nodes"),
        ("level 3 on 2 nodes, group_size = 2", g2, 4, 3, 3, None, "4 ranks on 2 nodes"),
        ("level 7 (differential 3) on 4 nodes, group_size = 2", g2_n1, 4, 7, 3, None, "4 ranks on 4 nodes"),
        ("level 3 on 3 nodes, group_size = 2", g2_n1, 3, 3, 2,
         no_l3 + "2 nodes with the same number of ranks each, and the job has 3 nodes; said once", "3 ranks on 3 nodes"),
        ("level 3 on 3 nodes of 2, 2 and 1 ranks, group_size = 3", GOOD + "group_size = 3\n", 5, 3, 2,
         no_l3 + "3 nodes with the same number of ranks each, and the job has 3 nodes of different sizes; said once",
         "5 ranks on 3 nodes"),
        ("level 3 on 2 nodes, group_size = 1", GOOD + "group_size = 1\n", 4, 3, 2,
         no_l3 + "1 nodes with the same number", "4 ranks on 2 nodes"),
        ("level 6 (differential 2) on 3 nodes", GOOD, 5, 6, 2, None, "5 ranks on 3 nodes"),
    ]
    for i, (name, text, np, level, want, notice, topo) in enumerate(cases):
        d = os.path.join(a.workdir, "levels%d" % i)
        os.makedirs(d)
        path = os.path.join(d, "l.fti")
        with open(path, "w") as f:
            f.write(text)
        rc, out = run(np, [a.init_only, path, str(level)], d)
        ok = rc == 0 and "[crpm] checkpoint 1 (L%d)" % want in out and "[crpm] %s" % topo in out
        if notice:
            ok = ok and out.count(notice) == 1
        else:
            ok = ok and "is taken as level" not in out
        expect("FTI level %d, %s: libcrpm level %d" % (level, name, want), ok, out)

    d = os.path.join(a.workdir, "percent")
    os.makedirs(d)
    path = os.path.join(d, "p.fti")
    with open(path, "w") as f:
        f.write(GOOD.replace("ckpt_dir = ./Local", "ckpt_dir = ./Lo%nal%").replace("verbosity = 2", "verbosity = 1"))
    rc, out = run(2, [a.init_only, path], d)
    expect("a '%' in ckpt_dir is taken literally", rc == 0 and os.path.isdir(os.path.join(d, "Lo%nal%"))
           and not any(n.startswith("Lo") and n != "Lo%nal%" for n in os.listdir(d)), out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--semantics", required=True)
    ap.add_argument("--init-only", required=True)
    ap.add_argument("--config-dir", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    for k in ("semantics", "init_only", "config_dir", "workdir"):
        setattr(a, k, os.path.abspath(getattr(a, k)))
    shutil.rmtree(a.workdir, ignore_errors=True)
    os.makedirs(a.workdir)

    # semantics, with the configuration checked to be left untouched
    d = os.path.join(a.workdir, "semantics")
    os.makedirs(d)
    cfg = os.path.join(a.config_dir, "semantics.fti")
    before = (open(cfg, "rb").read(), os.stat(cfg).st_mtime_ns)
    rc, out = run(4, [a.semantics, cfg], d)
    expect("semantics program", rc == 0 and "passed: 0 failed checks" in out, out)
    # semantics.fti: node_size = 2 and group_size = 2, so 4 ranks are 2 nodes, one level-3 group; FTI levels 2
    # and 6 are libcrpm's level 2, level 3 its level 3
    expect("no level substituted", "is taken as level" not in out, out)
    expect("FTI levels 2 and 6 checkpoint at level 2, 3 at level 3, 1 at level 1",
           all("[crpm] checkpoint %d (L%d)" % (i, l) in out for i, l in ((1, 2), (2, 3), (3, 2), (5, 1))), out)
    expect("node_size = 2 makes 2 nodes of 4 ranks",
           "[crpm] 4 ranks on 2 nodes (node_size from the configuration)" in out, out)
    expect("head = 1 runs without heads and says so", out.count("head = 1: libcrpm runs without head") == 2, out)
    for fn in ("FTI_BitFlip",):
        expect("%s says it is not supported (on each rank, once)" % fn,
               out.count("error: %s is not supported by libcrpm's FTI layer" % fn) == 4, out)
    expect("calls before FTI_Init say so", out.count("FTI_Checkpoint: FTI is not initialised") == 4, out)
    expect("semantics config left untouched", (open(cfg, "rb").read(), os.stat(cfg).st_mtime_ns) == before, "")

    # bad configurations: every rank fails, rank 0 explains
    for name, (text, msgs, code) in BAD.items():
        d = os.path.join(a.workdir, name)
        os.makedirs(d)
        path = os.path.join(d, "bad.fti")
        with open(path, "w") as f:
            f.write(text)
        mtime = os.stat(path).st_mtime_ns
        rc, out = run(4, [a.init_only, path], d)
        ok = rc not in (0, None) and all(m in out for m in msgs) and "FTI_Init returned %d" % code in out
        ok = ok and out.count("error: FTI config") == 1 and os.stat(path).st_mtime_ns == mtime
        expect("bad config: %s" % name, ok, out)

    d = os.path.join(a.workdir, "missing")
    os.makedirs(d)
    rc, out = run(4, [a.init_only, os.path.join(d, "nothing.fti")], d)
    expect("missing config file", rc not in (0, None) and "nothing.fti: cannot open: No such file" in out, out)

    rc, out = run(2, [a.init_only, os.path.join(a.config_dir, "semantics.fti")], d, {"CRPM_FTI_MINUTE": "soon"})
    expect("bad CRPM_FTI_MINUTE", rc not in (0, None) and "CRPM_FTI_MINUTE='soon'" in out, out)

    levels(a)

    # keys that do not apply: one warning, the job runs
    d = os.path.join(a.workdir, "ignored")
    os.makedirs(d)
    path = os.path.join(d, "extra.fti")
    with open(path, "w") as f:
        # no glbl_dir: keep_last_ckpt keeps the node-local checkpoint (with
        # glbl_dir it would go to level 4, see docs/fti.md)
        f.write(GOOD.replace("glbl_dir = ./Global\n", "").replace("ckpt_l4 = 11\n", "") +
                "keep_last_ckpt = 1\nenable_staging = 1\n[restart]\nfailure = 1\nexec_id = x\n"
                "[injection]\nrank = 0\n[advanced]\nlocal_test = 1\n")
    before = open(path, "rb").read()
    rc, out = run(4, [a.init_only, path], d)
    expect("keys that do not apply: one warning", rc == 0 and out.count("keys with no meaning in libcrpm") == 1
           and "[restart] failure, [restart] exec_id, [injection] rank, [advanced] local_test"
           in out and "never rewritten" in out, out)
    # keep_last_ckpt = 1 left a checkpoint of 4 ranks: 2 ranks cannot use it
    rc, out = run(2, [a.init_only, path], d)
    expect("unusable checkpoint: FTI_NREC", rc not in (0, None) and "FTI_Init returned -2" in out
           and "written by 4 ranks and this run has 2" in out and "per-rank state" in out, out)
    rc, out = run(4, [a.init_only, path], d)
    expect("relaunch with the unchanged file restarts", rc == 0 and "checkpoint is available" in out, out)
    expect("config with [restart] failure left untouched", open(path, "rb").read() == before, "")

    if not failures:
        shutil.rmtree(a.workdir, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
