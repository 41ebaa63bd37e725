/* The coordinator: runs the job's levels (context.h: the primary and the
 * followers the level table made) through both halves of their life.  Every
 * call is collective and ends agreed, so one rank's failure is an error on
 * every rank.
 *
 * Checkpoint (crpm_coord_checkpoint), at level L:
 *   primary write -> agreement (the commit) -> every follower: event
 *   -> the followers of L that join the commit: write -> agreement
 *      (on failure: their undo, the primary's undo, event "undone")
 *   -> their committed -> the primary's committed
 *   -> the followers of L that run after the commit: write -> agreement
 * With async = 1 (background.h) the followers of L run in the background
 * thread after the primary's commit instead, each agreed there. 
 * Restart (restart.c calls these in order):
 *   open -> facts -> plan -> [decide] -> lookup when asked -> restore
 *   -> [primary] -> attach + resync */
#ifndef CRPM_MPI_COORDINATE_H
#define CRPM_MPI_COORDINATE_H
#include "context.h"

/* A level's write of checkpoint `id` failed with rc: its message is prefixed
 * with the checkpoint and the level (a level's file operations do not know
 * them; a full file system must say which checkpoint it stopped).  Returns
 * rc; CRPM_SUCCESS unchanged. */
int crpm_coord_write_failed(int rc, int64_t id, int level);
/* The same for a level's restore or resync at a restart: the checkpoint is
 * named by the job epoch every rank resumes (the ids are in the files). */
int crpm_coord_restart_failed(int rc, int64_t epoch, int level);

/* ---- the job's levels ---- */
/* Collective, at init: the level table's rows become followers; whether
 * each can serve this job (an error when the configuration asks for one
 * that cannot). */
int crpm_coord_prepare(crpm_ctx *ctx, const char *config_file);
/* The follower of checkpoint level `level` (open or not), or NULL. */
const crpm_follower *crpm_coord_find(const crpm_ctx *ctx, int level);
/* Whether the job has level `level` (CRPM_L1: always). */
int crpm_coord_has(const crpm_ctx *ctx, int level);
/* Closes every level (the primary too). */
void crpm_coord_close(crpm_ctx *ctx);
/* Removes this rank's files of every level (finalize without keep): the
 * node-local ones, or (global, rank 0, once every rank removed those) the
 * job's global ones. */
void crpm_coord_remove(crpm_ctx *ctx, int global);
/* A finished run's files of every follower level (none open): node-local
 * ones by their prefix in the job directory (through remove_prefixed), or
 * (global, rank 0) the job's global ones. */
void crpm_coord_purge(crpm_ctx *ctx, int global, void (*remove_prefixed)(const crpm_ctx *ctx, const char *prefix));

/* ---- checkpoint ---- */
/* Whether a checkpoint at `level` can be taken (CRPM_ERR_INVAL: no such
 * level; the follower's reason when it is not available). */
int crpm_coord_ready(crpm_ctx *ctx, int id, int level);
/* The checkpoint sequence; rc: the caller's error so far (the sequence
 * still agrees on it).  *t_commit: when the checkpoint committed (0: it did
 * not, and rc says why); ctx->cost[2] gets the followers' part. */
int crpm_coord_checkpoint(crpm_ctx *ctx, int id, int level, int rc, crpm_stats_t *st, double *t_commit);

/* ---- restart ---- */
/* Collective: opens the followers prepare found available (locks). */
int crpm_coord_open(crpm_ctx *ctx);
/* Extra fact columns (the followers' own), after facts.h's. */
int crpm_coord_nfacts(const crpm_ctx *ctx);
/* Collective: the followers' facts into this rank's row (CRPM_F_N columns)
 * and its extra columns. */
int crpm_coord_facts(crpm_ctx *ctx, int64_t *row, int64_t *extra);
/* Collective: every follower with a plan op becomes a source of the
 * decision (decide.h), over every rank's rows and extra columns (nranks rows
 * of crpm_coord_nfacts) and the run being restored (NULL: none known);
 * *srcs (nsrc of them) stays valid until crpm_coord_plan_free. */
struct crpm_decide_src;
int crpm_coord_plan(crpm_ctx *ctx, const int64_t *rows, const int64_t *extra, const int64_t *run,
                    struct crpm_decide_src **srcs, int *nsrc);
/* Collective: a follower's own checkpoint to restart from (the decision
 * asked); *from: the follower that found it (NULL: none). */
int crpm_coord_lookup(crpm_ctx *ctx, crpm_found *f, crpm_follower **from);
/* Collective: the followers whose plan (the decision's repair flags for
 * the verdict's epoch) repairs a rank bring those containers back (io->plan
 * set per follower). */
int crpm_coord_restore(crpm_ctx *ctx, crpm_restart_io *io);
/* The restart's status: the highest level that repaired a rank, else L1. */
int crpm_coord_status(const crpm_ctx *ctx);
/* Collective: every follower follows the primary's container from now on
 * and brings its files up to it. */
int crpm_coord_resync(crpm_ctx *ctx, int resumed, int64_t epoch);
/* Frees the plans. */
void crpm_coord_plan_free(crpm_ctx *ctx);

#endif
