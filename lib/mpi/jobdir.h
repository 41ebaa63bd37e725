/* The job directory on node-local storage: its paths, this rank's
 * container, the marker of a finished run, and files of other rank counts. */
#ifndef CRPM_MPI_JOBDIR_H
#define CRPM_MPI_JOBDIR_H
#include "context.h"

/* Sets ctx->job_dir and ctx->path from the configuration, creates the
 * directory and takes this rank's lock (waiting up to lock_wait_s for the
 * ranks of an earlier run to die): a second job on the same checkpoints
 * gets CRPM_ERR_BUSY and changes nothing. */
int crpm_jobdir_prepare(crpm_ctx *ctx);
/* Releases the lock; remove: its file too (the job's files are gone). */
void crpm_jobdir_unlock(crpm_ctx *ctx, int remove);
/* Opens (create = 0) or creates this rank's container at path. */
int crpm_jobdir_open(crpm_ctx *ctx, const char *path, int create, crpm_container **out);
/* Replaces this rank's container by an empty one, atomically (temporary
 * name + durable rename): a crash leaves the old one or the new one. */
int crpm_jobdir_create_fresh(crpm_ctx *ctx, crpm_container **out);
/* Highest container rank >= nranks in the job directory (-1 if none);
 * removes those files if asked. */
int crpm_jobdir_extra_ranks(const crpm_ctx *ctx, int remove);
/* Collective: a finalize that was removing the checkpoints did not finish:
 * the job had completed, so finish the removal (a fresh start follows). */
int crpm_jobdir_finish_removal(crpm_ctx *ctx);
/* Collective: finalize without keep_last_ckpt removes the job's files;
 * keep_global: all but the global levels' (level 4's files stay). */
int crpm_jobdir_remove(crpm_ctx *ctx, int keep_global);

#endif
