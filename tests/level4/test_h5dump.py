#!/usr/bin/env python3
"""A level-4 file written through crpm_checkpoint(id, CRPM_L4) is readable by
h5dump with the expected layout, types and values: every dataset matches
what the application reported at that checkpoint, its crc32 attribute is
zlib's CRC-32 of the bytes h5dump extracts; keep_l4 prunes."""
import math
import os
import re
import zlib

import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
from l4common import check, h5_string_attr, h5_values, main, mpirun, run, write_cfg

NP, N, ITERS, EVERY = 2, 300, 40, 10


def body(a, work):
    check(a.h5dump, "h5dump not found")
    glbl = os.path.join(work, "glbl")
    cfg = write_cfg(os.path.join(work, "c.ini"), os.path.join(work, "ckpt"), glbl, "dump", keep_l4=2)
    p = mpirun(NP, [a.app, "--n", str(N), "--iters", str(ITERS), "--crpm", cfg, "--ckpt-every", str(EVERY),
                    "--l4-every", "1"])
    # CKPT id <id> level <l> rank <r> n <n> sum <s>
    ck = {}
    for m in re.finditer(r"^CKPT id (\d+) level (\d+) rank (\d+) n (\d+) sum (\S+)$", p.stdout, re.M):
        ck[(int(m.group(1)), int(m.group(3)))] = (int(m.group(2)), int(m.group(4)), float(m.group(5)))
    check(len(ck) == NP * ITERS // EVERY, "expected %d CKPT lines, got %d" % (NP * ITERS // EVERY, len(ck)))
    check(all(v[0] == 4 for v in ck.values()), "every checkpoint should be level 4")

    d = os.path.join(glbl, "dump")
    names = sorted(os.listdir(d))
    check(names == ["l4-30.h5", "l4-40.h5"], "keep_l4 = 2 should leave l4-30.h5 and l4-40.h5, found %s" % names)

    epochs = {}
    for cid in (30, 40):
        f = os.path.join(d, "l4-%d.h5" % cid)
        run([a.h5dump, f])  # the whole file must be readable
        check(h5_values(a.h5dump, f, "/ckpt_id", attr=True) == [cid], "ckpt_id attribute")
        check(h5_values(a.h5dump, f, "/nranks", attr=True) == [NP], "nranks attribute")
        check(h5_values(a.h5dump, f, "/crpm_format", attr=True) == [1], "crpm_format attribute")
        check(h5_string_attr(a.h5dump, f, "/job_name") == "dump", "job_name attribute")
        epochs[cid] = h5_values(a.h5dump, f, "/epoch", attr=True)[0]
        hdr = run([a.h5dump, "-H", f]).stdout
        for r in range(NP):
            g = "/rank_%d" % r
            check(h5_values(a.h5dump, f, g + "/rank", attr=True) == [r], "rank attribute of " + g)
            check(h5_values(a.h5dump, f, g + "/nregions", attr=True) == [5], "nregions of " + g)
            level, n, s = ck[(cid, r)]
            check(h5_values(a.h5dump, f, g + "/id_0") == [cid], "iteration counter of %s in l4-%d" % (g, cid))
            u = h5_values(a.h5dump, f, g + "/id_1")
            check(len(u) == n == N + 3 * r, "%s/id_1 has %d values, rank had %d" % (g, len(u), n))
            su = math.fsum(u)
            check(abs(su - s) <= 1e-12 * max(1.0, abs(s)), "%s/id_1 sums to %r, rank reported %r" % (g, su, s))
            st = h5_values(a.h5dump, f, g + "/id_2")
            check(len(st) == 4 and st[0] == cid, "%s/id_2 (int64 counters): %s" % (g, st))
            z = h5_values(a.h5dump, f, g + "/id_3")
            check(len(z) == 8 and all(abs(math.hypot(z[2 * k], z[2 * k + 1]) - 1) < 1e-9 for k in range(4)),
                  "%s/id_3 (complex phases) not of modulus 1: %s" % (g, z))
            part = run([a.h5dump, "-A", "0", "-d", g + "/id_4", f]).stdout
            check('OPAQUE_TAG "crpm type 100 (24 bytes)"' in part and "SIMPLE { ( 8 ) / ( 8 ) }" in part,
                  "%s/id_4 should be 8 opaque 24-byte records:\n%s" % (g, part))
            for i in range(5):
                raw = os.path.join(work, "raw.bin")
                run([a.h5dump, "-d", "%s/id_%d" % (g, i), "-b", "FILE", "-o", raw, f])
                with open(raw, "rb") as fh:
                    crc = zlib.crc32(fh.read())
                want = h5_values(a.h5dump, f, "%s/id_%d/crc32" % (g, i), attr=True)[0]
                check(crc == want, "%s/id_%d: crc32 attribute %08x, zlib over the data %08x" % (g, i, want, crc))
        # Native types of each dataset, in h5dump's header listing order.
        types = re.findall(r'DATASET "id_(\d)" \{\s*DATATYPE\s+(\S+)', hdr)
        want = {"0": "H5T_STD_I32LE", "1": "H5T_IEEE_F64LE", "2": "H5T_STD_I64LE", "3": "H5T_COMPOUND",
                "4": "H5T_OPAQUE"}
        check(len(types) == 5 * NP and all(t == want[i] for i, t in types), "dataset types: %s" % types)
        check(hdr.count('H5T_IEEE_F64LE "r"') == NP and hdr.count('H5T_IEEE_F64LE "i"') == NP,
              "complex as compound {r, i}")
    check(epochs[40] == epochs[30] + 1, "epochs %s should be consecutive" % epochs)


if __name__ == "__main__":
    main(body)
