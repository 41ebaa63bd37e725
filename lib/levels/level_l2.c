/* Level 2: each rank's container has a partner copy on the next node (see
 * lib/mpi/topology.h), kept byte-identical by sending it exactly the ranges
 * the rank stored into its container (the write log, persist.h) and
 * replaying them under the container protocol (format/replica.c).
 *
 * The copy is always the owner's file as of some committed epoch.  The
 * ranges of every epoch committed since are kept (failed attempts merged
 * into the next): one or two epochs are replayed in order, each as its own
 * failure-atomic step; both epochs' bytes are still in the owner's file then
 * (the newer epoch overwrote only copies the older one did not commit).  When
 * that is not so (more epochs behind, a lost log, a copy missing or of
 * unknown state) the pair does a whole-file sync that sends only the pieces
 * whose fingerprints differ.
 *
 * This file is the checkpoint half; the restart half is l2_restart.c. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include "fsutil.h"
#include "l2_internal.h"
#include "l2_xfer.h"
#include "persist_file.h"

enum { M_NONE, M_STAGES, M_SYNC, M_FULL };

/* What each end tells the other before a transfer. */
typedef struct owner_info {
    uint64_t epoch, npend, unknown, full, size;
} owner_info;

typedef struct holder_info {
    uint64_t have, epoch;
} holder_info;

static int pair_mode(const owner_info *o, const holder_info *h)
{
    if (o->full)
        return M_FULL;
    if (o->unknown || o->npend > 2 || !h->have || h->epoch + o->npend != o->epoch)
        return M_SYNC;
    return o->npend ? M_STAGES : M_NONE;
}

void l2_close_held(held *h)
{
    crpm_format_close(h->r);
    h->r = NULL;
}

/* The file's commit word is zero: a sync rewriting it in place stopped. */
static int word_cleared(const char *path)
{
    uint64_t w = 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && pread(fd, &w, sizeof w, CRPM_WORD_OFF) != (ssize_t)sizeof w)
        w = 1;
    if (fd >= 0)
        close(fd);
    return w == 0;
}

void l2_open_copies(crpm_level *lv)
{
    l2_state *s = l2_of(lv);
    char keep[1024]; /* the caller's message: a copy that does not open is a fact, not an error */
    snprintf(keep, sizeof keep, "%s", crpm_last_error());
    for (int i = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        if (h->r || h->bad)
            continue;
        struct stat sb;
        if (stat(h->path, &sb) != 0) {
            snprintf(h->why, sizeof h->why, "%.200s does not exist", h->path);
            continue;
        }
        crpm_open_opts oo = {.path = h->path, .job_name = lv->env->job_name, .rank = h->owner,
                             .nranks = lv->env->nranks, .persistence = s->o.persistence, .backend = s->o.backend};
        int orc = crpm_format_open(&oo, &h->r, NULL);
        if (orc != 0) {
            h->r = NULL;
            snprintf(h->why, sizeof h->why, "%s", crpm_last_error());
            /* its checksums failed, unless a sync in place was cut short (it clears the word first) */
            h->bad = orc == CRPM_ERR_CORRUPT && !word_cleared(h->path);
        }
    }
    crpm_error(CRPM_SUCCESS, "%s", keep);
}

crpm_container *crpm_level_l2_copy(crpm_level *lv, int i) { return l2_of(lv)->held[i].r; }

void crpm_level_l2_attach(crpm_level *lv, crpm_container *own)
{
    l2_state *s = l2_of(lv);
    if (s->own)
        crpm_container_media(s->own)->log = NULL;
    s->own = own;
    crpm_wlog_clear(&s->live);
    for (int k = 0; k < s->npend; k++)
        crpm_wlog_free(&s->pend[k].log);
    s->npend = 0;
    s->unknown = 1;
    if (own)
        crpm_container_media(own)->log = &s->live;
}

/* ---- checkpoints ------------------------------------------------------------ */

