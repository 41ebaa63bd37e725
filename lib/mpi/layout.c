/* The job layout recorded in checkpoint files (layout.h). */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include "agree.h"
#include "error.h"
#include "fsutil.h"
#include "full.h"
#include "layout.h"

/* Files a rank reads when its container is missing and it scans the job
 * directory: enough to see a changed configuration (every file of a job
 * records the same settings) without reading a shared directory whole. */
#define SCAN_MAX 64

void crpm_layout_of_run(crpm_ctx *ctx)
{
    ctx->layout = (crpm_layout){
        .role = CRPM_ROLE_RANK,
        .node_size = ctx->cfg.node_size,
        .node = ctx->topo.node,
        .nnodes = ctx->topo.nnodes,
        .group_size = (int)ctx->cfg.group_size,
        .l3_parity = (int)ctx->cfg.l3_parity,
    };
}

/* What differs, as every rank learns it from the first rank that saw it. */
enum { D_NONE, D_ROLE, D_NODE_SIZE, D_GROUP_SIZE, D_L3_PARITY, D_NNODES, D_NODE };

typedef struct finding {
    int32_t what;              /* D_* */
    int32_t was, now;          /* recorded, this run */
    int32_t was_nodes, now_nodes; /* D_NODE_SIZE: the numbers of nodes */
    int32_t rank;              /* the file's rank */
    char file[CRPM_PATH_MAX];
} finding;

static int role_of_name(const char *name, int *rank)
{
    if ((*rank = crpm_parse_container_name(name)) >= 0 || (*rank = crpm_parse_partner_name(name)) >= 0)
        return CRPM_ROLE_RANK;
    if ((*rank = crpm_parse_parity_name(name)) >= 0)
        return CRPM_ROLE_PARITY;
    return 0;
}

/* Whether the file at path (in this rank's job directory, named as a file
 * of `role`) records another layout than this run's; sets *f if so.  Files
 * that do not open, belong to another job or rank count, hold no checkpoint
 * or have no record are left to the restart decision. */
static int differs(const crpm_ctx *ctx, const char *path, int role, finding *f)
{
    crpm_header_facts h;
    if (crpm_header_read(path, &h) != CRPM_SUCCESS) {
        crpm_error_clear();
        return 0;
    }
    if (strcmp(h.job, ctx->cfg.job_name) != 0 || h.nranks != ctx->nranks || h.rank < 0 || h.rank >= ctx->nranks ||
        h.has_layout != 1)
        return 0;
    int64_t full[2] = {-1, -1};
    if (h.epoch == 0 && ctx->cfg.method == CRPM_METHOD_FULL && h.layout.role == CRPM_ROLE_RANK)
        crpm_full_newest(ctx->job_dir, h.rank, full); /* the empty container marks full files */
    if (h.epoch == 0 && full[0] < 0)
        return 0;
    const crpm_layout *was = &h.layout, *now = &ctx->layout;
    memset(f, 0, sizeof *f);
    f->rank = h.rank;
    snprintf(f->file, sizeof f->file, "%s", path);
    if (was->role != role) {
        f->what = D_ROLE;
        f->was = was->role;
        f->now = role;
    } else if (was->node_size != now->node_size) {
        f->what = D_NODE_SIZE;
        f->was = was->node_size;
        f->now = now->node_size;
        f->was_nodes = was->nnodes;
        f->now_nodes = now->nnodes;
    } else if (role == CRPM_ROLE_PARITY && was->group_size != now->group_size) {
        f->what = D_GROUP_SIZE;
        f->was = was->group_size;
        f->now = now->group_size;
    } else if (role == CRPM_ROLE_PARITY && was->l3_parity != now->l3_parity) {
        f->what = D_L3_PARITY;
        f->was = was->l3_parity;
        f->now = now->l3_parity;
    } else if (was->nnodes != now->nnodes) {
        f->what = D_NNODES;
        f->was = was->nnodes;
        f->now = now->nnodes;
    } else if (was->node != ctx->topo.node_of[h.rank]) {
        f->what = D_NODE;
        f->was = was->node;
        f->now = ctx->topo.node_of[h.rank];
    }
    return f->what != D_NONE;
}

static int differs_name(const crpm_ctx *ctx, const char *name, finding *f)
{
    char p[CRPM_PATH_MAX];
    int r, role = role_of_name(name, &r);
    return role && crpm_name_join(p, sizeof p, ctx->job_dir, name) == 0 && differs(ctx, p, role, f);
}

/* This rank's files, then, when its container is missing, what else its
 * job directory holds. */
