/* Checkpoint levels: every way of storing a checkpoint is one module behind
 * this ops table, which covers both halves of its life, the checkpoint and
 * the restart.  The MPI layer drives them (lib/mpi/coordinate.c) and builds
 * them from the configuration (lib/mpi/level_table.c); a level never decides
 * for the job (restart decisions are made in lib/mpi/decide.c, from the
 * facts the levels contribute).
 *
 * The *primary* level is where the bytes of every checkpoint live:
 *   level_l1.c    differential container on node-local NVM (the engine)
 *   level_full.c  FTI-level-1-style full files (method = full, the baseline)
 * *Followers* add redundancy after the primary committed, each from the
 * primary's committed epoch:
 *   level_l2.c    partner copies of the level-1 containers on the next node
 *   level_l3.c    Reed-Solomon parity of the level-1 containers over a group of nodes
 *   level_l4.c    parallel HDF5 on the global file system
 *
 * Ops return CRPM_SUCCESS or a negative CRPM_ERR_* with a message.  write,
 * read and undo are local unless the level says otherwise (levels 2-4 are
 * collective over env->comm); the restart ops marked collective are called
 * on every rank. */
#ifndef CRPM_LEVELS_LEVEL_H
#define CRPM_LEVELS_LEVEL_H

#include <mpi.h>
#include <stdint.h>
#include "array.h"
#include "crpm_types.h"
#include "engine.h"
#include "facts.h"
#include "fsutil.h"

/* What a level needs to know about the job; owned by the caller. */
typedef struct crpm_level_env {
    MPI_Comm comm;
    int rank, nranks;
    const char *job_name;
    const char *job_dir;       /* node-local: <ckpt_dir>/<job> */
    const char *glbl_dir;      /* level 4: global file system ("" = none) */
    int keep_l4;               /* level-4 files kept */
    int verbosity;             /* what the levels print: 1 warnings, 2 progress (the configuration's) */
    uint64_t epoch;            /* the job's committed epoch, recorded in level-4 files */
    const crpm_layout *layout; /* recorded in the files a level creates (NULL: none) */
    /* level 4: the job's global layout (format/glayout.h), NULL when it has none;
     * run_id (CRPM_RUN_ID_LEN bytes) identifies this run in the file */
    const struct crpm_glayout *glayout;
    const uint8_t *run_id;
    struct crpm_pool *pool;    /* the rank's workers (util/pool.h; api_team.c), NULL: none */
    /* Asynchronous levels (mpi/background.h): a follower writing in the
     * background calls crpm_level_release once it no longer reads the
     * primary's container beyond the copies and slot of the epoch it writes
     * (the next checkpoint's level 1 may run from then on) and no longer
     * touches the state the primary's events change.  NULL: synchronous. */
    void (*release)(void *arg);
    void *release_arg;
} crpm_level_env;

static inline void crpm_level_release(const crpm_level_env *env)
{
    if (env->release)
        env->release(env->release_arg);
}

typedef struct crpm_level crpm_level;

/* ---- the restart's views (lib/mpi/coordinate.c fills them) ---- */

/* A follower's part of the restart plan.  The decision (lib/mpi/decide.c)
 * asks each follower, for a candidate epoch, which of the ranks that cannot
 * bring that epoch back by themselves it can; the answer for the epoch
 * chosen is the plan its restore op carries out. */
typedef struct crpm_plan {
    const int64_t *rows;       /* nranks rows of CRPM_F_N facts (facts.h): every rank's own container */
    const int64_t *own;        /* nranks rows of the level's own ops->nfacts columns */
    int nranks;
    const int64_t *run;        /* the run identity (2 words) being restored; NULL: none known yet */
    int64_t epoch;             /* the question: this epoch ... */
    const int64_t *need;       /* ... for the ranks flagged here (nranks flags); every other rank
                                  holds it (its own container, or a level asked before this one) */
    int64_t *repair;           /* out: nranks flags, the ranks of need it brings back at epoch */
    int nrepair;               /* out: how many */
    int in_use;                /* the job wrote checkpoints at this level (the containers' record,
                                  facts.h CRPM_F_LEVELS): resync rebuilds its files whatever was lost */
} crpm_plan;

