/* The level table: which levels a job has, built from its configuration.
 * One row per follower level (like SCR's redundancy descriptors): the
 * crpm_checkpoint level that runs it, when in the checkpoint it runs, and how
 * the configuration and the job's nodes make it.  The coordinator
 * (coordinate.h) runs whatever the rows made; a new follower is one level
 * module (lib/levels) plus one row here.
 *
 * The primary level (where the bytes live) is chosen by `method`: level 1's
 * differential container, or full files. */
#ifndef CRPM_MPI_LEVEL_TABLE_H
#define CRPM_MPI_LEVEL_TABLE_H
#include "context.h"

enum crpm_stage {
    CRPM_STAGE_COMMIT = 1,     /* the checkpoint commits only when every rank wrote it at this level too
                                  (undone on every rank otherwise) */
    CRPM_STAGE_AFTER           /* written after the checkpoint committed; a failure is returned, the
                                  checkpoint stays */
};

typedef struct crpm_level_row {
    int level;                 /* crpm_checkpoint(id, level) runs it; a restart it repairs has
                                  crpm_status() == level */
    int stage;                 /* enum crpm_stage */
    int global;                /* its files are one set for the job (rank 0 removes them, last) */
    const char *sent_to;       /* messages: where a checkpoint's bytes went ("partner" nodes), or NULL */
    const char *opening;       /* the agreement after the restart opened it ("locking the ...") */
    const char *files;         /* prefix of its node-local files in the job directory, or NULL */
    /* Collective, at init: whether the job can have the level.  Sets
     * f->why_code and f->why when not; returns an error only when the
     * configuration asks for the level anyway (config_file names it). */
    int (*prepare)(crpm_ctx *ctx, crpm_follower *f, const char *config_file);
    /* Constructs f->lv (a level that prepare found available). */
    int (*open)(crpm_ctx *ctx, crpm_follower *f);
    /* Frees f->prep (may be NULL). */
    void (*release)(crpm_follower *f);
    /* Collective: rank 0 removes the job's global files of a finished run
     * (NULL: none). */
    void (*purge)(crpm_ctx *ctx);
} crpm_level_row;

/* The rows in order (the built-in ones, then any added), *n of them. */
const crpm_level_row *const *crpm_level_table(int *n);

/* Test builds only (CRPM_TEST_HOOKS): adds a row after the built-in ones,
 * for every crpm_init from now on (tests/levels: a follower outside the
 * library).  CRPM_ERR_INVAL when the table is full or the level is taken. */
int crpm_level_table_add(const crpm_level_row *row);

/* The primary level, by method.  Before the decision: its facts (the ids of
 * the newest full files).  After it: the level, from this rank's container
 * (taken over, or closed when full files hold the data) and, with full
 * files, the id to restart from (-1: none). */
void crpm_primary_facts(crpm_ctx *ctx, int64_t *row);
int crpm_primary_open(crpm_ctx *ctx, crpm_container **c, int64_t full_id);

#endif
