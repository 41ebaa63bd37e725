/* Checkpoint levels: every way of storing a checkpoint is one module behind
 * this ops table.  The MPI layer drives them; a level never decides for the
 * job (restart decisions are made in lib/mpi/decide.c).
 *
 *   level_l1.c    differential container on node-local NVM (the engine)
 *   level_full.c  FTI-level-1-style full files (method = full, the baseline)
 *   level_l2.c    partner copies of the level-1 containers on the next node
 *   level_l3.c    Reed-Solomon parity of the level-1 containers over a group of nodes
 *   level_l4.c    parallel HDF5 on the global file system
 *
 * Ops return CRPM_SUCCESS or a negative CRPM_ERR_* with a message.  write,
 * read and undo are local unless the level says otherwise (level 4's are
 * collective over env->comm and agree by themselves). */
#ifndef CRPM_LEVELS_LEVEL_H
#define CRPM_LEVELS_LEVEL_H

#include <mpi.h>
#include <stdint.h>
#include "array.h"
#include "crpm_types.h"
#include "engine.h"

/* What a level needs to know about the job; owned by the caller. */
typedef struct crpm_level_env {
    MPI_Comm comm;
    int rank, nranks;
    const char *job_name;
    const char *job_dir;       /* node-local: <ckpt_dir>/<job> */
    const char *glbl_dir;      /* level 4: global file system ("" = none) */
    int keep_l4;               /* level-4 files kept */
    uint64_t epoch;            /* the job's committed epoch, recorded in level-4 files */
    const crpm_layout *layout; /* recorded in the files a level creates (NULL: none) */
    /* level 4: the job's global layout (format/glayout.h), NULL when it has none;
     * run_id (CRPM_RUN_ID_LEN bytes) identifies this run in the file */
    const struct crpm_glayout *glayout;
    const uint8_t *run_id;
    struct crpm_pool *pool;    /* the rank's workers (util/pool.h; api_team.c), NULL: none */
} crpm_level_env;

typedef struct crpm_level crpm_level;

typedef struct crpm_level_ops {
    const char *name;          /* for messages: "L1", "full", "L2", "L3", "L4" */
    /* An array was (re)registered: levels that follow arrays between
     * checkpoints (the differential engine) learn it here.  May be NULL. */
    int (*protect)(crpm_level *lv, const crpm_array *a);
    /* Writes checkpoint `id` of the arrays; *committed tells whether this
     * rank's checkpoint became durable (even when an error is returned). */
    int (*write)(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed);
    /* Every rank wrote `id`: older data may go.  May be NULL. */
    int (*committed)(crpm_level *lv, int64_t id);
    /* This rank's write succeeded but another's failed: return durably to
     * the checkpoint before it.  May be NULL (nothing to undo). */
    int (*undo)(crpm_level *lv);
    /* Reads the checkpoint chosen at restart into the arrays. */
    int (*read)(crpm_level *lv, const crpm_array *a, int n);
    /* One saved array of the checkpoint to read: its shape (*shape, ptr
     * NULL) and a handle for read_one (CRPM_ERR_MISMATCH: not saved).
     * read_one NULL: the level reads only whole checkpoints. */
    int (*stored)(crpm_level *lv, int32_t id, crpm_array *shape, int *handle);
    int (*read_one)(crpm_level *lv, int handle, void *dst);
    /* The primary level committed (CRPM_EV_COMMITTED, after every rank did)
     * or undid (CRPM_EV_UNDONE) a checkpoint: levels that follow the
     * primary's changes learn it here.  May be NULL. */
    int (*event)(crpm_level *lv, int event);
    /* Removes this rank's files of the level (finalize without keep). */
    int (*remove)(crpm_level *lv);
    void (*close)(crpm_level *lv);
} crpm_level_ops;

struct crpm_level {
    const crpm_level_ops *ops;
    const crpm_level_env *env;
    void *state;
};

/* Level 1: wraps an open container (the level takes ownership of it). */
int crpm_level_l1(crpm_level *lv, const crpm_level_env *env, crpm_container *c);
crpm_container *crpm_level_l1_container(crpm_level *lv);
/* method = full; `restart_id` is the agreed checkpoint to read (-1 = none). */
int crpm_level_full(crpm_level *lv, const crpm_level_env *env, int64_t restart_id);
/* Level 2 (level_l2.c).  It follows the level-1 container attached to it;
 * write sends the checkpoint just committed to the partner and replays the
 * owners' into the copies this rank holds (collective over the pairs). */
enum { CRPM_EV_COMMITTED = 1, CRPM_EV_UNDONE };
enum { CRPM_L2_HOOK_SENT = 1, CRPM_L2_HOOK_APPLIED, CRPM_L2_HOOK_COMMITTED };
typedef struct crpm_l2_opts {
    int partner;               /* rank holding this rank's copy */
    const int *owners;         /* ranks whose copies this rank holds (read by crpm_level_l2 only) */
    int nowners;
    int persistence;
    const crpm_backend *backend; /* overrides persistence (tests) */
    int full_copy;             /* benchmarks: send the arrays whole (FTI style) */
    double lock_wait_s;
    void (*hook)(void *arg, int point); /* process-kill tests */
    void *hook_arg;
} crpm_l2_opts;
int crpm_level_l2(crpm_level *lv, const crpm_level_env *env, const crpm_l2_opts *o);
/* Follow this container from now on (NULL: none); the copies' state is then
 * unknown until the next write or sync. */
void crpm_level_l2_attach(crpm_level *lv, crpm_container *own);
/* Restart: opens the copies this rank holds (missing or unusable ones stay
 * closed, with the reason), and describes copy i (owners order). */
