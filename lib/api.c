/* Public API: thin entry points over the MPI layer (lib/mpi) and the
 * checkpoint levels (lib/levels).  Every collective entry point ends in an
 * agreement, so one rank's failure is an error on every rank, never a hang. */
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "agree.h"
#include "api_internal.h"
#include "background.h"
#include "api_heap.h"
#include "clock.h"
#include "context.h"
#include "coordinate.h"
#include "crpm.h"
#include "devkind.h"
#include "error.h"
#include "grow.h"
#include "jobdir.h"
#include "layout.h"
#include "reserved_ids.h"
#include "level_table.h"
#include "progress.h"
#include "restart.h"
#include "runlog.h"
#include "schedule.h"
#include "stop.h"
#include "testhook.h"

/* ---- predefined types ---------------------------------------------------- */
const crpm_type_t CRPM_CHAR = {CRPM_TC_CHAR, 0, sizeof(char)};
const crpm_type_t CRPM_SHORT = {CRPM_TC_SHORT, 0, sizeof(short)};
const crpm_type_t CRPM_INT = {CRPM_TC_INT, 0, sizeof(int)};
const crpm_type_t CRPM_LONG = {CRPM_TC_LONG, 0, sizeof(long)};
const crpm_type_t CRPM_LLONG = {CRPM_TC_LLONG, 0, sizeof(long long)};
const crpm_type_t CRPM_UINT = {CRPM_TC_UINT, 0, sizeof(unsigned)};
const crpm_type_t CRPM_ULONG = {CRPM_TC_ULONG, 0, sizeof(unsigned long)};
const crpm_type_t CRPM_FLOAT = {CRPM_TC_FLOAT, 0, sizeof(float)};
const crpm_type_t CRPM_DOUBLE = {CRPM_TC_DOUBLE, 0, sizeof(double)};
const crpm_type_t CRPM_LDOUBLE = {CRPM_TC_LDOUBLE, 0, sizeof(long double)};
const crpm_type_t CRPM_BYTE = {CRPM_TC_BYTE, 0, 1};

int crpm_init_type(crpm_type_t *type, size_t size)
{
    if (!type || size == 0 || size > (size_t)INT64_MAX)
        return crpm_error(CRPM_ERR_INVAL, "crpm_init_type: need a type pointer and a size > 0");
    type->code = CRPM_TYPE_USER;
    type->reserved = 0;
    type->size = (int64_t)size;
    return CRPM_SUCCESS;
}

/* The library's one context: NULL between finalize and init. */
static crpm_ctx *ctx;

crpm_ctx *crpm_api_ctx(void) { return ctx; }

/* Errors leave the library through here.  The application prints
 * crpm_last_error() (every rank has the reason, CRPM_ERR_REMOTE carries the
 * failing rank's message), so the library repeats it only when debugging. */
static int report(int rc, const char *fn)
{
    int verbosity = ctx ? ctx->cfg.verbosity : 1;
    if (rc < 0 && verbosity >= 3) {
        int rank = ctx ? ctx->rank : 0, inited = 0, fin = 0;
        MPI_Initialized(&inited);
        MPI_Finalized(&fin);
        if (!ctx && inited && !fin)
            MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        fprintf(stderr, "[crpm rank %d] %s: %s: %s\n", rank, fn, crpm_strerror(rc), crpm_last_error());
        fflush(stderr);
    }
    return rc;
}

int crpm_api_report(int rc, const char *fn) { return report(rc, fn); }

static int agree(int rc, const char *what) { return crpm_agree(ctx->comm, ctx->rank, rc, what); }

static void fmt_size(char *buf, size_t n, double b)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (b >= 1024 && u < 4) {
        b /= 1024;
        u++;
    }
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", b, unit[u]);
}

static void free_ctx(void)
{
    if (!ctx)
        return;
    crpm_bg_stop(ctx); /* no thread may outlive the context */
    crpm_stop_end(ctx);
    crpm_runlog_close(ctx);
    crpm_global_free(ctx); /* global layout, reshaped restart (api_global.c) */
    crpm_coord_close(ctx);
    crpm_threads_free(ctx); /* after every container that used the workers */
    crpm_jobdir_unlock(ctx, 0);
    crpm_topology_free(&ctx->topo);
    if (ctx->comm != MPI_COMM_NULL) {
        int fin = 0;
        MPI_Finalized(&fin);
        if (!fin)
            MPI_Comm_free(&ctx->comm);
    }
    free(ctx->arrays);
    crpm_idindex_free(&ctx->array_ids);
    for (int i = 0; i < ctx->nnames; i++)
        free(ctx->names[i].name);
    free(ctx->names);
    crpm_idindex_free(&ctx->name_ids);
    free(ctx);
    ctx = NULL;
    crpm_heapctx_close();
}

/* ---- init ------------------------------------------------------------------ */
/* Rank 0 reads the file (or takes `given`) and broadcasts it: every rank
 * parses the same text (one read of a shared file; identical messages on
 * all ranks). */