static int l2_event(crpm_level *lv, int event)
{
    l2_state *s = l2_of(lv);
    if (!s->own)
        return CRPM_SUCCESS;
    if (event == CRPM_EV_COMMITTED) {
        if (s->npend == 2) { /* three epochs behind: only a sync can catch up */
            for (int k = 0; k < 2; k++)
                crpm_wlog_free(&s->pend[k].log);
            s->npend = 0;
            s->unknown = 1;
        }
        pend_epoch *p = &s->pend[s->npend++];
        p->epoch = crpm_container_epoch(s->own);
        p->log = s->live;
        memset(&s->live, 0, sizeof s->live);
        crpm_container_media(s->own)->log = &s->live;
        crpm_wlog_normalize(&p->log);
        if (p->log.lost)
            s->unknown = 1;
    } else if (event == CRPM_EV_UNDONE && s->npend) {
        /* the next attempt writes the same copies again: its log must cover
         * this one's stores too */
        pend_epoch *p = &s->pend[--s->npend];
        crpm_wlog_merge(&s->live, &p->log);
        crpm_wlog_free(&p->log);
    } else if (event == CRPM_EV_UNDONE) {
        s->unknown = 1;
    }
    return CRPM_SUCCESS;
}

/* The stored ranges of one epoch, without the commit word (written last). */
static int stage_ranges(const crpm_wlog *log, crpm_wlog *out)
{
    for (size_t i = 0; i < log->n; i++) {
        uint64_t a = log->v[i].off, b = a + log->v[i].len;
        if (a < CRPM_WORD_OFF)
            crpm_wlog_note(out, a, (b < CRPM_WORD_OFF ? b : CRPM_WORD_OFF) - a);
        if (b > CRPM_WORD_OFF + CRPM_WORD_LEN) {
            uint64_t from = a > CRPM_WORD_OFF + CRPM_WORD_LEN ? a : CRPM_WORD_OFF + CRPM_WORD_LEN;
            crpm_wlog_note(out, from, b - from);
        }
    }
    return out->lost ? crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory") : CRPM_SUCCESS;
}

/* The FTI-style baseline: the protected arrays, whole, into a plain file
 * (a zero header reaching past the commit word's offset, which
 * crpm_recv_ranges never writes, then the arrays back to back). */
#define FULL_HDR 4096u
static int post_full(l2_state *s, crpm_sendq *q, const crpm_level_env *env, const crpm_array *a, int n)
{
    uint64_t hdr[2] = {0, 0}, off = FULL_HDR;
    /* arrays not in host memory are sent from host copies (util/memkind.h),
     * made before anything is posted: a failure sends an empty header */
    const void **bytes = calloc((size_t)(n > 0 ? n : 1), sizeof *bytes);
    int rc = bytes ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
    for (int i = 0; i < n && rc == 0; i++) {
        void *tmp = NULL;
        rc = crpm_array_view(&a[i], &bytes[i], &tmp);
        if (tmp)
            crpm_sendq_keep(q, tmp); /* freed once sent */
        hdr[0] += crpm_array_bytes(&a[i]);
        hdr[1] += crpm_array_bytes(&a[i]) > 0;
    }
    if (rc)
        hdr[0] = hdr[1] = 0;
    crpm_sendq_post(q, env->comm, s->o.partner, TAG_FULL, hdr, sizeof hdr);
    for (int i = 0; i < n && rc == 0; i++) {
        crpm_wrange r = {off, crpm_array_bytes(&a[i])};
        if (!r.len)
            continue;
        /* base such that base + off is the array */
        const char *base = (const char *)((uintptr_t)bytes[i] - (uintptr_t)off);
        crpm_sendq_ranges(q, env->comm, s->o.partner, TAG_FULL, base, &r, 1);
        off += r.len;
    }
    free(bytes);
    return rc;
}

