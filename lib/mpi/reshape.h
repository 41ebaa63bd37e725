/* Restart on another number of ranks (docs/reshape.md).
 *
 * The application's global layout (format/glayout.h) travels with every
 * checkpoint in the region CRPM_ID_GLAYOUT.  When crpm_init finds the newest
 * checkpoint written by another number of ranks (or only an older rank
 * count's files next to containers that never completed a checkpoint), the
 * restart is planned here instead of refused:
 *
 *   scan      one rank per node lists the job's files in its node's job
 *             directory (containers, partner copies, parity, and files an
 *             earlier reshaped restart kept as "<name>.held-<run>");
 *   decide    (reshape_plan.c, pure) the newest generation (run) with data;
 *             level 1 when every one of its ranks has a container or a
 *             partner copy some rank of this job can see, at one epoch;
 *             otherwise the newest level-4 file with a global layout;
 *   verify    each old container or copy is read by one rank of the node
 *             that holds it (old rank q itself when it is there, else the
 *             least loaded), which checks every CRC of the epoch; a damaged
 *             source is an erasure and the plan is made again without it;
 *             level 4: the datasets are checked the same way, shared out;
 *   check     the old layouts are gathered: arrays outside any global
 *             dataset and not replicated make the restart an error on every
 *             rank, with nothing changed;
 *   keep      the old generation's files are renamed "<name>.held-<run>"
 *             (never deleted), so this job's new containers take the
 *             ordinary names; they are removed once a checkpoint of this
 *             job at their highest level is committed on every rank.
 *
 * crpm_recover then reads through the level in `level` (crpm_rs_level_ops):
 * it checks the application's new layout against the saved one and moves
 * the boxes with crpm_redistribute (levels/redist.h). */
#ifndef CRPM_MPI_RESHAPE_H
#define CRPM_MPI_RESHAPE_H
#include "context.h"
#include "decide.h"
#include "glayout.h"

typedef struct crpm_rs_restart crpm_rs_restart; /* reshape.c */

typedef struct crpm_reshape {
    crpm_ctx *ctx;
    crpm_glayout cur;            /* this run's layout as declared */
    unsigned char *blob;        /* cur serialized: the region CRPM_ID_GLAYOUT */
    size_t blob_len, blob_cap;
    int blob_protected;         /* the region holds cur's blob */
    int region_in_use;          /* the region is among the protected arrays */
    crpm_glayout saved;          /* the restart checkpoint's datasets (crpm_global_dims) */
    int have_saved;
    size_t saved_blob_len;      /* level-1 restart: this rank's saved layout region */
    unsigned char *saved_blob;
    crpm_level check;           /* level-1 restart: the container, plus the layout check */
    crpm_level *check_inner;
    crpm_level level;           /* reshaped restart: what crpm_recover reads */
    crpm_rs_restart *rs;
    int held_level;             /* an older generation is kept until a checkpoint at >= this level
                                   is committed on every rank (0: none) */
    char held_tag[40];          /* its files end in ".held-<tag>" */
} crpm_reshape;

/* The state, allocated on first use (NULL: out of memory, message set). */
crpm_reshape *crpm_reshape_get(crpm_ctx *ctx);
void crpm_reshape_free(crpm_ctx *ctx);

/* Restart (restart.c), collective.  Called when the ordinary decision *v
 * is a fresh start, a level-4 restart or a refusal for another rank count:
 * when a reshaped restart applies it prepares it (ctx->source, ctx->status,
 * ctx->last_id) and turns *v into CRPM_V_FRESH, so restart.c creates this
 * job's containers; otherwise *v is left alone.  l4_path: the file of a
 * CRPM_V_FOUND verdict.  An error (agreed) leaves every file as it was. */
int crpm_reshape_restart(crpm_ctx *ctx, crpm_verdict *v, const char *l4_path);

/* Every rank committed a checkpoint at `level`: the kept older generation
 * goes when the level covers it (collective). */
int crpm_reshape_committed(crpm_ctx *ctx, int level);
/* Finalize without keep_last_ckpt: the kept files go too (collective). */
int crpm_reshape_finalize(crpm_ctx *ctx);

#endif
