/* INI configuration: [basic] and [advanced] keys, environment overrides.
 * Every problem is reported with the file name and, when it comes from the
 * file, the line number. */
#include "config.h"

#include <ctype.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "initext.h"

#include "error.h"
#include "fsutil.h"
#include "format.h"  /* the container's default segment and block sizes */
#include "persist.h" /* enum crpm_persistence */
#include "stop.h"    /* end_time and exit_signal values */

enum key_id {
    K_CKPT_DIR, K_JOB_NAME, K_CKPT_INTERVAL, K_CKPT_INTERVAL_S, K_KEEP_LAST_CKPT, K_VERBOSITY,
    K_GLBL_DIR, K_CKPT_INTERVAL_L4, K_KEEP_L4, K_MTBF_S, K_MTBF_L4_S, K_NODE_SIZE, K_CKPT_INTERVAL_L2,
    K_CKPT_INTERVAL_L3, K_GROUP_SIZE, K_L3_PARITY, K_HEAP_SIZE, K_END_TIME, K_END_TIME_SAFETY, K_EXIT_SIGNAL,
    K_ASYNC, K_ASYNC_BACKPRESSURE, /* background levels (docs/async.md) */
    K_SEGMENT_SIZE, K_BLOCK_SIZE, K_PERSISTENCE, K_METHOD, K_CHANGE_TRACKING,
    K_LOCK_WAIT_S, K_ON_UNRECOVERABLE, K_HUGE_PAGES,
    K_HEAP_BASE, /* persistent heap (docs/heap.md) */
    K_DEVICE_MODE, /* GPU arrays (docs/gpu.md) */
    K_THREADS,   /* the engine's workers (docs/threads.md) */
    K_LOG_FILE,  /* the run log (docs/tools.md) */
    K_COUNT
};

static const struct key_desc {
    const char *section, *name;
} keys[K_COUNT] = {
    [K_CKPT_DIR] = {"basic", "ckpt_dir"},
    [K_JOB_NAME] = {"basic", "job_name"},
    [K_CKPT_INTERVAL] = {"basic", "ckpt_interval"},
    [K_CKPT_INTERVAL_S] = {"basic", "ckpt_interval_s"},
    [K_KEEP_LAST_CKPT] = {"basic", "keep_last_ckpt"},
    [K_VERBOSITY] = {"basic", "verbosity"},
    [K_GLBL_DIR] = {"basic", "glbl_dir"},
    [K_CKPT_INTERVAL_L4] = {"basic", "ckpt_interval_l4"},
    [K_KEEP_L4] = {"basic", "keep_l4"},
    [K_MTBF_S] = {"basic", "mtbf_s"},
    [K_MTBF_L4_S] = {"basic", "mtbf_l4_s"},
    [K_NODE_SIZE] = {"basic", "node_size"},
    [K_CKPT_INTERVAL_L2] = {"basic", "ckpt_interval_l2"},
    [K_CKPT_INTERVAL_L3] = {"basic", "ckpt_interval_l3"},
    [K_GROUP_SIZE] = {"basic", "group_size"},
    [K_L3_PARITY] = {"basic", "l3_parity"},
    [K_HEAP_SIZE] = {"basic", "heap_size"},
    [K_END_TIME] = {"basic", "end_time"},
    [K_END_TIME_SAFETY] = {"basic", "end_time_safety"},
    [K_EXIT_SIGNAL] = {"basic", "exit_signal"},
    [K_ASYNC] = {"basic", "async"},
    [K_ASYNC_BACKPRESSURE] = {"basic", "async_backpressure"},
    [K_SEGMENT_SIZE] = {"advanced", "segment_size"},
    [K_BLOCK_SIZE] = {"advanced", "block_size"},
    [K_PERSISTENCE] = {"advanced", "persistence"},
    [K_METHOD] = {"advanced", "method"},
    [K_CHANGE_TRACKING] = {"advanced", "change_tracking"},
    [K_LOCK_WAIT_S] = {"advanced", "lock_wait_s"},
    [K_ON_UNRECOVERABLE] = {"advanced", "on_unrecoverable"},
    [K_HUGE_PAGES] = {"advanced", "huge_pages"},
    [K_HEAP_BASE] = {"advanced", "heap_base"},
    [K_DEVICE_MODE] = {"advanced", "device_mode"},
    [K_THREADS] = {"advanced", "threads"},
    [K_LOG_FILE] = {"advanced", "log_file"},
};

