#!/usr/bin/env python3
"""crpm-inspect describes a valid container and reports a flipped bit in
each checksummed part of one (superblock, commit record, committed epoch's
metadata header and body) with a non-zero exit; usage errors exit 2.  Level-2
partner copies (partner-<r>.crpm, byte-identical mirrors of rank r's
container) are labelled as such, alone and in a directory listing, and a
copy whose container is another rank's fails; so are level-3 parity
containers (parity-<r>.crpm, ordinary containers of rank r whose region ids
are the codewords it holds parity for)."""
import os
import re
import shutil

import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from l4common import check, flip_bit, main, mpirun, run, superblock, write_cfg

NP, N = 2, 400
LAYOUT_OFF, LAYOUT_LEN = 1024, 40  # format.h: struct crpm_layout_rec


def body(a, work):
    check(a.inspect, "--inspect is required")
    cfg = write_cfg(os.path.join(work, "c.ini"), os.path.join(work, "ckpt"), os.path.join(work, "glbl"), "insp")
    mpirun(NP, [a.app, "--n", str(N), "--iters", "30", "--crpm", cfg, "--ckpt-every", "10"])
    good = os.path.join(work, "ckpt", "insp", "rank-1.crpm")

    p = run([a.inspect, good])
    out = p.stdout
    for pat in (r"job:\s+insp", r"rank:\s+1 of 2", r"committed:\s+epoch 3, checkpoint id 30",
                r"layout:\s+rank's container of rank 1; node 0 of 1 \(node_size 0: MPI's nodes\), group_size 4, "
                r"l3_parity 1\n",
                r"regions:\s+5", r"status:\s+OK", r"superblock:\s+checksum ok", r"segment size:\s+\d+"):
        check(re.search(pat, out), "inspect output lacks /%s/:\n%s" % (pat, out))
    # Region sizes: rank 1 protects N + 3 doubles as id 1 and 8 24-byte particles as id 4.
    check(re.search(r"id 1\s+type 9\s+elem 8\s+count %d\s+bytes %d" % (N + 3, 8 * (N + 3)), out),
          "region 1 line:\n" + out)
    check(re.search(r"id 4\s+type 100\s+elem 24\s+count 8\s", out), "region 4 line:\n" + out)
    check(run([a.inspect, "-q", good]).stdout == "", "-q prints nothing for a valid file")

    sb = superblock(good)
    committed_slot = sb["slot_offset"][3 % 2]
    cases = [("superblock", 17, r"superblock checksum"),
             ("commit record", 2048 + 1, r"commit record"),
             ("epoch metadata header", committed_slot + 17, r"metadata slot|checksum"),
             ("epoch metadata body", committed_slot + 80, r"checksum mismatch in metadata")]
    for name, off, why in cases:
        bad = os.path.join(work, "bad.crpm")
        shutil.copy(good, bad)
        flip_bit(bad, off)
        p = run([a.inspect, bad], expect=1)
        check(re.search(r"FAILED: .*" + why, p.stderr), "flipped bit in the %s not reported clearly:\n%s%s" %
              (name, p.stdout, p.stderr))
        check("status:         OK" not in p.stdout, "the %s flip printed status OK" % name)
        # Several files: one bad one makes the exit status 1, the good one is still described.
        p = run([a.inspect, good, bad], expect=1)
        check(p.stdout.count("container:") == 2 and "status:         OK" in p.stdout, "two-file report")

    partner_copies(a, work, good)
    parity_containers(a, work, good)

    check("usage: crpm-inspect" in run([a.inspect, "--help"]).stdout, "--help")
    run([a.inspect], expect=2)
    run([a.inspect, "--bogus", good], expect=2)
    run([a.inspect, os.path.join(work, "missing.crpm")], expect=1)


