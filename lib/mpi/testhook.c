/* Internal test and benchmark hooks (testhook.h): compiled only with
 * CRPM_TEST_HOOKS (lib/CMakeLists.txt adds this file then). */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "error.h"
#include "testhook.h"

/* level 2's and level 3's points, apart from the container's */
#define L2_BASE 100
#define L3_BASE 200
#define RESHAPE_REMOVING 301 /* reshape.c: old rank count's files about to go */

enum { BASE_L2_FULL_COPY = 1, BASE_L3_FULL_ENCODE = 2 };

static void kill_hook(void *arg, int point, uint64_t epoch)
{
    crpm_ctx *ctx = arg;
    (void)epoch;
    for (int i = 0; i < ctx->nkills; i++)
        if (point == ctx->kills[i].point && ctx->ckpt_count == (uint64_t)ctx->kills[i].n)
            raise(SIGKILL);
}

static int parse_kills(crpm_ctx *ctx)
{
    const char *v = getenv("CRPM_TEST_KILL");
    if (!v || !*v)
        return CRPM_SUCCESS;
    for (const char *p = v; *p;) {
        int r, n, end = 0;
        char point[32];
        if (sscanf(p, "%d:%31[a-z_23]:%d%n", &r, point, &n, &end) != 3 || (p[end] && p[end] != ',') || n < 1)
            return crpm_error(CRPM_ERR_CONFIG, "CRPM_TEST_KILL='%s': expected <rank>:<point>:<n>[,...]", v);
        int pt = strcmp(point, "before_data") == 0    ? CRPM_HOOK_BEFORE_DATA
                 : strcmp(point, "after_data") == 0   ? CRPM_HOOK_AFTER_DATA
                 : strcmp(point, "after_commit") == 0 ? CRPM_HOOK_AFTER_COMMIT
                 : strcmp(point, "l2_sent") == 0      ? L2_BASE + CRPM_L2_HOOK_SENT
                 : strcmp(point, "l2_applied") == 0   ? L2_BASE + CRPM_L2_HOOK_APPLIED
                 : strcmp(point, "l2_committed") == 0 ? L2_BASE + CRPM_L2_HOOK_COMMITTED
                 : strcmp(point, "l3_sent") == 0      ? L3_BASE + CRPM_L3_HOOK_SENT
                 : strcmp(point, "l3_applied") == 0   ? L3_BASE + CRPM_L3_HOOK_APPLIED
                 : strcmp(point, "l3_committed") == 0 ? L3_BASE + CRPM_L3_HOOK_COMMITTED
                 : strcmp(point, "reshape_removing") == 0 ? RESHAPE_REMOVING
                                                      : 0;
        if (!pt)
            return crpm_error(CRPM_ERR_CONFIG, "CRPM_TEST_KILL='%s': point must be before_data, after_data, "
                              "after_commit, l2_sent, l2_applied, l2_committed, l3_sent, l3_applied, l3_committed or reshape_removing", v);
        if (r == ctx->rank && ctx->nkills < (int)(sizeof ctx->kills / sizeof ctx->kills[0])) {
            ctx->kills[ctx->nkills].point = pt;
            ctx->kills[ctx->nkills].n = n;
            ctx->nkills++;
        }
        p += end + (p[end] == ',');
    }
    return CRPM_SUCCESS;
}

/* CRPM_BENCH_BASELINE as BASE_* flags; -1 (with the error set) if malformed. */
static int baselines(void)
{
    static const struct { const char *name; int flag; } known[] = {
        {"l2_full_copy", BASE_L2_FULL_COPY}, {"l3_full_encode", BASE_L3_FULL_ENCODE}};
    const char *v = getenv("CRPM_BENCH_BASELINE");
    int flags = 0;
    for (const char *p = v ? v : ""; *p;) {
        size_t len = strcspn(p, ",");
        int f = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
            if (strlen(known[i].name) == len && strncmp(p, known[i].name, len) == 0)
                f = known[i].flag;
        if (!f) {
            crpm_error(CRPM_ERR_CONFIG, "CRPM_BENCH_BASELINE='%s': expected l2_full_copy and/or l3_full_encode, "
                       "separated by commas", v);
            return -1;
        }
        flags |= f;
        p += len + (p[len] == ',');
    }
    return flags;
}

int crpm_testhook_parse(crpm_ctx *ctx)
{
    int rc = parse_kills(ctx);
    int b = rc == CRPM_SUCCESS ? baselines() : 0;
    if (b < 0)
        return CRPM_ERR_CONFIG;
    if (ctx->rank == 0 && (b & BASE_L2_FULL_COPY))
        printf("[crpm] benchmark baseline l2_full_copy: level 2 sends whole containers\n");
    if (ctx->rank == 0 && (b & BASE_L3_FULL_ENCODE))
        printf("[crpm] benchmark baseline l3_full_encode: level 3 re-encodes whole containers\n");
    if (ctx->rank == 0 && b)
        fflush(stdout);
    return rc;
}

void crpm_testhook_attach(crpm_ctx *ctx, crpm_container *c)
{
    if (ctx->nkills)
        crpm_container_set_hook(c, kill_hook, ctx);
}

static void l2_hook(void *arg, int point) { kill_hook(arg, L2_BASE + point, 0); }

void crpm_testhook_l2(crpm_ctx *ctx, crpm_l2_opts *o)
{
    if (ctx->nkills) {
        o->hook = l2_hook;
        o->hook_arg = ctx;
    }
    int b = baselines();
    o->full_copy = b > 0 && (b & BASE_L2_FULL_COPY);
}

static void l3_hook(void *arg, int point) { kill_hook(arg, L3_BASE + point, 0); }

void crpm_testhook_l3(crpm_ctx *ctx, crpm_l3_opts *o)
{
    if (ctx->nkills) {
        o->hook = l3_hook;
        o->hook_arg = ctx;
    }
    const char *v = getenv("CRPM_TEST_L3_VERIFY");
    o->verify = v && *v && strcmp(v, "0") != 0;
    int b = baselines();
    o->full_encode = b > 0 && (b & BASE_L3_FULL_ENCODE);
}

void crpm_testhook_point(crpm_ctx *ctx, const char *point)
{
    if (strcmp(point, "reshape_removing") == 0)
        kill_hook(ctx, RESHAPE_REMOVING, 0);
}

int crpm_testhook_skip_data_check(void)
{
    const char *v = getenv("CRPM_TEST_SKIP_DATA_CHECK");
    return v && *v && strcmp(v, "0") != 0;
}

void crpm_testhook_pause(const char *point, int rank)
{
    const char *v = getenv("CRPM_TEST_PAUSE");
    size_t n = strlen(point);
    if (!v || strncmp(v, point, n) != 0 || v[n] != ':' || !v[n + 1])
        return;
    char p[4096];
    snprintf(p, sizeof p, "%s/%s.%d", v + n + 1, point, rank);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0)
        close(fd);
    snprintf(p, sizeof p, "%s/%s.go", v + n + 1, point);
    struct timespec nap = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 12000 && access(p, F_OK) != 0; i++)
        nanosleep(&nap, NULL);
}