/* What a follower bringing containers back (restore) may use: this rank's
 * container and the job directory's ways to replace it. */
typedef struct crpm_restart_io {
    const crpm_plan *plan;     /* the level's own plan */
    int64_t epoch;             /* the epoch every rank resumes */
    const char *path;          /* this rank's container file */
    crpm_container **own;      /* this rank's container: open (maybe one epoch ahead), or NULL */
    uint8_t *run_id;           /* the identity containers created now get (a lost rank learns it here) */
    /* Keeps this rank's unusable container under another name (closes *own). */
    int (*set_aside)(void *arg);
    /* Opens (create = 0) or creates this rank's container at path, with the
     * job's geometry, identity and layout. */
    int (*open)(void *arg, const char *path, int create, crpm_container **c);
    void *arg;
} crpm_restart_io;

/* What a level looked up only when the decision asked for it (level 4). */
typedef struct crpm_found {
    int found;                 /* a checkpoint every rank can read ... */
    int damaged;               /* ... or only damaged ones */
    int64_t epoch, id;         /* found: its job epoch and checkpoint id */
    int has_run;               /* found: it records the run that wrote it ... */
    int64_t run[2];            /* ... this one (the epochs of different runs cannot be compared) */
    char where[CRPM_PATH_MAX]; /* found: for messages */
    char why[512];             /* not found: why, for the error that names it */
} crpm_found;

typedef struct crpm_level_ops {
    const char *name;          /* for messages: "L1", "full", "L2", "L3", "L4" */
    int nfacts;                /* restart: facts of its own besides facts.h's columns */

    /* ---- checkpoint ---- */
    /* Primary: an array was (re)registered (the differential engine follows
     * arrays between checkpoints).  May be NULL. */
    int (*protect)(crpm_level *lv, const crpm_array *a);
    /* Primary: the container followers follow (NULL op or result: none). */
    crpm_container *(*container)(crpm_level *lv);
    /* Follower: follow this container from now on (NULL: none); what it
     * knew of the container before is forgotten. */
    void (*attach)(crpm_level *lv, crpm_container *own);
    /* Primary: writes checkpoint `id` of the arrays.  Follower: after every
     * rank's primary committed, stores that checkpoint at this level, reading
     * the primary's committed epoch (not the arrays, except level 4 and the
     * level-2 full-copy baseline).  *committed: this rank's part is durable
     * (even when an error is returned). */
    int (*write)(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed);
    /* Every rank wrote `id` at this level: it is the level's checkpoint now,
     * older data may go.  Separate from write so that a write could complete
     * in the background and commit later.  May be NULL. */
    int (*committed)(crpm_level *lv, int64_t id);
    /* This rank's write succeeded but another's failed: return durably to
     * the checkpoint before it.  May be NULL (nothing to undo). */
    int (*undo)(crpm_level *lv);
    /* Follower: the primary committed (CRPM_EV_COMMITTED, after every rank
     * did) or undid (CRPM_EV_UNDONE) a checkpoint, at any level: levels that
     * follow the primary's changes learn it here.  May be NULL. */
    int (*event)(crpm_level *lv, int event);

    /* ---- restart (followers; every op may be NULL) ---- */
    /* Collective: this rank's own nfacts values (what it holds, checked
     * against its checksums: what it finds damaged it stops trusting); row
     * is this rank's container's row, read-only here. */
    int (*facts)(crpm_level *lv, const int64_t *row, int64_t *own);
    /* Pure, identical on every rank: the epochs (at most max) at which the
     * level holds data of some rank, for the decision's candidates. */
    int (*offers)(crpm_level *lv, const crpm_plan *p, int64_t *epochs, int max);
    /* Pure, identical on every rank: of p->need, the ranks it can bring
     * back at p->epoch (p->repair, p->nrepair). */
    void (*plan)(crpm_level *lv, crpm_plan *p);
    /* Pure: what the level holds of rank r, for a refusal ("its level-2
     * partner copy holds epoch 3"); returns 1 when that is damaged. */
    int (*describe)(crpm_level *lv, const crpm_plan *p, int r, char *buf, size_t n);
    /* The noun for what describe calls damaged ("level-2 partner copy"). */
    const char *holding;
    /* Collective, only when the decision asks: a checkpoint of the level's
     * own to restart from; *f says what it found.  After a find, read and
     * stored read it. */
    int (*lookup)(crpm_level *lv, crpm_found *f);
    /* Collective, when the job resumes level 1 at io->epoch and the plan
     * repairs some rank: the lost containers come back (io->own reopened). */
    int (*restore)(crpm_level *lv, const crpm_restart_io *io);
    /* Collective, after the restart (attached to the primary's container):
     * the level's files brought up to it, whatever survived of them (a
     * restart leaves every level with as good a copy as before the
     * failure).  resumed: the job resumed its level-1 checkpoint at epoch
     * (else it starts anew or from level 4). */
    int (*resync)(crpm_level *lv, const crpm_plan *p, int resumed, int64_t epoch);

    /* ---- reading the checkpoint chosen at restart ---- */
    int (*read)(crpm_level *lv, const crpm_array *a, int n);
    /* One saved array of the checkpoint to read: its shape (*shape, ptr
     * NULL) and a handle for read_one (CRPM_ERR_MISMATCH: not saved).
     * read_one NULL: the level reads only whole checkpoints. */
    int (*stored)(crpm_level *lv, int32_t id, crpm_array *shape, int *handle);
    int (*read_one)(crpm_level *lv, int handle, void *dst);

    /* Removes this rank's files of the level (finalize without keep). */
    int (*remove)(crpm_level *lv);
    void (*close)(crpm_level *lv);
} crpm_level_ops;

