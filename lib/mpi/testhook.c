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

/* A follower level's points: level x 100 + its own (1, 2, 3), apart from
 * the container's. */
#define LEVEL_BASE 100
static const char *const level_points[] = {"sent", "applied", "committed"};
#define RESHAPE_REMOVING 90 /* reshape.c: old rank count's files about to go (below LEVEL_BASE) */
#define RESHAPE_REBUILT 91  /* reshape_l3.c: a rebuilt container written, not yet renamed into place */
/* background.c: a drain picked up (nothing of it written yet), and a drain
 * whose levels every rank committed (before the application learns it) */
#define DRAIN_START 92
#define DRAIN_COMMITTED 93

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
        if (sscanf(p, "%d:%31[a-z_0-9]:%d%n", &r, point, &n, &end) != 3 || (p[end] && p[end] != ',') || n < 1)
            return crpm_error(CRPM_ERR_CONFIG, "CRPM_TEST_KILL='%s': expected <rank>:<point>:<n>[,...]", v);
        int pt = strcmp(point, "before_data") == 0    ? CRPM_HOOK_BEFORE_DATA
                 : strcmp(point, "after_data") == 0   ? CRPM_HOOK_AFTER_DATA
                 : strcmp(point, "after_commit") == 0 ? CRPM_HOOK_AFTER_COMMIT
                 : strcmp(point, "reshape_removing") == 0 ? RESHAPE_REMOVING
                 : strcmp(point, "reshape_rebuilt") == 0 ? RESHAPE_REBUILT
                 : strcmp(point, "drain_start") == 0      ? DRAIN_START
                 : strcmp(point, "drain_committed") == 0  ? DRAIN_COMMITTED
                                                      : 0;
        int lv = 0, off = 0;
        if (!pt && sscanf(point, "l%d_%n", &lv, &off) == 1 && off > 0 && lv > CRPM_L1 && lv < LEVEL_BASE)
            for (int i = 0; i < 3; i++)
                if (strcmp(point + off, level_points[i]) == 0)
                    pt = LEVEL_BASE * lv + 1 + i;
        if (!pt)
            return crpm_error(CRPM_ERR_CONFIG, "CRPM_TEST_KILL='%s': point must be before_data, after_data, "
                              "after_commit, l2_sent, l2_applied, l2_committed, l3_sent, l3_applied, l3_committed, "
                              "reshape_removing, reshape_rebuilt, drain_start or drain_committed", v);
        if (r == ctx->rank && ctx->nkills < (int)(sizeof ctx->kills / sizeof ctx->kills[0])) {
            ctx->kills[ctx->nkills].point = pt;
            ctx->kills[ctx->nkills].n = n;
            ctx->nkills++;
        }
        p += end + (p[end] == ',');
    }
    return CRPM_SUCCESS;
}

/* The baselines CRPM_BENCH_BASELINE may name. */
static const char *const known_baselines[] = {"l2_full_copy", "l3_full_encode"};
#define NBASELINES ((int)(sizeof known_baselines / sizeof known_baselines[0]))

/* CRPM_BENCH_BASELINE as flags (bit i: known_baselines[i]); -1 (with the
 * error set) if malformed. */
static int baselines(void)
{
    const char *v = getenv("CRPM_BENCH_BASELINE");
    int flags = 0;
    for (const char *p = v ? v : ""; *p;) {
        size_t len = strcspn(p, ",");
        int f = 0;
        for (int i = 0; i < NBASELINES; i++)
            if (strlen(known_baselines[i]) == len && strncmp(p, known_baselines[i], len) == 0)
                f = 1 << i;
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

int crpm_testhook_baseline(const char *name)
{
    int b = baselines();
    for (int i = 0; b > 0 && i < NBASELINES; i++)
        if (strcmp(name, known_baselines[i]) == 0)
            return (b >> i) & 1;
    return 0;
}

int crpm_testhook_parse(crpm_ctx *ctx)
{
    int rc = parse_kills(ctx);
    int b = rc == CRPM_SUCCESS ? baselines() : 0;
    if (b < 0)
        return CRPM_ERR_CONFIG;
    if (ctx->rank == 0 && (b & 1))
        printf("[crpm] benchmark baseline l2_full_copy: level 2 sends whole containers\n");
    if (ctx->rank == 0 && (b & 2))
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

/* The follower levels' hooks: the context and the level's base, by level. */
static struct level_hook {
    crpm_ctx *ctx;
    int base;
} level_hooks[LEVEL_BASE];

static void level_hook(void *arg, int point)
{
    const struct level_hook *h = arg;
    kill_hook(h->ctx, h->base + point, 0);
}

void crpm_testhook_level(crpm_ctx *ctx, int level, void (**hook)(void *arg, int point), void **arg)
{
    if (!ctx->nkills || level <= CRPM_L1 || level >= LEVEL_BASE)
        return;
    level_hooks[level] = (struct level_hook){ctx, LEVEL_BASE * level};
    *hook = level_hook;
    *arg = &level_hooks[level];
}

void crpm_testhook_point(crpm_ctx *ctx, const char *point)
{
    if (strcmp(point, "reshape_removing") == 0)
        kill_hook(ctx, RESHAPE_REMOVING, 0);
    static int rebuilt; /* this point counts the containers the rank rebuilt, not checkpoints */
    if (strcmp(point, "reshape_rebuilt") == 0) {
        rebuilt++;
        for (int i = 0; i < ctx->nkills; i++)
            if (ctx->kills[i].point == RESHAPE_REBUILT && rebuilt == ctx->kills[i].n)
                raise(SIGKILL);
    }
    if (strcmp(point, "drain_start") == 0)
        kill_hook(ctx, DRAIN_START, 0);
    else if (strcmp(point, "drain_committed") == 0)
        kill_hook(ctx, DRAIN_COMMITTED, 0);
}

int crpm_testhook_env(const char *var)
{
    const char *v = getenv(var);
    return v && *v && strcmp(v, "0") != 0;
}

int crpm_testhook_skip_data_check(void) { return crpm_testhook_env("CRPM_TEST_SKIP_DATA_CHECK"); }

int crpm_testhook_drain_delay_ms(void)
{
    const char *v = getenv("CRPM_TEST_DRAIN_DELAY_MS");
    int ms = v ? atoi(v) : 0;
    return ms > 0 && ms < 600000 ? ms : 0;
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
