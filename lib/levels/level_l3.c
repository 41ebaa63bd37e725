/* Level 3: Reed-Solomon parity of the level-1 containers over a group of
 * nodes (layout and coding: l3_code.h), updated with the change alone.
 *
 * What is coded is each rank's *image* of its committed checkpoint: a meta
 * area (region table, user id), then every saved region's segments in slot
 * order, each segment zero beyond the region's end.  Right after the
 * level-1 commit of epoch e+1 the container still holds epoch e intact (the
 * committed copies of e are never written by e+1), so a rank can send, for
 * every segment whose committed copy changed, delta = new XOR old of the
 * blocks that differ.  Holders add g * delta into their parity (kept in DRAM
 * as the working copy of an ordinary container, parity-<rank>.crpm, which
 * the engine checkpoints under the usual two-copy protocol: epoch e's parity
 * stays recoverable until every rank committed e+1).
 *
 * A delta needs the parity and the image to describe the same epoch: when
 * the previous checkpoint was not level 3, after a failed one, after a
 * restart whose parity is not at the agreed epoch, or when the region table
 * changed, the checkpoint re-encodes everything (the same exchange with old
 * = 0 and the parity zeroed).  Transfers run in rounds of at most
 * ROUND_BYTES per rank and codeword set, so memory stays bounded. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "clock.h"
#include "fsutil.h"
#include "l3_code.h"
#include "level.h"
#include "mpi_error.h"
#include "mpi_wait.h"
#include "persist_file.h"
#include "pool.h"

#define TAG_L3 7400            /* + codeword (< 256) */
#define ROUND_BYTES (64ull << 20)
#define META_MAGIC "CRPML3M2"
/* The code's granule: images are cut into units of this size (at least a
 * block, at most a segment).  Each array pads only its last unit, so parity
 * stays near 1/k of the data even for many arrays smaller than a segment. */
#define UNIT_BYTES (64u << 10)
#define META_REC 24u

typedef struct img_reg {
    int32_t id, type;
    uint64_t elem, count, nsegs; /* nsegs: container segments */
    uint64_t first, nunits;      /* its image units */
    crpm_seg *segs;
    uint64_t base;               /* where its bytes start in segs' copies (packed arrays: crpm_region_segs) */
    uint64_t span;               /* packed arrays: the bytes its pack's CRC table covers (0: not packed) */
} img_reg;

/* A rank's image of one committed epoch: the meta area, then each array,
 * each starting on a unit.  Bytes are read through the container's mapping
 * (phys indices, not pointers: the mapping moves). */
typedef struct image {
    unsigned char *meta;
    uint64_t unit, meta_len, meta_units;
    img_reg *reg;
    int nreg;
    uint64_t nunits;
} image;

typedef struct l3_state {
    crpm_l3_opts o;
    int *grp;                  /* ranks of this group by member index */
    int g, k;                  /* member index, data units per codeword */
    crpm_l3_layout lay;
    crpm_l3_code code;
    crpm_container *own;
    uint64_t segsize, blksize, unit; /* unit: see UNIT_BYTES */
    /* data side: the image the parity was last built from */
    image base;
    int have_base;
    uint64_t base_epoch;
    image cur;                 /* the image of the checkpoint being written */
    /* holder side */
    char ppath[CRPM_PATH_MAX], plock[CRPM_PATH_MAX + 8];
    int plock_fd;
    crpm_container *pc;        /* NULL: missing or unusable (pwhy) */
    char pwhy[256];
    int pfile;                 /* its file existed at open */
    int pbad, pprev_bad;       /* it, or its previous epoch, failed the restart's data check */
    unsigned char **par;       /* M buffers of plen bytes: parity of codeword (g - h) mod K, row h */
    uint64_t plen;
    uint64_t par_epoch;        /* job epoch par and pc's committed state describe; 0 = none */
    int par_committed;         /* this write committed pc */
} l3_state;

static l3_state *st_of(crpm_level *lv) { return lv->state; }

/* ---- images ------------------------------------------------------------------ */

static void image_free(image *im)
{
    for (int i = 0; i < im->nreg; i++)
        free(im->reg[i].segs);
    free(im->reg);
    free(im->meta);
    memset(im, 0, sizeof *im);
}

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint64_t unit_for(uint64_t seg, uint64_t blk)
{
    uint64_t u = UNIT_BYTES < blk ? blk : UNIT_BYTES;
    return u > seg || seg % u || u % blk ? seg : u;
}

/* The committed epoch of c as an image cut into units of `unit` bytes. */
static int image_of(crpm_container *c, uint64_t unit, image *im)
{
    memset(im, 0, sizeof *im);
    im->unit = unit;
    int n = 0;
    for (int i = 0; i < c->nregions; i++)
        n += c->regions[i].saved != 0;
    im->reg = calloc((size_t)n + 1, sizeof *im->reg);
    im->meta_len = META_REC + (uint64_t)n * META_REC;
    im->meta_units = (im->meta_len + unit - 1) / unit;
    im->meta = calloc(1, im->meta_len);
    if (!im->reg || !im->meta) {
        image_free(im);
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    }
    memcpy(im->meta, META_MAGIC, 8);
    put64(im->meta + 8, (uint64_t)n);
    put64(im->meta + 16, c->user_id);
    uint64_t next = im->meta_units;
    for (int i = 0; i < c->nregions; i++) {
        const crpm_region *r = &c->regions[i];
        if (!r->saved)
            continue;
        img_reg *d = &im->reg[im->nreg];
        uint64_t nu = (r->count * r->elem_size + unit - 1) / unit, ns, base;
        const crpm_seg *sg = crpm_region_segs(c, r, &ns, &base);
        *d = (img_reg){r->id, r->type_code, r->elem_size, r->count, ns, next, nu, NULL, base,
                       r->pack != CRPM_NO_PACK ? c->packs[r->pack].len : 0};
        d->segs = malloc(sizeof *d->segs * (ns ? ns : 1));
        if (!d->segs) {
            image_free(im);
            return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
        }
        if (ns)
            memcpy(d->segs, sg, sizeof *d->segs * ns);
        unsigned char *m = im->meta + META_REC * (uint64_t)(1 + im->nreg);
        memcpy(m, &d->id, 4);
        memcpy(m + 4, &d->type, 4);
        put64(m + 8, d->elem);
        put64(m + 16, d->count);
        im->nreg++;
        next += nu;
    }
    im->nunits = next;
    return CRPM_SUCCESS;
}

static int same_layout(const image *a, const image *b)
{
    if (a->unit != b->unit || a->meta_units != b->meta_units || a->nreg != b->nreg)
        return 0;
    for (int i = 0; i < a->nreg; i++)
        if (a->reg[i].id != b->reg[i].id || a->reg[i].type != b->reg[i].type || a->reg[i].elem != b->reg[i].elem ||
            a->reg[i].count != b->reg[i].count)
            return 0;
    return 1;
}

/* Image unit s: its bytes (NULL: zeros), how many are defined (the rest
 * are zero) and the physical segment holding them (CRPM_NO_PHYS: none);
 * *covered (may be NULL): the bytes of that segment its CRC table covers. */
static const char *unit_bytes(crpm_container *c, const image *im, uint64_t s, uint64_t *len, uint32_t *phys,
                              uint64_t *covered)
{
    uint64_t seg = c->sb.segment_size, unit = im->unit;
    *phys = CRPM_NO_PHYS;
    *len = 0;
    if (s >= im->nunits)
        return NULL;
    if (s < im->meta_units) {
        uint64_t off = s * unit;
        *len = im->meta_len - off < unit ? im->meta_len - off : unit;
        return (const char *)im->meta + off;
    }
    int lo = 0, hi = im->nreg - 1;
    while (lo < hi) { /* last region starting at or before s */
        int mid = (lo + hi + 1) / 2;
        if (im->reg[mid].first <= s)
            lo = mid;
        else
            hi = mid - 1;
    }
    const img_reg *r = &im->reg[lo];
    uint64_t q = s - r->first, o = q * unit, k = o / seg, bytes = r->count * r->elem;
    if (q >= r->nunits || k >= r->nsegs || !r->segs[k].state)
        return NULL;
    *len = bytes - o < unit ? bytes - o : unit;
    *phys = r->segs[k].phys[r->segs[k].state - 1];
    if (covered)
        *covered = r->span ? r->span : bytes - k * seg < seg ? bytes - k * seg : seg;
    return crpm_seg_addr(c, *phys) + r->base + o % seg;
}