static int load_config(const char *file, const char *given)
{
    struct {
        int64_t rc, len;
        char msg[2 * 4096 + 512];
    } hdr = {0, 0, ""};
    char *text = NULL;
    size_t len = 0;
    if (ctx->rank == 0) {
        if (given) {
            len = strlen(given);
            text = strdup(given);
            hdr.rc = text ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
        } else {
            hdr.rc = file ? crpm_config_read_file(file, &text, &len)
                          : crpm_error(CRPM_ERR_INVAL, "crpm_init: no configuration file given");
        }
        hdr.len = (int64_t)len;
        if (hdr.rc == 0 && len > INT_MAX)
            hdr.rc = crpm_error(CRPM_ERR_CONFIG, "config %s: file too large", file);
        if (hdr.rc < 0)
            snprintf(hdr.msg, sizeof hdr.msg, "%s", crpm_last_error());
    }
    int mrc = MPI_Bcast(&hdr, (int)sizeof hdr, MPI_BYTE, 0, ctx->comm);
    if (mrc != MPI_SUCCESS) {
        free(text);
        return crpm_mpi_fail(mrc, "crpm_init: MPI_Bcast of the configuration");
    }
    if (hdr.rc < 0) {
        free(text);
        hdr.msg[sizeof hdr.msg - 1] = '\0';
        return crpm_error((int)hdr.rc, "%s", hdr.msg);
    }
    if (ctx->rank != 0 && !(text = malloc((size_t)hdr.len + 1)))
        return crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory");
    mrc = MPI_Bcast(text, (int)hdr.len, MPI_CHAR, 0, ctx->comm);
    text[hdr.len] = '\0';
    int rc = mrc == MPI_SUCCESS ? crpm_config_parse(text, file ? file : "(none)", &ctx->cfg)
                                : crpm_mpi_fail(mrc, "crpm_init: MPI_Bcast of the configuration");
    free(text);
    return rc;
}

/* Verbosity 2: one line per node (its ranks, host and partner node). */
static void log_topology(void)
{
    if (ctx->cfg.verbosity < 2)
        return;
    if (ctx->rank == 0)
        printf("[crpm] %d ranks on %d node%s (%s)\n", ctx->nranks, ctx->topo.nnodes, ctx->topo.nnodes == 1 ? "" : "s",
               ctx->cfg.node_size ? "node_size from the configuration" : "MPI shared-memory nodes");
    fflush(stdout);
    if (ctx->topo.local == 0) {
        if (ctx->topo.nnodes > 1)
            printf("[crpm] node %d on %s: rank %d first of %d; partner copies on node %d\n", ctx->topo.node,
                   ctx->topo.host, ctx->rank, ctx->topo.nlocal, (ctx->topo.node + 1) % ctx->topo.nnodes);
        else
            printf("[crpm] node %d on %s: rank %d first of %d; no partner node (level 2 needs two nodes)\n",
                   ctx->topo.node, ctx->topo.host, ctx->rank, ctx->topo.nlocal);
    }
    fflush(stdout);
}

static int heap_protect(void);

/* crpm_init and crpm_init_text: the configuration is the file, or `text`
 * (then config_file only names it in messages). */
