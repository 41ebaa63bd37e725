#!/usr/bin/python3
"""Global datasets and the persistent heap through the crpm package, one
phase per launch (driven by python_cases.py):

  gwrite DIR   2 ranks: a 6 x 10 dataset, 3 rows per rank, and a
               replicated counter; a level-1 checkpoint kept at finalize;
               heap_array without a heap is a MemoryError naming heap_size
  gread DIR    3 ranks: STATUS_RESHAPED, global_dims (6, 10), 2 rows per
               rank recovered with the values gwrite saved, the counter on
               every rank
  hwrite DIR   2 ranks with a heap: arrays of three dtypes and both orders
               in roots, a checkpoint, then scribbled and a fourth array
               allocated; recover() brings the checkpoint's arrays back
               through get_root; kept at finalize
  hread DIR    2 ranks, a new process: recover(), the roots' arrays with
               their dtypes, shapes, orders and values; heap_used; refusals
               (an ordinary ndarray to set_root or heap_free)

Prints "<phase>: ok" on rank 0 when every rank passed; exit status 0 only then.
"""
import os
import sys

import numpy as np
from mpi4py import MPI

import crpm

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
failures = []
ROWS, COLS = 6, 10


def check(cond, msg):
    if not cond:
        failures.append("rank %d: %s" % (rank, msg))


def expected(r0, r1):
    i, j = np.meshgrid(np.arange(r0, r1), np.arange(COLS), indexing="ij")
    return (i * COLS + j) + 0.25


def ini(d, heap):
    path = os.path.join(d, "gh%s.ini" % ("heap" if heap else ""))
    if rank == 0:
        with open(path, "w") as f:
            f.write("[basic]\nckpt_dir = %s\njob_name = %s\nkeep_last_ckpt = 1\nverbosity = 1\n"
                    % (os.path.join(d, "ckpt"), "pyheap" if heap else "pyglobal"))
            if heap:
                f.write("heap_size = 64M\n")
    comm.Barrier()
    return path


def rows(n):
    per = ROWS // n
    return rank * per, (rank + 1) * per


def gwrite(d):
    with crpm.init(ini(d, False)):
        check(crpm.status() == crpm.STATUS_FRESH, "status %d, expected fresh" % crpm.status())
        r0, r1 = rows(size)
        box = expected(r0, r1)
        counter = np.array([42], dtype=np.int64)
        crpm.define_global(0, (ROWS, COLS), np.float64, "field")
        crpm.protect(1, box)
        crpm.add_subset(0, 1, (r0, 0), (r1 - r0, COLS))
        crpm.protect_replicated(2, counter)
        check(crpm.global_dims(0) == (ROWS, COLS), "global_dims %s" % (crpm.global_dims(0),))
        # the detail is the call's prefix once and the whole cause
        for call, want in ((lambda: crpm.define_global(3, (4, -1), np.float64, "bad"),
                            "crpm_define_global(3): global dataset 3: dimension 1 is -1"),
                           (lambda: crpm.add_subset(9, 7, (0, 0), (1, 1)),
                            "crpm_add_subset(7): array 7: global dataset 9 is not defined (crpm_define_global first)")):
            try:
                call()
                check(False, "%r accepted" % want)
            except crpm.Error as e:
                check(e.detail == want, "Error.detail %r, expected %r" % (e.detail, want))
        try:
            crpm.heap_array(4)
            check(False, "heap_array without heap_size did not raise")
        except MemoryError as e:
            check("heap" in str(e), "MemoryError without the cause: %s" % e)
        crpm.checkpoint(1, crpm.L1)


def gread(d):
    with crpm.init(ini(d, False)):
        check(crpm.status() == crpm.STATUS_RESHAPED, "status %d, expected STATUS_RESHAPED" % crpm.status())
        dims = crpm.global_dims(0)
        check(dims == (ROWS, COLS), "saved dims %s" % (dims,))
        r0, r1 = rows(size)
        box = np.zeros((r1 - r0, COLS))
        counter = np.zeros(1, dtype=np.int64)
        crpm.define_global(0, dims, np.float64, "field")
        crpm.protect(1, box)
        crpm.add_subset(0, 1, (r0, 0), (r1 - r0, COLS))
        crpm.protect_replicated(2, counter)
        crpm.recover()
        check(np.array_equal(box, expected(r0, r1)), "rows %d..%d recovered wrong:\n%s" % (r0, r1, box))
        check(counter[0] == 42, "counter %d" % counter[0])


