"""Shared helpers of the level-4 test scripts (run by CTest through
crpm_add_script_test, which exports CRPM_MPIEXEC, CRPM_MPIEXEC_FLAGS)."""
import argparse
import os
import re
import shutil
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
import crpmtest  # noqa: E402


Failure = crpmtest.Failure
check = crpmtest.check


def parse_args(need=("app",)):
    ap = argparse.ArgumentParser()
    ap.add_argument("--app", help="l4_app executable")
    ap.add_argument("--inspect", help="crpm-inspect executable")
    ap.add_argument("--export", help="crpm-export executable")
    ap.add_argument("--h5dump", default=shutil.which("h5dump"))
    ap.add_argument("--tmp", default=crpmtest.shm_base())
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    a = ap.parse_args()
    for n in need:
        if not getattr(a, n):
            ap.error("--%s is required for this test" % n)
    return a


class Completed:
    """What run returns: returncode, stdout and stderr (text)."""

    def __init__(self, r):
        self.returncode, self.stdout, self.stderr = r.rc, r.out, r.err


def run(cmd, env=None, timeout=60, expect=0):
    """Runs cmd; expect: exit code wanted (None = any, "nonzero")."""
    r = crpmtest.run_job(cmd, env=crpmtest.job_env(env), timeout=timeout, separate_stderr=True)
    if r.timed_out:
        raise Failure("timed out after %ds: %s" % (timeout, " ".join(cmd)))
    ok = (expect is None or (expect == "nonzero" and r.rc != 0) or r.rc == expect)
    if not ok:
        raise Failure("%s exited %d (wanted %s)\n--- stdout\n%s--- stderr\n%s" %
                      (" ".join(cmd), r.rc, expect, r.out[-4000:], r.err[-4000:]))
    return Completed(r)


def mpirun(np, args, **kw):
    return run(crpmtest.mpiexec(np) + list(args), **kw)


def results(out):
    return [l for l in out.splitlines() if l.startswith("RESULT ")]


def write_cfg(path, ckpt_dir, glbl_dir, job, keep_l4=2, **extra):
    lines = ["[basic]", "ckpt_dir = " + ckpt_dir, "glbl_dir = " + glbl_dir, "job_name = " + job,
             "keep_last_ckpt = 1", "keep_l4 = %d" % keep_l4]
    lines += ["%s = %s" % (k, v) for k, v in extra.items()]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def flip_bit(path, offset, mask=0x10):
    with open(path, "r+b") as f:
        f.seek(offset)
        b = f.read(1)
        check(len(b) == 1, "%s: offset %d beyond the end" % (path, offset))
        f.seek(offset)
        f.write(bytes([b[0] ^ mask]))


def h5_offset(h5dump, path, dset):
    """File offset of a contiguous dataset's data (h5dump -p)."""
    p = run([h5dump, "-p", "-H", "-d", dset, path])
    m = re.search(r"CONTIGUOUS\s+SIZE\s+(\d+)\s+OFFSET\s+(\d+)", p.stdout)
    check(m, "no contiguous layout for %s in %s:\n%s" % (dset, path, p.stdout))
    return int(m.group(2)), int(m.group(1))


_NUM = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|nan|inf)")


def h5_values(h5dump, path, obj, attr=False):
    """Numbers in the DATA block of a dataset (or attribute with attr=True)."""
    args = [h5dump, "-y", "-w", "0", "-m", "%.17g"]
    args += ["-a", obj] if attr else ["-A", "0", "-d", obj]
    p = run(args + [path])
    m = re.search(r"DATA \{(.*?)\n\s*\}\n", p.stdout, re.S)
    check(m, "no DATA block for %s in %s:\n%s" % (obj, path, p.stdout))
    return [float(x) if re.search(r"[.eEn]", x) else int(x) for x in _NUM.findall(m.group(1))]


def h5_string_attr(h5dump, path, obj):
    p = run([h5dump, "-y", "-a", obj, path])
    m = re.search(r'DATA \{\s*"(.*)"', p.stdout)
    check(m, "no string value for %s:\n%s" % (obj, p.stdout))
    return m.group(1)


def superblock(path):
    """Fields of a container's superblock (lib/format/format.h, little-endian)."""
    with open(path, "rb") as f:
        b = f.read(96)
    magic, ver, ssz, seg, blk, s0, s1, slot_size, data_off = struct.unpack_from("<8sIIQQQQQQ", b, 0)
    return {"magic": magic, "version": ver, "segment_size": seg, "block_size": blk,
            "slot_offset": (s0, s1), "slot_size": slot_size, "data_offset": data_off}


def main(body):
    """Runs body(args, workdir); removes the work dir when it passes."""
    a = parse_args()
    work = crpmtest.make_workdir(prefix="crpm-l4-%s-" % os.path.basename(sys.argv[0])[:-3], base=a.tmp)
    try:
        body(a, work)
    except Failure as e:
        print("FAIL: %s" % e)
        print("work directory kept: %s" % work)
        sys.exit(1)
    except crpmtest.Skipped:
        crpmtest.clean_workdir(work, keep=a.keep)
        raise
    print("PASS")
    crpmtest.clean_workdir(work, keep=a.keep)
