/* Level 3's layout and coding (lib/levels/l3_code.h), no MPI.
 *
 *   test_l3_code [seed]
 *
 * - layout, K = 2..8 and every M: holders, parity rows, data indices and
 *   the codewords of a member agree with each other and with the header's
 *   definition (holders c..c+M-1, data members in increasing order);
 * - coding: encode equals a byte-wise reference built on ISA-L's gf_mul;
 *   parity grown by random delta updates (old ^ new) equals the encode of
 *   the final data; every erasure pattern of up to M units (all subsets for
 *   K <= 8, random ones for K = 12, 16 and 255) rebuilds the lost data
 *   exactly; M+1 lost units give CRPM_ERR_MISSING;
 * - a whole group: members' images of different lengths cut into segments
 *   as level 3 does, parity built by updates at the holders, every set of up
 *   to M lost members rebuilt from the survivors;
 * - crpm_l3_layout_check accepts and refuses with the cause in the message.
 * Built twice: against the library, and with l3_code.c compiled with
 * CRPM_L3_CHUNK = 1000 so the piece loop (for lengths beyond INT_MAX) runs. */
#include <isa-l/erasure_code.h>
#include <string.h>
#include "check.h"
#include "crpm_types.h"
#include "l3_code.h"
#include "pool.h"

static uint64_t seed = 20261123;

/* ------------------------------------------------------------------ layout */

static void test_layout(int K, int M)
{
    crpm_l3_layout l = {K, M};
    int ndata[256] = {0}, nhold[256] = {0};
    for (int c = 0; c < K; c++) {
        int holders = 0, datas = 0, next_index = 0;
        for (int h = 0; h < M; h++) {
            int g = crpm_l3_holder(&l, c, h);
            CHECK(g == (c + h) % K, "K %d M %d: holder(c %d, h %d) = %d, want %d", K, M, c, h, g, (c + h) % K);
            if (g >= 0 && g < K)
                CHECK(crpm_l3_parity_row(&l, c, g) == h, "K %d M %d: parity_row(c %d, g %d) = %d, want %d", K, M, c,
                      g, crpm_l3_parity_row(&l, c, g), h);
        }
        for (int g = 0; g < K; g++) {
            int r = crpm_l3_parity_row(&l, c, g), i = crpm_l3_data_index(&l, c, g);
            CHECK((r >= 0) != (i >= 0), "K %d M %d: member %d of codeword %d: parity row %d, data index %d", K, M,
                  g, c, r, i);
            if (r >= 0) {
                holders++;
                nhold[g]++;
                CHECK(r < M && crpm_l3_holder(&l, c, r) == g, "K %d M %d: c %d g %d row %d", K, M, c, g, r);
            }
            if (i >= 0) {
                datas++;
                ndata[g]++;
                /* data members in increasing member order: indices 0, 1, ... as g grows */
                CHECK(i == next_index, "K %d M %d: data index of member %d in codeword %d is %d, want %d", K, M, g,
                      c, i, next_index);
                next_index++;
                CHECK(crpm_l3_data_member(&l, c, i) == g, "K %d M %d: data_member(c %d, i %d) = %d, want %d", K, M,
                      c, i, crpm_l3_data_member(&l, c, i), g);
            }
        }
        CHECK(holders == M && datas == K - M, "K %d M %d: codeword %d has %d holders, %d data members", K, M, c,
              holders, datas);
    }
    for (int g = 0; g < K; g++) {
        CHECK(ndata[g] == K - M && nhold[g] == M, "K %d M %d: member %d is data of %d, holder of %d", K, M, g,
              ndata[g], nhold[g]);
        int prev = -1;
        for (int j = 0; j < K - M; j++) {
            int c = crpm_l3_codeword_of(&l, g, j);
            CHECK(c > prev && c < K, "K %d M %d: codeword_of(g %d, j %d) = %d after %d", K, M, g, j, c, prev);
            if (c < 0 || c >= K)
                break;
            CHECK(crpm_l3_data_index(&l, c, g) >= 0, "K %d M %d: codeword_of(g %d, j %d) = %d, not a data unit", K,
                  M, g, j, c);
            prev = c;
        }
    }
}

/* ------------------------------------------------------------------ coding */