static int init_common(const char *config_file, const char *text, MPI_Comm comm)
{
    const char *fn = text ? "crpm_init_text" : "crpm_init";
    CRPM_GUARD(fn, 1);
    if (ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_init: already initialised"), fn);
    int inited = 0, fin = 0;
    MPI_Initialized(&inited);
    MPI_Finalized(&fin);
    if (!inited || fin)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_init: MPI is not initialised"), fn);
    if (comm == MPI_COMM_NULL)
        return report(crpm_error(CRPM_ERR_INVAL, "crpm_init: communicator is MPI_COMM_NULL"), fn);
    double t_begin = crpm_now();
    if (!(ctx = calloc(1, sizeof *ctx)))
        return report(crpm_error(CRPM_ERR_NOMEM, "crpm_init: out of memory"), fn);
    ctx->lock_fd = -1;
    crpm_config_defaults(&ctx->cfg);
    /* A private communicator keeps our collectives apart from the
     * application's; errors are returned, not fatal. */
    int mrc = MPI_Comm_dup(comm, &ctx->comm);
    if (mrc != MPI_SUCCESS) {
        ctx->comm = MPI_COMM_NULL;
        int rc = report(crpm_mpi_fail(mrc, "crpm_init: MPI_Comm_dup"), fn);
        free_ctx();
        return rc;
    }
    MPI_Comm_set_errhandler(ctx->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(ctx->comm, &ctx->rank);
    MPI_Comm_size(ctx->comm, &ctx->nranks);

    int rc = load_config(config_file, text);
    if (rc == 0)
        crpm_progress_setup(ctx->cfg.verbosity);
    if (rc == 0) /* same on every rank: the configuration is */
        rc = crpm_threads_setup(ctx);
    if (rc == 0)
        rc = crpm_testhook_parse(ctx);
    if (rc == 0)
        rc = crpm_topology_build(ctx->comm, ctx->cfg.node_size, &ctx->topo);
    if (rc == 0)
        rc = crpm_coord_prepare(ctx, config_file); /* which levels the job can have */
    if (rc == 0)
        crpm_layout_of_run(ctx);
    if (rc == 0)
        log_topology();
    if (rc == 0)
        rc = crpm_jobdir_prepare(ctx);
    ctx->env = (crpm_level_env){
        .comm = ctx->comm,
        .rank = ctx->rank,
        .nranks = ctx->nranks,
        .job_name = ctx->cfg.job_name,
        .job_dir = ctx->job_dir,
        .glbl_dir = ctx->cfg.glbl_dir,
        .keep_l4 = ctx->cfg.keep_l4,
        .verbosity = ctx->cfg.verbosity,
        .layout = &ctx->layout,
        .run_id = ctx->run_id, /* level-4 files record the run (a restart compares epochs within one) */
        /* with async the followers run in the background thread, beside runs of the caller's pool and
         * its teams: they get none (one run at a time per pool, a fixed width during a run) */
        .pool = ctx->cfg.async ? NULL : ctx->pool,
    };
    if (rc == 0)
        rc = crpm_stop_start(ctx);
    if (rc == 0)
        rc = crpm_runlog_open(ctx, t_begin); /* [advanced] log_file */
    if (rc == 0)
        rc = crpm_heapctx_open(&ctx->cfg, config_file);
    rc = agree(rc, fn);
    if (rc == 0)
        rc = crpm_jobdir_finish_removal(ctx);
    if (rc == 0)
        rc = crpm_layout_check(ctx);
    if (rc == 0)
        rc = crpm_restart(ctx);
    if (rc == 0 && ctx->cfg.heap_size)
        rc = agree(heap_protect(), fn);
    if (rc != 0) {
        report(rc, fn);
        free_ctx();
        return rc;
    }
    rc = crpm_global_after_init(ctx); /* global layout (api_global.c) */
    if (rc != 0) {
        report(rc, fn);
        free_ctx();
        return rc;
    }
    rc = crpm_bg_start(ctx); /* async = 1: the background levels' thread */
    if (rc != 0) {
        report(rc, fn);
        free_ctx();
        return rc;
    }
    crpm_schedule_start(ctx);
    crpm_error_clear(); /* "no level-4 file" and the like were not errors */
    if (ctx->rank == 0 && ctx->cfg.verbosity >= 3)
        printf("[crpm] init: %d ranks, job '%s' in %s, status %d\n", ctx->nranks, ctx->cfg.job_name, ctx->job_dir,
               ctx->status);
    return CRPM_SUCCESS;
}

int crpm_init(const char *config_file, MPI_Comm comm) { return init_common(config_file, NULL, comm); }

int crpm_init_fcomm(const char *config_file, MPI_Fint comm)
{
    return init_common(config_file, NULL, MPI_Comm_f2c(comm));
}

int crpm_init_text(const char *ini_text, const char *origin, MPI_Comm comm)
{
    if (!ini_text)
        return report(crpm_error(CRPM_ERR_INVAL, "crpm_init_text: no configuration text given"), "crpm_init_text");
    return init_common(origin ? origin : "(configuration text)", ini_text, comm);
}

/* ---- protect / status / recover ------------------------------------------- */
static crpm_idrecs array_recs(void)
{
    return (crpm_idrecs){ctx->arrays, sizeof *ctx->arrays, offsetof(crpm_array, id)};
}

static crpm_idrecs name_recs(void)
{
    return (crpm_idrecs){ctx->names, sizeof *ctx->names, offsetof(struct crpm_name, id)};
}

/* Position of id in the table (n records) through its index, or -1. */
static int lookup(crpm_idindex *x, crpm_idrecs r, int n, int32_t id)
{
    if (crpm_idindex_sync(x, r, n, 1) == 0)
        return crpm_idindex_find(x, r, id);
    for (int i = 0; i < n; i++) /* no memory for the index: search */
        if (*(const int32_t *)(const void *)((const char *)r.base + (size_t)i * r.stride + r.id_off) == id)
            return i;
    return -1;
}

static const char *name_of(int32_t id)
{
    int k = lookup(&ctx->name_ids, name_recs(), ctx->nnames, id);
    return k < 0 ? NULL : ctx->names[k].name;
}
int crpm_protect(int id, void *ptr, int64_t count, crpm_type_t type)
{
    CRPM_GUARD("crpm_protect", 0);
    if (ctx && crpm_id_reserved(id))
        return report(crpm_error(CRPM_ERR_INVAL, "crpm_protect(%d): ids %d to %d are reserved for the library", id,
                                 CRPM_RESERVED_ID_MIN, CRPM_RESERVED_ID_MAX), "crpm_protect");
    return crpm_protect_any(id, ptr, count, type, "crpm_protect");
}

int crpm_protect_any(int id, void *ptr, int64_t count, crpm_type_t type, const char *fn)
{
    return crpm_protect_mem(id, ptr, count, type, fn, CRPM_DEVICE_DEFAULT, 0);
}

int crpm_protect_mem(int id, void *ptr, int64_t count, crpm_type_t type, const char *fn, int device_mode,
                     int device_only)
{
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "%s(%d): call crpm_init first", fn, id), fn);
    if (count < 0 || type.size <= 0 || (count > 0 && !ptr))
        return report(crpm_error(CRPM_ERR_INVAL, "%s(%d): bad pointer, count %lld or type size %lld", fn,
                                 id, (long long)count, (long long)type.size), fn);
    if (!((type.code >= CRPM_TC_CHAR && type.code <= CRPM_TC_LOGICAL) || type.code >= CRPM_TYPE_USER))
        return report(crpm_error(CRPM_ERR_INVAL, "%s(%d): unknown type code %d", fn, id, (int)type.code), fn);
    if ((uint64_t)count > SIZE_MAX / (uint64_t)type.size)
        return report(crpm_error(CRPM_ERR_RANGE, "%s(%d): %lld elements of %lld bytes overflow", fn, id,
                                 (long long)count, (long long)type.size), fn);
    int i = lookup(&ctx->array_ids, array_recs(), ctx->narrays, id);
    /* A new array or a new shape changes the container's region table, which
     * a drain in the background reads: wait for it.  Another address for the
     * same shape (double buffering) touches nothing the drain reads. */
    if (i < 0 || ctx->arrays[i].count != (uint64_t)count || ctx->arrays[i].elem_size != (uint64_t)type.size ||
        ctx->arrays[i].type_code != type.code || ctx->arrays[i].kind)
        crpm_bg_idle(ctx);
    if (i < 0)
        i = ctx->narrays;
    if (i == ctx->narrays && CRPM_GROW(ctx->arrays, ctx->cap_arrays, (size_t)ctx->narrays + 1, 16))
        return report(crpm_error(CRPM_ERR_NOMEM, "crpm_protect: out of memory"), fn);
    crpm_array a = {id, type.code, (uint64_t)type.size, (uint64_t)count, ptr, name_of(id), NULL};
    int managed, rc = ptr ? crpm_dev_classify(ptr, device_mode ? device_mode : ctx->cfg.device_mode, device_only, id,
                                              fn, &a.kind, &managed) : CRPM_SUCCESS; /* GPU memory: docs/gpu.md */
    const crpm_level_ops *ops = ctx->primary.ops;
    if (rc == 0 && ops && ops->protect)
        rc = ops->protect(&ctx->primary, &a);
    if (rc != 0)
        return report(rc, fn);
    crpm_container *c = ops && ops->container ? ops->container(&ctx->primary) : NULL;
    const char *why = c && (ctx->cfg.change_tracking || a.kind) ? crpm_container_untracked_reason(c, id) : NULL;
    int again = i < ctx->narrays && ctx->arrays[i].ptr == ptr && ctx->arrays[i].kind == a.kind &&
                ctx->arrays[i].count == a.count; /* GPU arrays: said once, and at verbosity 1 when not followed */
    if (a.kind && !again && (ctx->cfg.verbosity >= 2 || (why && ctx->cfg.verbosity >= 1)))
        printf("[crpm rank %d] array %d is CUDA %s memory (%s)%s%s\n", ctx->rank, id, managed ? "managed" : "device",
               a.kind->name, why ? ": " : "", why ? why : "");
    else if (why && ctx->cfg.verbosity >= 2)
        printf("[crpm rank %d] array %d is compared whole, not tracked: %s\n", ctx->rank, id, why);
    ctx->arrays[i] = a;
    if (i == ctx->narrays) {
        ctx->narrays++;
        crpm_idindex_append(&ctx->array_ids, array_recs(), i);
    }
    return CRPM_SUCCESS;
}

