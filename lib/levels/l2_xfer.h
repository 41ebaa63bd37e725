/* Level 2's transport: byte ranges of a container file moved over MPI from
 * one rank's mapping straight into another's, and whole-file syncs that send
 * only the pieces whose fingerprints differ.  Senders post everything
 * non-blocking before anyone blocks in a receive, so any pattern of pairs
 * (a ring, two nodes swapping, several owners per holder) cannot deadlock. */
#ifndef CRPM_LEVELS_L2_XFER_H
#define CRPM_LEVELS_L2_XFER_H
#include <mpi.h>
#include <stdint.h>
#include "container.h"

/* Non-blocking sends in flight, and what they need until they complete. */
typedef struct crpm_sendq {
    MPI_Request *req;
    int nreq;
    size_t cap;
    void **bufs;               /* freed after the wait */
    int nbufs;
    size_t capbufs;
    uint64_t bytes;            /* payload posted */
    int err;                   /* first MPI error while posting */
} crpm_sendq;

/* buf (malloc'd) is freed by crpm_sendq_wait, after the sends that read it. */
void crpm_sendq_keep(crpm_sendq *q, void *buf);
/* Posts a copy of n bytes (small control data). */
void crpm_sendq_post(crpm_sendq *q, MPI_Comm comm, int peer, int tag, const void *p, size_t n);
/* Posts ranges (offsets into base) as they are now in memory: a count, the
 * range list and the bytes, in messages of at most 64 MiB.  The memory must
 * not change until crpm_sendq_wait. */
void crpm_sendq_ranges(crpm_sendq *q, MPI_Comm comm, int peer, int tag, const char *base, const crpm_wrange *v,
                       size_t n);
/* Waits for every posted send and frees what they needed. */
int crpm_sendq_wait(crpm_sendq *q, const char *what);

/* Receives what crpm_sendq_ranges sent, into m's mapping: the ranges are
 * reserved (no SIGBUS on a full file system), received in place and flushed
 * (durable at the next drain).  *bytes adds the payload.  m without a
 * mapping (the caller failed before): the data is received and dropped,
 * and the caller's error message is left as it is. */
int crpm_recv_ranges(MPI_Comm comm, int peer, int tag, crpm_media *m, uint64_t *bytes);
int crpm_recv_bytes(MPI_Comm comm, int peer, int tag, void *p, size_t n, const char *what);

/* A whole-file sync: the destination has `dst` (NULL: nothing usable) and
 * sends its fingerprints; the source sends the pieces that differ, the file
 * size and its commit word.  The destination's commit word is cleared first
 * and written last, so an interrupted sync leaves a file that does not open
 * (never a mix that does); a destination that must shrink or does not exist
 * is written under a temporary name and renamed into place. */
typedef struct crpm_sync_dst {
    int peer;
    const char *path;          /* the file to bring up to date */
    crpm_media *have;          /* its open mapping (NULL: missing or unusable) */
    const crpm_backend *backend;
    int full;                  /* send everything, fingerprints or not */
} crpm_sync_dst;

typedef struct crpm_sync_src {
    int peer;
    crpm_media *m;             /* the file to copy, unchanged meanwhile */
    const char *path;          /* its name (holes are found there), or NULL */
    int fail;                  /* nonzero: the source cannot serve (e.g. it failed its data check):
                                  this error goes to the destination instead of data, which is
                                  left as it is */
} crpm_sync_src;

/* Collective over the pairs: every rank passes the syncs it is the source
 * and the destination of.  A destination whose `have` mapping was rewritten
 * in place must be reopened by the caller; one written anew is at path. */
int crpm_sync_files(MPI_Comm comm, const crpm_sync_src *src, int nsrc, const crpm_sync_dst *dst, int ndst,
                    uint64_t *sent, int *rewritten);

#endif