static unsigned char *xmalloc(size_t n)
{
    unsigned char *p = malloc(n ? n : 1);
    REQUIRE(p, "out of memory");
    return p;
}

/* parity[h][x] = sum_i g[h][i] * data[i][x], one byte at a time with
 * ISA-L's scalar gf_mul: independent of the table path under test. */
static void reference_encode(const crpm_l3_code *c, size_t len, unsigned char **data, unsigned char **parity)
{
    for (int h = 0; h < c->m; h++) {
        const unsigned char *row = c->matrix + (size_t)(c->k + h) * (size_t)c->k;
        for (size_t x = 0; x < len; x++) {
            unsigned char s = 0;
            for (int i = 0; i < c->k; i++)
                s ^= gf_mul(row[i], data[i][x]);
            parity[h][x] = s;
        }
    }
}

/* Decodes with units mask lost (bit u: unit u, data 0..k-1, parity k..)
 * and compares the rebuilt data with the original. */
static void check_pattern(const crpm_l3_code *c, size_t len, unsigned char **data, unsigned char **parity,
                          unsigned mask, unsigned char **out)
{
    int n = c->k + c->m, avail[256], nlost = 0;
    for (int u = 0; u < n; u++) {
        avail[u] = !(mask >> u & 1);
        nlost += !avail[u];
    }
    crpm_l3_decoder d;
    int rc = crpm_l3_decoder_init(&d, c, avail);
    if (nlost > c->m) {
        CHECK(rc == CRPM_ERR_MISSING, "k %d m %d mask %#x: %d lost, rc %d, want CRPM_ERR_MISSING", c->k, c->m, mask,
              nlost, rc);
        if (rc == CRPM_SUCCESS)
            crpm_l3_decoder_free(&d);
        return;
    }
    CHECK(rc == CRPM_SUCCESS, "k %d m %d mask %#x: decoder_init rc %d", c->k, c->m, mask, rc);
    if (rc != CRPM_SUCCESS)
        return;
    int want_lost = 0;
    for (int u = 0; u < c->k; u++)
        want_lost += !avail[u];
    CHECK(d.nlost == want_lost, "k %d m %d mask %#x: nlost %d, want %d", c->k, c->m, mask, d.nlost, want_lost);
    unsigned char *in[256];
    for (int j = 0; j < c->k; j++) {
        int u = d.src[j];
        CHECK(u >= 0 && u < n && avail[u] && (j == 0 || u > d.src[j - 1]), "k %d m %d mask %#x: src[%d] = %d",
              c->k, c->m, mask, j, u);
        in[j] = u < c->k ? data[u] : parity[u - c->k];
    }
    for (int j = 0; j < d.nlost; j++)
        memset(out[j], 0xA5, len);          /* not what was lost */
    crpm_l3_decode(&d, len, in, out);
    for (int j = 0; j < d.nlost; j++) {
        int u = d.lost[j];
        CHECK(u >= 0 && u < c->k && !avail[u], "k %d m %d mask %#x: lost[%d] = %d", c->k, c->m, mask, j, u);
        if (u >= 0 && u < c->k && memcmp(out[j], data[u], len) != 0) {
            size_t x = 0;
            while (out[j][x] == data[u][x])
                x++;
            CHECK(0, "k %d m %d len %zu mask %#x: data unit %d rebuilt wrong at byte %zu", c->k, c->m, len, mask, u,
                  x);
        }
    }
    crpm_l3_decoder_free(&d);
}

static unsigned random_mask(int n, int nlost)
{
    unsigned mask = 0;
    for (int t = 0; t < nlost;) {
        unsigned b = 1u << rnd_below(&seed, (uint64_t)n);
        if (!(mask & b)) {
            mask |= b;
            t++;
        }
    }
    return mask;
}

