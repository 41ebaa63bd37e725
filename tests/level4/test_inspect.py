#!/usr/bin/env python3
"""crpm-inspect describes a valid container and reports a flipped bit in
each checksummed part of one (superblock, commit record, committed epoch's
metadata header and body) with a non-zero exit; usage errors exit 2."""
import os
import re
import shutil

import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from l4common import check, flip_bit, main, mpirun, run, superblock, write_cfg

NP, N = 2, 400


def body(a, work):
    check(a.inspect, "--inspect is required")
    cfg = write_cfg(os.path.join(work, "c.ini"), os.path.join(work, "ckpt"), os.path.join(work, "glbl"), "insp")
    mpirun(NP, [a.app, "--n", str(N), "--iters", "30", "--crpm", cfg, "--ckpt-every", "10"])
    good = os.path.join(work, "ckpt", "insp", "rank-1.crpm")

    p = run([a.inspect, good])
    out = p.stdout
    for pat in (r"job:\s+insp", r"rank:\s+1 of 2", r"committed:\s+epoch 3, checkpoint id 30",
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

    check("usage: crpm-inspect" in run([a.inspect, "--help"]).stdout, "--help")
    run([a.inspect], expect=2)
    run([a.inspect, "--bogus", good], expect=2)
    run([a.inspect, os.path.join(work, "missing.crpm")], expect=1)


if __name__ == "__main__":
    main(body)
