#!/usr/bin/python3
"""The Python side of the binding's overhead benchmark (run.py): what
bench_ckpt.c does, through the crpm package and NumPy: K float64 arrays of
M MiB in all per rank; N times the first double of every step-th 256-byte
block is written (the same values as the C program) and crpm.checkpoint is
timed around the call.

  mpirun -n NP python3 bench_ckpt.py --crpm cfg.ini [--mib M] [--arrays K]
                                     [--fraction F] [--iters N]

Prints "times <t1> <t2> ..." on rank 0 (per checkpoint, the slowest rank's
seconds)."""
import argparse
import time

import numpy as np
from mpi4py import MPI

import crpm


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--crpm", required=True)
    p.add_argument("--mib", type=float, default=64)
    p.add_argument("--arrays", type=int, default=8)
    p.add_argument("--fraction", type=float, default=0.1)
    p.add_argument("--iters", type=int, default=20)
    a = p.parse_args()
    comm = MPI.COMM_WORLD
    n = int(a.mib * 1048576.0 / 8.0 / a.arrays)
    step = int(round(32.0 / a.fraction))
    times = []
    with crpm.init(a.crpm, comm):
        arrs = [np.arange(n, dtype=np.float64) for _ in range(a.arrays)]
        for k, arr in enumerate(arrs):
            crpm.protect(k, arr)
        for i in range(a.iters):
            for k, arr in enumerate(arrs):
                arr[i % step::step] = float(1000 * i + k)
            comm.Barrier()
            t0 = time.perf_counter()
            crpm.checkpoint(i + 1, crpm.L1)
            dt = time.perf_counter() - t0
            times.append(comm.reduce(dt, op=MPI.MAX, root=0))
    if comm.rank == 0:
        print("times " + " ".join("%.9f" % t for t in times), flush=True)


if __name__ == "__main__":
    main()
