/* A follower level that lives outside the library: each rank's committed
 * container copied, whole, to a second directory (copy_level.h).  It shows
 * what a new level takes: this file, with both halves of its life behind the
 * ops table (lib/levels/level.h), and one row of the level table
 * (lib/mpi/level_table.h), added through the test builds' hook.
 *
 * Checkpoint: write copies the committed container to <dir>/rank-<r>.copy.tmp
 * (reading the committed epoch, not the arrays); committed renames it into
 * place once every rank wrote its copy; undo drops it.  Restart: facts say
 * whether this rank's copy opens and passes its checksums, and its epoch and
 * run; plan says which ranks lacking an epoch its copies bring back;
 * restore writes the copy back in place of the lost container; resync copies
 * every container again. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agree.h"
#include "copy_level.h"
#include "error.h"
#include "fsutil.h"
#include "level_table.h"

/* The level's own facts, one row per rank. */
enum { CP_FILE, CP_OK, CP_EPOCH, CP_PREV, CP_RUN0, CP_RUN1, CP_N };

static char copy_dir[CRPM_PATH_MAX];

typedef struct copy_state {
    char path[CRPM_PATH_MAX + 32], tmp[CRPM_PATH_MAX + 40];
    crpm_container *own;
    int persistence;
} copy_state;

static copy_state *st(crpm_level *lv) { return lv->state; }

/* src to dst through a temporary file: complete and durable, or not there. */
static int copy_file(const char *src, const char *dst)
{
    char tmp[CRPM_PATH_MAX + 48];
    snprintf(tmp, sizeof tmp, "%s.part", dst);
    int in = open(src, O_RDONLY | O_CLOEXEC), out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = in < 0 || out < 0 ? crpm_error(CRPM_ERR_IO, "copy level: %s: %s", in < 0 ? src : tmp, strerror(errno))
                               : CRPM_SUCCESS;
    static char buf[1 << 20];
    for (ssize_t n = 1; rc == 0 && n > 0;) {
        n = read(in, buf, sizeof buf);
        if (n < 0 || (n > 0 && write(out, buf, (size_t)n) != n))
            rc = crpm_error(CRPM_ERR_IO, "copy level: copying %s: %s", src, strerror(errno));
    }
    if (rc == 0 && fsync(out) != 0)
        rc = crpm_error(CRPM_ERR_IO, "copy level: %s: %s", tmp, strerror(errno));
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    if (rc == 0)
        rc = crpm_durable_rename(tmp, dst);
    if (rc != 0)
        crpm_unlink_quiet(tmp);
    return rc;
}

/* ---- checkpoint ---- */

static void copy_attach(crpm_level *lv, crpm_container *own) { st(lv)->own = own; }

static int copy_write(crpm_level *lv, const crpm_array *a, int n, int64_t id, crpm_stats_t *st_, int *committed)
{
    (void)a;
    (void)n;
    (void)id;
    (void)st_;
    copy_state *s = st(lv);
    int rc = s->own ? copy_file(s->own->path, s->tmp) : crpm_error(CRPM_ERR_STATE, "copy level: no container");
    *committed = rc == 0;
    return rc;
}

static int copy_committed(crpm_level *lv, int64_t id)
{
    (void)id;
    return crpm_durable_rename(st(lv)->tmp, st(lv)->path);
}

static int copy_undo(crpm_level *lv) { return crpm_unlink_quiet(st(lv)->tmp); }

/* ---- restart ---- */

static int copy_facts(crpm_level *lv, const int64_t *row, int64_t *own)
{
    (void)row;
    copy_state *s = st(lv);
    struct stat sb;
    memset(own, 0, sizeof(int64_t) * CP_N);
    own[CP_FILE] = stat(s->path, &sb) == 0;
    crpm_open_opts oo = {.path = s->path, .job_name = lv->env->job_name, .rank = lv->env->rank,
                         .nranks = lv->env->nranks, .persistence = s->persistence};
    crpm_container *c = NULL;
    int bad = 0, prev_bad = 0;
    char msg[256];
    /* a copy is used only when every byte of it checks against its CRC */
    if (own[CP_FILE] && crpm_format_open(&oo, &c, NULL) == 0 &&
        crpm_container_verify_epochs(c, &bad, &prev_bad, msg, sizeof msg) == 0 && !bad) {
        own[CP_OK] = 1;
        own[CP_EPOCH] = (int64_t)crpm_container_epoch(c);
        own[CP_PREV] = crpm_container_prev_available(c) && !prev_bad;
        uint8_t id[CRPM_RUN_ID_LEN];
        crpm_container_run_id(c, id);
        memcpy(&own[CP_RUN0], id, sizeof id);
    }
    if (c)
        crpm_format_close(c);
    crpm_error_clear(); /* a copy that does not serve is a fact, not an error */
    return CRPM_SUCCESS;
}

