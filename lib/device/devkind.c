/* The GPU memory kinds (devkind.h) on the device operations (devops.h).
 *
 * Per array the device holds a reference (the committed state's copy, or a
 * fingerprint per block), `force` (blocks to report whatever they hold) and
 * `dchg` (blocks reported in the checkpoint in flight).  The engine asks for
 * one range (segment) at a time; the kind answers from windows: a window
 * is compared, scanned and gathered on the device in one go, its report
 * (count and bitmap) and then its packed blocks copied to pinned memory,
 * while the engine writes the ranges before it.  Up to `depth` windows are
 * in flight ahead of the range asked for.
 *
 * The compare kernel brings the reference up to date as it goes (the blocks
 * it reports now hold what is being staged), so no second device buffer is
 * needed for the pending blocks.  The reference is nevertheless kept exact
 * for the committed state where it matters: a block the reference took but
 * whose checkpoint did not commit (ABORTED), or that a window staged but
 * the engine never took (a window given up), goes from dchg into force and
 * is reported at the next checkpoint whatever the comparison says.  After a
 * device error the reference is not trusted: every block is reported until
 * a checkpoint that staged the whole array commits, or a recovery syncs. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include "array.h"
#include "devkind.h"
#include "devlane.h"
#include "error.h"
#include "fingerprint.h"

#define WIN_MAX 8

typedef struct dk_win {
    crpm_dlane *lane; /* NULL: the slot is free */
    uint64_t off, len; /* bytes of the array */
    int all, phase;    /* phase 1: report queued, 2: pack queued, 3: on the host */
} dk_win;

typedef struct dk_state {
    const crpm_devops *ops;
    pthread_mutex_t mu;
    int dev, ref_kind, depth;
    const void *live;
    uint64_t bytes, blk, nb, words, winbase, winbytes; /* window: asked, this checkpoint's */
    void *ref;
    uint64_t *force, *dchg, *keys; /* device */
    crpm_dstream *s;
    int in_ck, untrusted, ck_error;
    uint64_t R, frontier, all_blocks;
    uint64_t *launched, *consumed; /* host, nb bits each: blocks windows covered / the engine took */
    dk_win win[WIN_MAX];
} dk_state;

/* ---- host bitmaps ---------------------------------------------------------------- */

static void hb_set(uint64_t *m, uint64_t a, uint64_t b)
{
    for (uint64_t i = a; i < b;) {
        if (i % 64 == 0 && b - i >= 64) {
            m[i / 64] = ~0ull;
            i += 64;
        } else {
            m[i / 64] |= 1ull << (i % 64);
            i++;
        }
    }
}

/* Number of set bits in [a, b) */
static uint64_t hb_count(const uint64_t *m, uint64_t a, uint64_t b)
{
    uint64_t n = 0;
    for (uint64_t i = a; i < b;) {
        if (i % 64 == 0 && b - i >= 64) {
            n += (uint64_t)__builtin_popcountll(m[i / 64]);
            i += 64;
        } else {
            n += m[i / 64] >> (i % 64) & 1;
            i++;
        }
    }
    return n;
}

/* First bit in [a, b) equal to v, or b */
static uint64_t hb_next(const uint64_t *m, uint64_t a, uint64_t b, int v)
{
    for (uint64_t i = a; i < b;) {
        uint64_t w = v ? m[i / 64] : ~m[i / 64];
        w &= ~0ull << (i % 64);
        if (w) {
            uint64_t j = i / 64 * 64 + (uint64_t)__builtin_ctzll(w);
            return j < b ? j : b;
        }
        i = i / 64 * 64 + 64;
    }
    return b;
}

/* ---- windows ---------------------------------------------------------------------- */

static uint64_t blocks(const dk_state *st, uint64_t len) { return (len + st->blk - 1) / st->blk; }

static crpm_dwindow window_of(const dk_state *st, const dk_win *w)
{
    crpm_dlane *l = w->lane;
    return (crpm_dwindow){st->live, st->ref, st->keys, w->off, w->len, st->blk, st->ref_kind, w->all, st->force,
                          st->dchg, l->dmeta, l->dpos, l->dpack};
}

static int drop(dk_state *st, dk_win *w);

/* A window whose work failed is given up (what its compare may have done
 * goes to force); rc is the failure. */
