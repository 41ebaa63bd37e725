/* The level-3 part of a reshaped restart's plan (reshape_plan.h): old ranks
 * whose containers were lost with their nodes, rebuilt from the surviving
 * containers and parity of their level-3 groups (reshape_l3.c carries it
 * out).  Pure: no MPI, no files, so the unit test drives it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "l3_code.h"
#include "reshape_plan.h"

void crpm_rs_plan_l3_free(crpm_rs_plan *p)
{
    free(p->build);
    free(p->node);
    free(p->member);
    free(p->group);
    free(p->par);
    free(p->par_reader);
    p->build = p->node = p->member = p->group = p->par = p->par_reader = NULL;
    p->nbuild = 0;
    p->K = p->M = 0;
}

static int of_run(const crpm_rs_file *x, const uint8_t *run) { return memcmp(x->run, run, 16) == 0; }

/* A parity file of the run whose committed or previous state is the job's
 * epoch e (a parity container's user id is the job epoch it encodes). */
static int parity_serves(const crpm_rs_file *x, const uint8_t *run, uint64_t e)
{
    return x->kind == CRPM_RS_PARITY && x->rc == 0 && !x->bad && of_run(x, run) &&
           (x->user_id == e || (x->prev_ok && x->prev_user_id == e));
}

/* The old run's node of every old rank and its code: from the layout
 * records of the files found (a container and a parity file record their
 * rank's node), else from node_size, else the one node no file names.
 * 0 when the groups cannot be known. */
static int old_nodes(const crpm_rs_facts *f, const uint8_t *run, int N, crpm_rs_plan *p)
{
    int nsize = -1, nnodes = 0, unknown = 0, *node = p->node, *K = &p->K, *M = &p->M;
    *K = *M = 0;
    for (int q = 0; q < N; q++)
        node[q] = -1;
    for (int i = 0; i < f->nf; i++) {
        const crpm_rs_file *x = &f->f[i];
        if (x->rc != 0 || !x->has_lay || !of_run(x, run))
            continue;
        if (x->kind == CRPM_RS_PARITY && x->lay_K > 0) {
            if (*K && (*K != x->lay_K || *M != x->lay_M))
                return 0;
            *K = x->lay_K;
            *M = x->lay_M;
        }
        nsize = x->lay_nsize;
        nnodes = x->lay_nnodes > nnodes ? x->lay_nnodes : nnodes;
        if (x->kind != CRPM_RS_COPY && x->q >= 0 && x->q < N)
            node[x->q] = x->lay_node;
    }
    if (*K < 2 || *M < 1 || *M >= *K || nnodes < *K)
        return 0;
    for (int q = 0; q < N; q++)
        if (node[q] < 0 && nsize > 0)
            node[q] = q / nsize;
        else
            unknown += node[q] < 0;
    if (unknown) { /* nodes numbered by their lowest rank: only one unseen node can be told */
        int missing = -1, nmissing = 0;
        for (int n = 0; n < nnodes; n++) {
            int seen = 0;
            for (int q = 0; q < N && !seen; q++)
                seen = node[q] == n;
            if (!seen) {
                missing = n;
                nmissing++;
            }
        }
        if (nmissing != 1)
            return 0;
        for (int q = 0; q < N; q++)
            node[q] = node[q] < 0 ? missing : node[q];
    }
    for (int q = 0; q < N; q++)
        if (node[q] < 0 || node[q] >= nnodes)
            return 0;
    p->nsize = nsize > 0 ? nsize : 0;
    p->nnodes = nnodes;
    return 1;
}

/* Old rank holding member m of group g, or -1. */
static int rank_of(const crpm_rs_plan *p, int N, int g, int m)
{
    for (int r = 0; r < N; r++)
        if (p->group[r] == g && p->member[r] == m)
            return r;
    return -1;
}

/* Whether a file of old rank r of kind `kind` failed its checks. */
static int damaged(const crpm_rs_facts *f, const uint8_t *run, int r, int kind)
{
    for (int i = 0; i < f->nf; i++)
        if (f->f[i].bad && f->f[i].q == r && f->f[i].kind == kind && of_run(&f->f[i], run))
            return 1;
    return 0;
}

/* Every codeword of lost old rank q keeps k units (data units only from
 * containers: a partner copy serves its rank, not the code).  0 and why. */