/* The heap, as the array every level saves (api_heap.h), protected anew
 * when its extent changed. */
static int heap_protect(void)
{
    crpm_array a;
    if (!crpm_heap_array(&a))
        return CRPM_SUCCESS;
    int i = lookup(&ctx->array_ids, array_recs(), ctx->narrays, a.id);
    if (i >= 0 && ctx->arrays[i].count == a.count)
        return CRPM_SUCCESS;
    return crpm_protect_any(a.id, a.ptr, (int64_t)a.count, CRPM_BYTE, "crpm_protect (the persistent heap)");
}

int crpm_set_name(int id, const char *name)
{
    const char *fn = "crpm_set_name";
    CRPM_GUARD(fn, 0);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "%s(%d): call crpm_init first", fn, id), fn);
    if (!name || !*name || strlen(name) >= CRPM_NAME_MAX)
        return report(crpm_error(CRPM_ERR_INVAL, "%s(%d): the name must have 1 to %d characters", fn, id,
                                 CRPM_NAME_MAX - 1), fn);
    crpm_bg_idle(ctx); /* level 4 in the background names the datasets */
    char *copy = strdup(name);
    int k = lookup(&ctx->name_ids, name_recs(), ctx->nnames, id);
    if (copy && k < 0 && CRPM_GROW(ctx->names, ctx->cap_names, (size_t)ctx->nnames + 1, 16)) {
        free(copy);
        copy = NULL;
    }
    if (!copy)
        return report(crpm_error(CRPM_ERR_NOMEM, "%s: out of memory", fn), fn);
    if (k < 0) {
        k = ctx->nnames++;
        ctx->names[k].id = id;
        ctx->names[k].name = NULL;
        crpm_idindex_append(&ctx->name_ids, name_recs(), k);
    }
    free(ctx->names[k].name);
    ctx->names[k].name = copy;
    int i = lookup(&ctx->array_ids, array_recs(), ctx->narrays, id);
    if (i >= 0)
        ctx->arrays[i].name = copy;
    return CRPM_SUCCESS;
}

int crpm_status(void)
{
    CRPM_GUARD("crpm_status", 0);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_status: call crpm_init first"), "crpm_status");
    return ctx->status;
}

/* The heap's size in the checkpoint to recover, its range made ready, and
 * the heap array protected at that size for the read. */
