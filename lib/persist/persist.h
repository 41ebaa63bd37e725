/* Persistence backend: the one interface through which every byte reaches the
 * persistence domain.  The container layer stores through copy(), makes
 * stores durable with flush() + drain(), and never calls msync/pmem_* itself,
 * so tests can swap in the simulator (tests/common/persist_sim.c, linked only
 * into tests) and crash at any drain. */
#ifndef CRPM_PERSIST_H
#define CRPM_PERSIST_H

#include <stddef.h>
#include <stdint.h>

typedef struct crpm_media crpm_media;

/* Write log: the byte ranges stored into a mapping since the log was last
 * taken.  Level 2 ships exactly these ranges to the partner copy. */
typedef struct crpm_wrange {
    uint64_t off, len;
} crpm_wrange;

typedef struct crpm_wlog {
    crpm_wrange *v;
    size_t n, cap;
    int lost;              /* out of memory: the log is incomplete */
} crpm_wlog;

void crpm_wlog_note(crpm_wlog *l, uint64_t off, uint64_t len);
/* Sorts and merges the ranges (overlapping or touching become one). */
void crpm_wlog_normalize(crpm_wlog *l);
/* Appends src's ranges to dst (then normalizes). */
void crpm_wlog_merge(crpm_wlog *dst, const crpm_wlog *src);
void crpm_wlog_clear(crpm_wlog *l);
void crpm_wlog_free(crpm_wlog *l);

typedef struct crpm_backend {
    const char *name;
    /* Map all of the existing file `path`. */
    int (*map)(crpm_media *m, const char *path);
    /* Grow the file (sparse) and mapping; the new size is durable on return. */
    int (*resize)(crpm_media *m, size_t new_size);
    /* Back [off, off+len) with storage, so that stores there cannot fault
     * (SIGBUS) on a full file system; an error is returned instead. */
    int (*reserve)(crpm_media *m, size_t off, size_t len);
    void (*unmap)(crpm_media *m);
    /* Store n bytes at dst (inside the mapping); durable after the next drain. */
    void (*copy)(crpm_media *m, void *dst, const void *src, size_t n);
    /* As copy, for a range written whole for the first time: a page-cache
     * backend may write(2) it instead of faulting every fresh page in. */
    int (*fill)(crpm_media *m, void *dst, const void *src, size_t n);
    /* Bytes already stored at addr become durable after the next drain. */
    void (*flush)(crpm_media *m, const void *addr, size_t n);
    /* Fence: everything copied or flushed before is durable on return. */
    void (*drain)(crpm_media *m);
    /* Optional, for several threads storing at once (checkpoint workers):
     * view is a copy of m that one thread stores through (copy, fill,
     * flush, reserve; never drain or resize); view_end hands its stores to
     * m, durable after m's next drain (a second call for the same view does
     * nothing).  NULL: those ops are safe from several threads on m itself. */
    int (*view_begin)(crpm_media *m, crpm_media *view);
    void (*view_end)(crpm_media *m, crpm_media *view);
} crpm_backend;

struct crpm_media {
    const crpm_backend *ops;
    char *base;            /* mapping */
    size_t size;           /* mapped (= file) size */
    int is_pmem;           /* pmem_is_pmem() said yes */
    uint64_t drains;       /* fences issued */
    crpm_wlog *log;        /* non-NULL: every store through this interface is noted */
    void *priv;            /* backend state */
};

enum crpm_persistence { CRPM_PERSIST_AUTO = 0, CRPM_PERSIST_PMEM, CRPM_PERSIST_MSYNC };

/* libpmem flush/drain when the mapping is pmem (or forced), msync otherwise. */
const crpm_backend *crpm_backend_for(int persistence);
/* Read-only mapping (O_RDONLY, PROT_READ) of a regular file, for the tools:
 * resize() remaps to the file's current size; nothing can be stored. */
extern const crpm_backend crpm_backend_readonly;

/* A view of m for one of several threads storing into it at once, with its
 * own write log (log, when m keeps one; else unused).  crpm_persist_view_end
 * (serial, after the threads finished) adds the log to m's and makes the
 * view's stores part of m's next drain.  CRPM_ERR_NOMEM. */
int crpm_persist_view(crpm_media *m, crpm_media *view, crpm_wlog *log);
void crpm_persist_view_end(crpm_media *m, crpm_media *view, crpm_wlog *log);

/* Convenience wrappers used by the upper layers. */
static inline void crpm_persist_note(crpm_media *m, const void *addr, size_t n)
{ if (m->log) crpm_wlog_note(m->log, (uint64_t)((const char *)addr - m->base), n); }
static inline void crpm_persist_copy(crpm_media *m, void *dst, const void *src, size_t n)
{ crpm_persist_note(m, dst, n); m->ops->copy(m, dst, src, n); }
static inline int crpm_persist_fill(crpm_media *m, void *dst, const void *src, size_t n)
{ crpm_persist_note(m, dst, n); return m->ops->fill(m, dst, src, n); }
/* Stores made directly into the mapping are noted here. */
static inline void crpm_persist_flush(crpm_media *m, const void *addr, size_t n)
{ crpm_persist_note(m, addr, n); m->ops->flush(m, addr, n); }
static inline void crpm_persist_drain(crpm_media *m)
{ m->drains++; m->ops->drain(m); }

#endif
