/* Checkpoint engine: one container per process.  Failure-atomic differential
 * checkpoints of the protected arrays (buffered mode: the arrays are the DRAM
 * working copy).  No MPI here; lib/api.c coordinates ranks on top of it. */
#ifndef CRPM_ENGINE_H
#define CRPM_ENGINE_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include "crpm.h"
#include "persist.h"

typedef struct crpm_container crpm_container;

typedef struct crpm_open_opts {
    const char *path;
    uint64_t segment_size;     /* power of two; 0 = default 2 MiB (checked on open if nonzero) */
    uint64_t block_size;       /* power of two; 0 = default 256 B */
    const char *job_name;      /* identity: written on create, checked on open if non-NULL */
    int32_t rank, nranks;      /* identity: checked on open when nranks > 0 */
    int persistence;           /* enum crpm_persistence */
    const crpm_backend *backend; /* overrides persistence (tests: &crpm_backend_sim) */
    int create;                /* 1: create if missing; 0: must exist */
    uint64_t slot_size;        /* bytes per metadata slot on create; 0 = room for 64 GiB */
    int change_tracking;       /* 1: compare only pages the kernel saw written (track.h) */
} crpm_open_opts;

/* Hook points for tests (process-kill injection). */
enum crpm_hook_point { CRPM_HOOK_BEFORE_DATA = 1, CRPM_HOOK_AFTER_DATA, CRPM_HOOK_AFTER_COMMIT };
typedef void (*crpm_hook_fn)(void *arg, int point, uint64_t epoch);

typedef struct crpm_region_info {
    int32_t id;
    int32_t type_code;
    uint64_t elem_size;
    uint64_t count;
    uint64_t nbytes;
} crpm_region_info;

/* Opens (or creates) the container.  *created tells which (may be NULL). */
int crpm_container_open(const crpm_open_opts *o, crpm_container **out, int *created);
int crpm_container_close(crpm_container *c);

uint64_t crpm_container_epoch(const crpm_container *c);      /* 0 = nothing committed */
int crpm_container_prev_available(const crpm_container *c);  /* epoch-1 is recoverable */
uint64_t crpm_container_user_id(const crpm_container *c);    /* application's checkpoint id */
/* Durably make epoch-1 the committed epoch. */
int crpm_container_rollback(crpm_container *c);

int crpm_container_protect(crpm_container *c, int32_t id, void *ptr, uint64_t count,
                           int32_t type_code, uint64_t elem_size);
int crpm_container_unprotect(crpm_container *c, int32_t id);

/* Commit epoch+1 holding the protected arrays. */
int crpm_container_checkpoint(crpm_container *c, uint64_t user_id, crpm_stats_t *st);
/* Copy the committed epoch into the protected arrays; the protected set must
 * match the saved one (ids, element sizes, counts). */
int crpm_container_recover(crpm_container *c);

/* Saved regions of the committed epoch (for inspection, export, level 4). */
int crpm_container_nregions(const crpm_container *c);
int crpm_container_region(const crpm_container *c, int idx, crpm_region_info *out);
/* Copies saved region idx (committed epoch) into dst (info.nbytes bytes). */
int crpm_container_read_region(const crpm_container *c, int idx, void *dst);

/* Prints superblock, geometry, epochs, regions and checksum verdicts of a
 * container file; returns CRPM_SUCCESS or the code of the first failed check. */
int crpm_inspect_file(const char *path, FILE *out);

void crpm_container_set_hook(crpm_container *c, crpm_hook_fn fn, void *arg);
crpm_media *crpm_container_media(crpm_container *c);
uint64_t crpm_container_segment_size(const crpm_container *c);
/* Identity stored at creation: job name (NUL-terminated into job[len]),
 * rank and number of ranks. */
void crpm_container_identity(const crpm_container *c, char *job, size_t len, int32_t *rank, int32_t *nranks);
uint64_t crpm_container_block_size(const crpm_container *c);
/* NULL: change tracking not asked for; "pagemap": active; otherwise the
 * reason it is not available (every block is compared instead). */
const char *crpm_container_tracking(const crpm_container *c);

/* Error reporting shared by all layers: sets this thread's detailed message
 * and returns code. */
int crpm_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
