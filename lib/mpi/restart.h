/* Restart at init: gather the facts on every rank, decide (decide.c), apply
 * the verdict: roll back, open levels, create containers. */
#ifndef CRPM_MPI_RESTART_H
#define CRPM_MPI_RESTART_H
#include "context.h"

/* Collective.  Leaves ctx->primary open, ctx->source and ctx->status set. */
int crpm_restart(crpm_ctx *ctx);

#endif