static void test_code(int K, int M, size_t len, int exhaustive, int nupdates)
{
    int k = K - M, m = M;
    crpm_l3_code c;
    REQUIRE(crpm_l3_code_init(&c, k, m) == CRPM_SUCCESS, "code_init(%d, %d): %s", k, m, crpm_last_error());
    unsigned char *data[256], *parity[256], *ref[256], *grown[256], *out[256];
    for (int i = 0; i < k; i++) {
        data[i] = xmalloc(len);
        memset(data[i], 0, len);
    }
    for (int h = 0; h < m; h++) {
        parity[h] = xmalloc(len);
        ref[h] = xmalloc(len);
        grown[h] = xmalloc(len);
        out[h] = xmalloc(len);
        memset(grown[h], 0, len);           /* parity of all-zero data */
    }
    unsigned char *delta = xmalloc(len);

    /* Random writes; each applied to the parity as old ^ new.  Some cover
     * the whole unit, most a random range (odd offsets and lengths). */
    for (int t = 0; t < nupdates; t++) {
        int i = (int)rnd_below(&seed, (uint64_t)k);
        size_t a = 0, b = len;
        if (t % 4 != 0) {
            a = rnd_below(&seed, len);
            b = a + 1 + rnd_below(&seed, len - a);
        }
        for (size_t x = a; x < b; x++) {
            unsigned char nv = (unsigned char)rnd(&seed);
            delta[x - a] = data[i][x] ^ nv;
            data[i][x] = nv;
        }
        for (int h = 0; h < m; h++)
            crpm_l3_update(&c, h, i, delta, grown[h] + a, b - a);
    }
    crpm_l3_encode(&c, len, data, parity);
    reference_encode(&c, len, data, ref);
    for (int h = 0; h < m; h++) {
        CHECK(memcmp(parity[h], ref[h], len) == 0, "K %d M %d len %zu: encode of row %d differs from gf_mul reference",
              K, M, len, h);
        CHECK(memcmp(grown[h], parity[h], len) == 0, "K %d M %d len %zu: row %d after %d delta updates differs from "
              "the encode", K, M, len, h, nupdates);
    }

    int n = k + m;
    if (exhaustive) {
        for (unsigned mask = 0; mask < (1u << n); mask++) {
            int nl = __builtin_popcount(mask);
            if (nl <= m + 1)
                check_pattern(&c, len, data, parity, mask, out);
        }
    } else {
        for (int nl = 1; nl <= m + 1; nl++)
            for (int t = 0; t < 6; t++) {
                /* units beyond 32 are never lost here; with K > 32 the mask covers units 0..31 */
                int span = n < 32 ? n : 32;
                check_pattern(&c, len, data, parity, random_mask(span, nl < span ? nl : span), out);
            }
    }

    for (int i = 0; i < k; i++)
        free(data[i]);
    for (int h = 0; h < m; h++) {
        free(parity[h]);
        free(ref[h]);
        free(grown[h]);
        free(out[h]);
    }
    free(delta);
    crpm_l3_code_free(&c);
}

/* Decoding with a lost-unit list as large as the code allows: K = 255,
 * M = 127, random patterns over all units (not limited to 32). */
static void test_wide(void)
{
    const int K = 255, M = 127, k = K - M;
    const size_t len = 4097;
    crpm_l3_code c;
    REQUIRE(crpm_l3_code_init(&c, k, M) == CRPM_SUCCESS, "code_init(%d, %d): %s", k, M, crpm_last_error());
    unsigned char *data[256], *parity[256], *out[256];
    for (int i = 0; i < k; i++) {
        data[i] = xmalloc(len);
        fill_random(&seed, (char *)data[i], len);
    }
    for (int h = 0; h < M; h++) {
        parity[h] = xmalloc(len);
        out[h] = xmalloc(len);
    }
    crpm_l3_encode(&c, len, data, parity);
    for (int t = 0; t < 4; t++) {
        int avail[256], perm[256];
        for (int u = 0; u < K; u++)
            perm[u] = u;
        for (int u = K - 1; u > 0; u--) {
            int v = (int)rnd_below(&seed, (uint64_t)u + 1), s = perm[u];
            perm[u] = perm[v];
            perm[v] = s;
        }
        int nl = t == 0 ? M : 1 + (int)rnd_below(&seed, M);
        for (int u = 0; u < K; u++)
            avail[u] = 1;
        for (int j = 0; j < nl; j++)
            avail[perm[j]] = 0;
        crpm_l3_decoder d;
        REQUIRE(crpm_l3_decoder_init(&d, &c, avail) == CRPM_SUCCESS, "K 255: %s", crpm_last_error());
        unsigned char *in[256];
        for (int j = 0; j < k; j++)
            in[j] = d.src[j] < k ? data[d.src[j]] : parity[d.src[j] - k];
        crpm_l3_decode(&d, len, in, out);
        for (int j = 0; j < d.nlost; j++)
            CHECK(memcmp(out[j], data[d.lost[j]], len) == 0, "K 255 M 127: %d lost, unit %d rebuilt wrong", nl,
                  d.lost[j]);
        crpm_l3_decoder_free(&d);
        avail[perm[nl]] = 0;                /* one more */
        if (nl == M)
            CHECK(crpm_l3_decoder_init(&d, &c, avail) == CRPM_ERR_MISSING, "K 255: 128 lost accepted");
    }
    for (int i = 0; i < k; i++)
        free(data[i]);
    for (int h = 0; h < M; h++) {
        free(parity[h]);
        free(out[h]);
    }
    crpm_l3_code_free(&c);
}