/* ---- deltas ------------------------------------------------------------------ */

/* Ranges of one codeword's parity offsets with their delta bytes. */
typedef struct builder {
    uint64_t *ent;             /* (off, len) pairs */
    size_t nent, capent;
    unsigned char *data;
    size_t ndata, capdata;
    int err;
} builder;

static void *grow(void *p, size_t *cap, size_t need, size_t elem, int *err)
{
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *n = realloc(p, c * elem);
    if (!n) {
        *err = 1;
        return p;
    }
    *cap = c;
    return n;
}

static unsigned char *builder_add(builder *b, uint64_t off, uint64_t len)
{
    b->data = grow(b->data, &b->capdata, b->ndata + len, 1, &b->err);
    if (b->err)
        return NULL;
    if (b->nent && b->ent[2 * b->nent - 2] + b->ent[2 * b->nent - 1] == off) {
        b->ent[2 * b->nent - 1] += len;
    } else {
        b->ent = grow(b->ent, &b->capent, 2 * b->nent + 2, sizeof *b->ent, &b->err);
        if (b->err)
            return NULL;
        b->ent[2 * b->nent] = off;
        b->ent[2 * b->nent + 1] = len;
        b->nent++;
    }
    unsigned char *p = b->data + b->ndata;
    b->ndata += len;
    return p;
}

/* dst = a ^ b over n bytes; returns whether any byte is nonzero. */
static int xor_into(unsigned char *dst, const unsigned char *a, const unsigned char *b, size_t n)
{
    uint64_t any = 0;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t x, y;
        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        x ^= y;
        any |= x;
        memcpy(dst + i, &x, 8);
    }
    for (; i < n; i++) {
        dst[i] = a[i] ^ b[i];
        any |= dst[i];
    }
    return any != 0;
}

/* Appends the blocks of image unit s where `nw` and `old` (NULL: zeros)
 * differ, at parity offset poff. */
static void delta_unit(l3_state *s, const image *nw, const image *old, uint64_t seg_i, uint64_t poff, builder *b,
                       unsigned char *tmp)
{
    uint64_t ln = 0, lo = 0;
    uint32_t pn, po = CRPM_NO_PHYS;
    const unsigned char *n = (const unsigned char *)unit_bytes(s->own, nw, seg_i, &ln, &pn, NULL);
    const unsigned char *o = old ? (const unsigned char *)unit_bytes(s->own, old, seg_i, &lo, &po, NULL) : NULL;
    if (old && pn != CRPM_NO_PHYS && pn == po && ln == lo && n == o)
        return; /* the same bytes of the same committed copy: not written by this checkpoint (a packed
                   array may have moved within a pack that kept its copy) */
    uint64_t len = ln > lo ? ln : lo, blk = s->blksize;
    static const unsigned char zero[4096];
    for (uint64_t off = 0; off < len; off += blk) {
        uint64_t m = len - off < blk ? len - off : blk;
        const unsigned char *x = n && off + m <= ln ? n + off : NULL, *y = o && off + m <= lo ? o + off : NULL;
        unsigned char *bx = tmp, *by = tmp + blk;
        if (!x) { /* partly or wholly beyond the defined bytes: zero-pad */
            memset(bx, 0, m);
            if (n && off < ln)
                memcpy(bx, n + off, ln - off);
            x = bx;
        }
        if (!y) {
            if (o && off < lo) {
                memset(by, 0, m);
                memcpy(by, o + off, lo - off);
                y = by;
            } else if (m <= sizeof zero) {
                y = zero;
            } else {
                memset(by, 0, m);
                y = by;
            }
        }
        unsigned char *d = tmp + 2 * blk;
        if (xor_into(d, x, y, m)) {
            unsigned char *p = builder_add(b, poff + off, m);
            if (p)
                memcpy(p, d, m);
        }
    }
}

/* The deltas of a window of parity segments [t0, t1), one builder per
 * codeword j: a task per codeword on the rank's workers (builders and the
 * image are disjoint or read-only; each worker has its own scratch). */
typedef struct delta_job {
    l3_state *s;
    const image *nw, *old;
    uint64_t t0, t1;
    builder *b;
    unsigned char *tmp;        /* per worker: 3 blocks and a word */
} delta_job;

static void delta_codeword(void *arg, uint64_t j, int worker)
{
    delta_job *x = arg;
    l3_state *s = x->s;
    unsigned char *tmp = x->tmp + (size_t)worker * (3 * s->blksize + 8);
    x->b[j].nent = x->b[j].ndata = 0;
    for (uint64_t t = x->t0; t < x->t1; t++) {
        uint64_t si = t * (uint64_t)s->k + j;
        if (si < x->nw->nunits || (x->old && si < x->old->nunits))
            delta_unit(s, x->nw, x->old, si, t * s->unit, &x->b[j], tmp);
    }
}

/* ---- exchange ---------------------------------------------------------------- */

static int recv_msg(MPI_Comm comm, int src, int tag, unsigned char **buf, int *len)
{
    MPI_Message msg;
    MPI_Status stt;
    int rc = MPI_Mprobe(src, tag, comm, &msg, &stt);
    if (rc != MPI_SUCCESS)
        return crpm_mpi_fail(rc, "level 3: MPI_Mprobe");
    MPI_Get_count(&stt, MPI_BYTE, len);
    *buf = malloc(*len > 0 ? (size_t)*len : 1);
    if (!*buf) { /* received anyway (the sender waits), then the error */
        unsigned char sink;
        MPI_Mrecv(&sink, 0, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    }
    rc = MPI_Mrecv(*buf, *len, MPI_BYTE, &msg, MPI_STATUS_IGNORE);
    return rc == MPI_SUCCESS ? CRPM_SUCCESS : crpm_mpi_fail(rc, "level 3: MPI_Mrecv");
}

/* Applies one message: count, (off, len) pairs, then the bytes. */
static int apply_msg(l3_state *s, const unsigned char *m, int len, int h, int i, unsigned char *par, int from,
                     crpm_container *pc)
{
    int32_t id = ((s->g - h) % s->lay.K + s->lay.K) % s->lay.K;
    uint64_t n = len >= 8 ? get64(m) : UINT64_MAX;
    if (n > ((uint64_t)len - 8) / 16)
        return crpm_error(CRPM_ERR_CORRUPT, "level 3: malformed delta from rank %d", from);
    const unsigned char *data = m + 8 + 16 * n;
    uint64_t avail = (uint64_t)len - 8 - 16 * n, used = 0;
    crpm_l3_piece *v = malloc((n ? n : 1) * sizeof *v);
    if (!v)
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for a delta of %llu ranges",
                          (unsigned long long)n);
    for (uint64_t e = 0; e < n; e++) { /* all checked before any is applied */
        uint64_t off = get64(m + 8 + 16 * e), l = get64(m + 16 + 16 * e);
        if (l > avail - used || off > s->plen || l > s->plen - off) {
            free(v);
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: delta from rank %d out of range", from);
        }
        v[e] = (crpm_l3_piece){data + used, par + off, l};
        used += l;
    }
    crpm_l3_update_many(&s->code, h, i, v, n); /* over the rank's workers */
    for (uint64_t e = 0; pc && e < n; e++) /* the parity checkpoint compares only what deltas touched */
        crpm_container_written(pc, id, (uint64_t)(v[e].parity - par), v[e].len);
    free(v);
    return CRPM_SUCCESS;
}

/* Collective: every rank sends the difference between image nw and old
 * (NULL: zeros) to the holders, which add it into target (M buffers of
 * plen bytes; psegs parity segments).  *sent adds the payload. */