static int recv_full(const crpm_level_env *env, held *h, const crpm_l2_opts *o, uint64_t *got)
{
    uint64_t hdr[2];
    int hrc = crpm_recv_bytes(env->comm, h->owner, TAG_FULL, hdr, sizeof hdr, "level 2: full copy");
    char path[CRPM_PATH_MAX + 8];
    snprintf(path, sizeof path, "%s.full", h->path);
    crpm_media m = {0}, scratch = {0};
    m.ops = o->backend ? o->backend : crpm_backend_for(o->persistence);
    static const char zero[FULL_HDR];
    int rc = hrc ? hrc : crpm_persist_create_file(path, hdr[0] + FULL_HDR, zero, sizeof zero);
    if (rc == 0)
        rc = m.ops->map(&m, path);
    /* Every array's message is received (into scratch after an error), or
     * the owner would wait for its sends forever. */
    for (uint64_t k = 0; hrc == 0 && k < hdr[1]; k++) {
        int lrc = crpm_recv_ranges(env->comm, h->owner, TAG_FULL, rc == 0 ? &m : &scratch, got);
        rc = rc ? rc : lrc;
    }
    if (rc == 0)
        crpm_persist_drain(&m);
    if (m.base)
        m.ops->unmap(&m);
    return rc;
}

/* Replays the stages the owner sends into copy h.  After a failure the
 * remaining messages are still received (into scratch): the owner waits
 * for its sends to complete. */
static int recv_stages(const crpm_level_env *env, const crpm_l2_opts *o, held *h, uint64_t *got)
{
    uint64_t nst = 0, sh[2]; /* per stage: epoch and file size */
    int mrc = crpm_recv_bytes(env->comm, h->owner, TAG_STAGE, &nst, sizeof nst, "level 2: stage count"), rc = mrc;
    for (uint64_t k = 0; mrc == 0 && k < nst; k++) {
        mrc = crpm_recv_bytes(env->comm, h->owner, TAG_STAGE, sh, sizeof sh, "level 2: stage");
        if (mrc != 0) {
            rc = rc ? rc : mrc;
            break;
        }
        if (rc == 0)
            rc = crpm_replica_begin(h->r, sh[1]);
        crpm_media scratch = {0};
        int rrc = crpm_recv_ranges(env->comm, h->owner, TAG_STAGE, rc == 0 ? crpm_container_media(h->r) : &scratch,
                                   got);
        rc = rc ? rc : rrc;
        if (rc == 0 && o->hook)
            o->hook(o->hook_arg, CRPM_L2_HOOK_APPLIED);
        if (rc == 0)
            rc = crpm_replica_commit(h->r, sh[0]);
    }
    return rc;
}

/* A whole-file sync would write the owner's file over its partner copy:
 * its committed data is checked first (the copy may be the only intact one).
 * The sync reads the whole file anyway; stages need no check, they carry
 * only what this checkpoint just wrote. */
static int sync_source_check(crpm_container *own)
{
    int bad = 0, prev_bad = 0;
    char msg[512];
    int rc = crpm_container_verify_epochs(own, &bad, &prev_bad, msg, sizeof msg);
    if (rc == 0 && bad)
        rc = crpm_error(CRPM_ERR_CORRUPT, "level 2: not copying %s over its partner copy: %s", own->path, msg);
    return rc;
}

/* 0. both ends learn the state of each pair: this rank's as an owner (oi,
 * to its partner) and as a holder (to each owner); *ois: the owners'. */