/* ------------------------------------------------------------------ a group */

#define SEG 37 /* odd segment size: nothing lines up with SIMD widths */

/* K members with images of random lengths (0..4*(K-M)+2 segments, the last
 * one partial); holders build parity by updates as level 3 does at a full
 * re-encode (old = 0); every set of up to M lost members is rebuilt. */
static void test_group(int K, int M)
{
    crpm_l3_layout l = {K, M};
    int k = K - M;
    crpm_l3_code c;
    REQUIRE(crpm_l3_code_init(&c, k, M) == CRPM_SUCCESS, "code_init: %s", crpm_last_error());
    size_t bytes[16];
    unsigned char *img[16];
    size_t nparseg = 0;                     /* parity segments per codeword */
    for (int g = 0; g < K; g++) {
        size_t nseg = rnd_below(&seed, (uint64_t)(4 * k + 3));
        bytes[g] = nseg ? nseg * SEG - rnd_below(&seed, SEG) : 0;
        img[g] = xmalloc(bytes[g]);
        fill_random(&seed, (char *)img[g], bytes[g]);
        size_t p = (nseg + (size_t)k - 1) / (size_t)k;
        if (p > nparseg)
            nparseg = p;
    }
    /* par[c][h]: parity unit h of codeword c, nparseg segments, at holder(c, h) */
    unsigned char *par[16][8];
    for (int cw = 0; cw < K; cw++)
        for (int h = 0; h < M; h++) {
            par[cw][h] = xmalloc(nparseg * SEG);
            memset(par[cw][h], 0, nparseg * SEG);
        }
    unsigned char seg[SEG];
    for (int g = 0; g < K; g++)
        for (size_t s = 0; s * SEG < bytes[g]; s++) {
            size_t n = bytes[g] - s * SEG < SEG ? bytes[g] - s * SEG : SEG;
            memset(seg, 0, SEG);
            memcpy(seg, img[g] + s * SEG, n);
            int cw = crpm_l3_codeword_of(&l, g, (int)(s % (size_t)k));
            int i = crpm_l3_data_index(&l, cw, g);
            REQUIRE(cw >= 0 && i >= 0, "K %d M %d: member %d segment %zu: codeword %d index %d", K, M, g, s, cw, i);
            for (int h = 0; h < M; h++)
                crpm_l3_update(&c, h, i, seg, par[cw][h] + s / (size_t)k * SEG, SEG);
        }

    unsigned char *zero = xmalloc(SEG), *outbuf[8];
    memset(zero, 0, SEG);
    for (int h = 0; h < M; h++)
        outbuf[h] = xmalloc(SEG);
    unsigned char *rebuilt[16];
    for (int g = 0; g < K; g++)
        rebuilt[g] = xmalloc(nparseg * (size_t)k * SEG);
    for (unsigned lostm = 1; lostm < (1u << K); lostm++) {
        if (__builtin_popcount(lostm) > M)
            continue;
        for (int g = 0; g < K; g++)
            memset(rebuilt[g], 0xA5, nparseg * (size_t)k * SEG);
        for (int cw = 0; cw < K; cw++) {
            int avail[256];
            for (int i = 0; i < k; i++)
                avail[i] = !(lostm >> crpm_l3_data_member(&l, cw, i) & 1);
            for (int h = 0; h < M; h++)
                avail[k + h] = !(lostm >> crpm_l3_holder(&l, cw, h) & 1);
            crpm_l3_decoder d;
            int rc = crpm_l3_decoder_init(&d, &c, avail);
            CHECK(rc == CRPM_SUCCESS, "K %d M %d lost members %#x: codeword %d cannot be decoded", K, M, lostm, cw);
            if (rc != CRPM_SUCCESS)
                continue;
            for (size_t p = 0; p < nparseg; p++) {
                unsigned char *in[256], pad[256][SEG];
                for (int j = 0; j < k; j++) {
                    int u = d.src[j];
                    if (u >= k) {
                        in[j] = par[cw][u - k] + p * SEG;
                        continue;
                    }
                    /* a survivor's segment, zero-padded as its image is */
                    int g = crpm_l3_data_member(&l, cw, u), jj = 0;
                    while (crpm_l3_codeword_of(&l, g, jj) != cw)
                        jj++;
                    size_t s = p * (size_t)k + (size_t)jj;
                    memset(pad[j], 0, SEG);
                    if (s * SEG < bytes[g])
                        memcpy(pad[j], img[g] + s * SEG, bytes[g] - s * SEG < SEG ? bytes[g] - s * SEG : SEG);
                    in[j] = pad[j];
                }
                crpm_l3_decode(&d, SEG, in, outbuf);
                for (int j = 0; j < d.nlost; j++) {
                    int g = crpm_l3_data_member(&l, cw, d.lost[j]), jj = 0;
                    while (crpm_l3_codeword_of(&l, g, jj) != cw)
                        jj++;
                    memcpy(rebuilt[g] + (p * (size_t)k + (size_t)jj) * SEG, outbuf[j], SEG);
                }
            }
            crpm_l3_decoder_free(&d);
        }
        for (int g = 0; g < K; g++)
            if (lostm >> g & 1) {
                CHECK(memcmp(rebuilt[g], img[g], bytes[g]) == 0, "K %d M %d lost members %#x: member %d's image "
                      "(%zu bytes) rebuilt wrong", K, M, lostm, g, bytes[g]);
                size_t tail = nparseg * (size_t)k * SEG - bytes[g];
                CHECK(tail == 0 || memcmp(rebuilt[g] + bytes[g], zero, tail < SEG ? tail : SEG) == 0,
                      "K %d M %d: member %d's padding not rebuilt as zeros", K, M, g);
            }
    }
    for (int g = 0; g < K; g++) {
        free(img[g]);
        free(rebuilt[g]);
    }
    for (int cw = 0; cw < K; cw++)
        for (int h = 0; h < M; h++)
            free(par[cw][h]);
    for (int h = 0; h < M; h++)
        free(outbuf[h]);
    free(zero);
    crpm_l3_code_free(&c);
}