static int heap_before_recover(void)
{
    crpm_array saved, mine;
    int handle, rc = CRPM_SUCCESS, have = crpm_heap_array(&mine);
    if (!ctx->source->ops->stored)
        return have ? crpm_error(CRPM_ERR_NOTSUP, "crpm_recover: the %s checkpoint does not describe its persistent "
                                 "heap", ctx->source->ops->name) : CRPM_SUCCESS;
    rc = ctx->source->ops->stored(ctx->source, CRPM_HEAP_ARRAY_ID, &saved, &handle);
    if (rc == CRPM_ERR_MISMATCH && !have) /* neither has a heap */
        rc = CRPM_SUCCESS;
    else if (rc == CRPM_ERR_MISMATCH)
        return crpm_error(CRPM_ERR_MISMATCH, "crpm_recover: the checkpoint was taken without a persistent heap, this "
                          "run has one (heap_size in [basic]): restart it without");
    else if (rc == 0)
        rc = crpm_heapctx_prepare(crpm_array_bytes(&saved));
    return rc == 0 && have ? heap_protect() : rc;
}

int crpm_recover(void)
{
    const char *fn = "crpm_recover";
    CRPM_GUARD(fn, 1);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_recover: call crpm_init first"), fn);
    crpm_bg_idle(ctx);
    double t0 = crpm_now();
    int rc;
    if (ctx->broken)
        rc = crpm_error(CRPM_ERR_STATE, "crpm_recover: an earlier failed checkpoint left the container in an "
                        "unknown state; restart the application");
    else if (!ctx->source)
        rc = crpm_error(CRPM_ERR_NOCKPT, "crpm_recover: no checkpoint of job '%s' to recover (fresh start)",
                        ctx->cfg.job_name);
    else {
        rc = heap_before_recover();
        if (rc == 0)
            rc = ctx->source->ops->read(ctx->source, ctx->arrays, ctx->narrays);
        rc = crpm_heapctx_recovered(rc);
    }
    /* Status-based errors are the same on all ranks; engine ones are not. */
    rc = agree(rc, fn);
    if (rc != 0)
        return report(rc, fn);
    ctx->recovered = 1;
    if (ctx->runlog) {
        double bytes = 0;
        for (int i = 0; i < ctx->narrays; i++)
            bytes += (double)crpm_array_bytes(&ctx->arrays[i]);
        crpm_runlog_recover(ctx, crpm_now() - t0, bytes);
    }
    if (ctx->cfg.verbosity >= 2) {
        double mine[2] = {crpm_now() - t0, 0}, mx[2];
        for (int i = 0; i < ctx->narrays; i++)
            mine[1] += (double)crpm_array_bytes(&ctx->arrays[i]);
        if (MPI_Allreduce(mine, mx, 2, MPI_DOUBLE, MPI_MAX, ctx->comm) == MPI_SUCCESS && ctx->rank == 0) {
            char b[32], t[32];
            fmt_size(b, sizeof b, mx[1]);
            crpm_fmt_secs(t, sizeof t, mx[0]);
            printf("[crpm] recovered checkpoint %llu (%s): %s per rank in %s (%.2f GB/s per rank)\n",
                   (unsigned long long)ctx->last_id, ctx->source->ops->name, b, t,
                   mx[0] > 0 ? mx[1] / mx[0] / 1e9 : 0.0);
            fflush(stdout);
        }
    }
    return CRPM_SUCCESS;
}

/* The saved shape of array id in the checkpoint crpm_recover would read;
 * *handle for the level's read_one (when `to_read`, the level must have one). */
static int saved_array(int id, const char *fn, int to_read, crpm_array *shape, int *handle)
{
    if (!ctx)
        return crpm_error(CRPM_ERR_STATE, "%s(%d): call crpm_init first", fn, id);
    crpm_bg_idle(ctx);
    if (ctx->broken)
        return crpm_error(CRPM_ERR_STATE, "%s(%d): an earlier failed checkpoint left the container in an unknown "
                          "state; restart the application", fn, id);
    if (!ctx->source)
        return crpm_error(CRPM_ERR_NOCKPT, "%s(%d): no checkpoint of job '%s' to read (fresh start)", fn, id,
                          ctx->cfg.job_name);
    if (!ctx->source->ops->stored || (to_read && !ctx->source->ops->read_one))
        return crpm_error(CRPM_ERR_NOTSUP, "%s(%d): the checkpoint to recover is a %s checkpoint, which is read "
                          "whole: use crpm_recover", fn, id, ctx->source->ops->name);
    int rc = ctx->source->ops->stored(ctx->source, id, shape, handle);
    if (rc != 0)
        return crpm_error(rc, "%s(%d): %s (checkpoint %llu)", fn, id, crpm_last_error(),
                          (unsigned long long)ctx->last_id);
    return CRPM_SUCCESS;
}