struct crpm_level {
    const crpm_level_ops *ops;
    const crpm_level_env *env;
    void *state;
};

enum { CRPM_EV_COMMITTED = 1, CRPM_EV_UNDONE };

/* ---- the primary levels ---- */
/* Level 1: wraps an open container (the level takes ownership of it). */
int crpm_level_l1(crpm_level *lv, const crpm_level_env *env, crpm_container *c);
/* method = full; `restart_id` is the agreed checkpoint to read (-1 = none). */
int crpm_level_full(crpm_level *lv, const crpm_level_env *env, int64_t restart_id);

/* ---- level 2 (level_l2.c, l2_restart.c) ----
 * It follows the level-1 container attached to it; write sends the
 * checkpoint just committed to the partner and replays the owners' into the
 * copies this rank holds (collective over the pairs). */
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
/* The attach op: the copies' state is then unknown until the next write or sync. */
void crpm_level_l2_attach(crpm_level *lv, crpm_container *own);
/* Copy i (owners order) as it is open now; NULL: missing or unusable. */
crpm_container *crpm_level_l2_copy(crpm_level *lv, int i);
/* Collective over the pairs: every copy brought up to its owner's
 * container (whole-file sync).  *sent adds the bytes sent. */
int crpm_level_l2_sync(crpm_level *lv, uint64_t *sent);

/* ---- level 3 (level_l3.c and its parts, l3_internal.h) ----
 * The level-1 checkpoint's change, as old XOR new, sent to the ranks holding
 * parity for it, which add it into their parity containers (ISA-L
 * Reed-Solomon, l3_code.h).  write is collective over env->comm. */
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
    int verify;                /* tests (CRPM_TEST_HOOKS builds): compare the parity with a full re-encode
                                  after each checkpoint */
    void (*hook)(void *arg, int point); /* process-kill tests */
    void *hook_arg;
} crpm_l3_opts;
int crpm_level_l3(crpm_level *lv, const crpm_level_env *env, const crpm_l3_opts *o);
/* The attach op. */
void crpm_level_l3_attach(crpm_level *lv, crpm_container *own);

/* ---- level 4 (level_l4.c) ---- */
int crpm_level_l4(crpm_level *lv, const crpm_level_env *env);

static inline void crpm_level_close(crpm_level *lv)
{
    if (lv->ops && lv->ops->close)
        lv->ops->close(lv);
    lv->ops = NULL;
    lv->state = NULL;
}

#endif