static int exchange_states(crpm_level *lv, crpm_sendq *q, const owner_info *oi, holder_info *phi, owner_info **ois)
{
    l2_state *s = l2_of(lv);
    const crpm_level_env *env = lv->env;
    crpm_sendq_post(q, env->comm, s->o.partner, TAG_INFO_O, oi, sizeof *oi);
    for (int i = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        holder_info hi = {h->r != NULL, h->r ? crpm_container_epoch(h->r) : 0};
        crpm_sendq_post(q, env->comm, h->owner, TAG_INFO_H, &hi, sizeof hi);
    }
    int rc = crpm_recv_bytes(env->comm, s->o.partner, TAG_INFO_H, phi, sizeof *phi, "level 2: partner state");
    *ois = calloc((size_t)s->o.nowners + 1, sizeof **ois);
    for (int i = 0; rc == 0 && i < s->o.nowners; i++)
        rc = *ois ? crpm_recv_bytes(env->comm, s->held[i].owner, TAG_INFO_O, &(*ois)[i], sizeof (*ois)[i],
                                    "level 2: owner state")
                  : crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
    int wrc = crpm_sendq_wait(q, "level 2: state exchange");
    return rc ? rc : wrc;
}

/* The pending epochs and the own container's state become the write's
 * (before it releases the container: level.h). */
static void take(l2_state *s)
{
    memcpy(s->wpend, s->pend, sizeof s->pend);
    s->nwpend = s->npend;
    s->wunknown = s->unknown | s->dirty;
    memset(s->pend, 0, sizeof s->pend);
    s->npend = 0;
    s->unknown = s->dirty = 0;
    s->wepoch = crpm_container_epoch(s->own);
    s->wsize = crpm_container_media(s->own)->size;
}

/* A failed or undone write: synchronously, the owner's undo follows and
 * takes its epoch back from pend (no event came between); in the
 * background the next checkpoint's events went on meanwhile, so the next
 * write syncs instead. */
static void give_back(crpm_level *lv)
{
    l2_state *s = l2_of(lv);
    if (!s->nwpend && !s->wunknown)
        return;
    if (lv->env->release) {
        for (int k = 0; k < s->nwpend; k++)
            crpm_wlog_free(&s->wpend[k].log);
        s->dirty = 1;
    } else {
        memcpy(s->pend, s->wpend, sizeof s->pend);
        s->npend = s->nwpend;
        s->unknown |= s->wunknown;
    }
    memset(s->wpend, 0, sizeof s->wpend);
    s->nwpend = s->wunknown = 0;
}

/* 1. the pairs that sync whole files (they need fingerprints from the
 * destination) go first; *fatal: nothing was sent, the write stops here. */
static int sync_pairs(crpm_level *lv, int mine, const owner_info *ois, uint64_t *sent, int *fatal)
{
    l2_state *s = l2_of(lv);
    crpm_sync_src src = {s->o.partner, crpm_container_media(s->own), s->own->path,
                         mine == M_SYNC ? sync_source_check(s->own) : 0};
    crpm_sync_dst *dst = calloc((size_t)s->o.nowners + 1, sizeof *dst);
    int *rewritten = calloc((size_t)s->o.nowners + 1, sizeof *rewritten), nd = 0, rc = CRPM_SUCCESS;
    *fatal = !dst || !rewritten;
    if (*fatal) {
        free(dst);
        free(rewritten);
        return crpm_error(CRPM_ERR_NOMEM, "level 2: out of memory");
    }
    for (int i = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        h->mode = pair_mode(&ois[i], &(holder_info){h->r != NULL, h->r ? crpm_container_epoch(h->r) : 0});
        h->committed = 0;
        if (h->mode == M_SYNC)
            dst[nd++] = (crpm_sync_dst){h->owner, h->path, h->r ? crpm_container_media(h->r) : NULL, l2_backend(s), 0};
    }
    if (mine == M_SYNC || nd)
        rc = crpm_sync_files(lv->env->comm, &src, mine == M_SYNC, dst, nd, sent, rewritten);
    for (int i = 0, k = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        if (h->mode != M_SYNC)
            continue;
        if (rewritten[k++]) { /* reopen what the sync wrote */
            l2_close_held(h);
            h->bad = h->prev_bad = 0;
            l2_open_copies(lv);
            h->committed = h->r != NULL;
        }
    }
    free(dst);
    free(rewritten);
    return rc;
}

/* 2. stages (or the full-copy baseline) sent to the partner, and the
 * owners' received into the copies this rank holds. */