def partner_copies(a, work, good):
    """A simulated node directory holding rank 1's container and the partner
    copy of rank 0's (a copy of rank-0.crpm, as level 2 keeps it)."""
    job = os.path.dirname(good)
    node = os.path.join(work, "node1", "insp")
    os.makedirs(node)
    shutil.copy(good, os.path.join(node, "rank-1.crpm"))
    pc = os.path.join(node, "partner-0.crpm")
    shutil.copy(os.path.join(job, "rank-0.crpm"), pc)

    out = run([a.inspect, pc]).stdout
    label = r"kind:\s+partner copy of rank 0's container \(job insp, owner rank 0 of 2, epoch 3\)\n"
    check(re.search(label + r"container:\s+" + re.escape(pc), out), "partner copy label:\n" + out)
    for pat in (r"rank:\s+0 of 2", r"committed:\s+epoch 3, checkpoint id 30", r"status:\s+OK"):
        check(re.search(pat, out), "partner copy report lacks /%s/:\n%s" % (pat, out))
    # an owner's own container is not labelled as a copy
    check("partner copy" not in run([a.inspect, good]).stdout, "rank-1.crpm labelled as a partner copy")

    out = run([a.inspect, node]).stdout
    for pat in (r"directory:\s+" + re.escape(node) + r"\n", r"containers:\s+1 \(ranks 1\)\n",
                r"partner copies:\s+1 \(of ranks 0, whose containers are on other nodes\)\n",
                r"level-4 files:\s+0\n", label):
        check(re.search(pat, out), "directory listing lacks /%s/:\n%s" % (pat, out))
    check(out.count("status:         OK") == 2 and out.count("container:") == 2, "directory report:\n" + out)
    check(out.index("rank-1.crpm") < out.index("partner-0.crpm"), "containers come before partner copies")
    check(run([a.inspect, "-q", node]).stdout == "", "-q prints nothing for a valid directory")

    out = run([a.inspect, job]).stdout
    check(re.search(r"containers:\s+2 \(ranks 0, 1\)\n", out) and re.search(r"partner copies:\s+0\n", out),
          "job directory listing:\n" + out)

    # a copy under another owner's name is no copy of that owner
    wrong = os.path.join(node, "partner-3.crpm")
    shutil.copy(good, wrong)
    p = run([a.inspect, wrong], expect=1)
    check("partner copy of rank 3, but its container is rank 1's" in p.stderr and
          "status:         OK" not in p.stdout, "wrong owner accepted:\n%s%s" % (p.stdout, p.stderr))
    p = run([a.inspect, node], expect=1)
    check(p.stdout.count("status:         OK") == 2 and "partner-3.crpm: FAILED" in p.stderr,
          "directory with a wrong copy:\n%s%s" % (p.stdout, p.stderr))
    os.unlink(wrong)
    # a damaged partner copy fails like a damaged container
    flip_bit(pc, 17)
    p = run([a.inspect, pc], expect=1)
    check(re.search(r"FAILED: .*superblock checksum", p.stderr), "damaged partner copy:\n" + p.stderr)
    check("kind:           partner copy of rank 0's container\n" in p.stdout, "damaged copy still labelled")
    empty = os.path.join(work, "empty")
    os.makedirs(empty)
    p = run([a.inspect, empty], expect=1)
    check("no checkpoint files" in p.stderr, "empty directory:\n" + p.stderr)


def parity_containers(a, work, good):
    """A simulated node directory holding rank 1's container and its parity
    container.  Level 3 writes parity containers in the ordinary container
    format, so a copy of rank-1.crpm stands for one here (its region ids,
    0 to 4, are listed as the codewords) once its layout record, which says
    "rank's container", is zeroed as in a file made before records existed.
    With the record, the copy fails: its name and its record disagree.
    (tests/tools/tools_levels.py inspects real parity containers.)"""
    node = os.path.join(work, "pnode1", "insp")
    os.makedirs(node)
    shutil.copy(good, os.path.join(node, "rank-1.crpm"))
    pc = os.path.join(node, "parity-1.crpm")
    shutil.copy(good, pc)
    p = run([a.inspect, pc], expect=1)
    check("named as a level-3 parity container but its layout record says it is a rank's container" in p.stderr,
          "a rank's container named as parity:\n" + p.stdout + p.stderr)
    with open(pc, "r+b") as f:
        f.seek(LAYOUT_OFF)
        f.write(bytes(LAYOUT_LEN))
    check("layout:         not recorded" in run([a.inspect, pc]).stdout, "zeroed layout record")

    out = run([a.inspect, pc]).stdout
    label = (r"kind:\s+level-3 parity container of rank 1 \(codewords: 0, 1, 2, 3, 4; job insp, rank 1 of 2\): "
             r"parity of the job's epoch 30 \(the checkpoint id below\), not rank data\n")
    check(re.search(label + r"container:\s+" + re.escape(pc), out), "parity container label:\n" + out)
    check(re.search(r"status:\s+OK", out), "parity container report:\n" + out)
    check("parity container" not in run([a.inspect, good]).stdout, "rank-1.crpm labelled as a parity container")

    out = run([a.inspect, node]).stdout
    for pat in (r"containers:\s+1 \(ranks 1\)\n", r"partner copies:\s+0\n",
                r"parity:\s+1 \(level-3 parity containers of ranks 1\)\n", r"level-4 files:\s+0\n", label):
        check(re.search(pat, out), "directory listing lacks /%s/:\n%s" % (pat, out))
    check(out.count("status:         OK") == 2, "directory report:\n" + out)
    check(out.index("rank-1.crpm") < out.index("parity-1.crpm"), "containers come before parity containers")
    out = run([a.inspect, os.path.dirname(good)]).stdout
    check(re.search(r"parity:\s+0\n", out), "job directory without parity:\n" + out)

    # a parity container under another rank's name fails
    wrong = os.path.join(node, "parity-0.crpm")
    shutil.copy(pc, wrong)
    p = run([a.inspect, wrong], expect=1)
    check("parity container of rank 0, but its container is rank 1's" in p.stderr and
          "status:         OK" not in p.stdout, "wrong holder accepted:\n%s%s" % (p.stdout, p.stderr))
    os.unlink(wrong)
    flip_bit(pc, 17)
    p = run([a.inspect, pc], expect=1)
    check(re.search(r"FAILED: .*superblock checksum", p.stderr), "damaged parity container:\n" + p.stderr)
    check("kind:           level-3 parity container of rank 1\n" in p.stdout, "damaged parity container labelled")


if __name__ == "__main__":
    main(body)
