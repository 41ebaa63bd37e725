/* Which level crpm_snapshot's schedule (lib/mpi/schedule.c) picks for each
 * checkpoint: the fixed intervals ckpt_interval_l2/_l3/_l4, the automatic
 * level-4 interval, and the precedence L4 > L3 > L2 > L1 when several are
 * due.  One rank; MPI only for the automatic interval's agreement. */
#include <stdio.h>
#include <string.h>
#include <mpi.h>
#include "check.h"
#include "context.h"
#include "crpm_types.h"
#include "schedule.h"

static crpm_ctx ctx;

static void setup(long every, long l2, long l3, long l4)
{
    memset(&ctx, 0, sizeof ctx);
    crpm_config_defaults(&ctx.cfg);
    ctx.comm = MPI_COMM_WORLD;
    ctx.cfg.ckpt_interval = every;
    ctx.cfg.ckpt_interval_l2 = l2;
    ctx.cfg.ckpt_interval_l3 = l3;
    ctx.cfg.ckpt_interval_l4 = l4;
    crpm_schedule_start(&ctx);
}

/* Calls the schedule `calls` times and writes the level of each call as one
 * character, '.' for no checkpoint. */
static void run(int calls, char *out)
{
    for (int i = 0; i < calls; i++) {
        int level = -1;
        CHECK(crpm_schedule_due(&ctx, &level) == 0);
        out[i] = level ? (char)('0' + level) : '.';
        if (level) /* what crpm_checkpoint does */
            ctx.iters_since = 0;
    }
    out[calls] = '\0';
}

static void expect(const char *name, int calls, const char *want)
{
    char got[128];
    run(calls, got);
    CHECK(strcmp(got, want) == 0, "%s: levels %s, expected %s", name, got, want);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    check_set_note(crpm_last_error);

    /* one level alone */
    setup(1, 0, 0, 0);
    expect("level 1 only", 6, "111111");
    setup(1, 0, 3, 0);
    expect("level 3 every 3rd", 9, "113113113");
    setup(1, 0, 1, 0);
    expect("level 3 every one", 4, "3333");
    setup(2, 0, 2, 0);
    expect("every 2nd call, level 3 every 2nd checkpoint", 8, ".1.3.1.3");

    /* precedence when several are due on the same checkpoint: 6 (L2 and L3),
     * 10 (L2 and L4), 15 (L3 and L4), 30 (all three) */
    setup(1, 2, 3, 5);
    expect("L4 > L3 > L2 > L1", 30, "1232431234" "1312421314" "3213423214");
    setup(1, 1, 2, 0);
    expect("level 2 every one, level 3 every 2nd", 6, "232323");
    setup(1, 2, 1, 0);
    expect("level 3 every one wins over level 2", 4, "3333");
    setup(1, 0, 2, 2);
    expect("level 4 wins over level 3", 4, "1414");

    /* the automatic level-4 interval: always due, then never */
    setup(1, 2, 3, 0);
    ctx.cfg.ckpt_interval_l4_auto = 1;
    strcpy(ctx.cfg.glbl_dir, "/nonexistent");
    ctx.cfg.mtbf_l4_s = 3600;
    crpm_schedule_start(&ctx);
    ctx.auto_iv[1].interval_s = 0;
    expect("automatic level 4 due at every checkpoint", 4, "4444");
    ctx.auto_iv[1].interval_s = 1e9;
    ctx.auto_iv[1].nsamples = 1;
    expect("automatic level 4 not due (checkpoints 5 to 10)", 6, "131232");

    int fails = check_failures();
    if (fails == 0)
        printf("test_schedule: all passed\n");
    MPI_Finalize();
    return fails ? 1 : 0;
}