typedef struct parse_ctx {
    crpm_initext in;      /* text, line count, first error */
    const char *name;     /* file name for messages */
    crpm_config *cfg;
    int key_line[K_COUNT];
} parse_ctx;

void crpm_config_defaults(crpm_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    strcpy(cfg->job_name, "crpm");
    cfg->keep_l4 = 1;
    cfg->group_size = 4;
    cfg->l3_parity = 1;
    cfg->verbosity = 1;
    cfg->persistence = CRPM_PERSIST_AUTO;
    cfg->lock_wait_s = 5;
    cfg->end_time_safety = 2;
    cfg->heap_base = CRPM_HEAP_BASE_DEFAULT;
    cfg->device_mode = CRPM_DEVICE_DIFF;
}

static int parse_long(const char *v, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end != '\0' || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

/* Exactly 0 or 1, as documented: "yes" or "off" are rejected rather than
 * guessed. */
static int parse_bool(const char *v, int *out)
{
    if (strcmp(v, "0") != 0 && strcmp(v, "1") != 0)
        return -1;
    *out = v[0] == '1';
    return 0;
}

static int parse_seconds(const char *v, double *out)
{
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end != '\0' || !isfinite(d) || d < 0)
        return -1;
    *out = d;
    return 0;
}

/* Bytes with an optional binary suffix: 4096, 64K, 2M, 2MiB, 1G. */
static int parse_size(const char *v, uint64_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)v[0]))
        return -1;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v)
        return -1;
    unsigned shift = 0;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'K': shift = 10; break;
        case 'M': shift = 20; break;
        case 'G': shift = 30; break;
        case 'T': shift = 40; break;
        default: return -1;
        }
        end++;
        if (strcasecmp(end, "ib") == 0 || strcasecmp(end, "b") == 0)
            end += strlen(end);
        if (*end)
            return -1;
    }
    if (x > (UINT64_MAX >> shift))
        return -1;
    *out = (uint64_t)x << shift;
    return 0;
}

static int set_path(char *dst, const char *v)
{
    if (strlen(v) >= CRPM_PATH_MAX)
        return -1;
    strcpy(dst, v);
    return 0;
}

/* What a refused end_time should have been: 0 is singled out, since it
 * reads as "none" but is a time (1970); an empty value means none. */
static const char *end_time_expected(const char *v)
{
    double d;
    char *end;
    if (*v && strspn(v, "0.") == strlen(v) && (d = strtod(v, &end), d == 0 && !*end))
        return "a time after 1970-01-01T00:00:00Z (0 is no end time: leave end_time empty or remove it)";
    return "Unix seconds or an ISO 8601 time (2024-06-11T14:30:00Z) from 1970 to 9999-12-31, or nothing";
}

/* The [basic] keys of the levels beyond level 1 (set_basic's). */
static int set_level_key(crpm_config *cfg, int k, const char *value, const char **want)
{
    long l = 0;
    int ok = 1;
    switch (k) {
    case K_CKPT_INTERVAL_L4:
        cfg->ckpt_interval_l4_auto = strcmp(value, "auto") == 0;
        ok = cfg->ckpt_interval_l4_auto || parse_long(value, 0, 1L << 40, &l) == 0;
        cfg->ckpt_interval_l4 = l;
        *want = "a count of checkpoints from 0 (never) to 2^40, or auto";
        break;
    case K_CKPT_INTERVAL_L2:
        ok = parse_long(value, 0, 1L << 40, &l) == 0;
        cfg->ckpt_interval_l2 = l;
        *want = "a count of checkpoints from 0 (never) to 2^40";
        break;
    case K_CKPT_INTERVAL_L3:
        ok = parse_long(value, 0, 1L << 40, &l) == 0;
        cfg->ckpt_interval_l3 = l;
        *want = "a count of checkpoints from 0 (never) to 2^40";
        break;
    /* GF(2^8) Reed-Solomon: at most 255 units per codeword; a group of one
     * node could only hold parity of its own data. */
    case K_GROUP_SIZE:
        ok = parse_long(value, 2, 255, &l) == 0;
        cfg->group_size = l;
        *want = "nodes per group, 2 .. 255";
        break;
    case K_L3_PARITY:
        ok = parse_long(value, 1, 127, &l) == 0;
        cfg->l3_parity = l;
        *want = "parity units per codeword, 1 .. group_size / 2";
        break;
    }
    return ok;
}

