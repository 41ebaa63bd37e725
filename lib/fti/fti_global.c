/* FTI's global datasets (its "VPR": FTI_DefineGlobalDataset, FTI_AddSubset
 * and friends) on libcrpm's global layout (crpm_define_global,
 * crpm_add_subset, crpm_global_dims; docs/reshape.md).  FTI's arguments are
 * C order, as libcrpm's.  The datasets are written at the root of level-4
 * files (the HDF5 group argument is accepted and not used). */
#include <fti.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crpm.h>

#include "fti_internal.h"

typedef struct gds {
    int id, rank;
    FTIT_hsize_t dims[FTI_MAX_DIMS];
    char name[FTI_BUFS];
    crpm_type_t type;
    int *vars;         /* the variables added as its subsets */
    int nvars;
} gds;

static gds *G;
static int nG;

static gds *find(int id)
{
    for (int i = 0; i < nG; i++)
        if (G[i].id == id)
            return &G[i];
    return NULL;
}

static int fail(const char *fn, int rc)
{
    fti_say(FTI_EROR, 1, "%s: %s: %s", fn, crpm_strerror(rc), crpm_last_error());
    return FTI_NSCS;
}

static int ready(const char *fn)
{
    if (fti_initialized())
        return 1;
    fti_say(FTI_EROR, 1, "%s: FTI is not initialised (call FTI_Init first)", fn);
    return 0;
}

static int define(const char *fn, gds *g)
{
    int64_t d[FTI_MAX_DIMS];
    for (int k = 0; k < g->rank; k++)
        d[k] = (int64_t)g->dims[k];
    int rc = crpm_define_global(g->id, g->rank, d, g->type, g->name[0] ? g->name : NULL);
    return rc < 0 ? fail(fn, rc) : FTI_SCES;
}

int FTI_DefineGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength, const char *name, FTIT_H5Group *h5group,
                            fti_id_t tid)
{
    const char *fn = "FTI_DefineGlobalDataset";
    (void)h5group;
    if (!ready(fn))
        return FTI_NSCS;
    if (find(id)) {
        fti_say(FTI_EROR, 1, "%s: id '%d' is already taken", fn, id);
        return FTI_NSCS;
    }
    if (rank < 1 || rank > FTI_MAX_DIMS || !dimLength) {
        fti_say(FTI_EROR, 1, "%s(%d): rank %d (1 to %d, with the dimension lengths)", fn, id, rank, FTI_MAX_DIMS);
        return FTI_NSCS;
    }
    gds g;
    memset(&g, 0, sizeof g);
    g.id = id;
    g.rank = rank;
    memcpy(g.dims, dimLength, sizeof *dimLength * (size_t)rank);
    if (name)
        snprintf(g.name, sizeof g.name, "%s", name);
    if (fti_type_of(tid, &g.type) != 0) {
        fti_say(FTI_EROR, 1, "%s(%d): invalid data type handle %d", fn, id, tid);
        return FTI_NSCS;
    }
    if (define(fn, &g) != FTI_SCES)
        return FTI_NSCS;
    gds *n = realloc(G, sizeof *n * (size_t)(nG + 1));
    if (!n) {
        fti_say(FTI_EROR, 1, "%s: out of memory", fn);
        return FTI_NSCS;
    }
    G = n;
    G[nG++] = g;
    return FTI_SCES;
}