def make_heap_arrays():
    a = crpm.heap_array((5, 7), np.int32)
    a[:] = np.arange(35, dtype=np.int32).reshape(5, 7) + 1000 * rank
    b = crpm.heap_array(3, np.complex128)
    b[:] = [1 + 2j, -3.5j, rank]
    f = crpm.heap_array((4, 3), np.float32, order="F")
    f[:] = np.arange(12, dtype=np.float32).reshape(4, 3) * (rank + 1)
    return a, b, f


def check_roots(what):
    want = [x.copy() for x in make_expected()]
    got = [crpm.get_root(i) for i in range(3)]
    for i, (w, g) in enumerate(zip(want, got)):
        check(g is not None, "%s: root %d empty" % (what, i))
        if g is None:
            continue
        check(g.dtype == w.dtype and g.shape == w.shape, "%s: root %d is %s %s, expected %s %s"
              % (what, i, g.dtype, g.shape, w.dtype, w.shape))
        check(np.array_equal(g, w), "%s: root %d values %s, expected %s" % (what, i, g, w))
    check(got[2] is None or got[2].flags.f_contiguous and not got[2].flags.c_contiguous,
          "%s: root 2 lost its Fortran order" % what)
    check(crpm.get_root(3) is None, "%s: root 3 set" % what)


def make_expected():
    a = np.arange(35, dtype=np.int32).reshape(5, 7) + 1000 * rank
    b = np.array([1 + 2j, -3.5j, rank], dtype=np.complex128)
    f = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(4, 3) * (rank + 1))
    return a, b, f


def hwrite(d):
    with crpm.init(ini(d, True)):
        check(crpm.status() == crpm.STATUS_FRESH, "status %d, expected fresh" % crpm.status())
        arrays = make_heap_arrays()
        for i, x in enumerate(arrays):
            crpm.set_root(i, x)
        crpm.checkpoint(1, crpm.L1)
        arrays[0][:] = -1
        extra = crpm.heap_array(100, np.float64)
        crpm.set_root(3, extra)
        crpm.recover()
        check_roots("after recover()")
        crpm.checkpoint(2, crpm.L1)


def hread(d):
    with crpm.init(ini(d, True)):
        check(crpm.status() > 0, "status %d, expected a restart" % crpm.status())
        crpm.recover()
        check_roots("after a restart")
        check(crpm.heap_used() > 0, "heap_used 0")
        for fn in (crpm.heap_free, lambda x: crpm.set_root(5, x)):
            try:
                fn(np.zeros(64))
                check(False, "an ordinary ndarray was taken for a heap array")
            except ValueError:
                pass
        before = crpm.heap_used()
        x = crpm.heap_array(1000, np.float64)
        check(crpm.heap_used() >= before + 8000, "heap_used did not grow: %d -> %d" % (before, crpm.heap_used()))
        crpm.heap_free(x)
        check(crpm.heap_used() == before, "heap_free did not return the block: %d -> %d" % (before, crpm.heap_used()))
        crpm.set_root(0, None)
        check(crpm.get_root(0) is None, "set_root(0, None) did not clear it")


PHASES = {"gwrite": gwrite, "gread": gread, "hwrite": hwrite, "hread": hread}


def main():
    phase, d = sys.argv[1], sys.argv[2]
    try:
        PHASES[phase](d)
    except Exception as e:  # noqa: BLE001 - reported like a failed check
        failures.append("rank %d: %s: %s" % (rank, type(e).__name__, e))
    every = comm.gather(failures, root=0)
    if rank == 0:
        bad = [f for fs in every for f in fs]
        print("%s: ok" % phase if not bad else "%s: FAILED\n%s" % (phase, "\n".join(bad)), flush=True)
    return 0 if comm.bcast(rank == 0 and not bad if rank == 0 else None, root=0) else 1


if __name__ == "__main__":
    sys.exit(main())
