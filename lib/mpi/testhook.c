/* Internal test hook (testhook.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "testhook.h"

/* level 2's points, apart from the container's */
#define L2_BASE 100
#define L3_BASE 200
#define RESHAPE_REMOVING 301 /* reshape.c: old rank count's files about to go */

#ifdef CRPM_TEST_HOOKS
static void kill_hook(void *arg, int point, uint64_t epoch)
{
    crpm_ctx *ctx = arg;
    (void)epoch;
    for (int i = 0; i < ctx->nkills; i++)
        if (point == ctx->kills[i].point && ctx->ckpt_count == (uint64_t)ctx->kills[i].n)
            raise(SIGKILL);
}

int crpm_testhook_parse(crpm_ctx *ctx)
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
}

void crpm_testhook_point(crpm_ctx *ctx, const char *point)
{
    if (strcmp(point, "reshape_removing") == 0)
        kill_hook(ctx, RESHAPE_REMOVING, 0);
}
#else
int crpm_testhook_parse(crpm_ctx *ctx)
{
    (void)ctx;
    return CRPM_SUCCESS;
}

void crpm_testhook_attach(crpm_ctx *ctx, crpm_container *c)
{
    (void)ctx;
    (void)c;
}

void crpm_testhook_l2(crpm_ctx *ctx, crpm_l2_opts *o)
{
    (void)ctx;
    (void)o;
}
void crpm_testhook_l3(crpm_ctx *ctx, crpm_l3_opts *o)
{
    (void)ctx;
    (void)o;
}

void crpm_testhook_point(crpm_ctx *ctx, const char *point)
{
    (void)ctx;
    (void)point;
}
#endif
