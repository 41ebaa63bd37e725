/* Level 3's parity check against a full re-encode after every checkpoint
 * (CRPM_TEST_L3_VERIFY, the crash simulator's `verify`): test builds only,
 * lib/CMakeLists.txt compiles this file with CRPM_TEST_HOOKS alone. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "agree.h"
#include "l3_internal.h"

/* The first `width` bytes (no unit defines more) of image units at rows
 * [t0, t1) of codeword slot j, zero-padded, into b. */
static void pack_units(l3_state *s, const image *im, int j, uint64_t t0, uint64_t t1, uint64_t width,
                          unsigned char *b)
{
    uint64_t ln;
    uint32_t ph;
    for (uint64_t t = t0; t < t1; t++) {
        const char *p = l3_unit_bytes(s->own, im, t * (uint64_t)s->k + (uint64_t)j, &ln, &ph, NULL);
        memset(b + (t - t0) * width, 0, width);
        if (p)
            memcpy(b + (t - t0) * width, p, ln < width ? ln : width);
    }
}

/* Bytes any unit of the image defines at most. */
static uint64_t defined_width(l3_state *s, const image *im)
{
    uint64_t w = 0, ln;
    uint32_t ph;
    for (uint64_t i = 0; i < im->nunits; i++) {
        l3_unit_bytes(s->own, im, i, &ln, &ph, NULL);
        w = ln > w ? ln : w;
    }
    return w;
}

/* Every rank sends its image segments raw to the holders, which encode them
 * from scratch (crpm_l3_encode, not the delta path) and compare with their
 * parity. */
int l3_verify_parity(crpm_level *lv, const image *im, uint64_t psegs)
{
    l3_state *s = l3_of(lv);
    MPI_Comm comm = lv->env->comm;
    int M = s->lay.M, k = s->k, rc = CRPM_SUCCESS;
    /* only the bytes some image defines travel: the rest is zero everywhere */
    int64_t wall = -(int64_t)defined_width(s, im); /* the agreement reduces with MIN */
    rc = crpm_agree_ext(comm, lv->env->rank, rc, "level 3: parity check", &wall, 1);
    if (rc != 0)
        return rc;
    wall = -wall;
    uint64_t unit = s->unit, wd = wall > 0 ? (uint64_t)wall : 1, T = ROUND_BYTES / (wd * (uint64_t)k);
    T = T ? T : 1;
    size_t cap = (size_t)((T < psegs ? T : psegs ? psegs : 1) * wd);
    unsigned char **mine = calloc((size_t)k, sizeof *mine), **in = calloc((size_t)k, sizeof *in);
    unsigned char **par = calloc((size_t)M, sizeof *par);
    MPI_Request *req = malloc(sizeof *req * (size_t)(k * M));
    int ok = mine && in && par && req;
    for (int i = 0; ok && i < k; i++)
        ok = (mine[i] = malloc(cap)) && (in[i] = malloc(cap));
    for (int h = 0; ok && h < M; h++)
        ok = (par[h] = malloc(cap)) != NULL;
    rc = crpm_agree(comm, lv->env->rank, ok ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory "
                    "for the parity check"), "level 3: parity check");
    if (rc != 0)
        psegs = 0;
    for (uint64_t t0 = 0; t0 < psegs; t0 += T) {
        uint64_t t1 = t0 + T < psegs ? t0 + T : psegs, len = (t1 - t0) * wd;
        int nreq = 0;
        for (int j = 0; j < k; j++) {
            int c = crpm_l3_codeword_of(&s->lay, s->g, j);
            pack_units(s, im, j, t0, t1, wd, mine[j]);
            for (int h = 0; h < M; h++)
                if (MPI_Isend(mine[j], (int)len, MPI_BYTE, s->grp[crpm_l3_holder(&s->lay, c, h)], TAG_L3 + c, comm,
                              &req[nreq]) == MPI_SUCCESS)
                    nreq++;
        }
        for (int h = 0; h < M; h++) {
            int c = l3_held_codeword(s, h);
            for (int i = 0; i < k; i++)
                if (MPI_Recv(in[i], (int)len, MPI_BYTE, s->grp[crpm_l3_data_member(&s->lay, c, i)], TAG_L3 + c, comm,
                             MPI_STATUS_IGNORE) != MPI_SUCCESS && rc == 0)
                    rc = crpm_error(CRPM_ERR_MPI, "level 3: parity check: MPI_Recv failed");
            crpm_l3_encode(&s->code, len, in, par);
            /* row h is ours: unit t's first wd bytes as encoded, the rest zero */
            for (uint64_t t = t0; rc == 0 && t < t1; t++)
                for (uint64_t x = 0; x < unit; x++) {
                    uint64_t off = t * unit + x;
                    unsigned char want = x < wd ? par[h][(t - t0) * wd + x] : 0;
                    if ((off < s->plen ? s->par[h][off] : 0) != want) {
                        rc = crpm_error(CRPM_ERR_CORRUPT, "level 3: parity of codeword %d (rank %d) differs from a "
                                        "full re-encode at byte %llu", c, lv->env->rank, (unsigned long long)off);
                        break;
                    }
                }
        }
        if (nreq && MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) != MPI_SUCCESS && rc == 0)
            rc = crpm_error(CRPM_ERR_MPI, "level 3: parity check: MPI_Waitall failed");
    }
    for (int i = 0; mine && in && i < k; i++) {
        free(mine[i]);
        free(in[i]);
    }
    for (int h = 0; par && h < M; h++)
        free(par[h]);
    free(mine);
    free(in);
    free(par);
    free(req);
    return rc;
}
