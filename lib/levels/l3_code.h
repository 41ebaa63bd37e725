/* Level 3's group layout and Reed-Solomon coding (ISA-L, GF(2^8)).
 *
 * A group is K members (one rank on each of K nodes, the same local rank).
 * There are K codewords per group; codeword c has M parity units held by
 * members c, c+1, ..., c+M-1 (mod K) and K-M data units: the other members,
 * in increasing member order (data index 0..K-M-1).  A member is a data unit
 * of K-M codewords and holds parity for M, never both for the same
 * codeword, so losing any M members erases at most M units of every
 * codeword.  A member's image is cut into segments; its segment s belongs to
 * its codeword number s % (K-M) (in increasing codeword order) at parity
 * segment s / (K-M).
 *
 * Parity unit h of a codeword is sum_i g[h][i] * d_i (Cauchy matrix, MDS for
 * every K and M); since the sum is linear, a change d_i -> d_i' is applied
 * as parity_h ^= g[h][i] * (d_i ^ d_i'). */
#ifndef CRPM_LEVELS_L3_CODE_H
#define CRPM_LEVELS_L3_CODE_H
#include <stddef.h>
#include <stdint.h>

typedef struct crpm_l3_layout {
    int K, M;                  /* members per group, parity units per codeword */
} crpm_l3_layout;

/* CRPM_SUCCESS, or CRPM_ERR_CONFIG with a message saying why no group of
 * group_size nodes with `parity` units can be made from nnodes nodes (too
 * few nodes, nnodes not a multiple of group_size, parity < 1 or > K/2). */
int crpm_l3_layout_check(int nnodes, int group_size, int parity);

/* Member holding parity unit h (0..M-1) of codeword c. */
int crpm_l3_holder(const crpm_l3_layout *l, int c, int h);
/* Parity unit member g holds of codeword c (0..M-1), or -1. */
int crpm_l3_parity_row(const crpm_l3_layout *l, int c, int g);
/* Data index (0..K-M-1) of member g in codeword c, or -1 when g holds parity of c. */
int crpm_l3_data_index(const crpm_l3_layout *l, int c, int g);
/* The j-th (0..K-M-1) codeword member g is a data unit of, increasing. */
int crpm_l3_codeword_of(const crpm_l3_layout *l, int g, int j);
/* The data member with data index i in codeword c. */
int crpm_l3_data_member(const crpm_l3_layout *l, int c, int i);

/* Coding tables for k = K-M data units and m = M parity units. */
struct crpm_pool;
typedef struct crpm_l3_code {
    int k, m;
    unsigned char *matrix;     /* (k+m) x k: identity, then the m parity rows */
    unsigned char *tbls;       /* ec_init_tables of each single element g[h][i]: (m*k) x 32 */
    struct crpm_pool *pool;    /* crpm_l3_update_many's workers (util/pool.h); NULL: the caller */
} crpm_l3_code;
int crpm_l3_code_init(crpm_l3_code *c, int k, int m);
void crpm_l3_code_free(crpm_l3_code *c);
/* parity ^= g[h][i] * delta over len bytes. */
void crpm_l3_update(const crpm_l3_code *c, int h, int i, const void *delta, void *parity, size_t len);
/* The same for n pieces whose parity ranges do not overlap, split over
 * c->pool (pieces of at most a MiB or so; serial when there is no pool or
 * no memory for the split). */
typedef struct crpm_l3_piece {
    const unsigned char *delta;
    unsigned char *parity;
    size_t len;
} crpm_l3_piece;
void crpm_l3_update_many(const crpm_l3_code *c, int h, int i, const crpm_l3_piece *v, size_t n);
/* Full encode (tests, the full re-encode baseline): parity[h] = sum_i g[h][i] * data[i]. */
void crpm_l3_encode(const crpm_l3_code *c, size_t len, unsigned char *const *data, unsigned char **parity);

/* Reconstruction of lost data units from k surviving units.  Units are
 * numbered 0..k-1 (data) and k..k+m-1 (parity row u-k). */
typedef struct crpm_l3_decoder {
    int k, nlost;
    int src[255];              /* the k surviving units used, increasing */
    int lost[255];             /* the lost data units rebuilt */
    unsigned char *tbls;       /* ec_init_tables of the decode rows: nlost x k x 32 */
} crpm_l3_decoder;
/* avail[u] != 0 for units that survive (k+m flags); rebuilds every data unit
 * with avail 0.  CRPM_ERR_MISSING when fewer than k units survive. */
int crpm_l3_decoder_init(crpm_l3_decoder *d, const crpm_l3_code *c, const int *avail);
void crpm_l3_decoder_free(crpm_l3_decoder *d);
/* out[j] (lost[j]) from src units in[0..k-1] (src order), len bytes each. */
void crpm_l3_decode(const crpm_l3_decoder *d, size_t len, unsigned char *const *in, unsigned char **out);
/* One source's share of lost unit lost[j]: acc = c * in when first, else
 * acc ^= c * in, over len bytes, where c is the decode coefficient of source
 * src[p].  Lost unit j is the sum of the k shares, so survivors can decode
 * it as a running sum passed from source to source. */
void crpm_l3_decode_part(const crpm_l3_decoder *d, int j, int p, size_t len, const void *in, void *acc, int first);

#endif
