"""Simulated nodes for the level-2 and level-3 test drivers (l2_crash.py,
l2_scenarios.py, tests/l3/l3_scenarios.py).

A job of NP ranks runs as NP / NODE_SIZE nodes on one machine: the
configuration sets node_size and ckpt_dir = <workdir>/node%n, so each node's
containers live in a directory of their own and "losing a node" is rm -rf of
that directory.  Node k holds the partner copies of node k-1's ranks (ring).
"""
import hashlib
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402

NP = 8
NODE_SIZE = 2
NNODES = NP // NODE_SIZE


def configure(np_, node_size):
    """Another job shape (level 3 runs 8 ranks as 8 nodes): sets NP,
    NODE_SIZE and NNODES for every helper here."""
    global NP, NODE_SIZE, NNODES
    if np_ % node_size:
        raise ValueError("%d ranks do not fill nodes of %d" % (np_, node_size))
    NP, NODE_SIZE, NNODES = np_, node_size, np_ // node_size

# Library notices at verbosity 2 (rank 0): a checkpoint line is printed after
# every rank committed it; a recovery line inside crpm_recover.
CKPT_LINE = re.compile(r"^\[crpm\] checkpoint (-?\d+) \(L(\d)\)")
RECOVERED = re.compile(r"^\[crpm\] recovered checkpoint (-?\d+)")


def node_of(rank):
    return rank // NODE_SIZE


def ranks_of(node):
    return list(range(node * NODE_SIZE, (node + 1) * NODE_SIZE))


def node_dir(workdir, node):
    return os.path.join(workdir, "node%d" % node)


def write_config(path, workdir, job, basic=None, advanced=None):
    """An INI file: ckpt_dir = <workdir>/node%n, node_size, job_name,
    verbosity 2 and keep_last_ckpt 0 unless basic overrides them."""
    b = {"ckpt_dir": os.path.join(workdir, "node%n"), "job_name": job, "node_size": NODE_SIZE,
         "keep_last_ckpt": 0, "verbosity": 2}
    b.update(basic or {})
    text = "[basic]\n" + "".join("%s = %s\n" % kv for kv in b.items())
    if advanced:
        text += "[advanced]\n" + "".join("%s = %s\n" % kv for kv in advanced.items())
    with open(path, "w") as f:
        f.write(text)
    return path


def wipe(workdir, nodes):
    """Loses these nodes: their whole checkpoint directory goes."""
    for k in nodes:
        shutil.rmtree(node_dir(workdir, k), ignore_errors=True)


def holds_checkpoints(workdir, nodes, skip=(".lock",)):
    """Whether any file but a lock is left under these nodes' directories."""
    for k in nodes:
        for _, _, files in os.walk(node_dir(workdir, k)):
            if any(not f.endswith(skip) for f in files):
                return True
    return False


def node_state(workdir, nodes, skip=(".lock",)):
    """{relative path: sha256} of every file under these nodes' directories
    (lock files aside: a launch may create them)."""
    out = {}
    for k in nodes:
        top = node_dir(workdir, k)
        for d, _, files in os.walk(top):
            for f in files:
                if f.endswith(skip):
                    continue
                p = os.path.join(d, f)
                h = hashlib.sha256()
                with open(p, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
                out[os.path.relpath(p, workdir)] = h.hexdigest()
    return out


def launch_env(workdir, extra=None):
    """The environment of a launch: no inherited CRPM_* overrides, Open MPI's
    shared-memory files in the work directory (a killed job leaves them)."""
    return crpmtest.job_env(extra, shm_dir=workdir, clear=crpmtest.CRPM_ENV_OVERRIDES)


def committed_ids(text):
    """Ids of the checkpoints rank 0 reported as committed by every rank."""
    return [int(m.group(1)) for m in map(CKPT_LINE.search, crpmtest.complete_lines(text)) if m]


def levels(text):
    return [int(m.group(2)) for m in map(CKPT_LINE.search, crpmtest.complete_lines(text)) if m]


def recovered_id(text):
    """The id crpm_recover reported, or None."""
    ids = [int(m.group(1)) for m in map(RECOVERED.search, crpmtest.complete_lines(text)) if m]
    return ids[-1] if ids else None