/* [basic] keys: sets the key, *want says what a bad value should have been. */
static int set_basic(crpm_config *cfg, int k, const char *value, const char **want)
{
    if (k == K_CKPT_INTERVAL_L2 || k == K_CKPT_INTERVAL_L3 || k == K_CKPT_INTERVAL_L4 || k == K_GROUP_SIZE ||
        k == K_L3_PARITY)
        return set_level_key(cfg, k, value, want);
    long l = 0;
    int ok = 1;
    switch (k) {
    case K_CKPT_DIR:
        ok = *value && set_path(cfg->ckpt_dir, value) == 0;
        *want = "a non-empty path";
        break;
    case K_GLBL_DIR:
        ok = set_path(cfg->glbl_dir, value) == 0;
        *want = "a path";
        break;
    case K_JOB_NAME:
        ok = crpm_job_name_valid(value);
        if (ok)
            strcpy(cfg->job_name, value);
        *want = "a name of letters, digits, '.', '_' or '-'";
        break;
    case K_CKPT_INTERVAL:
        ok = parse_long(value, 0, 1L << 40, &l) == 0;
        cfg->ckpt_interval = l;
        *want = "a count of iterations from 0 (off) to 2^40";
        break;
    case K_CKPT_INTERVAL_S:
        cfg->ckpt_interval_auto = strcmp(value, "auto") == 0;
        ok = cfg->ckpt_interval_auto || parse_seconds(value, &cfg->ckpt_interval_s) == 0;
        *want = "seconds (0: off; a decimal number, at most about 1e308) or auto";
        break;
    case K_MTBF_S:
    case K_MTBF_L4_S: {
        double d = 0;
        ok = parse_seconds(value, &d) == 0 && d > 0;
        *(k == K_MTBF_S ? &cfg->mtbf_s : &cfg->mtbf_l4_s) = d;
        *want = "seconds > 0 (a decimal number, at most about 1e308)";
        break;
    }
    case K_NODE_SIZE:
        ok = parse_long(value, 0, 1L << 24, &l) == 0;
        cfg->node_size = (int)l;
        *want = "ranks per node from 1 to 2^24, or 0 to detect the nodes";
        break;
    case K_KEEP_LAST_CKPT:
        ok = parse_bool(value, &cfg->keep_last_ckpt) == 0;
        if (!ok && strcmp(value, "global") == 0) {
            cfg->keep_last_ckpt = CRPM_KEEP_GLOBAL;
            ok = 1;
        }
        *want = "0, 1 or global";
        break;
    case K_KEEP_L4:
        ok = parse_long(value, 1, 1000000, &l) == 0;
        cfg->keep_l4 = (int)l;
        *want = "a count of level-4 checkpoints from 1 to 1000000";
        break;
    case K_VERBOSITY:
        ok = parse_long(value, 0, 3, &l) == 0;
        cfg->verbosity = (int)l;
        *want = "0, 1, 2 or 3";
        break;
    case K_HEAP_SIZE: /* whole arenas of the heap (4 MiB) */
        ok = parse_size(value, &cfg->heap_size) == 0 && cfg->heap_size <= CRPM_HEAP_SIZE_MAX;
        cfg->heap_size = (cfg->heap_size + (4u << 20) - 1) & ~(uint64_t)((4u << 20) - 1);
        *want = "bytes up to 1T (suffix K, M, G or T; 0 = no heap)";
        break;
    case K_END_TIME:
        cfg->end_time = 0;
        ok = !*value || crpm_stop_parse_time(value, &cfg->end_time) == 0;
        *want = end_time_expected(value);
        break;
    case K_END_TIME_SAFETY:
        ok = parse_seconds(value, &cfg->end_time_safety) == 0 && cfg->end_time_safety >= 1 &&
             cfg->end_time_safety <= 100;
        *want = "a factor from 1 to 100";
        break;
    case K_EXIT_SIGNAL:
        cfg->exit_signal = 0;
        ok = !*value || crpm_stop_parse_signal(value, &cfg->exit_signal) == 0;
        *want = crpm_stop_signal_expected(value);
        break;
    case K_ASYNC:
        ok = parse_bool(value, &cfg->async) == 0;
        *want = "0 or 1";
        break;
    case K_ASYNC_BACKPRESSURE:
        ok = strcmp(value, "wait") == 0 || strcmp(value, "skip") == 0;
        cfg->async_skip = strcmp(value, "skip") == 0;
        *want = "wait or skip";
        break;
    }
    (void)l;
    return ok;
}