static int exchange(crpm_level *lv, const image *nw, const image *old, uint64_t psegs, unsigned char **target,
                    uint64_t *sent, int hook)
{
    l3_state *s = st_of(lv);
    MPI_Comm comm = lv->env->comm;
    int K = s->lay.K, M = s->lay.M, k = s->k;
    uint64_t unit = s->unit, T = ROUND_BYTES / (unit * (uint64_t)k);
    if (T < 1)
        T = 1;
    builder *b = calloc((size_t)k, sizeof *b);
    unsigned char **out = calloc((size_t)k, sizeof *out);
    MPI_Request *req = malloc(sizeof *req * (size_t)(k * M));
    unsigned char *tmp = malloc((size_t)crpm_pool_width(s->code.pool) * (3 * s->blksize + 8));
    int rc = (!b || !out || !req || !tmp) ? crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory") : CRPM_SUCCESS;
    /* a rank that cannot take part still sends empty messages: nobody waits forever */
    for (uint64_t t0 = 0; t0 < psegs; t0 += T) {
        uint64_t t1 = t0 + T < psegs ? t0 + T : psegs;
        int nreq = 0;
        delta_job dj = {s, nw, old, t0, t1, b, tmp};
        if (rc == 0 && b && out && req)
            crpm_pool_run(s->code.pool, (uint64_t)k, delta_codeword, &dj);
        for (int j = 0; b && out && req && j < k; j++) {
            if (rc)
                b[j].nent = b[j].ndata = 0;
            if (b[j].err && rc == 0)
                rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for the delta");
            size_t ne = rc == 0 ? b[j].nent : 0, nd = rc == 0 ? b[j].ndata : 0;
            size_t len = 8 + 16 * ne + nd;
            free(out[j]);
            out[j] = malloc(len);
            if (!out[j] || len > (size_t)INT32_MAX) {
                rc = rc ? rc : crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
                ne = nd = 0;
                len = 8;
                if (!out[j] && !(out[j] = malloc(8)))
                    continue; /* the holders will fail on a missing message: MPI errors are fatal anyway */
            }
            put64(out[j], ne);
            for (size_t e = 0; e < ne; e++) {
                put64(out[j] + 8 + 16 * e, b[j].ent[2 * e]);
                put64(out[j] + 16 + 16 * e, b[j].ent[2 * e + 1]);
            }
            if (nd)
                memcpy(out[j] + 8 + 16 * ne, b[j].data, nd);
            int c = crpm_l3_codeword_of(&s->lay, s->g, j);
            for (int h = 0; h < M; h++) {
                int to = s->grp[crpm_l3_holder(&s->lay, c, h)];
                int mrc = MPI_Isend(out[j], (int)len, MPI_BYTE, to, TAG_L3 + c, comm, &req[nreq++]);
                if (mrc != MPI_SUCCESS) {
                    nreq--;
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Isend");
                }
                *sent += nd;
            }
        }
        if (hook && t0 == 0 && s->o.hook)
            s->o.hook(s->o.hook_arg, CRPM_L3_HOOK_SENT);
        for (int h = 0; h < M; h++) {
            int c = ((s->g - h) % K + K) % K;
            for (int i = 0; i < k; i++) {
                int from = s->grp[crpm_l3_data_member(&s->lay, c, i)];
                unsigned char *m = NULL;
                int len = 0;
                int lrc = recv_msg(comm, from, TAG_L3 + c, &m, &len);
                if (lrc == 0 && rc == 0)
                    lrc = apply_msg(s, m, len, h, i, target[h], from, target == s->par ? s->pc : NULL);
                free(m);
                rc = rc ? rc : lrc;
            }
        }
        int wrc = nreq ? MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
        if (wrc != MPI_SUCCESS)
            rc = rc ? rc : crpm_mpi_fail(wrc, "level 3: MPI_Waitall");
    }
    for (int j = 0; b && j < k; j++) {
        free(b[j].ent);
        free(b[j].data);
        if (out)
            free(out[j]);
    }
    free(b);
    free(out);
    free(req);
    free(tmp);
    return rc;
}

/* ---- the parity container ---------------------------------------------------- */

static void open_parity(crpm_level *lv)
{
    l3_state *s = st_of(lv);
    struct stat sb;
    s->pfile = stat(s->ppath, &sb) == 0;
    if (s->pc || !s->pfile)
        return;
    crpm_open_opts oo = {.path = s->ppath, .job_name = lv->env->job_name, .rank = lv->env->rank,
                         .nranks = lv->env->nranks, .persistence = s->o.persistence, .backend = s->o.backend};
    int rc = crpm_container_open(&oo, &s->pc, NULL);
    if (rc != 0) {
        s->pc = NULL;
        snprintf(s->pwhy, sizeof s->pwhy, "%s", crpm_last_error());
        s->pbad = rc == CRPM_ERR_CORRUPT; /* written whole under a temporary name: never half a rewrite */
    }
    crpm_error_clear(); /* a parity container that does not open is a fact, not an error */
}

/* Parity buffers of at least `bytes` each, protected in pc. */
static int size_parity(l3_state *s, uint64_t bytes, int zero)
{
    int M = s->lay.M;
    if (bytes > s->plen) {
        for (int h = 0; h < M; h++) {
            unsigned char *n = realloc(s->par[h], bytes);
            if (!n)
                return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for %llu bytes of parity",
                                  (unsigned long long)bytes);
            memset(n + s->plen, 0, bytes - s->plen);
            s->par[h] = n;
        }
        s->plen = bytes;
    }
    for (int h = 0; zero && h < M; h++)
        memset(s->par[h], 0, s->plen);
    for (int h = 0; s->pc && h < M; h++) {
        int c = ((s->g - h) % s->lay.K + s->lay.K) % s->lay.K;
        int rc = crpm_container_protect(s->pc, c, s->par[h], s->plen, CRPM_TC_BYTE, 1);
        if (rc == 0)
            rc = crpm_container_declare_writes(s->pc, c);
        if (rc)
            return rc;
        if (zero)
            crpm_container_written(s->pc, c, 0, s->plen);
    }
    return CRPM_SUCCESS;
}

/* A parity container to write into: the open one, or a new one (a file
 * that does not open holds nothing the data containers cannot re-encode).
 * The open one must carry the containers' run identity: after a restart
 * that made them anew (level 4, a fresh start) the parity of the run
 * before is replaced, or no restart could ever use what it encodes. */