static int decodable(const crpm_rs_facts *f, const uint8_t *run, const crpm_rs_plan *p, int N, const int *src, int q,
                     uint64_t e, char *why, size_t wn)
{
    crpm_l3_layout lay = {p->K, p->M};
    int k = p->K - p->M;
    for (int j = 0; j < k; j++) {
        int c = crpm_l3_codeword_of(&lay, p->member[q], j), n = 0, bad = 0;
        for (int i = 0; i < k; i++) {
            int r = rank_of(p, N, p->group[q], crpm_l3_data_member(&lay, c, i));
            int ok = r >= 0 && src[r] >= 0 && f->f[src[r]].kind == CRPM_RS_CONT;
            n += ok;
            bad |= !ok && r >= 0 && damaged(f, run, r, CRPM_RS_CONT);
        }
        for (int h = 0; h < p->M; h++) {
            int r = rank_of(p, N, p->group[q], crpm_l3_holder(&lay, c, h));
            n += r >= 0 && p->par[r] >= 0;
            bad |= r >= 0 && p->par[r] < 0 && damaged(f, run, r, CRPM_RS_PARITY);
        }
        if (n < k) {
            snprintf(why, wn, "old rank %d's level-3 group keeps %d of the %d units of its codeword %d at epoch %llu "
                     "(intact containers and parity reachable by this run), %d needed%s", q, n, p->K, c,
                     (unsigned long long)e, k, bad ? "; some failed their checksums (see the messages above)" : "");
            return bad ? -1 : 0;
        }
    }
    return 1;
}

/* The least loaded rank of this job on `node` (any node: -1), lowest on ties. */
static int least_loaded(const crpm_rs_facts *f, const int *load, int node)
{
    int best = -1;
    for (int r = 0; r < f->M; r++)
        if ((node < 0 || f->node_of[r] == node) && (best < 0 || load[r] < load[best]))
            best = r;
    return best;
}

int crpm_rs_plan_l3(const crpm_rs_facts *f, const uint8_t run[16], int N, uint64_t e, const int *src,
                    crpm_rs_plan *p, char *why, size_t wn)
{
    crpm_rs_plan_l3_free(p);
    why[0] = '\0';
    size_t n = (size_t)N + 1;
    int *node = p->node = malloc(sizeof *node * n), *load = calloc((size_t)f->M + 1, sizeof *load);
    p->build = malloc(sizeof *p->build * n);
    p->member = malloc(sizeof *p->member * n);
    p->group = malloc(sizeof *p->group * n);
    p->par = malloc(sizeof *p->par * n);
    p->par_reader = malloc(sizeof *p->par_reader * n);
    int ok = -1;
    if (!node || !load || !p->build || !p->member || !p->group || !p->par || !p->par_reader)
        goto out;
    ok = 0;
    if (!old_nodes(f, run, N, p)) {
        snprintf(why, wn, "the old run's level-3 groups cannot be told from the files found (no parity, or the "
                 "nodes of more than one lost node's ranks unknown)");
        goto out;
    }
    for (int q = 0; q < N; q++) {
        int local = 0;
        for (int r = 0; r < q; r++)
            local += node[r] == node[q];
        p->member[q] = node[q] % p->K;
        p->group[q] = (node[q] / p->K) * N + local;
        p->build[q] = p->par[q] = p->par_reader[q] = -1;
    }
    for (int i = 0; i < f->nf; i++)
        if (parity_serves(&f->f[i], run, e) && f->f[i].q >= 0 && f->f[i].q < N && p->par[f->f[i].q] < 0) {
            int r = f->f[i].q;
            p->par[r] = i;
            p->par_reader[r] = least_loaded(f, load, f->f[i].node);
            if (p->par_reader[r] < 0)
                p->par[r] = -1; /* no rank of this job on that node: cannot happen for a scanned file */
            else
                load[p->par_reader[r]]++;
        }
    for (int q = 0; q < N; q++) {
        if (src[q] >= 0)
            continue;
        int d = decodable(f, run, p, N, src, q, e, why, wn);
        if (d <= 0) {
            ok = d < 0 ? -2 : 0;
            goto out;
        }
        /* old rank q itself when this job has it, else the least loaded rank */
        p->build[q] = q < f->M ? q : least_loaded(f, load, -1);
        load[p->build[q]] += 2;
        p->nbuild++;
    }
    ok = 1;
out:
    free(load);
    if (ok != 1)
        crpm_rs_plan_l3_free(p);
    return ok;
}