static int fail_window(dk_state *st, dk_win *w, int rc)
{
    char why[512];
    strncpy(why, crpm_last_error(), sizeof why - 1);
    why[sizeof why - 1] = '\0';
    if (w->lane && drop(st, w) != 0)
        st->untrusted = 1;
    st->untrusted = 1;
    return crpm_error(rc, "%s", why);
}

/* Queues window [off, off + len): kernels, then its report to the host. */
static int launch(dk_state *st, dk_win *w, uint64_t off, uint64_t len, int all)
{
    const crpm_devops *o = st->ops;
    uint64_t nb = blocks(st, len), words = (nb + 63) / 64;
    int rc = crpm_dlane_get(o, st->dev, nb * st->blk, words, 1, &w->lane);
    if (rc)
        return rc;
    w->off = off;
    w->len = len;
    w->all = all;
    w->phase = 1;
    hb_set(st->launched, off / st->blk, off / st->blk + nb);
    uint64_t end = off + len;
    if (end > st->frontier)
        st->frontier = end;
    crpm_dwindow d = window_of(st, w);
    crpm_dstream *s = w->lane->s;
    if ((rc = o->zero(s, w->lane->dmeta, (words + 1) * 8)) == 0 && (rc = o->compare(s, &d)) == 0 &&
        (rc = o->scan(s, &d)) == 0 && (rc = o->gather(s, &d)) == 0)
        rc = o->copy(s, w->lane->hmeta, w->lane->dmeta, (words + 1) * 8, CRPM_D2H);
    return rc ? fail_window(st, w, rc) : CRPM_SUCCESS;
}

/* The report is on the host: queue the packed blocks behind it. */
static int start_pack(dk_state *st, dk_win *w)
{
    uint64_t nb = blocks(st, w->len), words = (nb + 63) / 64, *m = w->lane->hmeta, n = 0;
    for (uint64_t i = 0; i < words; i++)
        n += (uint64_t)__builtin_popcountll(m[1 + i]);
    if (n != m[0] || n > nb)
        return crpm_error(CRPM_ERR_DEVICE, "GPU array at %p: window %llu+%llu reports %llu blocks, its bitmap %llu",
                          st->live, (unsigned long long)w->off, (unsigned long long)w->len,
                          (unsigned long long)m[0], (unsigned long long)n);
    w->phase = n ? 2 : 3;
    return n ? st->ops->copy(w->lane->s, w->lane->hpack, w->lane->dpack, n * st->blk, CRPM_D2H) : CRPM_SUCCESS;
}

/* Moves windows on without waiting: the packs of those whose report came. */
static int advance(dk_state *st)
{
    for (int i = 0; i < WIN_MAX; i++) {
        dk_win *w = &st->win[i];
        if (!w->lane || w->phase == 3)
            continue;
        int d = st->ops->done(w->lane->s);
        if (d < 0)
            return fail_window(st, w, d);
        if (d && w->phase == 1) {
            int rc = start_pack(st, w);
            if (rc)
                return fail_window(st, w, rc);
        } else if (d) {
            w->phase = 3;
        }
    }
    return CRPM_SUCCESS;
}

/* Waits until w's blocks are on the host. */
static int settle(dk_state *st, dk_win *w)
{
    int rc = CRPM_SUCCESS;
    if (w->phase == 1 && (rc = st->ops->wait(w->lane->s)) == 0)
        rc = start_pack(st, w);
    if (rc == 0 && w->phase == 2 && (rc = st->ops->wait(w->lane->s)) == 0)
        w->phase = 3;
    return rc ? fail_window(st, w, rc) : CRPM_SUCCESS;
}

/* Gives w up: what it staged but the engine did not take goes to force. */
static int drop(dk_state *st, dk_win *w)
{
    const crpm_devops *o = st->ops;
    crpm_dstream *s = w->lane->s;
    uint64_t b = w->off / st->blk, e = b + blocks(st, w->len);
    int rc = o->wait(s);
    for (uint64_t i = hb_next(st->consumed, b, e, 0); rc == 0 && i < e;) {
        uint64_t j = hb_next(st->consumed, i, e, 1);
        rc = o->bits_move(s, st->force, st->dchg, i, j - i);
        i = hb_next(st->consumed, j, e, 0);
    }
    if (rc == 0)
        rc = o->wait(s);
    crpm_dlane_put(w->lane, rc != 0);
    w->lane = NULL;
    return rc;
}

