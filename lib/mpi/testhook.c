/* Internal test hook (testhook.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "testhook.h"

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
        if (sscanf(p, "%d:%31[a-z_]:%d%n", &r, point, &n, &end) != 3 || (p[end] && p[end] != ',') || n < 1)
            return crpm_error(CRPM_ERR_CONFIG, "CRPM_TEST_KILL='%s': expected <rank>:<point>:<n>[,...]", v);
        int pt = strcmp(point, "before_data") == 0    ? CRPM_HOOK_BEFORE_DATA
                 : strcmp(point, "after_data") == 0   ? CRPM_HOOK_AFTER_DATA
                 : strcmp(point, "after_commit") == 0 ? CRPM_HOOK_AFTER_COMMIT
                                                      : 0;
        if (!pt)
            return crpm_error(CRPM_ERR_CONFIG,
                              "CRPM_TEST_KILL='%s': point must be before_data, after_data or after_commit", v);
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
#endif