/* [advanced] keys: sets the key, *want says what a bad value should have been. */
static int set_advanced(crpm_config *cfg, int k, const char *value, const char **want)
{
    long l = 0;
    int ok = 1;
    switch (k) {
    case K_LOCK_WAIT_S:
        ok = parse_seconds(value, &cfg->lock_wait_s) == 0;
        *want = "seconds >= 0 (0: do not wait; a decimal number, at most about 1e308)";
        break;
    case K_ON_UNRECOVERABLE:
        if (strcmp(value, "error") == 0)
            cfg->on_unrecoverable_fresh = 0;
        else if (strcmp(value, "fresh") == 0)
            cfg->on_unrecoverable_fresh = 1;
        else
            ok = 0;
        *want = "error or fresh";
        break;
    case K_HUGE_PAGES:
        ok = parse_bool(value, &cfg->huge_pages) == 0;
        *want = "0 or 1";
        break;
    case K_THREADS:
        if (strcmp(value, "auto") == 0)
            cfg->threads = 0;
        else if ((ok = parse_long(value, 1, CRPM_THREADS_MAX, &l) == 0))
            cfg->threads = (int)l;
        *want = "auto or a number of threads from 1 to 1024";
        break;
    case K_SEGMENT_SIZE:
    case K_BLOCK_SIZE: {
        /* the container's limits (format/container.c), here with the file's line */
        uint64_t s = 0, lo = k == K_SEGMENT_SIZE ? 64 : 8;
        ok = parse_size(value, &s) == 0 && s >= lo && s <= (1ull << 30) && (s & (s - 1)) == 0;
        if (k == K_SEGMENT_SIZE)
            cfg->segment_size = s;
        else
            cfg->block_size = s;
        *want = k == K_SEGMENT_SIZE ? "a power of two from 64 bytes to 1G (suffix K, M or G allowed)"
                                    : "a power of two from 8 bytes to 1G (suffix K, M or G allowed)";
        break;
    }
    case K_PERSISTENCE:
        if (strcmp(value, "auto") == 0)
            cfg->persistence = CRPM_PERSIST_AUTO;
        else if (strcmp(value, "pmem") == 0)
            cfg->persistence = CRPM_PERSIST_PMEM;
        else if (strcmp(value, "msync") == 0)
            cfg->persistence = CRPM_PERSIST_MSYNC;
        else
            ok = 0;
        *want = "auto, pmem or msync";
        break;
    case K_METHOD:
        if (strcmp(value, "differential") == 0)
            cfg->method = CRPM_METHOD_DIFFERENTIAL;
        else if (strcmp(value, "full") == 0)
            cfg->method = CRPM_METHOD_FULL;
        else
            ok = 0;
        *want = "differential or full";
        break;
    case K_HEAP_BASE: {
        char *end;
        errno = 0;
        unsigned long long b = strtoull(value, &end, 0);
        ok = !errno && end != value && !*end && b && !(b & ((4u << 20) - 1)) && b < (1ull << 47);
        cfg->heap_base = b;
        *want = "an address that is a multiple of 4 MiB below 2^47, e.g. 0x10000000000";
        break;
    }
    case K_DEVICE_MODE:
        if (strcmp(value, "diff") == 0)
            cfg->device_mode = CRPM_DEVICE_DIFF;
        else if (strcmp(value, "fingerprint") == 0)
            cfg->device_mode = CRPM_DEVICE_FINGERPRINT;
        else if (strcmp(value, "full") == 0)
            cfg->device_mode = CRPM_DEVICE_FULL;
        else
            ok = 0;
        *want = "diff, fingerprint or full";
        break;
    case K_LOG_FILE: /* the run log (mpi/runlog.c): empty is off; relative is in ckpt_dir */
        ok = set_path(cfg->log_file, value) == 0;
        *want = "a file name or path";
        break;
    case K_CHANGE_TRACKING:
        if (strcmp(value, "compare") == 0)
            cfg->change_tracking = 0;
        else if (strcmp(value, "pagemap") == 0)
            cfg->change_tracking = 1;
        else if (strcmp(value, "instrumented") == 0)
            cfg->change_tracking = 2;
        else if (strcmp(value, "instrumented-verify") == 0)
            cfg->change_tracking = 3;
        else
            ok = 0;
        *want = "compare, pagemap, instrumented or instrumented-verify";
        break;
    }
    (void)l;
    return ok;
}