static int subset(const char *fn, int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int did, int update)
{
    if (!ready(fn))
        return FTI_NSCS;
    gds *g = find(did);
    if (!g) {
        fti_say(FTI_EROR, 1, "%s(%d): dataset id %d could not be found", fn, id, did);
        return FTI_NSCS;
    }
    if (g->rank != rank || !offset || !count) {
        fti_say(FTI_EROR, 1, "%s(%d): rank mismatch (dataset %d has rank %d, given %d)", fn, id, did, g->rank, rank);
        return FTI_NSCS;
    }
    int known = 0;
    for (int i = 0; i < g->nvars; i++)
        known |= g->vars[i] == id;
    if (update && !known) {
        fti_say(FTI_EROR, 1, "%s(%d): variable %d is not a subset of dataset %d", fn, id, id, did);
        return FTI_NSCS;
    }
    int64_t o[FTI_MAX_DIMS], c[FTI_MAX_DIMS];
    for (int k = 0; k < rank; k++) {
        o[k] = (int64_t)offset[k];
        c[k] = (int64_t)count[k];
    }
    int rc = crpm_add_subset(did, id, o, c);
    if (rc < 0)
        return fail(fn, rc);
    if (!known) {
        int *n = realloc(g->vars, sizeof *n * (size_t)(g->nvars + 1));
        if (!n) {
            fti_say(FTI_EROR, 1, "%s: out of memory", fn);
            return FTI_NSCS;
        }
        g->vars = n;
        g->vars[g->nvars++] = id;
    }
    return FTI_SCES;
}

int FTI_AddSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int did)
{
    return subset("FTI_AddSubset", id, rank, offset, count, did, 0);
}

int FTI_UpdateSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int did)
{
    return subset("FTI_UpdateSubset", id, rank, offset, count, did, 1);
}

int FTI_UpdateGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength)
{
    const char *fn = "FTI_UpdateGlobalDataset";
    if (!ready(fn))
        return FTI_NSCS;
    gds *g = find(id);
    if (!g || rank < 1 || rank > FTI_MAX_DIMS || !dimLength) {
        fti_say(FTI_EROR, 1, "%s(%d): %s", fn, id, g ? "bad rank or dimensions" : "invalid dataset id");
        return FTI_NSCS;
    }
    gds t = *g;
    t.rank = rank;
    memcpy(t.dims, dimLength, sizeof *dimLength * (size_t)rank);
    if (define(fn, &t) != FTI_SCES)
        return FTI_NSCS;
    *g = t;
    return FTI_SCES;
}

int FTI_RecoverDatasetDimension(int did)
{
    const char *fn = "FTI_RecoverDatasetDimension";
    if (!ready(fn))
        return FTI_NSCS;
    gds *g = find(did);
    if (!g) {
        fti_say(FTI_EROR, 1, "%s(%d): failed to find the dataset", fn, did);
        return FTI_NSCS;
    }
    if (FTI_Status() == 0) {
        fti_say(FTI_EROR, 1, "%s(%d): no checkpoint waits to be recovered", fn, did);
        return FTI_NSCS;
    }
    int64_t d[CRPM_MAX_DIMS];
    int n = crpm_global_dims(did, d);
    if (n < 0)
        return fail(fn, n);
    g->rank = n;
    for (int k = 0; k < n; k++)
        g->dims[k] = (FTIT_hsize_t)d[k];
    return define(fn, g);
}

FTIT_hsize_t *FTI_GetDatasetSpan(int did, int rank)
{
    static FTIT_hsize_t span[FTI_MAX_DIMS];
    gds *g = ready("FTI_GetDatasetSpan") ? find(did) : NULL;
    if (!g || g->rank != rank) {
        fti_say(FTI_WARN, 1, "FTI_GetDatasetSpan(%d): %s", did, g ? "dataset rank mismatch" : "no such dataset");
        return NULL;
    }
    memcpy(span, g->dims, sizeof *span * (size_t)rank);
    return span;
}

int FTI_GetDatasetRank(int did)
{
    gds *g = ready("FTI_GetDatasetRank") ? find(did) : NULL;
    if (!g) {
        fti_say(FTI_WARN, 1, "FTI_GetDatasetRank(%d): no such dataset", did);
        return FTI_NSCS;
    }
    return g->rank;
}

int fti_global_count(void) { return nG; }

void fti_global_reset(void)
{
    for (int i = 0; i < nG; i++)
        free(G[i].vars);
    free(G);
    G = NULL;
    nG = 0;
}