static int ship(crpm_level *lv, crpm_sendq *q, int mine, const crpm_array *a, int n, int rc, uint64_t *sent)
{
    l2_state *s = l2_of(lv);
    const crpm_level_env *env = lv->env;
    crpm_wlog ranges[2] = {{0}, {0}};
    uint64_t got = 0;
    if (mine == M_STAGES) {
        uint64_t nst = (uint64_t)s->nwpend;
        crpm_sendq_post(q, env->comm, s->o.partner, TAG_STAGE, &nst, sizeof nst);
        for (int k = 0; k < s->nwpend; k++) {
            uint64_t sh[2] = {s->wpend[k].epoch, s->wsize};
            int lrc = stage_ranges(&s->wpend[k].log, &ranges[k]);
            rc = rc ? rc : lrc;
            crpm_sendq_post(q, env->comm, s->o.partner, TAG_STAGE, sh, sizeof sh);
            crpm_sendq_ranges(q, env->comm, s->o.partner, TAG_STAGE, crpm_container_media(s->own)->base,
                              ranges[k].v, ranges[k].n);
        }
    } else if (mine == M_FULL) {
        int prc = post_full(s, q, env, a, n);
        rc = rc ? rc : prc;
    }
    if (s->o.hook)
        s->o.hook(s->o.hook_arg, CRPM_L2_HOOK_SENT);
    for (int i = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        int lrc = CRPM_SUCCESS;
        if (h->mode == M_STAGES) {
            lrc = recv_stages(env, &s->o, h, &got);
            h->committed = lrc == 0;
        } else if (h->mode == M_FULL) {
            lrc = recv_full(env, h, &s->o, &got);
        }
        if (lrc != 0 && h->mode == M_STAGES)
            l2_close_held(h); /* its state is the protocol's to sort out: sync next time */
        rc = rc ? rc : lrc;
    }
    if (s->o.hook)
        s->o.hook(s->o.hook_arg, CRPM_L2_HOOK_COMMITTED);
    int wrc = crpm_sendq_wait(q, "level 2: sending the checkpoint");
    *sent += q->bytes;
    crpm_wlog_free(&ranges[0]);
    crpm_wlog_free(&ranges[1]);
    return rc ? rc : wrc;
}

static int l2_write(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st, int *committed)
{
    (void)id;
    l2_state *s = l2_of(lv);
    *committed = 0;
    take(s);
    l2_open_copies(lv);
    crpm_sendq q = {0};
    owner_info oi = {s->wepoch, (uint64_t)s->nwpend, (uint64_t)s->wunknown, (uint64_t)s->o.full_copy, s->wsize};
    holder_info phi;
    owner_info *ois = NULL;
    int rc = exchange_states(lv, &q, &oi, &phi, &ois);
    uint64_t sent = q.bytes;
    if (rc != 0) {
        free(ois);
        give_back(lv);
        return rc;
    }
    int fatal = 0, mine = pair_mode(&oi, &phi);
    /* One stage reads only the copies and slot this epoch wrote, which the
     * next checkpoint does not write; a sync reads the whole file, an older
     * stage copies the next checkpoint overwrites. */
    if (mine == M_NONE || (mine == M_STAGES && s->nwpend == 1))
        crpm_level_release(lv->env);
    rc = sync_pairs(lv, mine, ois, &sent, &fatal);
    free(ois);
    if (!fatal)
        rc = ship(lv, &q, mine, a, n, rc, &sent);
    st->bytes_sent += sent;
    *committed = !fatal;
    if (rc != 0)
        give_back(lv);
    return rc;
}

/* Every copy of this checkpoint committed. */
static int l2_committed(crpm_level *lv, int64_t id)
{
    (void)id;
    l2_state *s = l2_of(lv);
    for (int k = 0; k < s->nwpend; k++)
        crpm_wlog_free(&s->wpend[k].log);
    memset(s->wpend, 0, sizeof s->wpend);
    s->nwpend = s->wunknown = 0;
    s->dirty = s->o.full_copy;
    for (int i = 0; i < s->o.nowners; i++)
        s->held[i].committed = 0;
    return CRPM_SUCCESS;
}

