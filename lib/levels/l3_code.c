/* Level 3's group layout and Reed-Solomon coding (l3_code.h).  All GF(2^8)
 * arithmetic is ISA-L's; this file only arranges matrices and pointers. */
#include <isa-l/erasure_code.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "l3_code.h"
#include "pool.h"

/* ISA-L takes int lengths; longer buffers go through in pieces of this many
 * bytes.  A multiple of 64 keeps every piece after the first as aligned as
 * the buffer.  Tests build this file again with a small value to run the
 * piece loop on short buffers. */
#ifndef CRPM_L3_CHUNK
#define CRPM_L3_CHUNK ((size_t)1 << 30)
#endif
_Static_assert(CRPM_L3_CHUNK > 0 && CRPM_L3_CHUNK <= INT_MAX, "CRPM_L3_CHUNK must fit ISA-L's int length");

#define L3_MAX_UNITS 255 /* crpm_l3_decoder's arrays; GF(2^8) Cauchy rows also end at 256 */

int crpm_l3_layout_check(int nnodes, int group_size, int parity)
{
    if (group_size < 2)
        return crpm_error(CRPM_ERR_CONFIG, "level 3 needs at least 2 nodes per group (group_size is %d)",
                          group_size);
    if (group_size > L3_MAX_UNITS)
        return crpm_error(CRPM_ERR_CONFIG, "level 3: group_size %d is more than %d, the largest codeword",
                          group_size, L3_MAX_UNITS);
    if (parity < 1)
        return crpm_error(CRPM_ERR_CONFIG, "level 3: l3_parity %d is less than 1", parity);
    if (parity > group_size / 2)
        return crpm_error(CRPM_ERR_CONFIG, "l3_parity %d is more than half of group_size %d", parity,
                          group_size);
    if (nnodes < group_size)
        return crpm_error(CRPM_ERR_CONFIG, "level 3: group_size %d needs at least %d nodes, the job has %d",
                          group_size, group_size, nnodes);
    if (nnodes % group_size != 0)
        return crpm_error(CRPM_ERR_CONFIG, "level 3: group_size %d needs a multiple of %d nodes, the job has %d",
                          group_size, group_size, nnodes);
    return CRPM_SUCCESS;
}

/* The j-th member, increasing, of 0..K-1 without the circular run
 * first, first+1, ..., first+M-1 (mod K). */
static int outside_run(int K, int M, int first, int j)
{
    if (j < 0 || j >= K - M)
        return -1;
    if (first + M <= K)                      /* run [first, first+M): members [0, first) then [first+M, K) */
        return j < first ? j : j + M;
    return j + (first + M - K);              /* run wraps: the members left are [first+M-K, first) */
}

/* Position of g among the members outside that run, or -1 when g is in it. */
static int outside_index(int K, int M, int first, int g)
{
    if ((g - first + K) % K < M)
        return -1;
    if (first + M <= K)
        return g < first ? g : g - M;
    return g - (first + M - K);
}

int crpm_l3_holder(const crpm_l3_layout *l, int c, int h)
{
    if (c < 0 || c >= l->K || h < 0 || h >= l->M)
        return -1;
    return (c + h) % l->K;
}

int crpm_l3_parity_row(const crpm_l3_layout *l, int c, int g)
{
    int r = (g - c + l->K) % l->K;
    return r < l->M ? r : -1;
}

int crpm_l3_data_index(const crpm_l3_layout *l, int c, int g)
{
    return outside_index(l->K, l->M, c, g);
}

int crpm_l3_data_member(const crpm_l3_layout *l, int c, int i)
{
    return outside_run(l->K, l->M, c, i);
}

/* g holds parity of codewords g-M+1 .. g (mod K), a data unit of all others. */
int crpm_l3_codeword_of(const crpm_l3_layout *l, int g, int j)
{
    return outside_run(l->K, l->M, ((g - l->M + 1) % l->K + l->K) % l->K, j);
}