static const int64_t *cp_row(const crpm_plan *p, int r) { return p->own + (size_t)r * CP_N; }

static int copy_offers(crpm_level *lv, const crpm_plan *p, int64_t *epochs, int max)
{
    (void)lv;
    int n = 0;
    for (int r = 0; r < p->nranks && n + 2 <= max; r++)
        if (cp_row(p, r)[CP_OK]) {
            epochs[n++] = cp_row(p, r)[CP_EPOCH];
            if (cp_row(p, r)[CP_PREV])
                epochs[n++] = cp_row(p, r)[CP_EPOCH] - 1;
        }
    return n;
}

static void copy_plan(crpm_level *lv, crpm_plan *p)
{
    (void)lv;
    for (int r = 0; r < p->nranks; r++) {
        const int64_t *o = cp_row(p, r);
        p->repair[r] = p->need[r] && o[CP_OK] &&
                       crpm_fact_copy_holds(1, o[CP_EPOCH], o[CP_PREV] != 0, o[CP_RUN0], o[CP_RUN1], p->run, p->epoch);
        p->nrepair += (int)p->repair[r];
    }
}

static int copy_describe(crpm_level *lv, const crpm_plan *p, int r, char *buf, size_t n)
{
    (void)lv;
    const int64_t *o = cp_row(p, r);
    if (o[CP_OK])
        snprintf(buf, n, "its copy holds epoch %lld", (long long)o[CP_EPOCH]);
    else
        snprintf(buf, n, "its copy is %s", o[CP_FILE] ? "unusable" : "missing");
    return o[CP_FILE] && !o[CP_OK];
}

static int copy_restore(crpm_level *lv, const crpm_restart_io *io)
{
    int me = lv->env->rank, rc = CRPM_SUCCESS;
    if (io->plan->repair[me]) {
        rc = io->set_aside(io->arg);
        if (rc == 0)
            rc = copy_file(st(lv)->path, io->path);
        if (rc == 0)
            rc = io->open(io->arg, io->path, 0, io->own);
    }
    return crpm_agree(lv->env->comm, me, rc, "copy level: restoring containers from their copies");
}

static int copy_resync(crpm_level *lv, const crpm_plan *p, int resumed, int64_t epoch)
{
    (void)epoch;
    copy_state *s = st(lv);
    int files = 0;
    for (int r = 0; r < p->nranks; r++)
        files |= cp_row(p, r)[CP_FILE] != 0;
    if (!resumed || !(p->in_use || files))
        return CRPM_SUCCESS;
    int rc = s->own ? copy_file(s->own->path, s->path) : CRPM_SUCCESS;
    return crpm_agree(lv->env->comm, lv->env->rank, rc, "copy level: copying the containers again");
}

static int copy_remove(crpm_level *lv)
{
    crpm_unlink_quiet(st(lv)->tmp);
    return crpm_unlink_quiet(st(lv)->path);
}

static void copy_close(crpm_level *lv) { free(lv->state); }

static const crpm_level_ops copy_ops = {
    .name = "copy",
    .nfacts = CP_N,
    .attach = copy_attach,
    .write = copy_write,
    .committed = copy_committed,
    .undo = copy_undo,
    .facts = copy_facts,
    .offers = copy_offers,
    .plan = copy_plan,
    .describe = copy_describe,
    .holding = "copy",
    .restore = copy_restore,
    .resync = copy_resync,
    .remove = copy_remove,
    .close = copy_close,
};

static int copy_open(crpm_ctx *ctx, crpm_follower *f)
{
    copy_state *s = calloc(1, sizeof *s);
    if (!s)
        return crpm_error(CRPM_ERR_NOMEM, "copy level: out of memory");
    snprintf(s->path, sizeof s->path, "%s/rank-%d.copy", copy_dir, ctx->rank);
    snprintf(s->tmp, sizeof s->tmp, "%s.tmp", s->path);
    s->persistence = ctx->cfg.persistence;
    f->lv = (crpm_level){&copy_ops, &ctx->env, s};
    return CRPM_SUCCESS;
}

/* ---- the row ---- */

static const crpm_level_row copy_row = {
    .level = COPY_LEVEL,
    .stage = CRPM_STAGE_COMMIT,
    .sent_to = "copy",
    .opening = "opening the copy level",
    .open = copy_open,
};

int copy_level_register(const char *dir)
{
    snprintf(copy_dir, sizeof copy_dir, "%s", dir);
    return crpm_level_table_add(&copy_row);
}