static int drop_all(dk_state *st)
{
    int rc = CRPM_SUCCESS;
    for (int i = 0; i < WIN_MAX; i++)
        if (st->win[i].lane) {
            int r = drop(st, &st->win[i]);
            rc = rc ? rc : r;
        }
    return rc;
}

/* A free slot; when none, the window furthest behind `off` is given up. */
static int slot(dk_state *st, uint64_t off, dk_win **out)
{
    dk_win *victim = NULL;
    for (int i = 0; i < WIN_MAX; i++) {
        dk_win *w = &st->win[i];
        if (!w->lane) {
            *out = w;
            return CRPM_SUCCESS;
        }
        if (!victim || (w->off < victim->off && w->off + w->len <= off))
            victim = w;
    }
    *out = victim;
    return drop(st, victim);
}

/* Windows ahead of the frontier, up to depth of them with blocks not yet taken. */
static int prefetch(dk_state *st)
{
    int ahead = 0;
    for (int i = 0; i < WIN_MAX; i++) {
        const dk_win *w = &st->win[i];
        uint64_t b = w->off / st->blk;
        ahead += w->lane && hb_next(st->consumed, b, b + blocks(st, w->len), 0) < b + blocks(st, w->len);
    }
    while (ahead < st->depth && st->R && st->frontier < st->bytes && st->frontier % st->R == 0) {
        uint64_t off = st->frontier, fb = off / st->blk;
        uint64_t end = off + st->winbytes < st->bytes ? off + st->winbytes : st->bytes;
        uint64_t stop = hb_next(st->launched, fb, blocks(st, end), 1) * st->blk; /* only the window is scanned */
        end = end < stop ? end : stop;
        if (end <= off)
            break;
        dk_win *w;
        int rc = slot(st, off, &w);
        if (rc == 0)
            rc = launch(st, w, off, end - off, st->untrusted);
        if (rc)
            return rc;
        ahead++;
    }
    return CRPM_SUCCESS;
}

/* The window that answers [off, off + len), launched when none can. */
static int find(dk_state *st, uint64_t off, uint64_t len, int all, dk_win **out)
{
    uint64_t b = off / st->blk, e = b + blocks(st, len);
    int taken = hb_next(st->consumed, b, e, 1) < e;
    for (int i = 0; i < WIN_MAX; i++) {
        dk_win *w = &st->win[i];
        if (!w->lane || w->off + w->len <= off || off + len <= w->off)
            continue;
        if (!taken && w->off <= off && off + len <= w->off + w->len && (w->all || !all)) {
            *out = w;
            return CRPM_SUCCESS;
        }
        int rc = drop(st, w); /* overlaps without answering: its blocks go to force */
        if (rc)
            return rc;
    }
    /* blocks a window covered before (taken or given up) are reported whole */
    all |= hb_next(st->launched, b, e, 1) < e;
    uint64_t end = off + len;
    if (st->R && len == st->R && off % st->R == 0) { /* the engine's regular walk: a whole window */
        uint64_t w = off + st->winbytes;
        end = w < st->bytes ? w : st->bytes;
        uint64_t stop = hb_next(st->launched, e, blocks(st, end) > e ? blocks(st, end) : e, 1) * st->blk;
        end = end < stop ? end : stop;
        end = end < off + len ? off + len : end;
    }
    int rc = slot(st, off, out);
    return rc ? rc : launch(st, *out, off, end - off, all);
}

/* Copies the blocks of [off, off + len) that w reports into host. */
static void unpack(dk_state *st, const dk_win *w, uint64_t off, uint64_t len, uint64_t *changed, char *host)
{
    const uint64_t *m = w->lane->hmeta + 1;
    const char *pack = w->lane->hpack;
    uint64_t rb = (off - w->off) / st->blk, nb = blocks(st, len), k = hb_count(m, 0, rb);
    for (uint64_t i = hb_next(m, rb, rb + nb, 1); i < rb + nb;) {
        uint64_t j = hb_next(m, i, rb + nb, 0), o = (i - rb) * st->blk, n = (j - i) * st->blk;
        hb_set(changed, i - rb, j - rb);
        memcpy(host + o, pack + k * st->blk, n < len - o ? n : len - o);
        k += j - i;
        i = hb_next(m, j, rb + nb, 1);
    }
    uint64_t b = off / st->blk;
    if (w->all)
        st->all_blocks += nb - hb_count(st->consumed, b, b + nb);
    hb_set(st->consumed, b, b + nb);
}