int crpm_recover_var(int id)
{
    const char *fn = "crpm_recover_var";
    CRPM_GUARD(fn, 1);
    crpm_array saved;
    int handle, rc = saved_array(id, fn, 1, &saved, &handle);
    if (rc != 0)
        return report(rc, fn);
    int i = id == CRPM_HEAP_ARRAY_ID ? -1 : lookup(&ctx->array_ids, array_recs(), ctx->narrays, id);
    if (i < 0)
        return report(crpm_error(CRPM_ERR_INVAL, "%s(%d): protect array %d first", fn, id, id), fn);
    const crpm_array *a = &ctx->arrays[i];
    if (a->elem_size != saved.elem_size || a->count != saved.count)
        return report(crpm_error(CRPM_ERR_MISMATCH, "%s(%d): the checkpoint holds %llu elements of %llu bytes, "
                                 "array %d is protected with %llu of %llu bytes (resize it to crpm_stored_size "
                                 "first)", fn, id, (unsigned long long)saved.count,
                                 (unsigned long long)saved.elem_size, id, (unsigned long long)a->count,
                                 (unsigned long long)a->elem_size), fn);
    void *bytes = NULL, *host = NULL; /* not host memory: read and checked in a host buffer, then copied in */
    rc = crpm_array_bytes(a) ? crpm_array_fill_begin(a, &bytes, &host) : CRPM_SUCCESS;
    if (rc == CRPM_SUCCESS && crpm_array_bytes(a)) {
        rc = ctx->source->ops->read_one(ctx->source, handle, bytes);
        int frc = crpm_array_fill_end(a, host, rc == CRPM_SUCCESS);
        rc = rc ? rc : frc;
    }
    return rc ? report(rc, fn) : CRPM_SUCCESS;
}

int crpm_stored_size(int id, int64_t *bytes)
{
    const char *fn = "crpm_stored_size";
    CRPM_GUARD(fn, 0);
    if (!bytes)
        return report(crpm_error(CRPM_ERR_INVAL, "%s(%d): bytes is NULL", fn, id), fn);
    *bytes = 0;
    crpm_array saved;
    int handle, rc = saved_array(id, fn, 0, &saved, &handle);
    if (rc != 0)
        return report(rc, fn);
    *bytes = (int64_t)crpm_array_bytes(&saved);
    return CRPM_SUCCESS;
}

/* ---- checkpoint ------------------------------------------------------------ */
static void add_stats(const crpm_stats_t *st)
{
    ctx->last = *st;
    ctx->total.checkpoints++;
    ctx->total.protected_bytes = st->protected_bytes;
    ctx->total.bytes_compared += st->bytes_compared;
    ctx->total.bytes_written += st->bytes_written;
    ctx->total.blocks_written += st->blocks_written;
    ctx->total.drains += st->drains;
    ctx->total.seconds += st->seconds;
    ctx->total.bytes_sent += st->bytes_sent;
}

/* A checkpoint at a level that writes after the commit (level 4: every
 * protected byte to glbl_dir) reports both parts. */
static void log_checkpoint(int id, int level, const crpm_stats_t *st)
{
    const crpm_follower *f = crpm_coord_find(ctx, level);
    const crpm_level_row *row = f ? f->row : NULL;
    double sum[3] = {(double)st->bytes_written, (double)st->protected_bytes, (double)st->bytes_sent}, tsum[3],
           tmax[3];
    if (MPI_Allreduce(sum, tsum, 3, MPI_DOUBLE, MPI_SUM, ctx->comm) == MPI_SUCCESS &&
        MPI_Allreduce(ctx->cost, tmax, 3, MPI_DOUBLE, MPI_MAX, ctx->comm) == MPI_SUCCESS && ctx->rank == 0) {
        char w[32], p[32], t[32], t4[32], tr[32];
        fmt_size(w, sizeof w, tsum[0]);
        fmt_size(p, sizeof p, tsum[1]);
        crpm_fmt_secs(t, sizeof t, tmax[0]);
        crpm_fmt_secs(t4, sizeof t4, tmax[1]);
        double pct = tsum[1] > 0 ? 100.0 * tsum[0] / tsum[1] : 0.0;
        if (crpm_bg_takes(ctx, level)) /* not "(Ln)": that line comes when the level committed */
            printf("[crpm] checkpoint %d (level 1 committed, level %d in the background): %s written of %s "
                   "protected (%.1f%%) in %s\n", id, level, w, p, pct, t);
        else if (row && row->stage == CRPM_STAGE_AFTER)
            printf("[crpm] checkpoint %d (L%d): %s written to level %d in %s; level 1: %s written of %s protected "
                   "(%.1f%%) in %s\n", id, level, p, level, t4, w, p, pct, t);
        else if (row && row->sent_to) {
            char sent[32];
            fmt_size(sent, sizeof sent, tsum[2]);
            crpm_fmt_secs(tr, sizeof tr, tmax[2]);
            printf("[crpm] checkpoint %d (L%d): %s written of %s protected (%.1f%%), %s sent to %s nodes, in "
                   "%s (level %d part %s)\n", id, level, w, p, pct, sent, row->sent_to, t, level, tr);
        } else
            printf("[crpm] checkpoint %d (L%d): %s written of %s protected (%.1f%%) in %s\n", id, level, w, p, pct,
                   t);
        fflush(stdout);
    }
}

