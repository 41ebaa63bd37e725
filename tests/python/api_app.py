#!/usr/bin/python3
"""The crpm package on several ranks, one phase per launch (driven by
python_cases.py):

  write    protects arrays of many dtypes and shapes (C and Fortran order,
           0-d, empty, views), checkpoints, scribbles, recovers in place and
           compares bytes; checkpoints final contents and finalizes with
           keep_last_ckpt = 1
  restart  a new process: status > 0, protects zeroed arrays of the same
           shapes, recovers, compares with what write saved (per rank);
           stored_size and recover_var; finalize removes the checkpoints
  errors   every family of crpm.Error with its code, name, function and
           message (ERR_REMOTE on the ranks that did not fail), ValueError
           for non-contiguous and read-only arrays, TypeError for object
           arrays and non-arrays, the kept-alive arrays, the context
           manager (finalizes on a normal exit only)

Prints "<phase>: ok" on rank 0 when every rank passed, else the failures;
exit status 0 only then.
"""
import gc
import os
import sys
import weakref

import numpy as np
from mpi4py import MPI

import crpm

comm = MPI.COMM_WORLD
rank = comm.Get_rank()
failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)


def raises(exc, fn, *args, **kw):
    """The exception fn(*args) raised (checked to be an exc), or None."""
    try:
        fn(*args, **kw)
    except exc as e:
        return e
    except Exception as e:  # noqa: BLE001 - any other is a failure to report
        failures.append("%s%r raised %s: %s, expected %s" % (fn.__name__, args, type(e).__name__, e, exc.__name__))
        return None
    failures.append("%s%r did not raise %s" % (fn.__name__, args, exc.__name__))
    return None


def ini(path, ckpt_dir, keep):
    with open(path, "w") as f:
        f.write("[basic]\nckpt_dir = %s\njob_name = pyapi\nkeep_last_ckpt = %d\nverbosity = 0\n" % (ckpt_dir, keep))
    return path


# ---- the arrays ----------------------------------------------------------------

# (dtype, shape, order); order "view" is a contiguous slice of a larger array,
# "T" the transpose of a C-order array (Fortran-contiguous).
SPECS = [
    (np.bool_, (33,), "C"), (np.int8, (5, 7), "C"), (np.int16, (4, 3, 2), "F"), (np.int32, (1000,), "C"),
    (np.int64, (), "C"), (np.uint8, (0,), "C"), (np.uint16, (9, 9), "C"), (np.uint32, (31,), "C"),
    (np.uint64, (6, 5), "T"), (np.float16, (12,), "C"), (np.float32, (20, 30), "F"), (np.float64, (300000,), "C"),
    (np.longdouble, (7,), "C"), (np.complex64, (3, 3), "C"), (np.complex128, (4, 2), "F"),
    (np.clongdouble, (2,), "C"), ("datetime64[ns]", (5,), "C"), ("S7", (4,), "C"),
    ([("a", "<i4"), ("b", "<f8"), ("c", "S3")], (10,), "C"), (">f8", (8,), "C"), (np.float64, (50,), "view"),
]


def make(i, dt, shape, order):
    dt = np.dtype(dt)
    if order == "view":
        base = np.zeros(shape[0] + 20, dtype=dt)
        return base[10:10 + shape[0]]
    if order == "T":
        return np.zeros(shape[::-1], dtype=dt).T
    return np.zeros(shape, dtype=dt, order=order)


def fill(a, seed):
    """Random bytes in a's memory, the same for the same seed, whatever the
    dtype (a same-dtype copy moves bytes, NaN payloads included)."""
    raw = np.random.default_rng(seed).integers(0, 256, size=a.nbytes, dtype=np.uint8).tobytes()
    order = "C" if a.flags.c_contiguous else "F"
    np.copyto(a, np.frombuffer(raw, dtype=a.dtype).reshape(a.shape, order=order))


def content(a):
    return a.tobytes(order="A")