/* The first stage of a checkpoint: the application's kernels are done; the
 * engine's range length decides the windows. */
static int begin(dk_state *st, uint64_t off, uint64_t len)
{
    int rc = st->ops->device_sync();
    if (rc)
        return rc;
    memset(st->launched, 0, st->words * 8);
    memset(st->consumed, 0, st->words * 8);
    st->R = off == 0 || off + len < st->bytes ? len : 0; /* a tail first says nothing of the walk */
    st->frontier = 0;
    st->all_blocks = 0;
    st->ck_error = 0;
    uint64_t per = st->R ? st->winbase / st->R : 0;
    st->winbytes = st->R ? (per ? per : 1) * st->R : 0;
    st->in_ck = 1;
    return CRPM_SUCCESS;
}

static int dk_stage(void *state, const crpm_array *a, uint64_t off, uint64_t len, int all, uint64_t *changed,
                    void *host)
{
    dk_state *st = state;
    if (a->ptr != st->live || off % st->blk || off > st->bytes || len > st->bytes - off || !len ||
        (off + len != st->bytes && len % st->blk))
        return crpm_error(CRPM_ERR_INVAL, "GPU array %d: stage of %llu+%llu does not fit its %llu bytes in "
                          "%llu-byte blocks", a->id, (unsigned long long)off, (unsigned long long)len,
                          (unsigned long long)st->bytes, (unsigned long long)st->blk);
    pthread_mutex_lock(&st->mu);
    dk_win *w = NULL;
    int rc = st->ops->use(st->dev), used = rc == 0;
    if (rc == 0 && !st->in_ck)
        rc = begin(st, off, len);
    if (rc == 0)
        rc = find(st, off, len, all || st->untrusted, &w);
    if (rc == 0)
        rc = prefetch(st);
    if (rc == 0)
        rc = advance(st);
    if (rc == 0)
        rc = settle(st, w);
    if (rc == 0) {
        unpack(st, w, off, len, changed, host);
        uint64_t b = w->off / st->blk, e = b + blocks(st, w->len);
        if (hb_next(st->consumed, b, e, 0) == e) { /* all taken: the lane goes back */
            crpm_dlane_put(w->lane, 0);
            w->lane = NULL;
        }
    }
    if (rc) {
        st->untrusted = st->ck_error = 1;
        char why[512];
        strncpy(why, crpm_last_error(), sizeof why - 1);
        why[sizeof why - 1] = '\0';
        rc = crpm_error(rc, "GPU array %d, bytes %llu+%llu: %s", a->id, (unsigned long long)off,
                        (unsigned long long)len, why);
    }
    if (used)
        st->ops->unuse();
    pthread_mutex_unlock(&st->mu);
    return rc;
}

static void dk_event(void *state, const crpm_array *a, int event)
{
    dk_state *st = state;
    const crpm_devops *o = st->ops;
    pthread_mutex_lock(&st->mu);
    int rc = o->use(st->dev), used = rc == 0;
    if (rc == 0)
        rc = drop_all(st);
    if (rc == 0 && event == CRPM_MEM_COMMITTED) {
        rc = o->zero(st->s, st->dchg, st->words * 8);
        if (rc == 0 && st->untrusted && !st->ck_error && st->all_blocks == st->nb)
            st->untrusted = 0; /* the whole array was staged from scratch and committed */
    } else if (rc == 0 && event == CRPM_MEM_ABORTED) {
        rc = o->bits_move(st->s, st->force, st->dchg, 0, st->nb);
    } else if (rc == 0 && event == CRPM_MEM_SYNCED) {
        rc = o->device_sync();
        if (rc == 0)
            rc = st->ref_kind == CRPM_DREF_COPY
                     ? o->copy(st->s, st->ref, a->ptr, st->bytes, CRPM_D2D)
                     : o->fingerprint(st->s, a->ptr, st->ref, st->keys, st->bytes, st->blk);
        if (rc == 0 && (rc = o->zero(st->s, st->force, st->words * 8)) == 0)
            rc = o->zero(st->s, st->dchg, st->words * 8);
        if (rc == 0 && (rc = o->wait(st->s)) == 0)
            st->untrusted = 0;
    }
    if (rc == 0)
        rc = o->wait(st->s);
    if (rc)
        st->untrusted = 1; /* events cannot fail: the next checkpoint reports every block */
    if (used)
        o->unuse();
    st->in_ck = 0;
    pthread_mutex_unlock(&st->mu);
}

