#!/usr/bin/python3
"""2-D heat diffusion (Jacobi iteration) in NumPy with libcrpm checkpoints.

The Python twin of apps/examples/heat/heat.c: the same grid split into
blocks of rows (one per rank, each with a ghost row above and below), the
same arithmetic in the same order, the same output.  Both print the same
residuals and checksum for the same arguments, and a run restarted from a
checkpoint prints exactly what a failure-free run prints.

  mpirun -n 4 python3 heat.py [--nx N] [--ny N] [--iters N] [--print-every N]
                              [--delay-us N] [--crpm cfg.ini [--ckpt-every N [--check-exit]]]

With --crpm and --ckpt-every N it calls crpm.checkpoint every N iterations;
with --crpm alone it calls crpm.snapshot() every iteration and the
configuration's ckpt_interval / ckpt_interval_s decide.  When the job is
asked to stop (end of the allocation, exit_signal, a HALT file) it stops
after the final checkpoint: snapshot() returns SNAP_EXIT, or, with
--ckpt-every and --check-exit, crpm.should_exit() every iteration.
"""
import argparse
import contextlib
import sys
import time

import numpy as np
from mpi4py import MPI

import crpm

FNV_SEED = 0xcbf29ce484222325
FNV_PRIME = 0x100000001b3
MASK = (1 << 64) - 1
COLLECTIVE = {"crpm_init", "crpm_recover", "crpm_checkpoint", "crpm_snapshot", "crpm_should_exit", "crpm_finalize"}

comm = MPI.COMM_WORLD
rank, nranks = comm.Get_rank(), comm.Get_size()


def fnv1a(h, data):
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK
    return h


def restart_level(st):
    return {crpm.STATUS_L4: 4, crpm.STATUS_L3: 3, crpm.STATUS_L2: 2}.get(st, 1)


def say(text):
    if rank == 0:
        print(text, flush=True)


def parse():
    p = argparse.ArgumentParser(description="2-D heat diffusion with libcrpm checkpoints")
    p.add_argument("--nx", type=int, default=256)
    p.add_argument("--ny", type=int, default=256)
    p.add_argument("--iters", type=int, default=1000)
    p.add_argument("--print-every", type=int, default=-1)
    p.add_argument("--delay-us", type=int, default=0, help="sleep per iteration (a longer computation)")
    p.add_argument("--crpm", metavar="CFG")
    p.add_argument("--ckpt-every", type=int, default=0)
    p.add_argument("--check-exit", action="store_true")
    a = p.parse_args()
    if a.nx < 3 or a.ny < nranks or not 0 <= a.iters < 2 ** 31 or a.ckpt_every < 0 or a.delay_us < 0:
        if rank == 0:
            print("heat: need nx >= 3, ny >= number of ranks, 0 <= iters < 2^31", file=sys.stderr)
        sys.exit(2)
    if a.print_every <= 0:
        a.print_every = a.iters // 10 if a.iters >= 10 else 1
    return a


def checksum(u, rows):
    """Rank 0 prints the FNV-1a digest of every rank's rows and their sum,
    combined in rank order exactly as heat.c does."""
    inner = u[1:rows + 1]
    h = fnv1a(FNV_SEED, inner.tobytes())
    flat = inner.ravel()
    s = float(np.cumsum(flat)[-1]) if flat.size else 0.0  # sequential, as C's loop
    hs = comm.gather(h, root=0)
    ss = comm.gather(s, root=0)
    if rank == 0:
        total_h, total = FNV_SEED, 0.0
        for r in range(nranks):
            total_h = fnv1a(total_h, hs[r].to_bytes(8, sys.byteorder))
            total += ss[r]
        print("checksum %016x sum %.17g" % (total_h, total), flush=True)


def run(a):
    # Leaving the block finalizes libcrpm (not when an exception leaves it:
    # the checkpoints then stay for a relaunch).
    with crpm.init(a.crpm, comm) if a.crpm else contextlib.nullcontext():
        compute(a)


