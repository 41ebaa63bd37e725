/* Internals shared by reshape.c (planning at init) and reshape_read.c
 * (the recovery). */
#ifndef CRPM_MPI_RESHAPE_INT_H
#define CRPM_MPI_RESHAPE_INT_H
#include "l4_global.h"
#include "reshape.h"
#include "reshape_plan.h"
#include "testhook.h"

struct rs_open {               /* a level-1 source this rank reads */
    int file;                  /* index into files */
    int q;                     /* old rank */
    crpm_container *c;         /* read-only, at the plan's epoch */
    int lock_fd;               /* old rank q's lock, when this rank took it */
};

/* Kept names: <name>.held-<run>; a container rebuilt from level 3 adds -l3. */
#define CRPM_RS_HELD ".held-"
#define CRPM_RS_REBUILT "-l3"

struct crpm_rs_restart {
    crpm_rs_plan plan;
    crpm_rs_file *files;       /* what the scanners found, every rank's copy */
    int nfiles;
    crpm_l4g_file *l4f;        /* the job's level-4 files */
    int nl4f;
    struct rs_open *open;
    int nopen;
    crpm_l4g *l4;              /* CRPM_RS_L4: the open file */
    char l4_path[CRPM_PATH_MAX];
    int N;                     /* old rank count */
    crpm_glayout *old;          /* N: each old rank's layout */
    crpm_array **arrs;         /* N: each old rank's saved arrays (ptr NULL) */
    int *narrs;
    crpm_glayout merged;        /* the old global datasets */
    crpm_rs_file *rebuilt;     /* the containers this rank rebuilt from level 3 */
    int nrebuilt;
};

void crpm_rs_restart_free(crpm_rs_restart *s);
/* The record of file `name` in this rank's job directory, as a scan makes it
 * (an error only when the name is too long). */
int crpm_rs_describe(const crpm_ctx *ctx, const char *name, crpm_rs_file *x);
/* The tag of a run in kept names. */
void crpm_rs_run_tag(const uint8_t *run, char *tag, size_t n);
/* Collective (reshape_l3.c): the old ranks the plan rebuilds from level 3
 * are rebuilt, written as kept containers and made the plan's sources.
 * Units that fail their checks mark their files bad (*nbad: how many, the
 * same on every rank; the plan is then to be made again). */
int crpm_rs_l3_rebuild(crpm_ctx *ctx, crpm_rs_restart *s, int *nbad);
/* Removes the containers this rank rebuilt (a restart that failed). */
void crpm_rs_l3_discard(crpm_ctx *ctx, crpm_rs_restart *s);
int crpm_rs_allgather(crpm_ctx *ctx, const void *mine, int n, size_t size, void **all, int *nall);
/* Makes r->level read from r->rs (reshape_read.c). */
void crpm_rs_level_init(crpm_ctx *ctx, crpm_reshape *r);

#endif