int crpm_level_l2_open_copies(crpm_level *lv);
/* Restart: checks the data CRCs of every open copy (committed epoch, and the
 * previous one when recoverable).  A copy that fails is closed and never
 * used as a source (reported as CRPM_L2F_BAD, as is a copy whose metadata
 * checksums failed at open) until a sync rewrites it from its owner; a
 * previous epoch that fails is reported unavailable.  With
 * `say`, each finding goes to stderr. */
void crpm_level_l2_verify_copies(crpm_level *lv, int say);
enum { CRPM_L2F_OWNER, CRPM_L2F_OK, CRPM_L2F_EPOCH, CRPM_L2F_PREV, CRPM_L2F_RUN0, CRPM_L2F_RUN1, CRPM_L2F_BAD,
       CRPM_L2F_N };
void crpm_level_l2_copy_facts(crpm_level *lv, int i, int64_t out[CRPM_L2F_N]);
/* Copy i (owners order) as it is open now; NULL: missing or unusable. */
crpm_container *crpm_level_l2_copy(crpm_level *lv, int i);
/* Collective over the pairs: the facts of this rank's own copy, from its
 * partner; mine[CRPM_L2F_N] = 1 when the copy's file exists at all. */
int crpm_level_l2_exchange_facts(crpm_level *lv, int64_t mine[CRPM_L2F_N + 1]);
/* Restart, collective over the pairs: owners in `restore` (nranks flags) get
 * their container back from the copy their partner holds, written to
 * own_path; then, with sync_all, every copy is brought up to its owner's
 * container (attached).  *sent adds the bytes sent. */
int crpm_level_l2_restore(crpm_level *lv, const int64_t *restore, const char *own_path, uint64_t *sent);
int crpm_level_l2_sync(crpm_level *lv, uint64_t *sent);

/* Level 3 (level_l3.c): the level-1 checkpoint's change, as old XOR new,
 * sent to the ranks holding parity for it, which add it into their parity
 * containers (ISA-L Reed-Solomon, l3_code.h).  write is collective over
 * env->comm. */
enum { CRPM_L3_HOOK_SENT = 1, CRPM_L3_HOOK_APPLIED, CRPM_L3_HOOK_COMMITTED };
typedef struct crpm_l3_opts {
    int group_size, parity;    /* K nodes per group, M parity units */
    const int *members;        /* nranks entries: member index of each rank in its group */
    const int *groups;         /* nranks entries: its group (ranks of one group share it) */
    uint64_t segment_size, block_size; /* the containers' geometry (0: defaults) */
    int persistence;
    const crpm_backend *backend; /* overrides persistence (tests) */
    double lock_wait_s;
    int full_encode;           /* benchmarks: re-encode everything every time (FTI, SCR style) */
    int verify;                /* tests: compare the parity with a full re-encode after each checkpoint */
    void (*hook)(void *arg, int point); /* process-kill tests */
    void *hook_arg;
} crpm_l3_opts;
int crpm_level_l3(crpm_level *lv, const crpm_level_env *env, const crpm_l3_opts *o);
/* Follow this container from now on (NULL: none). */
void crpm_level_l3_attach(crpm_level *lv, crpm_container *own);
/* Restart: this rank's parity container as found (opened if it exists). */
/* BAD: the parity failed its checksums (at open, or in crpm_level_l3_verify) */
enum { CRPM_L3F_FILE, CRPM_L3F_OK, CRPM_L3F_EPOCH, CRPM_L3F_PREV, CRPM_L3F_RUN0, CRPM_L3F_RUN1, CRPM_L3F_BAD,
       CRPM_L3F_N };
void crpm_level_l3_facts(crpm_level *lv, int64_t out[CRPM_L3F_N]);
/* Restart, before the facts: checks the parity container's data CRCs
 * (committed epoch and, when recoverable, the previous one).  Parity that
 * fails is closed (re-encoded from the intact containers later, never used
 * for a rebuild); a previous epoch that fails is reported unavailable. */
void crpm_level_l3_verify(crpm_level *lv, int say);
/* Restart: the parity goes to the job's agreed epoch (rolled back when one
 * ahead); *usable = 0 when it does not describe that epoch. */
int crpm_level_l3_at(crpm_level *lv, uint64_t epoch, int *usable);
/* Restart, collective: lost[r] != 0 for ranks whose container is rebuilt
 * from the survivors of their group (their containers at the agreed epoch)
 * and the parity of ranks with usable[r] != 0.  On a lost rank, *img gets
 * its regions (ptr into img->buf, which holds their bytes alone) and user
 * id.  Only the regions' defined bytes are moved and decoded.  *seconds:
 * this rank's time in the reconstruction proper (after the agreement that
 * every rank can take part). */
typedef struct crpm_l3_image {
    char *buf;
    crpm_array *regions;
    int nregions;
    uint64_t user_id;
} crpm_l3_image;
int crpm_level_l3_rebuild(crpm_level *lv, const int64_t *lost, const int64_t *usable, crpm_l3_image *img,
                          uint64_t *sent, double *seconds);
void crpm_l3_image_free(crpm_l3_image *img);
/* Collective: every parity container is re-encoded from the containers
 * unless all already describe the committed epoch (force: re-encode). */
int crpm_level_l3_sync(crpm_level *lv, int force, uint64_t *sent);

/* Level 4; `restart_path` is the file chosen at restart ("" = none). */
int crpm_level_l4(crpm_level *lv, const crpm_level_env *env, const char *restart_path);

static inline void crpm_level_close(crpm_level *lv)
{
    if (lv->ops && lv->ops->close)
        lv->ops->close(lv);
    lv->ops = NULL;
    lv->state = NULL;
}

#endif