static void dk_free(dk_state *st)
{
    const crpm_devops *o = st->ops;
    int used = o->use(st->dev) == 0;
    if (!used)
        crpm_error_clear();
    for (int i = 0; i < WIN_MAX; i++)
        if (st->win[i].lane) {
            o->wait(st->win[i].lane->s);
            crpm_dlane_put(st->win[i].lane, 0);
        }
    if (st->s)
        o->stream_free(st->s);
    o->free(st->ref);
    o->free(st->force);
    o->free(st->dchg);
    o->free(st->keys);
    if (used)
        o->unuse();
    free(st->launched);
    free(st->consumed);
    pthread_mutex_destroy(&st->mu);
    free(st);
}

static void dk_detach(void *state)
{
    dk_free(state);
    crpm_dlane_hold(-1);
}

static uint64_t env_u64(const char *name, uint64_t def, uint64_t lo, uint64_t hi)
{
    const char *e = getenv(name);
    char *end;
    unsigned long long v = e ? strtoull(e, &end, 10) : 0;
    return e && *e && !*end && v >= lo && v <= hi ? v : def;
}

/* FP: two keys, their power tables on the device */
static int make_keys(dk_state *st)
{
    uint64_t words[16], nw = st->blk / 4, *tab = malloc(2 * nw * 8);
    int rc = tab ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "out of memory");
    if (rc == 0 && getrandom(words, sizeof words, 0) != (ssize_t)sizeof words)
        rc = crpm_error(CRPM_ERR_IO, "getrandom failed: no keys for the GPU fingerprints");
    uint64_t k1 = rc ? 0 : crpm_fp_draw(words, 8), k2 = rc ? 0 : crpm_fp_draw(words + 8, 8);
    if (rc == 0 && (!k1 || !k2))
        rc = crpm_error(CRPM_ERR_IO, "getrandom gave no usable key"); /* 2^-488: a broken source */
    if (rc == 0) {
        crpm_fp_keys(k1, k2, st->blk, tab);
        if ((rc = st->ops->alloc((void **)&st->keys, 2 * nw * 8)) == 0 &&
            (rc = st->ops->copy(st->s, st->keys, tab, 2 * nw * 8, CRPM_H2D)) == 0)
            rc = st->ops->wait(st->s);
    }
    free(tab);
    return rc;
}

