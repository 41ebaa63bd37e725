/* The device operations the CUDA memory kind (devkind.c) is written on.
 *
 * Everything the kind does on a GPU goes through one table: memory, pinned
 * host memory, streams, asynchronous copies and the three kernels of a
 * checkpoint window (compare, scan, gather) plus the bitmap move used when a
 * staged window is given up.  Two tables implement it:
 *
 *   crpm_devops_cuda   the CUDA runtime and the kernels (devops_cuda.cu),
 *                      only in builds with CRPM_CUDA
 *   crpm_devops_mock   host memory standing for device memory, with the
 *                      same semantics, and work queued per stream until it is
 *                      waited for: test code (tests/common/devops_mock.c,
 *                      never in a shipped libcrpm); CI runs the kind's whole
 *                      host-side logic through it
 *
 * Semantics every table keeps (the kind relies on nothing else):
 *  - calls that take a stream only queue work; it runs in stream order and
 *    is complete after wait(s) returned 0 (or done(s) returned 1); host
 *    memory an operation reads or writes must stay untouched until then;
 *  - different streams are unordered with each other;
 *  - errors are negative CRPM_ERR_* codes after crpm_error(); an error of
 *    queued work is returned by the next wait/done of that stream.
 *
 * Windows: the kind compares a window [off, off + len) of an array (off a
 * multiple of blk) against its reference (the committed state's copy, or
 * fingerprints) and packs the changed blocks; bit i of a window bitmap is
 * the block at off + i * blk; absolute bitmaps (force, dchg) index blocks of
 * the whole array. */
#ifndef CRPM_DEVICE_DEVOPS_H
#define CRPM_DEVICE_DEVOPS_H
#include <stdint.h>

typedef struct crpm_dstream crpm_dstream;

enum crpm_dmem { CRPM_DMEM_HOST = 0, CRPM_DMEM_DEVICE = 1, CRPM_DMEM_MANAGED = 2 };
enum crpm_ddir { CRPM_D2H = 1, CRPM_H2D, CRPM_D2D };
enum crpm_dref { CRPM_DREF_COPY = 1, CRPM_DREF_FP = 2 }; /* what a reference holds */

/* Fingerprints: 16 bytes per block, two values modulo 2^61 - 1 (fingerprint.h). */
#define CRPM_FP_BYTES 16u

typedef struct crpm_dwindow {
    const void *live;    /* the array (device or managed memory) */
    void *ref;           /* COPY: the array's reference copy (same size); FP: 16 B per block of the array */
    const uint64_t *keys; /* FP: powers of the two keys, 2 x (blk / 4) values (device) */
    uint64_t off, len;   /* the window, bytes of the array */
    uint64_t blk;        /* block size, a power of two >= 16 */
    int kind;            /* enum crpm_dref */
    int all;             /* report every block */
    uint64_t *force;     /* absolute: blocks to report whatever they hold; read and cleared */
    uint64_t *dchg;      /* absolute: blocks reported this checkpoint (or-ed in) */
    uint64_t *meta;      /* meta[0]: number of blocks reported; meta[1 ..]: the window bitmap (zeroed first) */
    uint64_t *pos;       /* scratch: blocks reported before each bitmap word */
    void *pack;          /* reported blocks, blk bytes each, in bitmap order */
} crpm_dwindow;

typedef struct crpm_devops {
    const char *name;
    /* What p points to: enum crpm_dmem and the device that holds it.  Memory
     * the runtime does not know is host memory; a runtime that cannot tell
     * (no driver loaded in this process, or a driver without a usable GPU)
     * says host and returns 1, without starting one. */
    int (*query)(const void *p, int *type, int *dev);
    /* Makes dev this thread's current device (for alloc and streams) until
     * the matching unuse(), which makes the device current before it current
     * again: the application's current device is left as it was.  Every
     * use() that returned 0 is paired with one unuse(); they nest. */
    int (*use)(int dev);
    void (*unuse)(void);
    int (*alloc)(void **p, uint64_t n);
    void (*free)(void *p);
    int (*host_alloc)(void **p, uint64_t n); /* pinned */
    void (*host_free)(void *p);
    int (*stream_new)(crpm_dstream **s);
    void (*stream_free)(crpm_dstream *s); /* waits for its work first */
    int (*copy)(crpm_dstream *s, void *dst, const void *src, uint64_t n, int dir);
    int (*zero)(crpm_dstream *s, void *p, uint64_t n);
    int (*wait)(crpm_dstream *s);
    int (*done)(crpm_dstream *s); /* 1: all work complete, 0: not yet, < 0: error */
    /* Every stream of the current device, the application's too, completed. */
    int (*device_sync)(void);
    /* The window's kernels: compare (window bitmap, reference updated for the
     * blocks that differ, force cleared and dchg set for reported blocks),
     * scan (meta[0] and pos), gather (pack). */
    int (*compare)(crpm_dstream *s, const crpm_dwindow *w);
    int (*scan)(crpm_dstream *s, const crpm_dwindow *w);
    int (*gather)(crpm_dstream *s, const crpm_dwindow *w);
    /* Bits [first, first + n): dst |= src, src = 0. */
    int (*bits_move)(crpm_dstream *s, uint64_t *dst, uint64_t *src, uint64_t first, uint64_t n);
    /* FP: the fingerprints of blocks [0, bytes) of live into ref (after a recovery). */
    int (*fingerprint)(crpm_dstream *s, const void *live, void *ref, const uint64_t *keys, uint64_t bytes,
                       uint64_t blk);
} crpm_devops;

/* The table in use (crpm_devops_select), or NULL: no device support in this
 * build and none simulated. */
const crpm_devops *crpm_devops_get(void);
/* Sets the table: CUDA's when built with it is chosen at the first use
 * unless one was set; a test sets the mock (NULL: choose again). */
void crpm_devops_set(const crpm_devops *ops);

#ifdef CRPM_HAVE_CUDA
extern const crpm_devops crpm_devops_cuda;
#endif

#endif