static int handler(void *user, const char *section, const char *name, const char *value)
{
    parse_ctx *ctx = user;
    crpm_config *cfg = ctx->cfg;
    int k;
    for (k = 0; k < K_COUNT; k++)
        if (strcmp(section, keys[k].section) == 0 && strcmp(name, keys[k].name) == 0)
            break;
    if (k == K_COUNT) {
        if (!*section)
            crpm_initext_fail(&ctx->in, "key '%s' outside a section ([basic] or [advanced])", name);
        else if (strcmp(section, "basic") && strcmp(section, "advanced"))
            crpm_initext_fail(&ctx->in, "unknown section [%s] (key '%s')", section, name);
        else
            crpm_initext_fail(&ctx->in, "unknown key '%s' in [%s]", name, section);
        return 0;
    }
    if (ctx->key_line[k]) {
        crpm_initext_fail(&ctx->in, "duplicate key '%s' (first set on line %d)", name, ctx->key_line[k]);
        return 0;
    }
    ctx->key_line[k] = ctx->in.line;

    const char *want = "";
    int ok = k < K_SEGMENT_SIZE ? set_basic(cfg, k, value, &want) : set_advanced(cfg, k, value, &want);
    if (!ok) {
        crpm_initext_fail(&ctx->in, "bad value '%s' for %s: expected %s", value, name, want);
        return 0;
    }
    return 1;
}

int crpm_config_parse(const char *text, const char *name, crpm_config *cfg)
{
    parse_ctx ctx = {.name = name, .cfg = cfg};
    crpm_config_defaults(cfg);
    int rc = crpm_initext_parse(&ctx.in, text, handler, &ctx);
    if (rc == -2)
        return crpm_error(CRPM_ERR_NOMEM, "config %s: out of memory while parsing", name);
    if (ctx.in.err_line)
        return crpm_error(CRPM_ERR_CONFIG, "config %s, line %d: %s", name, ctx.in.err_line, ctx.in.err);
    if (rc != 0)
        return crpm_error(CRPM_ERR_CONFIG, "config %s: cannot be parsed", name);

    const char *env = getenv("CRPM_CKPT_DIR");
    if (env && *env && set_path(cfg->ckpt_dir, env) != 0)
        return crpm_error(CRPM_ERR_CONFIG, "environment CRPM_CKPT_DIR: path too long");
    env = getenv("CRPM_JOB_NAME");
    if (env && *env) {
        if (!crpm_job_name_valid(env))
            return crpm_error(CRPM_ERR_CONFIG,
                              "environment CRPM_JOB_NAME='%s': expected letters, digits, '.', '_' or '-'", env);
        strcpy(cfg->job_name, env);
    }
    env = getenv("CRPM_END_TIME");
    if (env && *env) {
        if (crpm_stop_parse_time(env, &cfg->end_time) != 0)
            return crpm_error(CRPM_ERR_CONFIG, "environment CRPM_END_TIME='%s': expected %s", env,
                              end_time_expected(env));
        cfg->end_time_env = 1;
    }
    env = getenv("CRPM_THREADS");
    if (env && *env) {
        const char *want;
        if (!set_advanced(cfg, K_THREADS, env, &want))
            return crpm_error(CRPM_ERR_CONFIG, "environment CRPM_THREADS='%s': expected %s", env, want);
    }
    if (!cfg->ckpt_dir[0])
        return crpm_error(CRPM_ERR_CONFIG,
                          "config %s: required key ckpt_dir missing in [basic] (and CRPM_CKPT_DIR not set)", name);
    if ((cfg->ckpt_interval_l4 > 0 || cfg->ckpt_interval_l4_auto) && !cfg->glbl_dir[0])
        return crpm_error(CRPM_ERR_CONFIG, "config %s, line %d: ckpt_interval_l4 needs glbl_dir in [basic]", name,
                          ctx.key_line[K_CKPT_INTERVAL_L4]);
    /* The automatic interval needs the failure rate; a failure rate that no
     * automatic interval uses is a configuration mistake. */
    if (cfg->ckpt_interval_auto && !cfg->mtbf_s)
        return crpm_error(CRPM_ERR_CONFIG, "config %s, line %d: ckpt_interval_s = auto needs mtbf_s in [basic]",
                          name, ctx.key_line[K_CKPT_INTERVAL_S]);
    if (cfg->ckpt_interval_l4_auto && !cfg->mtbf_l4_s && !cfg->mtbf_s)
        return crpm_error(CRPM_ERR_CONFIG,
                          "config %s, line %d: ckpt_interval_l4 = auto needs mtbf_l4_s or mtbf_s in [basic]", name,
                          ctx.key_line[K_CKPT_INTERVAL_L4]);
    if (cfg->mtbf_s && !cfg->ckpt_interval_auto && !cfg->ckpt_interval_l4_auto)
        return crpm_error(CRPM_ERR_CONFIG, "config %s, line %d: mtbf_s is used only with ckpt_interval_s = auto or "
                          "ckpt_interval_l4 = auto", name, ctx.key_line[K_MTBF_S]);
    if (cfg->mtbf_l4_s && !cfg->ckpt_interval_l4_auto)
        return crpm_error(CRPM_ERR_CONFIG, "config %s, line %d: mtbf_l4_s is used only with ckpt_interval_l4 = auto",
                          name, ctx.key_line[K_MTBF_L4_S]);
    if (cfg->ckpt_interval_l4_auto && !cfg->mtbf_l4_s)
        cfg->mtbf_l4_s = cfg->mtbf_s;
    /* Beyond K/2 the parity would outweigh the data it protects (more
     * storage than level 2's copies).  The default l3_parity (1) always
     * fits, so the key was set. */
    if (cfg->l3_parity > cfg->group_size / 2)
        return crpm_error(CRPM_ERR_CONFIG, "config %s, line %d: l3_parity %ld exceeds group_size / 2 (group_size %ld)",
                          name, ctx.key_line[K_L3_PARITY], cfg->l3_parity, cfg->group_size);
    if (cfg->heap_size && cfg->heap_base + cfg->heap_size > (1ull << 47))
        return crpm_error(CRPM_ERR_CONFIG, "config %s, line %d: heap_size %llu at heap_base %#llx ends beyond the "
                          "user address space (2^47)", name, ctx.key_line[K_HEAP_SIZE],
                          (unsigned long long)cfg->heap_size, (unsigned long long)cfg->heap_base);
    uint64_t seg = cfg->segment_size ? cfg->segment_size : CRPM_DEFAULT_SEGMENT,
             blk = cfg->block_size ? cfg->block_size : CRPM_DEFAULT_BLOCK;
    if (blk > seg)
        return crpm_error(CRPM_ERR_CONFIG, "config %s, line %d: block_size %llu%s exceeds segment_size %llu%s", name,
                          ctx.key_line[cfg->block_size ? K_BLOCK_SIZE : K_SEGMENT_SIZE], (unsigned long long)blk,
                          cfg->block_size ? "" : " (the default)", (unsigned long long)seg,
                          cfg->segment_size ? "" : " (the default)");
    return CRPM_SUCCESS;
}