/* ------------------------------------------------------------ layout_check */

static void expect_check(int nnodes, int K, int M, int want_ok, const char *want_msg)
{
    int rc = crpm_l3_layout_check(nnodes, K, M);
    if (want_ok) {
        CHECK(rc == CRPM_SUCCESS, "layout_check(%d nodes, K %d, M %d) refused: %s", nnodes, K, M, crpm_last_error());
        return;
    }
    CHECK(rc == CRPM_ERR_CONFIG, "layout_check(%d nodes, K %d, M %d) = %d, want CRPM_ERR_CONFIG", nnodes, K, M, rc);
    CHECK(strstr(crpm_last_error(), want_msg) != NULL, "layout_check(%d, %d, %d): message \"%s\" lacks \"%s\"",
          nnodes, K, M, crpm_last_error(), want_msg);
}

static void test_layout_check(void)
{
    expect_check(4, 4, 1, 1, NULL);
    expect_check(8, 4, 2, 1, NULL);
    expect_check(12, 4, 2, 1, NULL);
    expect_check(2, 2, 1, 1, NULL);
    expect_check(6, 3, 1, 1, NULL);
    expect_check(255, 255, 127, 1, NULL);
    expect_check(6, 4, 1, 0, "level 3: group_size 4 needs a multiple of 4 nodes, the job has 6");
    expect_check(10, 4, 2, 0, "level 3: group_size 4 needs a multiple of 4 nodes, the job has 10");
    expect_check(2, 4, 1, 0, "level 3: group_size 4 needs at least 4 nodes, the job has 2");
    expect_check(4, 4, 3, 0, "l3_parity 3 is more than half of group_size 4");
    expect_check(6, 3, 2, 0, "l3_parity 2 is more than half of group_size 3");
    expect_check(4, 4, 0, 0, "l3_parity 0 is less than 1");
    expect_check(4, 4, -1, 0, "l3_parity -1 is less than 1");
    expect_check(4, 1, 1, 0, "level 3 needs at least 2 nodes per group");
    expect_check(4, 0, 1, 0, "level 3 needs at least 2 nodes per group");
    expect_check(256, 256, 1, 0, "group_size 256 is more than 255");
    /* the cause named is the one the user must fix first: a bad group before the node count */
    expect_check(6, 1, 1, 0, "at least 2 nodes per group");
    expect_check(6, 4, 3, 0, "l3_parity 3 is more than half");
}