def arrays():
    out = []
    for i, (dt, shape, order) in enumerate(SPECS):
        a = make(i, dt, shape, order)
        assert a.flags.c_contiguous or a.flags.f_contiguous
        out.append(a)
    return out


def seed(i, gen):
    return 1000 * rank + 10 * i + gen


# ---- phases ----------------------------------------------------------------------

# dtype -> (C type code, element size): the C API's type where one has the
# same meaning and size, an opaque record otherwise.
TYPES = [(np.bool_, "TC_LOGICAL", 1), (np.int8, "TC_INT8", 1), (np.int16, "TC_INT16", 2), (np.int32, "TC_INT32", 4),
         (np.int64, "TC_INT64", 8), (np.uint8, "TC_BYTE", 1), (np.uint16, "TYPE_USER", 2),
         (np.uint32, "TC_UINT", 4), (np.uint64, "TC_ULONG", 8), (np.float16, "TYPE_USER", 2),
         (np.float32, "TC_FLOAT", 4), (np.float64, "TC_DOUBLE", 8), (np.complex64, "TC_COMPLEX_FLOAT", 8),
         (np.complex128, "TC_COMPLEX_DOUBLE", 16), (">f8", "TYPE_USER", 8), ("S7", "TYPE_USER", 7),
         ([("a", "<i4"), ("b", "<f8")], "TYPE_USER", 12), ("datetime64[s]", "TYPE_USER", 8)]


def phase_write(cfg):
    for dt, code, size in TYPES:
        t = crpm._types.crpm_type(dt)
        check((t.code, t.size) == (getattr(crpm._consts, code), size),
              "dtype %s: type (%d, %d), expected %s of %d bytes" % (np.dtype(dt), t.code, t.size, code, size))
    t = crpm._types.crpm_type(np.longdouble)
    check(t.code == crpm._consts.TC_LDOUBLE and t.size == np.dtype(np.longdouble).itemsize, "longdouble")
    crpm.init(cfg, comm)
    arrs = arrays()
    for i, a in enumerate(arrs):
        fill(a, seed(i, 1))
        crpm.protect(i, a)
        check(crpm.protected(i) is a, "protected(%d) is not the array" % i)
    check(crpm.status() == crpm.STATUS_FRESH, "status %d on a fresh start" % crpm.status())
    saved = [content(a) for a in arrs]
    crpm.checkpoint(1, crpm.L1)
    st = crpm.stats()
    total = sum(a.nbytes for a in arrs)
    check(st.last.protected_bytes == total and st.total.checkpoints == 1,
          "stats: %s, expected %d protected bytes" % (st.last, total))
    v = crpm.version()
    vs = crpm._lib.lib.crpm_version(None, None, None).decode()
    check(len(v) == 3 and all(isinstance(x, int) for x in v) and "%d.%d.%d" % v == vs,
          "version() %s, libcrpm's string %s" % (v, vs))
    for i, a in enumerate(arrs):
        fill(a, seed(i, 2))  # scribble
    crpm.recover()
    for i, a in enumerate(arrs):
        check(content(a) == saved[i], "array %d (%s %s) not restored in place" % (i, a.dtype, a.shape))
    for i, a in enumerate(arrs):
        fill(a, seed(i, 3))
    crpm.checkpoint(2, crpm.L1)
    crpm.finalize()
    check(not crpm.is_initialized() and crpm.protected(0) is None, "finalize did not release the arrays")