int crpm_checkpoint(int id, int level)
{
    const char *fn = "crpm_checkpoint";
    CRPM_GUARD(fn, 1);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_checkpoint: call crpm_init first"), fn);
    crpm_runlog_begin(ctx); /* the previous checkpoint's line (runlog.h) */
    double t0 = crpm_now(), t_commit = 0, waited = 0;
    /* Level 1 runs while the last checkpoint's levels drain, not while an
     * older one's do: it overwrites that one's copies (background.h). */
    int64_t in_way = crpm_bg_before_l1(ctx, &waited);
    if (waited > 1e-4 && ctx->cfg.verbosity >= 2 && ctx->rank == 0) {
        char t[32];
        crpm_fmt_secs(t, sizeof t, waited);
        printf("[crpm] checkpoint %d waited %s for the background levels of checkpoint %lld\n", id, t,
               (long long)in_way);
        fflush(stdout);
    }
    /* a drain's failure is this call's error on every rank (agreed) */
    int rc = crpm_bg_report(ctx);
    if (rc != 0) {
        crpm_runlog_failure(ctx, "checkpoint", id, level, rc);
        return report(rc, fn);
    }
    rc = ctx->broken ? crpm_error(CRPM_ERR_STATE, "crpm_checkpoint: an earlier failed checkpoint left the "
                                  "container in an unknown state; restart the application")
                     : crpm_coord_ready(ctx, id, level);
    if (rc == 0)
        rc = crpm_global_before_checkpoint(ctx); /* the layout region is current (api_global.c) */
    if (rc == 0 && ctx->cfg.heap_size)
        rc = heap_protect(); /* the heap's extent as it is now */
    crpm_stats_t st;
    memset(&st, 0, sizeof st);
    rc = crpm_coord_checkpoint(ctx, id, level, rc, &st, &t_commit);
    if (!t_commit) { /* nothing committed: agreed on every rank */
        crpm_runlog_failure(ctx, "checkpoint", id, level, rc);
        return report(rc, fn);
    }
    /* an older rank count's files may go now (api_global.c); level 4 counts only if it committed */
    crpm_global_committed(ctx, rc == 0 ? level : CRPM_L1);
    ctx->last_level = rc == 0 ? level : CRPM_L1;
    double t1 = crpm_now();
    ctx->cost[0] = t_commit - t0 - waited; /* the wait is the previous drain's, counted apart */
    /* in the background a level's cost is its drain's (the last one measured; -1: none yet, which the
     * automatic interval ignores), not the call's */
    ctx->cost[1] = crpm_bg_takes(ctx, level) ? crpm_bg_lag(ctx, level) : t1 - t_commit;
    st.seconds = t1 - t0;
    st.checkpoints = 1;
    /* the stop margin needs the final checkpoint's whole time: a level in the background adds its last
     * drain's (the stop waits for it) */
    double lag = crpm_bg_takes(ctx, level) ? crpm_bg_lag(ctx, level) : 0;
    crpm_stop_record(ctx, level, t1 - t0 + (lag > 0 ? lag : 0));
    add_stats(&st);
    ctx->last_ckpt_time = t1;
    if (ctx->cfg.verbosity >= 2)
        log_checkpoint(id, level, &st);
    crpm_runlog_checkpoint(ctx, id, level, rc, &st, t1 - t0, waited);
    crpm_runlog_failure(ctx, "checkpoint", id, level, rc);
    return rc ? report(rc, fn) : CRPM_SUCCESS;
}

/* async_backpressure = skip: a due checkpoint whose predecessor's levels
 * still run in the background is not taken now (1) but at a later call, the
 * schedule's count left as if it had not been due; the same on every rank. */
static int snapshot_skips(int level)
{
    int busy = 0, rc = crpm_bg_busy(ctx, &busy);
    if (rc != 0 || !busy) {
        ctx->bg_skipping = 0;
        return rc;
    }
    ctx->snap_ckpts--;
    if (!ctx->bg_skipping++ && ctx->cfg.verbosity >= 2 && ctx->rank == 0) {
        printf("[crpm] snapshot: checkpoint %llu (L%d) skipped: the background levels of checkpoint %llu are "
               "still running (async_backpressure = skip)\n", (unsigned long long)ctx->last_id + 1, level,
               (unsigned long long)ctx->last_id);
        fflush(stdout);
    }
    return 1;
}

int crpm_snapshot(void)
{
    const char *fn = "crpm_snapshot";
    CRPM_GUARD(fn, 1);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_snapshot: call crpm_init first"), fn);
    if (ctx->status != CRPM_STATUS_FRESH && !ctx->recovered && ctx->source && ctx->total.checkpoints == 0) {
        int rc = crpm_recover();
        return rc < 0 ? rc : CRPM_SNAP_RECOVERED;
    }
    int stop, measure, level, rc = crpm_stop_poll(ctx, 0, &stop, &measure);
    if (rc == 0 && stop) {
        rc = crpm_checkpoint((int)(ctx->last_id + 1), crpm_stop_level(ctx));
        /* Levels that complete in the background must be waited for here,
         * before the application is told to stop. */
        if (rc == 0)
            rc = report(crpm_bg_collect(ctx, NULL), fn);
        return rc < 0 ? rc : CRPM_SNAP_EXIT;
    }
    if (rc == 0)
        rc = crpm_schedule_due(ctx, &level);
    if (rc != 0)
        return report(rc, fn);
    if (measure) /* the cost of the final checkpoint decides when to stop */
        level = crpm_stop_level(ctx);
    if (!level)
        return CRPM_SNAP_NONE;
    if (ctx->cfg.async_skip && (rc = snapshot_skips(level)) != 0)
        return rc < 0 ? report(rc, fn) : CRPM_SNAP_NONE;
    rc = crpm_checkpoint((int)(ctx->last_id + 1), level);
    if (rc == 0)
        rc = report(crpm_schedule_taken(ctx, level), fn);
    return rc < 0 ? rc : CRPM_SNAP_CHECKPOINTED;
}