static int attach(const crpm_array *a, uint64_t blk, int ref_kind, void **out)
{
    const crpm_devops *o = crpm_devops_get();
    if (!o)
        return crpm_error(CRPM_ERR_NOTSUP, "GPU array %d: this libcrpm was built without CUDA", a->id);
    if (blk < 16 || (ref_kind == CRPM_DREF_FP && blk > CRPM_FP_MAX_BLOCK))
        return crpm_error(CRPM_ERR_INVAL, "GPU array %d: block_size %llu; the %s mode needs 16 .. %u", a->id,
                          (unsigned long long)blk, ref_kind == CRPM_DREF_FP ? "fingerprint" : "diff",
                          ref_kind == CRPM_DREF_FP ? CRPM_FP_MAX_BLOCK : 1u << 30);
    dk_state *st = calloc(1, sizeof *st);
    if (!st)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    pthread_mutex_init(&st->mu, NULL);
    st->ops = o;
    st->live = a->ptr;
    st->bytes = crpm_array_bytes(a);
    st->blk = blk;
    st->ref_kind = ref_kind;
    st->nb = blocks(st, st->bytes);
    st->words = (st->nb + 63) / 64;
    st->untrusted = 1;
    st->winbase = env_u64("CRPM_DEVICE_WINDOW_MB", CRPM_DEV_WINDOW_DEFAULT >> 20, 1, 4096) << 20;
    st->depth = (int)env_u64("CRPM_DEVICE_DEPTH", CRPM_DEV_DEPTH_DEFAULT, 1, WIN_MAX - 2);
    int type, rc = o->query(a->ptr, &type, &st->dev);
    if (rc == 0 && type == CRPM_DMEM_HOST)
        rc = crpm_error(CRPM_ERR_INVAL, "GPU array %d: %p is not device or managed memory", a->id, a->ptr);
    uint64_t rbytes = ref_kind == CRPM_DREF_COPY ? st->bytes : st->nb * CRPM_FP_BYTES;
    if (rc == 0 && ((st->launched = calloc(st->words ? st->words : 1, 8)) == NULL ||
                    (st->consumed = calloc(st->words ? st->words : 1, 8)) == NULL))
        rc = crpm_error(CRPM_ERR_NOMEM, "out of memory for the bitmaps of GPU array %d", a->id);
    if (rc == 0 && (rc = o->use(st->dev)) == 0) {
        if ((rc = o->stream_new(&st->s)) == 0 && (rc = o->alloc(&st->ref, rbytes ? rbytes : 1)) == 0 &&
            (rc = o->alloc((void **)&st->force, st->words * 8 + 8)) == 0 &&
            (rc = o->alloc((void **)&st->dchg, st->words * 8 + 8)) == 0 &&
            (rc = o->zero(st->s, st->force, st->words * 8 + 8)) == 0 &&
            (rc = o->zero(st->s, st->dchg, st->words * 8 + 8)) == 0 && (rc = o->wait(st->s)) == 0 &&
            ref_kind == CRPM_DREF_FP)
            rc = make_keys(st);
        o->unuse();
    }
    if (rc) {
        dk_free(st);
        return rc;
    }
    crpm_dlane_hold(1);
    *out = st;
    return CRPM_SUCCESS;
}

static int attach_diff(const crpm_array *a, uint64_t blk, void **out) { return attach(a, blk, CRPM_DREF_COPY, out); }
static int attach_fp(const crpm_array *a, uint64_t blk, void **out) { return attach(a, blk, CRPM_DREF_FP, out); }

/* ---- copy out, copy in -------------------------------------------------------------- */

/* The array's device, made current (unuse() when done). */
static int device_of(const crpm_array *a, const char *what, int *dev)
{
    const crpm_devops *o = crpm_devops_get();
    int type = CRPM_DMEM_HOST, rc = o ? o->query(a->ptr, &type, dev) : CRPM_ERR_NOTSUP;
    if (rc == 0 && type == CRPM_DMEM_HOST)
        rc = CRPM_ERR_INVAL;
    if (rc == 0)
        rc = o->use(*dev);
    if (rc)
        return crpm_error(rc < 0 ? rc : CRPM_ERR_DEVICE, "GPU array %d: cannot %s it: %p is %s", a->id, what,
                          a->ptr, !o ? "GPU memory and this libcrpm has no CUDA" : "not usable GPU memory");
    return CRPM_SUCCESS;
}

static int dk_read(const crpm_array *a, uint64_t off, void *dst, uint64_t len)
{
    int dev, rc = device_of(a, "copy out", &dev);
    if (rc)
        return rc;
    const crpm_devops *o = crpm_devops_get();
    if ((rc = o->device_sync()) == 0) /* the application's kernels wrote it */
        rc = crpm_dcopy_out(o, dev, dst, (const char *)a->ptr + off, len);
    o->unuse();
    return rc;
}

static int dk_write(const crpm_array *a, uint64_t off, const void *src, uint64_t len)
{
    int dev, rc = device_of(a, "copy in", &dev);
    if (rc)
        return rc;
    const crpm_devops *o = crpm_devops_get();
    if ((rc = o->device_sync()) == 0) /* none still reads or writes it */
        rc = crpm_dcopy_in(o, dev, (char *)a->ptr + off, src, len);
    o->unuse();
    return rc;
}

const crpm_mem_kind crpm_dev_kind_diff = {"cuda", 0, dk_read, dk_write, attach_diff, dk_stage, dk_event, dk_detach};
const crpm_mem_kind crpm_dev_kind_fp = {"cuda-fingerprint", 0, dk_read, dk_write, attach_fp, dk_stage, dk_event,
                                        dk_detach};
const crpm_mem_kind crpm_dev_kind_full = {"cuda-full", 0, dk_read, dk_write, NULL, NULL, NULL, NULL};