def phase_restart(cfg):
    crpm.init(cfg, comm)
    arrs = arrays()
    for i, a in enumerate(arrs):
        crpm.protect(i, a)
    check(crpm.status() == crpm.STATUS_L1, "status %d after a restart, expected STATUS_L1" % crpm.status())
    crpm.recover()
    for i, a in enumerate(arrs):
        want = make(i, *SPECS[i])
        fill(want, seed(i, 3))
        check(content(a) == content(want), "array %d (%s %s) differs after the restart" % (i, a.dtype, a.shape))
    big = 11  # the 300000 float64
    check(crpm.stored_size(big) == arrs[big].nbytes, "stored_size %d" % crpm.stored_size(big))
    arrs[big][...] = 0
    crpm.recover_var(big)
    want = make(big, *SPECS[big])
    fill(want, seed(big, 3))
    check(content(arrs[big]) == content(want), "recover_var did not restore array %d" % big)
    crpm.finalize()


def family(e, cls, code, function):
    if e is None:
        return
    check(type(e) is cls, "%s raised %s, expected %s" % (function, type(e).__name__, cls.__name__))
    check(isinstance(e, crpm.Error), "%s is not a crpm.Error" % type(e).__name__)
    check(e.code == code and e.name == "CRPM_" + [k for k, v in vars(crpm).items()
                                                    if k.startswith("ERR_") and v == code][0],
          "code %s name %s, expected %d" % (e.code, e.name, code))
    check(e.function == function, "function %r, expected %r" % (e.function, function))
    check(e.detail and e.detail in str(e) and e.reason in str(e), "message %r lacks the details" % str(e))