int crpm_l3_code_init(crpm_l3_code *c, int k, int m)
{
    memset(c, 0, sizeof *c);
    if (k < 1 || m < 1 || k + m > L3_MAX_UNITS)
        return crpm_error(CRPM_ERR_INVAL, "level 3: no code with %d data and %d parity units", k, m);
    c->matrix = malloc((size_t)(k + m) * (size_t)k);
    c->tbls = malloc((size_t)m * (size_t)k * 32);
    if (!c->matrix || !c->tbls) {
        crpm_l3_code_free(c);
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for the coding tables");
    }
    c->k = k;
    c->m = m;
    gf_gen_cauchy1_matrix(c->matrix, k + m, k);
    /* Row h's tables start at h*k*32, element (h, i) at (h*k + i)*32: the
     * layout ec_encode_data wants for all rows and ec_encode_data_update
     * for one row. */
    ec_init_tables(k, m, c->matrix + (size_t)k * (size_t)k, c->tbls);
    return CRPM_SUCCESS;
}

void crpm_l3_code_free(crpm_l3_code *c)
{
    free(c->matrix);
    free(c->tbls);
    c->matrix = c->tbls = NULL;
    c->k = c->m = 0;
}

void crpm_l3_update(const crpm_l3_code *c, int h, int i, const void *delta, void *parity, size_t len)
{
    unsigned char *tbl = c->tbls + (size_t)h * (size_t)c->k * 32;
    /* ISA-L's prototype is not const-qualified; it only reads the source. */
    unsigned char *src = (unsigned char *)(uintptr_t)delta;
    for (size_t off = 0; off < len;) {
        size_t n = len - off < CRPM_L3_CHUNK ? len - off : CRPM_L3_CHUNK;
        unsigned char *dst = (unsigned char *)parity + off;
        ec_encode_data_update((int)n, c->k, 1, i, tbl, src + off, &dst);
        off += n;
    }
}

/* crpm_l3_update_many: tasks of at most this many bytes of one piece */
#define L3_TASK ((size_t)1 << 20)

typedef struct update_job {
    const crpm_l3_code *c;
    int h, i;
    crpm_l3_piece *t;
} update_job;

static void update_task(void *arg, uint64_t k, int worker)
{
    (void)worker;
    update_job *j = arg;
    crpm_l3_update(j->c, j->h, j->i, j->t[k].delta, j->t[k].parity, j->t[k].len);
}

void crpm_l3_update_many(const crpm_l3_code *c, int h, int i, const crpm_l3_piece *v, size_t n)
{
    size_t nt = 0, total = 0;
    int disjoint = 1; /* in increasing order without overlap, as senders make them: else serial */
    for (size_t e = 0; e < n; e++) {
        nt += (v[e].len + L3_TASK - 1) / L3_TASK;
        total += v[e].len;
        disjoint &= !e || v[e].parity >= v[e - 1].parity + v[e - 1].len;
    }
    update_job j = {c, h, i, NULL};
    /* small deltas (sparse changes) are not worth waking the workers for */
    if (disjoint && crpm_pool_width(c->pool) > 1 && total >= 2 * L3_TASK &&
        (j.t = malloc(nt * sizeof *j.t)) != NULL) {
        size_t k = 0;
        for (size_t e = 0; e < n; e++)
            for (size_t off = 0; off < v[e].len; off += L3_TASK)
                j.t[k++] = (crpm_l3_piece){v[e].delta + off, v[e].parity + off,
                                           v[e].len - off < L3_TASK ? v[e].len - off : L3_TASK};
        crpm_pool_run(c->pool, nt, update_task, &j);
        free(j.t);
        return;
    }
    for (size_t e = 0; e < n; e++)
        crpm_l3_update(c, h, i, v[e].delta, v[e].parity, v[e].len);
}

/* out[r] = sum_j tbls[r][j] * in[j] over len bytes, in pieces ISA-L accepts. */
static void apply_rows(size_t len, int k, int rows, unsigned char *tbls, unsigned char *const *in,
                       unsigned char **out)
{
    unsigned char *src[L3_MAX_UNITS], *dst[L3_MAX_UNITS];
    for (size_t off = 0; off < len;) {
        size_t n = len - off < CRPM_L3_CHUNK ? len - off : CRPM_L3_CHUNK;
        for (int j = 0; j < k; j++)
            src[j] = in[j] + off;
        for (int r = 0; r < rows; r++)
            dst[r] = out[r] + off;
        ec_encode_data((int)n, k, rows, tbls, src, dst);
        off += n;
    }
}