static int ensure_parity(crpm_level *lv)
{
    l3_state *s = st_of(lv);
    uint8_t run[CRPM_RUN_ID_LEN], prun[CRPM_RUN_ID_LEN];
    crpm_container_run_id(s->own, run);
    if (s->pc)
        crpm_container_run_id(s->pc, prun);
    if (s->pc && memcmp(run, prun, sizeof run) == 0)
        return CRPM_SUCCESS;
    crpm_container_close(s->pc);
    s->pc = NULL;
    char tmp[CRPM_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", s->ppath);
    crpm_unlink_quiet(tmp);
    crpm_layout lay = {0};
    if (lv->env->layout) {
        lay = *lv->env->layout;
        lay.role = CRPM_ROLE_PARITY;
    }
    crpm_open_opts oo = {.path = tmp, .segment_size = s->segsize, .block_size = s->blksize,
                         .layout = lv->env->layout ? &lay : NULL,
                         .job_name = lv->env->job_name, .rank = lv->env->rank, .nranks = lv->env->nranks,
                         .persistence = s->o.persistence, .backend = s->o.backend, .create = 1, .run_id = run,
                         /* M regions only (not room for 128K arrays): each a segment table of at
                          * most 1 MiB, 64 GiB of parity per codeword with 2-MiB segments */
                         .slot_size = 4096 + (uint64_t)s->lay.M * (sizeof(struct crpm_slot_region) + (1u << 20))};
    crpm_container *c = NULL;
    int rc = crpm_container_open(&oo, &c, NULL);
    if (rc == 0)
        crpm_container_close(c);
    if (rc == 0)
        rc = crpm_durable_rename(tmp, s->ppath);
    oo.path = s->ppath;
    oo.create = 0;
    if (rc == 0)
        rc = crpm_container_open(&oo, &s->pc, NULL);
    if (rc != 0)
        s->pc = NULL;
    else
        s->pbad = s->pprev_bad = 0;
    s->par_epoch = 0;
    return rc;
}

/* The first `width` bytes (no unit defines more) of image units at rows
 * [t0, t1) of codeword slot j, zero-padded, into b. */
static void pack_units(l3_state *s, const image *im, int j, uint64_t t0, uint64_t t1, uint64_t width,
                          unsigned char *b)
{
    uint64_t ln;
    uint32_t ph;
    for (uint64_t t = t0; t < t1; t++) {
        const char *p = unit_bytes(s->own, im, t * (uint64_t)s->k + (uint64_t)j, &ln, &ph, NULL);
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
        unit_bytes(s->own, im, i, &ln, &ph, NULL);
        w = ln > w ? ln : w;
    }
    return w;
}

/* Full re-encode check (tests): every rank sends its image segments raw to
 * the holders, which encode them from scratch (crpm_l3_encode, not the
 * delta path) and compare with their parity. */
static int verify(crpm_level *lv, const image *im, uint64_t psegs)
{
    l3_state *s = st_of(lv);
    MPI_Comm comm = lv->env->comm;
    int K = s->lay.K, M = s->lay.M, k = s->k, rc = CRPM_SUCCESS;
    /* only the bytes some image defines travel: the rest is zero everywhere */
    int64_t wmine = (int64_t)defined_width(s, im), wall = 0;
    if (MPI_Allreduce(&wmine, &wall, 1, MPI_INT64_T, MPI_MAX, comm) != MPI_SUCCESS)
        return crpm_error(CRPM_ERR_MPI, "level 3: parity check: MPI_Allreduce failed");
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
    if (!ok)
        rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for the parity check");
    int64_t okv = ok, oka = 0;
    if (MPI_Allreduce(&okv, &oka, 1, MPI_INT64_T, MPI_MIN, comm) != MPI_SUCCESS || !oka)
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
            int c = ((s->g - h) % K + K) % K;
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

/* ---- checkpoints --------------------------------------------------------------- */

/* Collective: the image `cur` of the committed epoch goes into the parity,
 * as a delta against base when `want_delta` and everyone can, else whole.
 * Commits the parity container with the job epoch as its user id. */
static int encode(crpm_level *lv, int want_delta, uint64_t *sent, int hook)
{
    l3_state *s = st_of(lv);
    image_free(&s->cur);
    int irc = s->own ? image_of(s->own, s->unit, &s->cur) : crpm_error(CRPM_ERR_STATE, "level 3: no container attached");
    uint64_t epoch = irc ? 0 : crpm_container_epoch(s->own);
    int lrc = irc ? CRPM_SUCCESS : ensure_parity(lv); /* first: it may replace the parity (par_epoch 0) */
    int need_full = irc || !want_delta || !s->have_base || s->base_epoch + 1 != epoch ||
                    !crpm_container_prev_available(s->own) || !same_layout(&s->base, &s->cur) ||
                    s->par_epoch + 1 != epoch || !s->pc;
    /* one reduction: can everyone go on, and with a delta or a full encode */
    int64_t v[4] = {irc != 0, lrc != 0, need_full, (int64_t)((s->cur.nunits + (uint64_t)s->k - 1) / (uint64_t)s->k)};
    int64_t r[4];
    int mrc = MPI_Allreduce(v, r, 4, MPI_INT64_T, MPI_MAX, lv->env->comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, "level 3: MPI_Allreduce");
    if (r[0])
        return irc ? irc : crpm_error(CRPM_ERR_STATE, "level 3: another rank could not describe its checkpoint");
    if (r[1])
        return lrc ? lrc : crpm_error(CRPM_ERR_IO, "level 3: another rank could not open its parity container");
    uint64_t psegs = (uint64_t)r[3];
    int full = r[2] != 0;
    int rc = size_parity(s, psegs * s->unit, full);
    s->par_epoch = 0; /* par changes from here: it describes no epoch until committed */
    int xrc = exchange(lv, &s->cur, full ? NULL : &s->base, psegs, s->par, sent, hook);
    rc = rc ? rc : xrc;
    if (hook && rc == 0 && s->o.hook)
        s->o.hook(s->o.hook_arg, CRPM_L3_HOOK_APPLIED);
    if (rc == 0) {
        crpm_stats_t pst;
        rc = crpm_container_checkpoint(s->pc, epoch, &pst);
        s->par_committed = rc == 0;
        if (rc == 0)
            s->par_epoch = epoch;
    }
    if (hook && rc == 0 && s->o.hook)
        s->o.hook(s->o.hook_arg, CRPM_L3_HOOK_COMMITTED);
    if (s->o.verify) {
        int64_t ok = rc == 0, all = 0;
        mrc = MPI_Allreduce(&ok, &all, 1, MPI_INT64_T, MPI_MIN, lv->env->comm);
        if (mrc != MPI_SUCCESS)
            return crpm_mpi_fail(mrc, "level 3: MPI_Allreduce");
        if (all)
            rc = verify(lv, &s->cur, psegs);
    }
    return rc;
}

static int l3_write(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed)
{
    (void)a;
    (void)n;
    (void)id;
    l3_state *s = st_of(lv);
    *committed = 0;
    s->par_committed = 0;
    uint64_t sent = 0;
    int rc = encode(lv, !s->o.full_encode, &sent, 1);
    st->bytes_sent += sent;
    *committed = s->par_committed;
    return rc;
}

/* Every rank committed: the parity describes this epoch's images. */
static int l3_committed(crpm_level *lv, int64_t id)
{
    (void)id;
    l3_state *s = st_of(lv);
    image_free(&s->base);
    s->base = s->cur;
    memset(&s->cur, 0, sizeof s->cur);
    s->have_base = 1;
    s->base_epoch = crpm_container_epoch(s->own);
    s->par_committed = 0;
    return CRPM_SUCCESS;
}

/* Another rank failed: the parity goes back with the containers; the next
 * level-3 checkpoint re-encodes (the DRAM parity holds the failed one). */
static int l3_undo(crpm_level *lv)
{
    l3_state *s = st_of(lv);
    int rc = CRPM_SUCCESS;
    if (s->par_committed && s->pc && crpm_container_rollback(s->pc) != 0) {
        rc = crpm_error(CRPM_ERR_IO, "%s", crpm_last_error());
        crpm_container_close(s->pc);
        s->pc = NULL;
    }
    s->par_committed = 0;
    s->par_epoch = 0;
    image_free(&s->cur);
    return rc;
}

static int l3_remove(crpm_level *lv)
{
    l3_state *s = st_of(lv);
    char p[CRPM_PATH_MAX + 16];
    crpm_container_close(s->pc);
    s->pc = NULL;
    crpm_unlink_quiet(s->ppath);
    snprintf(p, sizeof p, "%s.tmp", s->ppath);
    crpm_unlink_quiet(p);
    crpm_unlock_file(s->plock_fd, s->plock, 1);
    s->plock_fd = -1;
    return CRPM_SUCCESS;
}

static void l3_close(crpm_level *lv)
{
    l3_state *s = st_of(lv);
    crpm_container_close(s->pc);
    if (s->plock_fd >= 0)
        crpm_unlock_file(s->plock_fd, s->plock, 0);
    image_free(&s->base);
    image_free(&s->cur);
    for (int h = 0; s->par && h < s->lay.M; h++)
        free(s->par[h]);
    free(s->par);
    free(s->grp);
    crpm_l3_code_free(&s->code);
    free(s);
}

static const crpm_level_ops l3_ops = {
    .name = "L3",
    .write = l3_write,
    .committed = l3_committed,
    .undo = l3_undo,
    .remove = l3_remove,
    .close = l3_close,
};

int crpm_level_l3(crpm_level *lv, const crpm_level_env *env, const crpm_l3_opts *o)
{
    l3_state *s = calloc(1, sizeof *s);
    if (!s)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    s->o = *o;
    s->o.members = s->o.groups = NULL; /* the caller's */
    s->plock_fd = -1;
    s->lay = (crpm_l3_layout){o->group_size, o->parity};
    s->k = o->group_size - o->parity;
    s->g = o->members[env->rank];
    s->segsize = o->segment_size ? o->segment_size : CRPM_DEFAULT_SEGMENT;
    s->blksize = o->block_size ? o->block_size : CRPM_DEFAULT_BLOCK;
    s->unit = unit_for(s->segsize, s->blksize);
    *lv = (crpm_level){&l3_ops, env, s};
    s->grp = malloc(sizeof *s->grp * (size_t)o->group_size);
    s->par = calloc((size_t)o->parity, sizeof *s->par);
    int rc = s->grp && s->par ? crpm_l3_code_init(&s->code, s->k, o->parity)
                              : crpm_error(CRPM_ERR_NOMEM, "out of memory");
    s->code.pool = env->pool; /* the rank's workers apply the deltas */
    for (int j = 0; s->grp && j < o->group_size; j++)
        s->grp[j] = -1;
    for (int r = 0; rc == 0 && r < env->nranks; r++)
        if (o->groups[r] == o->groups[env->rank])
            s->grp[o->members[r]] = r;
    for (int j = 0; rc == 0 && j < o->group_size; j++)
        if (s->grp[j] < 0)
            rc = crpm_error(CRPM_ERR_CONFIG, "level 3: the group of rank %d lacks member %d", env->rank, j);
    if (rc == 0)
        rc = crpm_name_parity(s->ppath, sizeof s->ppath, env->job_dir, env->rank);
    snprintf(s->plock, sizeof s->plock, "%s.lock", s->ppath);
    if (rc == 0)
        rc = crpm_lock_file(s->plock, o->lock_wait_s, &s->plock_fd);
    if (rc == 0)
        open_parity(lv);
    if (rc != 0)
        crpm_level_close(lv);
    return rc;
}

void crpm_level_l3_attach(crpm_level *lv, crpm_container *own)
{
    l3_state *s = st_of(lv);
    s->own = own;
    image_free(&s->base);
    s->have_base = 0;
    if (own) {
        s->segsize = crpm_container_segment_size(own);
        s->blksize = crpm_container_block_size(own);
        s->unit = unit_for(s->segsize, s->blksize);
        if (crpm_container_epoch(own) && image_of(own, s->unit, &s->base) == 0) {
            s->have_base = 1;
            s->base_epoch = crpm_container_epoch(own);
        }
        crpm_error_clear(); /* without a base the next checkpoint re-encodes */
    }
}

/* ---- restart ---------------------------------------------------------------- */

void crpm_level_l3_verify(crpm_level *lv, int say)
{
    l3_state *s = st_of(lv);
    int bad = 0, prev_bad = 0;
    if (!s->pc)
        return;
    int rc = crpm_container_verify_epochs(s->pc, &bad, &prev_bad, s->pwhy, sizeof s->pwhy);
    if (rc != 0) { /* not checked: not trusted */
        bad = 1;
        snprintf(s->pwhy, sizeof s->pwhy, "%s", crpm_last_error());
    }
    if (say && (bad || prev_bad)) {
        fprintf(stderr, "[crpm rank %d] parity: %s\n", lv->env->rank, s->pwhy);
        fflush(stderr);
    }
    s->pprev_bad = prev_bad;
    if (bad) {
        crpm_container_close(s->pc);
        s->pc = NULL;
        s->pbad = 1;
    }
    crpm_error_clear();
}

void crpm_level_l3_facts(crpm_level *lv, int64_t out[CRPM_L3F_N])
{
    l3_state *s = st_of(lv);
    memset(out, 0, sizeof(int64_t) * CRPM_L3F_N);
    out[CRPM_L3F_FILE] = s->pfile;
    out[CRPM_L3F_OK] = s->pc != NULL;
    out[CRPM_L3F_PREV] = -1;
    out[CRPM_L3F_BAD] = s->pbad;
    if (!s->pc)
        return;
    out[CRPM_L3F_EPOCH] = (int64_t)crpm_container_user_id(s->pc);
    uint64_t prev = 0;
    if (!s->pprev_bad && crpm_container_prev_available(s->pc) && crpm_container_prev_user_id(s->pc, &prev) == 0)
        out[CRPM_L3F_PREV] = (int64_t)prev;
    crpm_error_clear();
    uint8_t id[CRPM_RUN_ID_LEN];
    crpm_container_run_id(s->pc, id);
    memcpy(&out[CRPM_L3F_RUN0], id, sizeof id);
}

int crpm_level_l3_at(crpm_level *lv, uint64_t epoch, int *usable)
{
    l3_state *s = st_of(lv);
    *usable = 0;
    s->par_epoch = 0;
    if (!s->pc)
        return CRPM_SUCCESS;
    uint64_t prev = 0;
    int rc = CRPM_SUCCESS;
    if (!s->pprev_bad && crpm_container_user_id(s->pc) == epoch + 1 && crpm_container_prev_available(s->pc) &&
        crpm_container_prev_user_id(s->pc, &prev) == 0 && prev == epoch)
        rc = crpm_container_rollback(s->pc);
    crpm_error_clear();
    if (rc != 0 || crpm_container_user_id(s->pc) != epoch || !crpm_container_epoch(s->pc))
        return rc; /* describes another epoch: re-encoded after the restart */
    /* the parity's regions as saved: one per codeword held, all plen long */
    int n = crpm_container_nregions(s->pc);
    uint64_t len = 0;
    for (int i = 0; i < n; i++) {
        crpm_array r;
        if (crpm_container_region(s->pc, i, &r) == 0 && crpm_array_bytes(&r) > len)
            len = crpm_array_bytes(&r);
    }
    if (n != s->lay.M)
        return CRPM_SUCCESS;
    rc = size_parity(s, len, 1);
    if (rc == 0)
        rc = crpm_container_recover(s->pc);
    if (rc != 0) {
        crpm_error_clear();
        return CRPM_SUCCESS; /* unusable: re-encoded */
    }
    s->par_epoch = epoch;
    *usable = 1;
    return CRPM_SUCCESS;
}

void crpm_l3_image_free(crpm_l3_image *img)
{
    free(img->buf);
    free(img->regions);
    memset(img, 0, sizeof *img);
}

/* ---- rebuild ------------------------------------------------------------------
 *
 * Only defined bytes travel and are decoded.  A lost rank does not know its
 * region table until it has its meta area back, so the rebuild runs in
 * phases:
 *
 *   prefix  the first PREFIX bytes of image segment 0 (the meta header and,
 *           usually, the whole region table); nothing to ask for
 *   meta    the rest of the meta area, only when some lost rank's is longer
 *   data    the regions' segments
 *
 * In the meta and data phases each lost rank first tells the sources of
 * each of its codewords how many bytes of every row (parity segment) it
 * needs.  A lost unit is the sum over the k sources of coefficient x unit,
 * so the sources decode it in a chain: per lost unit and row, the sources
 * in decoder order (agreed: from the layout and the lost ranks) each add
 * their share to the running sum received from the previous one (the first
 * starts it) and pass it on; the last sends the finished bytes to the lost
 * rank, which receives them straight into its image.  The lost rank thus
 * takes in its image once (not k times) and the multiply-adds are spread
 * over the survivors.  A source adds min(the bytes it defines there, need):
 * the code has zeros beyond them; a sum travels as long as its longest
 * share so far, and is padded with zeros by whoever receives it.
 *
 * A source works through windows of W rows (two windows of buffers, reused:
 * one is computed while the other's sends drain), its chain steps in the
 * order (position in the chain, codeword, lost unit, row), which every
 * rank follows, so each step waits only on steps before it and messages
 * between two ranks on one codeword's tag are sent and received in the
 * same order.  The lost rank keeps LOST_ROWS rows of receives posted.
 *
 * Which messages exist follows from agreed numbers (rows per phase), the
 * decoders and the needs sent, never from a rank's own state, so a rank that
 * fails still sends and receives what the others expect; everything a phase
 * allocates is allocated before the agreement that precedes it. */

#define TAG_L3_NEED 7700       /* + codeword: a lost rank's needs per row */
#define PREFIX (16u << 10)
#define RB_ALIGN 64u
/* A source's buffers for the sums in flight (both windows).  They are fresh
 * memory, and a rebuild of fewer rows than they hold touches each cell once,
 * so first-touch faults grow with them: 2 MiB (5 rows of 3 chains of 64 KiB)
 * instead of 8 took the apps' sizes from 14 to 12 ms (HPCCG, 4.5 MiB per
 * rank, median of 10) and cost nothing at 36 MiB (50 -> 48 ms). */
#define WINDOW_BYTES (2ull << 20)
#define LOST_ROWS 64u
enum { PH_PREFIX, PH_META, PH_DATA };

typedef struct rb_src {        /* this rank as a source of one codeword */
    int unit;                  /* data index, or k + parity row; -1: not a source */
    int pos;                   /* its place in the decoder's sources: the chain */
    int j;                     /* the codeword's slot among this rank's (data unit) */
    uint64_t *need;            /* nlost x rows: what each lost unit of the codeword needs */
} rb_src;

typedef struct rb_task {       /* one chain this rank is a step of: (codeword, lost unit) */
    int c, q;
} rb_task;

typedef struct rb {
    l3_state *s;
    MPI_Comm comm;
    int lost_me;
    uint64_t seg, bound, maxrows; /* bound: image segments no image can exceed */
    crpm_l3_decoder *dec;      /* K: codewords with a lost data unit */
    rb_src *src;               /* K */
    image im;                  /* survivor: its image */
    rb_task *task;             /* survivor: its chains, by (position, codeword, lost unit) */
    int ntask;
    unsigned char *slab;       /* survivor: 2 windows x ntask x W cells of cell bytes */
    size_t cell;
    uint64_t W;
    /* lost rank: its image as rebuilt */
    unsigned char *pre;        /* PREFIX bytes of segment 0 */
    unsigned char *meta;       /* meta_len bytes (pre when it holds them all) */
    uint64_t meta_len, meta_segs, nsegs, user_id, p0;
    crpm_array *reg;
    uint64_t *first, nreg;     /* first image segment of each region */
    char *buf;                 /* the regions, each at reg[i].ptr */
    uint64_t *myneed;          /* k x rows, sent to the sources */
    MPI_Request *req;
    uint64_t *sent;
} rb;

/* Lost rank: the bytes of image segment s this phase rebuilds (0: none),
 * and where they go. */
static uint64_t rb_want(const rb *r, int phase, uint64_t s, unsigned char **dst)
{
    uint64_t seg = r->seg;
    *dst = NULL;
    if (phase == PH_PREFIX) {
        *dst = r->pre;
        return s == 0 ? r->p0 : 0;
    }
    if (phase == PH_META) {
        if (s >= r->meta_segs || r->meta == r->pre)
            return 0;
        *dst = r->meta + s * seg;
        return r->meta_len - s * seg < seg ? r->meta_len - s * seg : seg;
    }
    if (s < r->meta_segs || s >= r->nsegs || !r->nreg)
        return 0;
    uint64_t lo = 0, hi = r->nreg - 1;
    while (lo < hi) { /* the last region starting at or before s */
        uint64_t mid = (lo + hi + 1) / 2;
        if (r->first[mid] <= s)
            lo = mid;
        else
            hi = mid - 1;
    }
    uint64_t k = s - r->first[lo], bytes = crpm_array_bytes(&r->reg[lo]);
    if (k * seg >= bytes)
        return 0;
    *dst = (unsigned char *)r->reg[lo].ptr + k * seg;
    return bytes - k * seg < seg ? bytes - k * seg : seg;
}

/* Rank of unit u of codeword c. */
static int rb_rank(const l3_state *s, int c, int u)
{
    return s->grp[u < s->k ? crpm_l3_data_member(&s->lay, c, u) : crpm_l3_holder(&s->lay, c, u - s->k)];
}

/* One receive waited for without holding a core; *n: the bytes received
 * (0 after an error).  Returns MPI's code. */
static int rb_wait1(MPI_Request *rq, uint64_t *n)
{
    MPI_Status st;
    int cnt = 0, mrc = crpm_mpi_idle_wait(1, rq, &st);
    *n = 0;
    if (mrc == MPI_SUCCESS && MPI_Get_count(&st, MPI_BYTE, &cnt) == MPI_SUCCESS && cnt > 0)
        *n = (uint64_t)cnt;
    return mrc;
}

/* Survivor: the bytes of its unit of codeword c at row t (min(defined, need)).
 * A data unit is checked against its container's CRCs before it is used
 * (restart checked the whole container, but only this check covers the
 * bytes as they are read): one that fails is not used and the rebuild
 * fails with CRPM_ERR_CORRUPT, never decoding from it. */
static const void *rb_bytes(rb *r, const rb_src *x, uint64_t t, uint64_t need, uint64_t *n, int *rc)
{
    l3_state *s = r->s;
    const void *p = NULL;
    *n = 0;
    if (x->unit < s->k) {
        uint32_t ph;
        uint64_t u = t * (uint64_t)s->k + (uint64_t)x->j, covered = 0;
        p = unit_bytes(s->own, &r->im, u, n, &ph, &covered);
        *n = p ? *n : 0;
        int64_t bad = -1;
        if (p && ph != CRPM_NO_PHYS)
            bad = crpm_crc_check(s->own, ph, (uint64_t)((const char *)p - crpm_seg_addr(s->own, ph)), *n, covered);
        if (bad >= 0) {
            *rc = *rc ? *rc : crpm_error(CRPM_ERR_CORRUPT, "level 3: %s fails its CRC32C check in physical segment "
                                         "%u at byte %lld: rank %d cannot serve the rebuild", s->own->path, ph,
                                         (long long)bad, s->grp[s->g]);
            *n = 0;
            return NULL;
        }
    } else {
        uint64_t off = t * r->seg;
        *n = s->plen > off ? s->plen - off : 0;
        p = *n ? (const void *)(s->par[x->unit - s->k] + off) : NULL;
    }
    *n = *n < need ? *n : need;
    *n = *n < r->seg ? *n : r->seg;
    return p;
}

/* Survivor: its steps of every chain of a phase of nrows rows. */
static int rb_chain(rb *r, uint64_t nrows, int rc)
{
    l3_state *s = r->s;
    int k = s->k, nsend[2] = {0, 0}, mrc;
    uint64_t W = r->W;
    size_t per = (size_t)W * (size_t)r->ntask;
    for (uint64_t t0 = 0, w = 0; t0 < nrows; t0 += W, w++) {
        uint64_t t1 = t0 + W < nrows ? t0 + W : nrows;
        int b = (int)(w & 1);
        MPI_Request *rrq = r->req, *srq = r->req + per * (size_t)(1 + b);
        unsigned char *slab = r->slab + per * (size_t)b * r->cell;
        /* this window's buffers are free once the sends of two windows ago are out */
        mrc = nsend[b] ? crpm_mpi_idle_wait(nsend[b], srq, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
        if (mrc != MPI_SUCCESS)
            rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Waitall");
        nsend[b] = 0;
        for (int i = 0; i < r->ntask; i++) {
            int c = r->task[i].c, q = r->task[i].q, pos = r->src[c].pos;
            for (uint64_t t = t0; t < t1; t++) {
                size_t ci = (size_t)i * W + (size_t)(t - t0);
                uint64_t need = r->src[c].need[(size_t)q * nrows + t];
                rrq[ci] = MPI_REQUEST_NULL;
                if (!need || pos == 0)
                    continue;
                mrc = MPI_Irecv(slab + ci * r->cell, (int)need, MPI_BYTE, rb_rank(s, c, r->dec[c].src[pos - 1]),
                                TAG_L3 + c, r->comm, &rrq[ci]);
                if (mrc != MPI_SUCCESS) {
                    rrq[ci] = MPI_REQUEST_NULL;
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Irecv");
                }
            }
        }
        for (int i = 0; i < r->ntask; i++) {
            int c = r->task[i].c, q = r->task[i].q, pos = r->src[c].pos;
            const rb_src *x = &r->src[c];
            int to = pos < k - 1 ? rb_rank(s, c, r->dec[c].src[pos + 1])
                                 : s->grp[crpm_l3_data_member(&s->lay, c, r->dec[c].lost[q])];
            for (uint64_t t = t0; t < t1; t++) {
                size_t ci = (size_t)i * W + (size_t)(t - t0);
                unsigned char *sum = slab + ci * r->cell;
                uint64_t need = x->need[(size_t)q * nrows + t], got = 0, n;
                if (!need)
                    continue;
                if (pos > 0 && (mrc = rb_wait1(&rrq[ci], &got)) != MPI_SUCCESS)
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Wait");
                const void *mine = rb_bytes(r, x, t, need, &n, &rc);
                if (n > got && pos > 0) /* the sum so far is zero there */
                    memset(sum + got, 0, n - got);
                if (n)
                    crpm_l3_decode_part(&r->dec[c], q, pos, n, mine, sum, pos == 0);
                got = n > got ? n : got;
                mrc = MPI_Isend(sum, (int)got, MPI_BYTE, to, TAG_L3 + c, r->comm, &srq[nsend[b]++]);
                if (mrc != MPI_SUCCESS) {
                    nsend[b]--;
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Isend");
                }
                *r->sent += got;
            }
        }
    }
    for (int b = 0; b < 2; b++) {
        mrc = nsend[b] ? crpm_mpi_idle_wait(nsend[b], r->req + per * (size_t)(1 + b), MPI_STATUSES_IGNORE) : MPI_SUCCESS;
        if (mrc != MPI_SUCCESS)
            rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Waitall");
    }
    return rc;
}

/* Lost rank: posts the receives of row t, straight into its image. */
static int rb_post(rb *r, int phase, uint64_t t)
{
    l3_state *s = r->s;
    int k = s->k, rc = CRPM_SUCCESS;
    MPI_Request *rq = r->req + (size_t)(t % LOST_ROWS) * (size_t)k;
    for (int j = 0; j < k; j++) {
        int c = crpm_l3_codeword_of(&s->lay, s->g, j);
        unsigned char *dst;
        uint64_t want = rb_want(r, phase, t * (uint64_t)k + (uint64_t)j, &dst);
        rq[j] = MPI_REQUEST_NULL;
        if (!want)
            continue;
        int mrc = MPI_Irecv(dst, (int)want, MPI_BYTE, rb_rank(s, c, r->dec[c].src[k - 1]), TAG_L3 + c, r->comm,
                            &rq[j]);
        if (mrc != MPI_SUCCESS) {
            rq[j] = MPI_REQUEST_NULL;
            rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Irecv");
        }
    }
    return rc;
}

/* Lost rank: its units of a phase of nrows rows, as the chains finish them. */
static int rb_collect(rb *r, int phase, uint64_t nrows, int rc)
{
    int k = r->s->k;
    for (uint64_t t = 0; t < nrows && t < LOST_ROWS; t++) {
        int lrc = rb_post(r, phase, t);
        rc = rc ? rc : lrc;
    }
    for (uint64_t t = 0; t < nrows; t++) {
        MPI_Request *rq = r->req + (size_t)(t % LOST_ROWS) * (size_t)k;
        for (int j = 0; j < k; j++) {
            unsigned char *dst;
            uint64_t want = rb_want(r, phase, t * (uint64_t)k + (uint64_t)j, &dst), got = 0;
            if (!want)
                continue;
            int mrc = rb_wait1(&rq[j], &got);
            if (mrc != MPI_SUCCESS)
                rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Wait");
            /* no source defined bytes there: the code has zeros */
            if (got < want)
                memset(dst + got, 0, want - got);
        }
        if (t + LOST_ROWS < nrows) {
            int lrc = rb_post(r, phase, t + LOST_ROWS);
            rc = rc ? rc : lrc;
        }
    }
    return rc;
}

/* Collective: one phase of nrows rows.  Returns this rank's first error;
 * the phase runs to its end whatever happens. */
static int rb_phase(rb *r, int phase, uint64_t nrows, int rc)
{
    l3_state *s = r->s;
    MPI_Comm comm = r->comm;
    int K = s->lay.K, k = s->k, nreq = 0, mrc;
    if (nrows > r->maxrows) /* agreed from the bound: cannot happen */
        return rc ? rc : crpm_error(CRPM_ERR_STATE, "level 3: %llu rows to rebuild, at most %llu expected",
                                   (unsigned long long)nrows, (unsigned long long)r->maxrows);
    /* what each lost unit needs: known for the prefix, told for the rest */
    if (phase == PH_PREFIX) {
        for (int c = 0; c < K; c++)
            for (int q = 0; r->src[c].unit >= 0 && q < r->dec[c].nlost; q++) {
                int g = crpm_l3_data_member(&s->lay, c, r->dec[c].lost[q]);
                r->src[c].need[(size_t)q * nrows] = crpm_l3_codeword_of(&s->lay, g, 0) == c ? r->p0 : 0;
            }
    } else if (r->lost_me) {
        for (int j = 0; j < k; j++) {
            int c = crpm_l3_codeword_of(&s->lay, s->g, j);
            uint64_t *v = r->myneed + (size_t)j * nrows;
            unsigned char *dst;
            for (uint64_t t = 0; t < nrows; t++)
                v[t] = rb_want(r, phase, t * (uint64_t)k + (uint64_t)j, &dst);
            for (int q = 0; q < k; q++) {
                mrc = MPI_Isend(v, (int)nrows * 8, MPI_BYTE, rb_rank(s, c, r->dec[c].src[q]), TAG_L3_NEED + c, comm,
                                &r->req[nreq++]);
                if (mrc != MPI_SUCCESS) {
                    nreq--;
                    rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Isend");
                }
            }
        }
    } else {
        for (int c = 0; c < K; c++)
            for (int q = 0; r->src[c].unit >= 0 && q < r->dec[c].nlost; q++) {
                int from = s->grp[crpm_l3_data_member(&s->lay, c, r->dec[c].lost[q])], len = 0;
                MPI_Status stt;
                uint64_t *v = r->src[c].need + (size_t)q * nrows;
                mrc = MPI_Recv(v, (int)nrows * 8, MPI_BYTE, from, TAG_L3_NEED + c, comm, &stt);
                if (mrc == MPI_SUCCESS)
                    MPI_Get_count(&stt, MPI_BYTE, &len);
                if (mrc != MPI_SUCCESS || (uint64_t)len != nrows * 8) {
                    memset(v, 0, nrows * 8);
                    rc = rc ? rc : mrc != MPI_SUCCESS ? crpm_mpi_fail(mrc, "level 3: MPI_Recv")
                                                      : crpm_error(CRPM_ERR_STATE, "level 3: short need list");
                }
            }
    }
    mrc = nreq ? MPI_Waitall(nreq, r->req, MPI_STATUSES_IGNORE) : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS)
        rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Waitall");
    return r->lost_me ? rb_collect(r, phase, nrows, rc) : rb_chain(r, nrows, rc);
}

/* Lost rank: the region table from the meta area (all meta_len bytes in
 * r->meta), checked against the size any image can have; the regions get
 * their place in r->buf. */
static int rb_table(rb *r, int rank)
{
    const unsigned char *m = r->meta;
    uint64_t seg = r->seg, n = r->nreg, next = r->meta_segs, total = 0;
    r->reg = calloc(n + 1, sizeof *r->reg);
    r->first = calloc(n + 1, sizeof *r->first);
    if (!r->reg || !r->first)
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    for (uint64_t i = 0; i < n; i++) {
        const unsigned char *x = m + META_REC * (1 + i);
        crpm_array *a = &r->reg[i];
        memcpy(&a->id, x, 4);
        memcpy(&a->type_code, x + 4, 4);
        a->elem_size = get64(x + 8);
        a->count = get64(x + 16);
        if (!a->elem_size || a->count > r->bound * seg / a->elem_size)
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt checkpoint of rank %d is not valid", rank);
        uint64_t b = crpm_array_bytes(a), ns = (b + seg - 1) / seg;
        if (ns > r->bound - next)
            return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt checkpoint of rank %d is not valid", rank);
        r->first[i] = next;
        next += ns;
        a->ptr = (void *)(uintptr_t)total; /* an offset until buf exists */
        total += (b + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN;
    }
    r->nsegs = next;
    /* every byte is written by the decode: no zeroing */
    if (!(r->buf = malloc(total ? total : 1)))
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for the rebuilt checkpoint (%llu bytes)",
                          (unsigned long long)total);
    for (uint64_t i = 0; i < n; i++)
        r->reg[i].ptr = r->buf + (uintptr_t)r->reg[i].ptr;
    return CRPM_SUCCESS;
}

/* Lost rank, after the prefix phase: the meta header; when the whole meta
 * area is there, the region table too.  *more: the meta area is longer. */
static int rb_header(rb *r, int rank, int *more)
{
    *more = 0;
    const unsigned char *m = r->pre;
    if (r->p0 < META_REC || memcmp(m, META_MAGIC, 8) != 0)
        return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt checkpoint of rank %d has no valid header", rank);
    uint64_t n = get64(m + 8);
    if (n > (r->bound * r->seg - META_REC) / META_REC)
        return crpm_error(CRPM_ERR_CORRUPT, "level 3: the rebuilt checkpoint of rank %d is not valid", rank);
    r->nreg = n;
    r->user_id = get64(m + 16);
    r->meta_len = META_REC * (1 + n);
    r->meta_segs = (r->meta_len + r->seg - 1) / r->seg;
    if (r->meta_len <= r->p0) {
        r->meta = r->pre;
        return rb_table(r, rank);
    }
    *more = 1;
    if (!(r->meta = malloc(r->meta_len)))
        return crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    return CRPM_SUCCESS;
}

/* Collective: the agreed maximum of v[1..n-1] and whether any v[0] (an
 * error) is set; rc is this rank's error. */
static int rb_agree(MPI_Comm comm, int rc, int64_t *v, int n)
{
    int64_t r[4];
    v[0] = rc != 0;
    int mrc = MPI_Allreduce(v, r, n, MPI_INT64_T, MPI_MAX, comm);
    if (mrc != MPI_SUCCESS)
        return rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Allreduce");
    memcpy(v, r, sizeof *v * (size_t)n);
    if (r[0])
        return rc ? rc : crpm_error(CRPM_ERR_STATE, "level 3: another rank cannot take part in the rebuild");
    return CRPM_SUCCESS;
}

static uint64_t rows_of(uint64_t segs, int k) { return (segs + (uint64_t)k - 1) / (uint64_t)k; }

int crpm_level_l3_rebuild(crpm_level *lv, const int64_t *lost, const int64_t *usable, crpm_l3_image *img,
                          uint64_t *sent, double *seconds)
{
    l3_state *s = st_of(lv);
    int K = s->lay.K, M = s->lay.M, k = s->k, me = lv->env->rank;
    memset(img, 0, sizeof *img);
    *seconds = 0;
    rb r = {.s = s, .comm = lv->env->comm, .lost_me = lost[me] != 0, .seg = s->unit, .sent = sent};
    r.p0 = PREFIX < r.seg ? PREFIX : r.seg;
    int rc = CRPM_SUCCESS;
    if (!r.lost_me)
        rc = s->own ? image_of(s->own, s->unit, &r.im) : crpm_error(CRPM_ERR_STATE, "level 3: no container attached");
    r.dec = calloc((size_t)K, sizeof *r.dec);
    r.src = calloc((size_t)K, sizeof *r.src);
    r.pre = malloc(PREFIX);
    if (rc == 0 && (!r.dec || !r.src || !r.pre))
        rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    for (int c = 0; r.src && c < K; c++)
        r.src[c].unit = -1;
    /* per codeword of this group with a lost data unit: the decoder, and
     * which unit this rank contributes */
    for (int c = 0; rc == 0 && c < K; c++) {
        int avail[255], any = 0;
        for (int i = 0; i < k; i++) {
            avail[i] = !lost[s->grp[crpm_l3_data_member(&s->lay, c, i)]];
            any |= !avail[i];
        }
        for (int h = 0; h < M; h++) {
            int hr = s->grp[crpm_l3_holder(&s->lay, c, h)];
            avail[k + h] = !lost[hr] && usable[hr];
        }
        if (!any)
            continue;
        if ((rc = crpm_l3_decoder_init(&r.dec[c], &s->code, avail)) != 0)
            break;
        int di = crpm_l3_data_index(&s->lay, c, s->g), pr = crpm_l3_parity_row(&s->lay, c, s->g), unit = -1;
        if (r.lost_me)
            continue;
        if (di >= 0)
            unit = di;
        else if (pr >= 0)
            unit = k + pr;
        for (int q = 0; unit >= 0 && q < k; q++)
            if (r.dec[c].src[q] == unit) {
                r.src[c].unit = unit;
                r.src[c].pos = q;
                r.ntask += r.dec[c].nlost;
            }
        if (r.src[c].unit >= k && !s->par_epoch) /* usable says otherwise: the chain needs it */
            rc = crpm_error(CRPM_ERR_STATE, "level 3: parity of codeword %d is missing on rank %d", c, me);
        while (di >= 0 && crpm_l3_codeword_of(&s->lay, s->g, r.src[c].j) != c)
            r.src[c].j++;
        if (r.src[c].unit >= 0 && !(r.src[c].need = malloc(sizeof(uint64_t) * (size_t)r.dec[c].nlost)))
            rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    }
    /* survivor: its chains in the order every rank works through them */
    if (rc == 0 && r.ntask && !(r.task = malloc(sizeof *r.task * (size_t)r.ntask)))
        rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    for (int p = 0, n = 0; rc == 0 && p < k; p++)
        for (int c = 0; c < K; c++)
            for (int q = 0; r.src[c].unit >= 0 && r.src[c].pos == p && q < r.dec[c].nlost; q++)
                r.task[n++] = (rb_task){c, q};
    r.cell = (size_t)((r.seg + RB_ALIGN - 1) / RB_ALIGN * RB_ALIGN);
    r.W = r.ntask ? WINDOW_BYTES / (2 * r.cell * (size_t)r.ntask) : 1;
    r.W = r.W ? r.W : 1;
    size_t nreq = r.lost_me ? (size_t)LOST_ROWS * (size_t)k : 3 * (size_t)r.W * (size_t)r.ntask;
    nreq = nreq > (size_t)(k * k) ? nreq : (size_t)(k * k);
    if (rc == 0 && !(r.req = malloc(sizeof *r.req * nreq)))
        rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
    if (rc == 0 && r.ntask && !(r.slab = malloc(2 * (size_t)r.W * (size_t)r.ntask * r.cell)))
        rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory for %zu bytes of rebuild buffers",
                        2 * (size_t)r.W * (size_t)r.ntask * r.cell);
    /* the most image segments any image has (the parity covers them all) */
    int64_t v[4] = {0, (int64_t)r.im.nunits, 0, 0};
    if (s->par_epoch && (int64_t)(s->plen / s->unit * (uint64_t)k) > v[1])
        v[1] = (int64_t)(s->plen / s->unit * (uint64_t)k);
    rc = rb_agree(r.comm, rc, v, 2);
    r.maxrows = rows_of((uint64_t)v[1], k);
    r.bound = r.maxrows * (uint64_t)k;
    double t0 = crpm_now();
    int more = 0;
    if (rc == 0 && r.bound) {
        rc = rb_phase(&r, PH_PREFIX, 1, rc);
        if (rc == 0 && r.lost_me)
            rc = rb_header(&r, me, &more);
        /* room for the needs of any phase */
        for (int c = 0; rc == 0 && c < K; c++) {
            uint64_t *n = r.src[c].unit < 0 ? NULL
                          : realloc(r.src[c].need, sizeof *n * (size_t)r.dec[c].nlost * (size_t)r.maxrows);
            if (n)
                r.src[c].need = n;
            else if (r.src[c].unit >= 0)
                rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
        }
        if (rc == 0 && r.lost_me && !(r.myneed = malloc(sizeof *r.myneed * (size_t)k * (size_t)r.maxrows)))
            rc = crpm_error(CRPM_ERR_NOMEM, "level 3: out of memory");
        /* rows of the meta phase, rows of the data phase (known unless more) */
        v[1] = more ? (int64_t)rows_of(r.meta_segs, k) : 0;
        v[2] = r.lost_me && !more ? (int64_t)rows_of(r.nsegs, k) : 0;
        rc = rb_agree(r.comm, rc, v, 3);
    }
    if (rc == 0 && r.bound && v[1]) {
        rc = rb_phase(&r, PH_META, (uint64_t)v[1], rc);
        if (rc == 0 && more)
            rc = rb_table(&r, me);
        v[2] = r.lost_me ? (int64_t)rows_of(r.nsegs, k) : 0;
        rc = rb_agree(r.comm, rc, v, 3);
    }
    if (rc == 0 && r.bound)
        rc = rb_phase(&r, PH_DATA, (uint64_t)v[2], rc);
    if (rc == 0 && r.lost_me && !r.bound)
        rc = crpm_error(CRPM_ERR_MISSING, "level 3: nothing to rebuild rank %d from", me);
    /* ranks done early wait for the slowest without holding a core */
    int mrc = crpm_mpi_idle_barrier(r.comm);
    if (mrc != MPI_SUCCESS)
        rc = rc ? rc : crpm_mpi_fail(mrc, "level 3: MPI_Ibarrier");
    *seconds = crpm_now() - t0;
    if (rc == 0 && r.lost_me) {
        img->buf = r.buf;
        img->regions = r.reg;
        img->nregions = (int)r.nreg;
        img->user_id = r.user_id;
        r.buf = NULL;
        r.reg = NULL;
    }
    for (int c = 0; c < K && r.dec && r.src; c++) {
        crpm_l3_decoder_free(&r.dec[c]);
        free(r.src[c].need);
    }
    if (r.meta != r.pre)
        free(r.meta);
    free(r.pre);
    free(r.reg);
    free(r.first);
    free(r.buf);
    free(r.myneed);
    free(r.slab);
    free(r.task);
    free(r.dec);
    free(r.src);
    free(r.req);
    image_free(&r.im);
    return rc;
}

int crpm_level_l3_sync(crpm_level *lv, int force, uint64_t *sent)
{
    l3_state *s = st_of(lv);
    if (!s->own)
        return crpm_error(CRPM_ERR_STATE, "level 3: no container attached");
    uint64_t epoch = crpm_container_epoch(s->own);
    int64_t need = force || !s->pc || s->par_epoch != epoch || !epoch, all = 0;
    int mrc = MPI_Allreduce(&need, &all, 1, MPI_INT64_T, MPI_MAX, lv->env->comm);
    if (mrc != MPI_SUCCESS)
        return crpm_mpi_fail(mrc, "level 3: MPI_Allreduce");
    if (!all)
        return CRPM_SUCCESS;
    int rc = encode(lv, 0, sent, 0);
    if (rc == 0)
        l3_committed(lv, 0);
    return rc;
}