/* crpm_l3_update_many over 1 and 4 workers equals crpm_l3_update piece by
 * piece (pieces of a few bytes to several MiB, in order; and out of order,
 * which is applied serially). */
static void test_update_many(void)
{
    crpm_l3_code c;
    REQUIRE(crpm_l3_code_init(&c, 3, 2) == 0, "code");
    size_t plen = 12u << 20;
    unsigned char *delta = xmalloc(plen), *want = xmalloc(plen), *got = xmalloc(plen);
    for (size_t x = 0; x < plen; x++)
        delta[x] = (unsigned char)rnd(&seed);
    crpm_l3_piece v[6];
    size_t at = 0, used = 0;
    static const size_t lens[6] = {7, 3u << 20, 100, (5u << 20) + 3, 4096, 1u << 20};
    for (int e = 0; e < 6; e++) {
        at += 1 + rnd_below(&seed, 1000);
        v[e] = (crpm_l3_piece){delta + used, NULL, lens[e]};
        v[e].parity = (unsigned char *)(uintptr_t)at; /* offset for now */
        at += lens[e];
        used += lens[e];
    }
    REQUIRE(at <= plen && used <= plen, "layout");
    for (int order = 0; order < 2; order++)
        for (int w = 1; w <= 4; w += 3) {
            crpm_pool *pool;
            REQUIRE(crpm_pool_create(w, &pool) == 0, "pool");
            memset(want, 0x5a, plen);
            memset(got, 0x5a, plen);
            crpm_l3_piece g[6];
            for (int e = 0; e < 6; e++) {
                int k = order ? 5 - e : e;
                size_t off = (size_t)(uintptr_t)v[k].parity;
                crpm_l3_update(&c, 1, 2, v[k].delta, want + off, v[k].len);
                g[e] = (crpm_l3_piece){v[k].delta, got + off, v[k].len};
            }
            c.pool = pool;
            crpm_l3_update_many(&c, 1, 2, g, 6);
            c.pool = NULL;
            CHECK(memcmp(want, got, plen) == 0, "update_many with %d workers (%s order) differs", w,
                  order ? "reverse" : "increasing");
            crpm_pool_free(pool);
        }
    crpm_l3_code_free(&c);
    free(delta);
    free(want);
    free(got);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        seed = strtoull(argv[1], NULL, 0);
#ifdef CRPM_L3_CHUNK
    printf("test_l3_code: seed %llu, l3_code.c built with CRPM_L3_CHUNK = %d\n", (unsigned long long)seed,
           (int)CRPM_L3_CHUNK);
#else
    printf("test_l3_code: seed %llu\n", (unsigned long long)seed);
#endif
    for (int K = 2; K <= 8; K++)
        for (int M = 1; M <= K / 2; M++)
            test_layout(K, M);
    test_layout(16, 8);
    test_layout(255, 127);
    test_layout(255, 1);

    static const size_t lens[] = {1, 15, 255, 4097, 100000};
    for (int K = 2; K <= 8; K++)
        for (int M = 1; M <= K / 2; M++)
            for (size_t t = 0; t < sizeof lens / sizeof *lens; t++)
                test_code(K, M, lens[t], 1, lens[t] > 10000 ? 40 : 200);
    for (int M = 1; M <= 6; M++)
        test_code(12, M, 4097, 0, 100);
    for (int M = 1; M <= 8; M++)
        test_code(16, M, 1000, 0, 100);
    test_wide();

    for (int K = 2; K <= 8; K++)
        for (int M = 1; M <= K / 2; M++)
            test_group(K, M);

    test_layout_check();
    test_update_many();
    return check_summary("test_l3_code");
}