/* Another rank failed: copies this checkpoint committed go back one epoch;
 * our own side keeps its pending epochs (the owner's undo follows). */
static int l2_undo(crpm_level *lv)
{
    l2_state *s = l2_of(lv);
    int rc = CRPM_SUCCESS;
    for (int i = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        if (h->committed && h->r && crpm_container_rollback(h->r) != 0) {
            rc = rc ? rc : crpm_error(CRPM_ERR_IO, "%s", crpm_last_error());
            l2_close_held(h);
        }
        h->committed = 0;
    }
    give_back(lv);
    s->dirty |= rc != 0;
    return rc;
}

static int l2_remove(crpm_level *lv)
{
    l2_state *s = l2_of(lv);
    for (int i = 0; i < s->o.nowners; i++) {
        held *h = &s->held[i];
        char p[CRPM_PATH_MAX + 16];
        l2_close_held(h);
        crpm_unlink_quiet(h->path);
        snprintf(p, sizeof p, "%s.full", h->path);
        crpm_unlink_quiet(p);
        snprintf(p, sizeof p, "%s.sync", h->path);
        crpm_unlink_quiet(p);
        crpm_unlock_file(h->lock_fd, h->lock, 1);
        h->lock_fd = -1;
    }
    return CRPM_SUCCESS;
}

static void l2_close(crpm_level *lv)
{
    l2_state *s = l2_of(lv);
    if (s->own)
        crpm_container_media(s->own)->log = NULL;
    for (int i = 0; i < s->o.nowners; i++) {
        l2_close_held(&s->held[i]);
        if (s->held[i].lock_fd >= 0)
            crpm_unlock_file(s->held[i].lock_fd, s->held[i].lock, 0);
    }
    crpm_wlog_free(&s->live);
    for (int k = 0; k < s->npend; k++)
        crpm_wlog_free(&s->pend[k].log);
    for (int k = 0; k < s->nwpend; k++)
        crpm_wlog_free(&s->wpend[k].log);
    free(s->held);
    free(s);
}

static const crpm_level_ops l2_ops = {
    .name = "L2",
    .attach = crpm_level_l2_attach,
    .write = l2_write,
    .committed = l2_committed,
    .undo = l2_undo,
    .event = l2_event,
    .nfacts = L2_NFACTS,
    .facts = l2_facts,
    .offers = l2_offers,
    .plan = l2_plan,
    .describe = l2_describe,
    .holding = "level-2 partner copy",
    .restore = l2_restore,
    .resync = l2_resync,
    .remove = l2_remove,
    .close = l2_close,
};

int crpm_level_l2(crpm_level *lv, const crpm_level_env *env, const crpm_l2_opts *o)
{
    l2_state *s = calloc(1, sizeof *s);
    if (!s)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    s->o = *o;
    s->unknown = 1;
    s->held = calloc((size_t)o->nowners + 1, sizeof *s->held);
    if (!s->held) {
        free(s);
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    }
    *lv = (crpm_level){&l2_ops, env, s};
    int rc = CRPM_SUCCESS;
    for (int i = 0; i < o->nowners; i++) {
        held *h = &s->held[i];
        h->owner = o->owners[i];
        h->lock_fd = -1;
        if (rc == 0)
            rc = crpm_name_partner(h->path, sizeof h->path, env->job_dir, h->owner);
        snprintf(h->lock, sizeof h->lock, "%s.lock", h->path);
        /* a second job, or a lingering rank of the last run, holds it */
        if (rc == 0)
            rc = crpm_lock_file(h->lock, o->lock_wait_s, &h->lock_fd);
    }
    s->o.owners = NULL; /* the caller's; each held copy names its owner */
    if (rc != 0)
        crpm_level_close(lv);
    return rc;
}