def compute(a):
    nx, ny = a.nx, a.ny
    rows = ny // nranks + (rank < ny % nranks)
    row0 = rank * (ny // nranks) + (rank if rank < ny % nranks else ny % nranks)
    u = np.zeros((rows + 2, nx))
    # Fixed edges: top 100, bottom 25, left 50 (right stays 0).
    gr = row0 + np.arange(rows + 2) - 1
    u[:, 0] = 50.0
    u[gr <= 0, :] = 100.0
    u[gr >= ny - 1, :] = 25.0
    v = u.copy()
    it = np.zeros(1, dtype=np.int32)  # the iteration counter, saved with the grid

    use = a.crpm is not None
    if use:
        crpm.protect(0, it)
        crpm.protect(1, u)
        st = crpm.status()
        if st > 0 and a.ckpt_every > 0:
            crpm.recover()
            say("heat: restarted from iteration %d (level %d)" % (it[0], restart_level(st)))
    say("heat: %d x %d grid, %d iterations, %d ranks" % (ny, nx, a.iters, nranks))

    up = rank - 1 if rank > 0 else MPI.PROC_NULL
    down = rank + 1 if rank < nranks - 1 else MPI.PROC_NULL
    # Interior rows: global rows 1 .. ny-2.
    lo = 2 if row0 == 0 else 1
    hi = rows - 1 if row0 + rows == ny else rows
    start, stop = int(it[0]), False
    while True:
        exit_now = False
        if use and a.ckpt_every > 0 and a.check_exit and it[0] < a.iters:
            exit_now = crpm.should_exit()
        if use and a.ckpt_every > 0 and it[0] > start and (it[0] % a.ckpt_every == 0 or exit_now):
            crpm.protect(1, u)
            crpm.checkpoint(int(it[0]), crpm.L1)
        elif use and a.ckpt_every == 0:
            crpm.protect(1, u)
            s = crpm.snapshot()
            if s == crpm.SNAP_RECOVERED:
                say("heat: restarted from iteration %d (level %d)" % (it[0], restart_level(crpm.status())))
            exit_now = s == crpm.SNAP_EXIT
        if exit_now:
            lo_it = comm.allreduce(int(it[0]), op=MPI.MIN)
            hi_it = comm.allreduce(int(it[0]), op=MPI.MAX)
            say("heat: stopped at iteration %d on every rank; a relaunch resumes" % lo_it if lo_it == hi_it else
                "heat: ranks stopped at different iterations %d..%d" % (lo_it, hi_it))
            stop = True
            break
        if it[0] >= a.iters:
            break

        comm.Sendrecv(u[1], dest=up, sendtag=0, recvbuf=u[rows + 1], source=down, recvtag=0)
        comm.Sendrecv(u[rows], dest=down, sendtag=1, recvbuf=u[0], source=up, recvtag=1)
        diff = 0.0
        if lo <= hi:
            new = 0.25 * (u[lo - 1:hi, 1:-1] + u[lo + 1:hi + 2, 1:-1] + u[lo:hi + 1, :-2] + u[lo:hi + 1, 2:])
            diff = float(np.abs(new - u[lo:hi + 1, 1:-1]).max())
            v[lo:hi + 1, 1:-1] = new
        u, v = v, u
        it[0] += 1
        if a.delay_us:
            time.sleep(a.delay_us * 1e-6)
        if it[0] % a.print_every == 0:
            gdiff = comm.allreduce(diff, op=MPI.MAX)  # a max is exact in any order
            say("iter %d residual %.17g" % (it[0], gdiff))

    if not stop:
        checksum(u, rows)
    if use:
        tot = crpm.stats().total
        say("heat: rank 0 took %d checkpoints in this run: %.3f s, %.1f MiB written" %
            (tot.checkpoints, tot.seconds, tot.bytes_written / 1048576.0))


def main():
    a = parse()
    try:
        run(a)
    except crpm.Error as e:
        print("heat rank %d: %s" % (rank, e), file=sys.stderr, flush=True)
        # The library agrees on failures of collective calls, so every rank
        # is here; a local failure must take the job down.
        if e.function not in COLLECTIVE:
            comm.Abort(1)
        sys.exit(1)


if __name__ == "__main__":
    main()
