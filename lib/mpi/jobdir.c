/* The job directory (jobdir.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "agree.h"
#include "coordinate.h"
#include "error.h"
#include "fsutil.h"
#include "jobdir.h"
#include "testhook.h"

/* Written by a finalize that removes the checkpoints, before it removes
 * anything: a relaunch that finds it knows the job had completed and that
 * missing containers are not lost data. */
#define FINALIZE_MARKER ".crpm-finalized"

int crpm_jobdir_prepare(crpm_ctx *ctx)
{
    char dir[CRPM_PATH_MAX];
    int rc = crpm_topology_expand(&ctx->topo, ctx->cfg.ckpt_dir, dir, sizeof dir);
    if (rc != 0)
        return rc;
    rc = crpm_name_join(ctx->job_dir, sizeof ctx->job_dir, dir, ctx->cfg.job_name);
    if (rc == 0)
        rc = crpm_name_container(ctx->path, sizeof ctx->path, ctx->job_dir, ctx->rank);
    if (rc == 0)
        rc = crpm_name_rank_lock(ctx->lock_path, sizeof ctx->lock_path, ctx->job_dir, ctx->rank);
    if (rc != 0)
        return crpm_error(CRPM_ERR_CONFIG, "crpm_init: checkpoint path too long: %s", crpm_last_error());
    rc = crpm_mkdir_p(ctx->job_dir);
    crpm_testhook_pause("init_lock", ctx->rank);
    if (rc == 0)
        rc = crpm_lock_file(ctx->lock_path, ctx->cfg.lock_wait_s, &ctx->lock_fd);
    return rc;
}

void crpm_jobdir_unlock(crpm_ctx *ctx, int remove)
{
    crpm_unlock_file(ctx->lock_fd, ctx->lock_path, remove);
    ctx->lock_fd = -1;
}

int crpm_jobdir_open(crpm_ctx *ctx, const char *path, int create, crpm_container **out)
{
    crpm_open_opts o = {
        .path = path,
        .segment_size = ctx->cfg.segment_size,
        .block_size = ctx->cfg.block_size,
        .job_name = ctx->cfg.job_name,
        .rank = ctx->rank,
        .nranks = ctx->nranks,
        .persistence = ctx->cfg.persistence,
        .backend = NULL,
        .create = create,
        .change_tracking = ctx->cfg.change_tracking,
        .huge_pages = ctx->cfg.huge_pages,
        .run_id = create ? ctx->run_id : NULL,
        .layout = create ? &ctx->layout : NULL,
    };
    int rc = crpm_container_open(&o, out, NULL);
    if (rc == 0)
        crpm_testhook_attach(ctx, *out);
    if (rc == 0)
        crpm_container_set_pool(*out, ctx->pool); /* the rank's workers (api_team.c) */
    const char *trk = rc == 0 ? crpm_container_tracking(*out) : NULL;
    if (trk && ctx->cfg.change_tracking == 1 && strcmp(trk, "pagemap") != 0 && ctx->cfg.verbosity >= 1 &&
        ctx->rank == 0) {
        /* still exact, only slower: a warning, not an error */
        fprintf(stderr, "[crpm rank 0] change_tracking = pagemap unavailable, comparing every block: %s\n", trk);
        fflush(stderr);
    }
    return rc;
}

int crpm_jobdir_create_fresh(crpm_ctx *ctx, crpm_container **out)
{
    char tmp[CRPM_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", ctx->path);
    int rc = crpm_unlink_quiet(tmp);
    crpm_container *c = NULL;
    if (rc == 0)
        rc = crpm_jobdir_open(ctx, tmp, 1, &c);
    if (rc != 0)
        return rc;
    crpm_container_close(c);
    rc = crpm_durable_rename(tmp, ctx->path);
    if (rc != 0)
        return rc;
    return crpm_jobdir_open(ctx, ctx->path, 0, out);
}

int crpm_jobdir_extra_ranks(const crpm_ctx *ctx, int remove)
{
    DIR *d = opendir(ctx->job_dir);
    if (!d)
        return -1;
    int maxk = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int k = crpm_parse_container_name(e->d_name);
        if (k < ctx->nranks)
            continue;
        if (k > maxk)
            maxk = k;
        char p[CRPM_PATH_MAX];
        if (remove && crpm_name_join(p, sizeof p, ctx->job_dir, e->d_name) == 0)
            crpm_unlink_quiet(p);
    }
    closedir(d);
    return maxk;
}

