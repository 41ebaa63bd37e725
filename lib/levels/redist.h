/* Redistribution of global datasets between two decompositions (restart on
 * another number of ranks, docs/reshape.md): the boxes an old run saved
 * (sources, each read by one rank of this job) are moved into the boxes
 * this run protects (destinations), over MPI, in bounded windows.
 *
 * Every rank passes the same source and destination lists.  Each source is
 * cut into windows of `win` elements of its C order; round k moves the k-th
 * window of every rank that reads sources: the reader reads it (through
 * read(), which checks it against its checksums), cuts it into the runs
 * that fall into each destination box and sends each owner its runs, in one
 * message per pair; owners copy the runs into place.  Both ends enumerate
 * the same runs in the same order, so only data crosses the network.  A
 * rank holds at most one window and what it sends of it, plus what it
 * receives in the round (a window from each reader whose source meets its
 * boxes): memory is bounded by the decomposition's degree times the window,
 * never by the size of a dataset. */
#ifndef CRPM_LEVELS_REDIST_H
#define CRPM_LEVELS_REDIST_H
#include <mpi.h>
#include <stdint.h>
#include "glayout.h"

typedef struct crpm_rd_box {
    int rank;        /* source: the rank that reads it; destination: the rank that owns it */
    int32_t gid;     /* dataset: sources meet only destinations of the same dataset */
    int nd;
    uint64_t off[CRPM_GLAYOUT_MAX_DIMS];
    uint64_t cnt[CRPM_GLAYOUT_MAX_DIMS];
    uint64_t esz;    /* bytes per element */
    uint64_t win;    /* sources: elements per window (windows start at multiples of it) */
    int handle;      /* source: for read(); destination: index into the owner's ptrs */
} crpm_rd_box;

/* Reads elements [e0, e1) (C order) of the caller's source `handle` into dst,
 * verified; returns CRPM_SUCCESS or an error with its message. */
typedef int (*crpm_rd_read_fn)(void *arg, int handle, uint64_t e0, uint64_t e1, void *dst);

/* Collective over comm.  ptrs[h]: memory of this rank's destination with
 * handle h.  *sent / *received add the bytes this rank sent to / received
 * from other ranks (may be NULL).  Agreed: every rank returns an error when
 * any failed. */
int crpm_redistribute(MPI_Comm comm, const crpm_rd_box *src, int nsrc, const crpm_rd_box *dst, int ndst,
                      void *const *ptrs, crpm_rd_read_fn read, void *arg, uint64_t *sent, uint64_t *received);

/* The elements of the intersection of box s with box d that lie in s's
 * C-order range [e0, e1), as runs contiguous in both: fn(arg, src element,
 * dst element (d's C order), count) in increasing source order.  Returns
 * the elements enumerated. */
typedef void (*crpm_rd_run_fn)(void *arg, uint64_t se, uint64_t de, uint64_t n);
uint64_t crpm_rd_runs(const crpm_rd_box *s, const crpm_rd_box *d, uint64_t e0, uint64_t e1, crpm_rd_run_fn fn,
                      void *arg);

#endif