static int look(const crpm_ctx *ctx, finding *f)
{
    char name[64];
    struct stat st;
    snprintf(name, sizeof name, "rank-%d.crpm", ctx->rank);
    if (differs_name(ctx, name, f))
        return 1;
    snprintf(name, sizeof name, "parity-%d.crpm", ctx->rank);
    if (differs_name(ctx, name, f))
        return 1;
    for (int i = 0; i < ctx->topo.nowners; i++) {
        snprintf(name, sizeof name, "partner-%d.crpm", ctx->topo.owners[i]);
        if (differs_name(ctx, name, f))
            return 1;
    }
    if (stat(ctx->path, &st) == 0)
        return 0;
    DIR *d = opendir(ctx->job_dir);
    if (!d)
        return 0;
    int found = 0, read = 0, r;
    struct dirent *e;
    while (!found && read < SCAN_MAX && (e = readdir(d)) != NULL)
        if (role_of_name(e->d_name, &r)) {
            read++;
            found = differs_name(ctx, e->d_name, f);
        }
    closedir(d);
    return found;
}

static const char *role_name(int role)
{
    return role == CRPM_ROLE_PARITY ? "a level-3 parity container" : "a rank's container";
}

static void nodes_text(char *buf, size_t n, int node_size, int nnodes)
{
    if (node_size > 0)
        snprintf(buf, n, "node_size = %d (%d node%s)", node_size, nnodes, nnodes == 1 ? "" : "s");
    else
        snprintf(buf, n, "node_size = 0 (MPI's shared-memory nodes, %d node%s)", nnodes, nnodes == 1 ? "" : "s");
}

/* The one message every rank returns. */
static int report(const crpm_ctx *ctx, const finding *f)
{
    static const char *keep = "nothing was changed or removed";
    const char *job = ctx->cfg.job_name;
    char a[96], b[96];
    switch (f->what) {
    case D_ROLE:
        return crpm_error(CRPM_ERR_IDENTITY,
                          "crpm_init: %s is named as %s of rank %d but its layout record says it is %s; refusing "
                          "to use it (a file was renamed or copied); %s",
                          f->file, role_name(f->now), f->rank, role_name(f->was), keep);
    case D_NODE_SIZE:
        nodes_text(a, sizeof a, f->was, f->was_nodes);
        nodes_text(b, sizeof b, f->now, f->now_nodes);
        return crpm_error(CRPM_ERR_CONFIG,
                          "crpm_init: configuration mismatch: the checkpoints of job '%s' were written with %s, this "
                          "run has %s (recorded in %s); relaunch with node_size = %d to restart from them; %s",
                          job, a, b, f->file, f->was, keep);
    case D_GROUP_SIZE:
    case D_L3_PARITY: {
        const char *key = f->what == D_GROUP_SIZE ? "group_size" : "l3_parity";
        return crpm_error(CRPM_ERR_CONFIG,
                          "crpm_init: configuration mismatch: the level-3 parity of job '%s' was written with %s = %d, "
                          "this run has %s = %d (recorded in %s); relaunch with %s = %d to restart from it; %s",
                          job, key, f->was, key, f->now, f->file, key, f->was, keep);
    }
    case D_NNODES:
        return crpm_error(CRPM_ERR_CONFIG,
                          "crpm_init: configuration mismatch: the checkpoints of job '%s' were written on %d nodes, "
                          "this run has %d (node_size = %d%s; recorded in %s); relaunch on the same nodes with the "
                          "same ranks per node to restart from them; %s",
                          job, f->was, f->now, ctx->cfg.node_size,
                          ctx->cfg.node_size ? "" : ": MPI's shared-memory nodes", f->file, keep);
    default:
        return crpm_error(CRPM_ERR_CONFIG,
                          "crpm_init: configuration mismatch: rank %d was on node %d when the checkpoints of job '%s' "
                          "were written and is on node %d in this run (node_size = %d%s; recorded in %s); relaunch "
                          "with the same placement of ranks on nodes to restart from them; %s",
                          f->rank, f->was, job, f->now, ctx->cfg.node_size,
                          ctx->cfg.node_size ? "" : ": MPI's shared-memory nodes", f->file, keep);
    }
}

int crpm_layout_check(crpm_ctx *ctx)
{
    finding f;
    memset(&f, 0, sizeof f);
    int64_t first = look(ctx, &f) ? ctx->rank : ctx->nranks;
    int rc = crpm_agree_ext(ctx->comm, ctx->rank, CRPM_SUCCESS, "crpm_init: comparing the recorded job layout",
                            &first, 1);
    if (rc != 0 || first >= ctx->nranks)
        return rc;
    int mrc = MPI_Bcast(&f, (int)sizeof f, MPI_BYTE, (int)first, ctx->comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, "crpm_init: MPI_Bcast of a layout mismatch");
    return report(ctx, &f);
}