/* Files of this rank's job directory whose names start with prefix. */
static void remove_prefixed(const crpm_ctx *ctx, const char *prefix)
{
    DIR *d = opendir(ctx->job_dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char p[CRPM_PATH_MAX];
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && crpm_name_join(p, sizeof p, ctx->job_dir, e->d_name) == 0)
            crpm_unlink_quiet(p);
    }
    closedir(d);
}

int crpm_jobdir_finish_removal(crpm_ctx *ctx)
{
    const char *what = "crpm_init: removing the checkpoints of a finished run";
    char mp[CRPM_PATH_MAX];
    int64_t neg = 0;
    struct stat st;
    if (ctx->rank == 0 && crpm_name_join(mp, sizeof mp, ctx->job_dir, FINALIZE_MARKER) == 0 && stat(mp, &st) == 0)
        neg = -1;
    int rc = crpm_agree_ext(ctx->comm, ctx->rank, 0, "crpm_init", &neg, 1);
    if (rc != 0 || neg == 0)
        return rc;
    rc = crpm_unlink_quiet(ctx->path);
    crpm_jobdir_extra_ranks(ctx, 1);
    crpm_coord_purge(ctx, 0, remove_prefixed); /* a finished run's partner copies, parity containers, ... */
    rc = crpm_agree(ctx->comm, ctx->rank, rc, what);
    if (rc == 0 && ctx->rank == 0) {
        crpm_coord_purge(ctx, 1, remove_prefixed);
        rc = crpm_unlink_quiet(mp);
        if (rc == 0)
            rc = crpm_sync_dir(ctx->job_dir);
    }
    return crpm_agree(ctx->comm, ctx->rank, rc, what);
}

/* Containers set aside at a restart (rank-<r>.crpm.unused-<time>): the job
 * completed, so they are superseded. */
static void remove_set_aside(const crpm_ctx *ctx)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "rank-%d.crpm.unused-", ctx->rank);
    remove_prefixed(ctx, prefix);
}

int crpm_jobdir_remove(crpm_ctx *ctx, int keep_global)
{
    const char *fn = "crpm_finalize";
    char mp[CRPM_PATH_MAX];
    int rc = crpm_name_join(mp, sizeof mp, ctx->job_dir, FINALIZE_MARKER);
    if (rc == 0 && ctx->rank == 0) {
        int fd = open(mp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || fsync(fd) != 0)
            rc = crpm_error(CRPM_ERR_IO, "crpm_finalize: cannot create %s: %s", mp, strerror(errno));
        if (fd >= 0)
            close(fd);
        if (rc == 0)
            rc = crpm_sync_dir(ctx->job_dir);
    }
    rc = crpm_agree(ctx->comm, ctx->rank, rc, fn);
    crpm_testhook_pause("finalize_marker", ctx->rank);
    if (rc == 0) {
        char tmp[CRPM_PATH_MAX + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", ctx->path);
        rc = crpm_unlink_quiet(ctx->path);
        crpm_unlink_quiet(tmp);
        remove_set_aside(ctx);
        crpm_coord_remove(ctx, 0);
        rc = crpm_agree(ctx->comm, ctx->rank, rc, fn);
    }
    if (rc == 0 && ctx->rank == 0) {
        if (!keep_global)
            crpm_coord_remove(ctx, 1);
        rc = crpm_sync_dir(ctx->job_dir);
        if (rc == 0)
            rc = crpm_unlink_quiet(mp);
    }
    rc = crpm_agree(ctx->comm, ctx->rank, rc, fn);
    if (rc == 0) {
        crpm_testhook_pause("finalize_unlock", ctx->rank);
        crpm_jobdir_unlock(ctx, 1);
        rc = crpm_agree(ctx->comm, ctx->rank, rc, fn); /* every lock is gone before the directory goes */
        if (rc == 0)
            crpm_testhook_pause("finalize_rmdir", ctx->rank);
        if (rc == 0)
            rmdir(ctx->job_dir); /* per node; ENOTEMPTY if shared and not last */
    }
    return rc;
}