int crpm_config_read_file(const char *path, char **text, size_t *len)
{
    /* Non-blocking open and a regular-file check first: a FIFO or a device
     * (/dev/zero) would block or never end. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return crpm_error(CRPM_ERR_CONFIG, "config %s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return crpm_error(CRPM_ERR_CONFIG, "config %s: not a regular file", path);
    }
    if (st.st_size > CRPM_CONFIG_MAX) {
        close(fd);
        return crpm_error(CRPM_ERR_CONFIG, "config %s: %lld bytes, larger than the %d allowed for a configuration",
                          path, (long long)st.st_size, CRPM_CONFIG_MAX);
    }
    char *buf = malloc((size_t)CRPM_CONFIG_MAX + 2);
    size_t n = 0;
    int err = 0;
    while (buf && n <= (size_t)CRPM_CONFIG_MAX) {
        ssize_t r = read(fd, buf + n, (size_t)CRPM_CONFIG_MAX + 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            err = r < 0;
            break;
        }
        n += (size_t)r;
    }
    close(fd);
    if (!buf)
        return crpm_error(CRPM_ERR_NOMEM, "config %s: out of memory", path);
    if (!err && n > (size_t)CRPM_CONFIG_MAX) {
        free(buf);
        return crpm_error(CRPM_ERR_CONFIG, "config %s: larger than the %d bytes allowed for a configuration", path,
                          CRPM_CONFIG_MAX);
    }
    if (err) {
        free(buf);
        return crpm_error(CRPM_ERR_CONFIG, "config %s: read error", path);
    }
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        free(buf);
        return crpm_error(CRPM_ERR_CONFIG, "config %s: binary data in file", path);
    }
    *text = buf;
    *len = n;
    return CRPM_SUCCESS;
}