void crpm_l3_encode(const crpm_l3_code *c, size_t len, unsigned char *const *data, unsigned char **parity)
{
    apply_rows(len, c->k, c->m, c->tbls, data, parity);
}

int crpm_l3_decoder_init(crpm_l3_decoder *d, const crpm_l3_code *c, const int *avail)
{
    int k = c->k, n = c->k + c->m, nsrc = 0;
    memset(d, 0, sizeof *d);
    d->k = k;
    for (int u = 0; u < n && nsrc < k; u++)
        if (avail[u])
            d->src[nsrc++] = u;
    for (int u = 0; u < k; u++)
        if (!avail[u])
            d->lost[d->nlost++] = u;
    if (nsrc < k) {
        int nl = n;
        for (int u = 0; u < n; u++)
            nl -= avail[u] != 0;
        d->nlost = 0;
        return crpm_error(CRPM_ERR_MISSING, "level 3: %d of %d units of a codeword lost, at most %d can be rebuilt",
                          nl, n, c->m);
    }
    if (d->nlost == 0)
        return CRPM_SUCCESS;

    /* The survivors are src = B x data with B the rows src of the generator
     * matrix, so data = B^-1 x src: lost unit u is row u of B^-1. */
    unsigned char *b = malloc((size_t)k * (size_t)k), *inv = malloc((size_t)k * (size_t)k),
                  *rows = malloc((size_t)d->nlost * (size_t)k);
    d->tbls = malloc((size_t)d->nlost * (size_t)k * 32);
    int rc = CRPM_SUCCESS;
    if (!b || !inv || !rows || !d->tbls) {
        rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for the decode tables");
        goto out;
    }
    for (int j = 0; j < k; j++)
        memcpy(b + (size_t)j * (size_t)k, c->matrix + (size_t)d->src[j] * (size_t)k, (size_t)k);
    if (gf_invert_matrix(b, inv, k) != 0) {  /* cannot happen for a Cauchy code: a bug if it does */
        rc = crpm_error(CRPM_ERR_INVAL, "level 3: decode matrix of %d data and %d parity units is singular", k,
                        c->m);
        goto out;
    }
    for (int j = 0; j < d->nlost; j++)
        memcpy(rows + (size_t)j * (size_t)k, inv + (size_t)d->lost[j] * (size_t)k, (size_t)k);
    ec_init_tables(k, d->nlost, rows, d->tbls);
out:
    free(b);
    free(inv);
    free(rows);
    if (rc != CRPM_SUCCESS)
        crpm_l3_decoder_free(d);
    return rc;
}

void crpm_l3_decoder_free(crpm_l3_decoder *d)
{
    free(d->tbls);
    d->tbls = NULL;
    d->nlost = 0;
}

void crpm_l3_decode(const crpm_l3_decoder *d, size_t len, unsigned char *const *in, unsigned char **out)
{
    if (d->nlost > 0)
        apply_rows(len, d->k, d->nlost, d->tbls, in, out);
}

void crpm_l3_decode_part(const crpm_l3_decoder *d, int j, int p, size_t len, const void *in, void *acc, int first)
{
    /* row j of the decode tables; element p's 32 bytes are also the tables
     * of a 1 x 1 code, which multiplies without reading acc */
    unsigned char *row = d->tbls + (size_t)j * (size_t)d->k * 32;
    unsigned char *src = (unsigned char *)(uintptr_t)in; /* ISA-L only reads it */
    for (size_t off = 0; off < len;) {
        size_t n = len - off < CRPM_L3_CHUNK ? len - off : CRPM_L3_CHUNK;
        unsigned char *s = src + off, *dst = (unsigned char *)acc + off;
        if (first)
            ec_encode_data((int)n, 1, 1, row + (size_t)p * 32, &s, &dst);
        else
            ec_encode_data_update((int)n, d->k, 1, p, row, s, &dst);
        off += n;
    }
}
