/* All state of the library in one place: the job (communicator, paths,
 * configuration), the levels, the protected arrays, the restart verdict, the
 * snapshot schedule and the statistics. */
#ifndef CRPM_MPI_CONTEXT_H
#define CRPM_MPI_CONTEXT_H

#include <mpi.h>
#include "array.h"
#include "idindex.h"
#include "interval.h"
#include "config.h"
#include "level.h"
#include "stop.h"
#include "topology.h"

/* A follower level of the job: its row of the level table, and the level
 * once open (ops NULL: not available to this job, or not open yet). */
struct crpm_level_row;
#define CRPM_MAX_FOLLOWERS 8
typedef struct crpm_follower {
    const struct crpm_level_row *row;
    int level;                 /* the crpm_checkpoint level that runs it (CRPM_Ln; row->level) */
    crpm_level lv;
    int why_code;              /* not available: the error a checkpoint at its level returns ... */
    char why[512];             /* ... and why ("level 2 needs ...") */
    void *prep;                /* what the row's prepare found for its open (level 3: the groups) */
    int reads_arrays;          /* its write reads the arrays' bytes (level 4, the level-2 full-copy baseline):
                                  in the background it gets them read back from level 1 (background.c) */
    crpm_plan plan;            /* restart: its part of the plan (coordinate.c) */
    struct crpm_decide_src *src; /* restart: the decision's view of it (coordinate.c) */
} crpm_follower;

typedef struct crpm_ctx {
    MPI_Comm comm;             /* private duplicate of the application's communicator */
    int rank, nranks;
    crpm_config cfg;
    crpm_topology topo;        /* nodes and level-2 partners */
    crpm_layout layout;        /* recorded in every file this run creates (layout.h) */
    char job_dir[CRPM_PATH_MAX];
    char path[CRPM_PATH_MAX];  /* this rank's container */
    char lock_path[CRPM_PATH_MAX]; /* this rank's lock, held from init to finalize */
    int lock_fd;               /* -1: not held */
    crpm_level_env env;        /* what the levels see of the above */
    uint8_t run_id[CRPM_RUN_ID_LEN]; /* identity of this run of the job, in every container */

    /* levels: `primary` takes every checkpoint (L1 or full); the followers,
     * one per row of the level table (level_table.h), in its order, add
     * redundancy at the checkpoint levels that name them (coordinate.h) */
    crpm_level primary;
    crpm_follower fol[CRPM_MAX_FOLLOWERS];
    int nfol;
    struct crpm_decide_src *srcs; /* restart: the followers as the decision sees them (coordinate.c) */
    crpm_level *source;        /* what crpm_recover reads; NULL = fresh start */
    int status;                /* CRPM_STATUS_* decided at init */
    int recovered;             /* snapshot must not recover a second time */
    int broken;                /* a failed undo left the container state unknown */
    uint64_t last_id;          /* last checkpoint id (snapshot numbers from here) */
    int last_level;            /* level of this run's newest committed checkpoint (0: none yet) */

    /* protected arrays, in protect order, and their ids */
    crpm_array *arrays;
    int narrays;
    size_t cap_arrays;
    crpm_idindex array_ids;
    /* names given with crpm_set_name, by id (owned strings) */
    struct crpm_name { int32_t id; char *name; } *names;
    int nnames;
    size_t cap_names;
    crpm_idindex name_ids;

    /* snapshot schedule (schedule.c) */
    long iters_since;
    double last_ckpt_time;
    double last_l4_time;
    long snap_ckpts;
    double cost[3];            /* seconds of the last checkpoint: up to its commit (the primary and the
                                  followers that join it), the part after the commit (level 4), and the
                                  followers' part alone (after the primary committed) */
    crpm_interval auto_iv[2];  /* automatic intervals of level 1 and level 4 */
    double auto_logged[2];     /* interval last printed at verbosity 2 */
    crpm_stop stop;            /* reasons to stop before the scheduler does (stop.c) */

    crpm_stats_t last, total;
    struct crpm_runlog *runlog; /* [advanced] log_file (runlog.h); NULL: off */

    /* the engine's workers ([advanced] threads; api_team.c) */
    struct crpm_pool *pool;
    int threads;
    /* asynchronous levels (background.h); NULL: levels 2-4 run synchronously */
    struct crpm_bg *bg;
    long bg_skipping;          /* crpm_snapshot calls in a row that skipped a due checkpoint (skip) */

    /* global layout and restart on another rank count (mpi/reshape.h); NULL until used */
    struct crpm_reshape *reshape;

    /* internal test hook (CRPM_TEST_KILL, builds with CRPM_TEST_HOOKS only) */
    struct { int point, n; } kills[8];
    int nkills;
    uint64_t ckpt_count;       /* checkpoints started by this process */
} crpm_ctx;

#endif