int crpm_should_exit(void)
{
    const char *fn = "crpm_should_exit";
    CRPM_GUARD(fn, 1);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_should_exit: call crpm_init first"), fn);
    int stop, rc = crpm_stop_poll(ctx, 1, &stop, NULL);
    return rc ? report(rc, fn) : stop;
}

/* ---- finalize / stats -------------------------------------------------------- */
int crpm_finalize(void)
{
    const char *fn = "crpm_finalize";
    CRPM_GUARD(fn, 1);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_finalize: call crpm_init first"), fn);
    /* every background level committed (or failed, said on every rank) first */
    int bgrc = crpm_bg_stop(ctx);
    int rc = agree(CRPM_SUCCESS, fn);
    if (rc == 0)
        crpm_runlog_end(ctx);
    /* keep_last_ckpt = global with glbl_dir, and the newest checkpoint is a
     * committed level-4 one (taken in this run, or the one this run restarted
     * from and superseded by none): it is kept in glbl_dir, where the next
     * allocation finds it, and the node-local files go, as FTI's
     * keep_last_ckpt does (node-local storage does not outlive a job).  bgrc
     * and last_level are the same on every rank. */
    int newest_l4 = ctx->last_level == CRPM_L4 || (ctx->last_level == 0 && ctx->status == CRPM_STATUS_L4);
    int global_only = ctx->cfg.keep_last_ckpt == CRPM_KEEP_GLOBAL && ctx->cfg.glbl_dir[0] && newest_l4 && bgrc == 0;
    if (rc == 0 && ctx->stop.reason) /* stopped early: the checkpoints are needed */
        rc = crpm_stop_mark(ctx);
    else if (rc == 0 && !ctx->cfg.keep_last_ckpt)
        rc = crpm_global_finalize(ctx); /* an older rank count's files (api_global.c) */
    if (rc == 0 && !ctx->stop.reason && (!ctx->cfg.keep_last_ckpt || global_only))
        rc = crpm_jobdir_remove(ctx, global_only);
    if (rc != 0)
        report(rc, fn);
    else if (bgrc != 0)
        rc = report(bgrc, fn);
    free_ctx();
    return rc;
}

/* ---- background levels ------------------------------------------------------- */
int crpm_wait(void)
{
    const char *fn = "crpm_wait";
    CRPM_GUARD(fn, 1);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_wait: call crpm_init first"), fn);
    /* collective although the result is agreed already: a caller that goes
     * on to read the level's files on another rank may rely on it */
    int rc = crpm_bg_collect(ctx, NULL);
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", rc ? crpm_last_error() : "");
    int arc = agree(CRPM_SUCCESS, fn);
    if (rc != 0)
        return report(crpm_error(rc, "%s", msg), fn);
    return arc ? report(arc, fn) : CRPM_SUCCESS;
}

int crpm_test(int *done)
{
    const char *fn = "crpm_test";
    CRPM_GUARD(fn, 0);
    if (!done)
        return report(crpm_error(CRPM_ERR_INVAL, "crpm_test: done is NULL"), fn);
    *done = 1;
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "crpm_test: call crpm_init first"), fn);
    int rc = crpm_bg_test(ctx, done);
    return rc ? report(rc, fn) : CRPM_SUCCESS;
}

/* The bytes of crpm_stats_t in version 2.0 (through bytes_sent): the least a
 * caller's struct holds, and all that programs built against 2.0.0 have. */
#define STATS_SIZE_2_0 (offsetof(crpm_stats_t, bytes_sent) + sizeof(uint64_t))
_Static_assert(STATS_SIZE_2_0 == 64, "crpm_stats_t's 2.0 fields moved: that breaks the ABI");

/* Fills size bytes at out: the fields both sides know, zeros for those only
 * the caller's (newer) struct has. */
static void stats_out(void *out, const crpm_stats_t *st, size_t size)
{
    size_t n = size < sizeof *st ? size : sizeof *st;
    memcpy(out, st, n);
    memset((char *)out + n, 0, size - n);
}

int crpm_get_stats_sized(crpm_stats_t *last, crpm_stats_t *total, size_t size)
{
    static const char fn[] = "crpm_get_stats";
    CRPM_GUARD(fn, 0);
    if (size < STATS_SIZE_2_0)
        return report(crpm_error(CRPM_ERR_INVAL, "%s: the statistics struct has %zu bytes, less than the %zu of "
                                 "crpm_stats_t 2.0", fn, size, (size_t)STATS_SIZE_2_0), fn);
    if (!ctx)
        return report(crpm_error(CRPM_ERR_STATE, "%s: call crpm_init first", fn), fn);
    if (last)
        stats_out(last, &ctx->last, size);
    if (total)
        stats_out(total, &ctx->total, size);
    return CRPM_SUCCESS;
}

int crpm_set_progress(crpm_progress_fn fn, void *user, double every_s)
{
    crpm_progress_set_cb(fn, user, every_s);
    return CRPM_SUCCESS;
}

int(crpm_get_stats)(crpm_stats_t *last, crpm_stats_t *total)
{
    return crpm_get_stats_sized(last, total, STATS_SIZE_2_0);
}

const char *crpm_version(int *major, int *minor, int *patch)
{
    if (major)
        *major = CRPM_VERSION_MAJOR;
    if (minor)
        *minor = CRPM_VERSION_MINOR;
    if (patch)
        *patch = CRPM_VERSION_PATCH;
    return CRPM_VERSION_STRING;
}