def phase_errors(cfg, workdir):
    a = np.zeros(10)
    # Before init.
    family(raises(crpm.UsageError, crpm.protect, 0, a), crpm.UsageError, crpm.ERR_STATE, "crpm_protect")
    family(raises(crpm.UsageError, crpm.status), crpm.UsageError, crpm.ERR_STATE, "crpm_status")
    # Configuration.
    missing = os.path.join(workdir, "no-such.ini")
    e = raises(crpm.ConfigError, crpm.init, missing, comm)
    family(e, crpm.ConfigError, crpm.ERR_CONFIG, "crpm_init")
    check(e is None or missing in e.detail, "the message does not name the file: %s" % e)
    bad = os.path.join(workdir, "bad.ini")
    if rank == 0:
        with open(bad, "w") as f:
            f.write("[basic]\nckpt_dir = /x\nckpt_interval = soon\n")
    comm.Barrier()
    e = raises(crpm.ConfigError, crpm.init, bad, comm)
    check(e is None or "line 3" in e.detail, "no line number: %s" % e)
    raises(TypeError, crpm.init, cfg, "MPI_COMM_WORLD")
    family(raises(crpm.UsageError, crpm.init, cfg, MPI.COMM_NULL), crpm.UsageError, crpm.ERR_INVAL, "crpm_init")
    check(not crpm.is_initialized(), "initialized after failures")

    with crpm.init(cfg, comm):
        family(raises(crpm.UsageError, crpm.init, cfg, comm), crpm.UsageError, crpm.ERR_STATE, "crpm_init")
        # Arrays refused before the C library sees them.
        m = np.zeros((6, 8))
        for view, what in ((m[:, ::2], "column stride"), (m[::2], "row stride"), (m.T[1:4, 1:3], "window"),
                           (a[::3], "a[::3]")):
            e = raises(ValueError, crpm.protect, 1, view)
            check(e is None or "not contiguous" in str(e), "%s: %s" % (what, e))
        ro = np.zeros(4)
        ro.setflags(write=False)
        e = raises(ValueError, crpm.protect, 1, ro)
        check(e is None or "read-only" in str(e), "read-only: %s" % e)
        e = raises(ValueError, crpm.protect, 1, np.frombuffer(b"12345678", dtype=np.uint8))
        raises(TypeError, crpm.protect, 1, np.array([object(), 1], dtype=object))
        raises(TypeError, crpm.protect, 1, [1.0, 2.0])
        raises(TypeError, crpm.protect, "1", a)
        raises(OverflowError, crpm.protect, 2 ** 40, a)
        check(crpm.protected(1) is None, "a refused array was kept")
        family(raises(crpm.UsageError, crpm.set_name, 0, "x" * crpm.NAME_MAX), crpm.UsageError, crpm.ERR_INVAL,
               "crpm_set_name")
        # Collective errors: the same on every rank.
        family(raises(crpm.CheckpointError, crpm.recover), crpm.CheckpointError, crpm.ERR_NOCKPT, "crpm_recover")
        family(raises(crpm.UsageError, crpm.checkpoint, 1, 9), crpm.UsageError, crpm.ERR_INVAL, "crpm_checkpoint")
        e = raises(crpm.UsageError, crpm.checkpoint, 1 + rank, crpm.L1)
        check(e is None or "different ids" in e.detail, "ids differ: %s" % e)
        # One rank fails, the other gets ERR_REMOTE quoting it.
        crpm.protect(0, a)
        crpm.checkpoint(5, crpm.L1)
        if rank == 1:
            crpm.protect(0, np.zeros(11))
        if rank == 1:
            family(raises(crpm.CheckpointError, crpm.recover), crpm.CheckpointError, crpm.ERR_MISMATCH,
                   "crpm_recover")
        else:
            e = raises(crpm.CommunicationError, crpm.recover)
            family(e, crpm.CommunicationError, crpm.ERR_REMOTE, "crpm_recover")
            check(e is None or "rank 1" in e.detail, "ERR_REMOTE does not name rank 1: %s" % e)
        crpm.protect(0, a)
        # An unknown code raises the base class.
        e = raises(crpm.Error, crpm._errors.check, -999, "crpm_future")
        check(e is None or type(e) is crpm.Error, "code -999 raised %s" % type(e).__name__)
        check(crpm.strerror(crpm.ERR_IO) and crpm.strerror(crpm.ERR_IO) != crpm.strerror(crpm.ERR_INVAL),
              "strerror texts")

        # Protected arrays stay alive until replaced or finalized.
        def protect_temporary(i):
            t = np.arange(100.0)
            crpm.protect(i, t)
            return weakref.ref(t)

        r3, r4 = protect_temporary(3), protect_temporary(4)
        gc.collect()
        check(r3() is not None and r4() is not None, "a protected temporary was freed")
        raises(ValueError, r3().resize, (200,))  # numpy refuses: the package holds a reference
        crpm.protect(3, np.zeros(5))
        gc.collect()
        check(r3() is None, "the array replaced under id 3 is still held")
        crpm.checkpoint(6, crpm.L1)
    check(not crpm.is_initialized(), "leaving the with block did not finalize")
    gc.collect()
    check(r4() is None, "finalize did not release the protected arrays")

    # Leaving by an exception does not finalize (the checkpoints stay).
    class Boom(Exception):
        pass

    try:
        with crpm.init(cfg, comm):
            raise Boom()
    except Boom:
        pass
    check(crpm.is_initialized(), "an exception leaving the block finalized the library")
    crpm.finalize()


def main():
    phase, workdir = sys.argv[1], sys.argv[2]
    ckpt = os.path.join(workdir, "ckpt")
    cfg = ini(os.path.join(workdir, "%s-%d.ini" % (phase, rank)), ckpt, keep=1 if phase == "write" else 0)
    try:
        {"write": lambda: phase_write(cfg), "restart": lambda: phase_restart(cfg),
         "errors": lambda: phase_errors(cfg, workdir)}[phase]()
    except crpm.Error as e:
        failures.append("unexpected %s: %s" % (type(e).__name__, e))
    every = comm.gather(failures, root=0)
    if rank == 0:
        bad = ["rank %d: %s" % (r, f) for r, fs in enumerate(every) for f in fs]
        for b in bad:
            print("FAIL " + b)
        print("%s: %s" % (phase, "ok" if not bad else "%d failures" % len(bad)), flush=True)
        status = 1 if bad else 0
    else:
        status = 0
    status = comm.allreduce(status, op=MPI.MAX)
    sys.exit(status)


if __name__ == "__main__":
    main()
