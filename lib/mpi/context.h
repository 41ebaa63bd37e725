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

    /* levels: `primary` takes every checkpoint (L1 or full), `l4` the level-4 ones */
    crpm_level primary;
    crpm_level l4;
    crpm_level l2;             /* partner copies (ops NULL with one node or method = full) */
    crpm_level l3;             /* parity over node groups (ops NULL when the layout is impossible) */
    int *l3_groups, *l3_members; /* level 3: each rank's group and member index */
    char l3_why[512];          /* why level 3 is not available */
    crpm_level *source;        /* what crpm_recover reads; NULL = fresh start */
    int status;                /* CRPM_STATUS_* decided at init */
    int recovered;             /* snapshot must not recover a second time */
    int broken;                /* a failed undo left the container state unknown */
    uint64_t last_id;          /* last checkpoint id (snapshot numbers from here) */

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
    double cost[3];            /* seconds of the last checkpoint: up to level 1/2/3's commit, the level-4
                                  part, and the level-2/3 part alone (after level 1 committed) */
    crpm_interval auto_iv[2];  /* automatic intervals of level 1 and level 4 */
    double auto_logged[2];     /* interval last printed at verbosity 2 */
    crpm_stop stop;            /* reasons to stop before the scheduler does (stop.c) */

    crpm_stats_t last, total;

    /* the engine's workers ([advanced] threads; api_team.c) */
    struct crpm_pool *pool;
    int threads;

    /* global layout and restart on another rank count (mpi/reshape.h); NULL until used */
    struct crpm_reshape *reshape;

    /* internal test hook (CRPM_TEST_KILL, builds with CRPM_TEST_HOOKS only) */
    struct { int point, n; } kills[8];
    int nkills;
    uint64_t ckpt_count;       /* checkpoints started by this process */
} crpm_ctx;

#endif
