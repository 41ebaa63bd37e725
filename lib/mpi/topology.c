/* Nodes and level-2 partners (topology.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "agree.h"
#include "error.h"
#include "topology.h"
#include "l3_code.h"

/* Rank of local index `l` on node `n` (node[] holds every rank's node). */
static int rank_at(const int *node, int nranks, int n, int l)
{
    for (int r = 0, k = 0; r < nranks; r++)
        if (node[r] == n && k++ == l)
            return r;
    return -1;
}

static int node_count(const int *node, int nranks, int n)
{
    int k = 0;
    for (int r = 0; r < nranks; r++)
        k += node[r] == n;
    return k;
}

int crpm_topology_build(MPI_Comm comm, int node_size, crpm_topology *t)
{
    int rank, nranks;
    memset(t, 0, sizeof *t);
    t->partner = -1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &nranks);
    if (gethostname(t->host, sizeof t->host - 1) != 0)
        snprintf(t->host, sizeof t->host, "unknown");
    int *node = malloc(sizeof(int) * (size_t)nranks);
    if (!node)
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    int mine, mrc = MPI_SUCCESS;
    if (node_size > 0) {
        mine = rank / node_size;
    } else {
        /* the node's lowest rank names it; split_type keeps comm's order */
        MPI_Comm nc;
        mrc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &nc);
        int leader = rank;
        if (mrc == MPI_SUCCESS) {
            mrc = MPI_Allreduce(&rank, &leader, 1, MPI_INT, MPI_MIN, nc);
            MPI_Comm_free(&nc);
        }
        mine = leader;
    }
    if (mrc == MPI_SUCCESS)
        mrc = MPI_Allgather(&mine, 1, MPI_INT, node, 1, MPI_INT, comm);
    if (mrc != MPI_SUCCESS) {
        free(node);
        return crpm_mpi_fail(mrc, "crpm_init: finding the nodes");
    }
    if (node_size <= 0) {
        /* leaders' ranks -> 0, 1, 2, ... in rank order */
        int *id = malloc(sizeof(int) * (size_t)nranks);
        if (!id) {
            free(node);
            return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
        }
        int n = 0;
        for (int r = 0; r < nranks; r++)
            id[r] = node[r] == r ? n++ : -1;
        for (int r = 0; r < nranks; r++)
            node[r] = id[node[r]];
        free(id);
    }
    t->node = node[rank];
    t->nnodes = node[nranks - 1] + 1;
    for (int r = 0; r < nranks; r++)
        t->nnodes = node[r] + 1 > t->nnodes ? node[r] + 1 : t->nnodes;
    t->nlocal = node_count(node, nranks, t->node);
    for (int r = 0; r < rank; r++)
        t->local += node[r] == t->node;
    if (t->nnodes > 1) {
        int next = (t->node + 1) % t->nnodes, prev = (t->node + t->nnodes - 1) % t->nnodes;
        t->partner = rank_at(node, nranks, next, t->local % node_count(node, nranks, next));
        int nprev = node_count(node, nranks, prev);
        t->owners = malloc(sizeof(int) * (size_t)(nprev + 1));
        if (!t->owners) {
            free(node);
            return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
        }
        for (int l = 0; l < nprev; l++)
            if (l % t->nlocal == t->local)
                t->owners[t->nowners++] = rank_at(node, nranks, prev, l);
    }
    t->node_of = node; /* kept: restart compares it with the nodes files record */
    return CRPM_SUCCESS;
}

void crpm_topology_free(crpm_topology *t)
{
    free(t->owners);
    free(t->node_of);
    t->owners = NULL;
    t->node_of = NULL;
    t->nowners = 0;
}

int crpm_topology_expand(const crpm_topology *t, const char *pattern, char *out, size_t len)
{
    size_t o = 0;
    for (const char *p = pattern; *p; p++) {
        char num[16];
        const char *ins = NULL;
        if (*p == '%' && p[1] == 'n') {
            snprintf(num, sizeof num, "%d", t->node);
            ins = num;
        } else if (*p == '%' && p[1] == 'h') {
            ins = t->host;
        } else if (*p == '%' && p[1] == '%') {
            ins = "%";
        } else if (*p == '%') {
            return crpm_error(CRPM_ERR_CONFIG, "ckpt_dir '%s': unknown '%%%c' (use %%n for the node, %%h for the host "
                              "name, %%%% for '%%')", pattern, p[1] ? p[1] : ' ');
        }
        size_t n = ins ? strlen(ins) : 1;
        if (o + n >= len)
            return crpm_error(CRPM_ERR_CONFIG, "ckpt_dir '%s': too long once expanded", pattern);
        memcpy(out + o, ins ? ins : p, n);
        o += n;
        p += ins != NULL;
    }
    out[o] = '\0';
    return CRPM_SUCCESS;
}

int crpm_topology_l3(MPI_Comm comm, const crpm_topology *t, int K, int M, int **groups, int **members)
{
    int nranks;
    MPI_Comm_size(comm, &nranks);
    *groups = *members = NULL;
    int mine[3] = {t->node, t->local, t->nlocal};
    int *all = malloc(sizeof(int) * 3 * (size_t)nranks);
    if (!all)
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    int mrc = MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, comm);
    if (mrc != MPI_SUCCESS) {
        free(all);
        return crpm_mpi_fail(mrc, "crpm_init: MPI_Allgather of the nodes");
    }
    int rc = crpm_l3_layout_check(t->nnodes, K, M);
    for (int r = 0; rc == 0 && r < nranks; r++)
        for (int q = 0; q < nranks; q++)
            if (all[3 * q] / K == all[3 * r] / K && all[3 * q + 2] != all[3 * r + 2]) {
                rc = crpm_error(CRPM_ERR_CONFIG, "level 3: nodes %d and %d of one group hold %d and %d ranks; every "
                                "node of a group needs the same number", all[3 * r], all[3 * q], all[3 * r + 2],
                                all[3 * q + 2]);
                break;
            }
    if (rc == 0) {
        *groups = malloc(sizeof(int) * (size_t)nranks);
        *members = malloc(sizeof(int) * (size_t)nranks);
        if (!*groups || !*members)
            rc = crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    }
    for (int r = 0; rc == 0 && r < nranks; r++) {
        (*groups)[r] = (all[3 * r] / K) * nranks + all[3 * r + 1];
        (*members)[r] = all[3 * r] % K;
    }
    if (rc != 0) {
        free(*groups);
        free(*members);
        *groups = *members = NULL;
    }
    free(all);
    return rc;
}
