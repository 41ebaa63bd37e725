/* Team calls that disagree (issue 38, docs/threads.md), an OpenMP program at
 * 2 to 4 ranks, MPI_THREAD_MULTIPLE:
 *
 *   test_team_disagree DIR ROUNDS SEED
 *
 * Every round the ranks' OpenMP teams of NT threads make team calls whose
 * threads arrive in an order that differs per rank and per round (another
 * thread first on each rank).  Disagreeing rounds, all of which must end in
 * CRPM_ERR_STATE on every thread of every rank, and return (no hang):
 *   - on every rank one thread calls crpm_recover_team, the others
 *     crpm_checkpoint_team (a different thread on each rank);
 *   - one rank's team disagrees that way, the others checkpoint together;
 *   - one rank's threads pass different ids to crpm_checkpoint_team;
 *   - every team agrees, but one rank recovers while the others checkpoint.
 * Each is followed by a round that must succeed everywhere: a checkpoint of
 * the team (on one rank, now and then, a team of one outside the parallel
 * region, which agrees with the others' teams), or a recovery whose data is
 * checked.  At the end crpm_finalize must succeed. */
#define _GNU_SOURCE
#include <omp.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "crpm.h"

#define NT 4
#define CHUNK 4096 /* doubles per thread */

static int rank, nranks;
static double *data;
static int rcs[NT];
static char msgs[NT][512];

enum { CKPT, RECOVER };

static void fill(int epoch)
{
    for (size_t i = 0; i < (size_t)NT * CHUNK; i++)
        data[i] = (double)epoch * 1e6 + rank * 1e4 + (double)i;
}

static size_t wrong(int epoch)
{
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)NT * CHUNK; i++)
        bad += data[i] != (double)epoch * 1e6 + rank * 1e4 + (double)i;
    return bad;
}

/* One team call per thread: what[t] is its call, id[t] its checkpoint id;
 * thread t arrives after order[t] steps of 3 ms. */
static void team_round(const int what[NT], const int id[NT], const int order[NT])
{
#pragma omp parallel num_threads(NT)
    {
        int t = omp_get_thread_num();
        usleep((useconds_t)order[t] * 3000);
        int rc = what[t] == RECOVER ? crpm_recover_team() : crpm_checkpoint_team(id[t], CRPM_L1);
        rcs[t] = rc;
        snprintf(msgs[t], sizeof msgs[t], "%s", rc ? crpm_last_error() : "");
    }
}

static void expect_all(int want, const char *round, int r)
{
    for (int t = 0; t < NT; t++) {
        CHECK(rcs[t] == want, "round %d (%s), thread %d: %d (%s), expected %d", r, round, t, rcs[t],
              crpm_strerror(rcs[t]), want);
        if (want == CRPM_ERR_STATE) {
            CHECK(strstr(msgs[t], "_team") && strstr(msgs[t], "nothing was done"),
                  "round %d (%s), thread %d: message does not say which call failed and that nothing was done: %s",
                  r, round, t, msgs[t]);
            CHECK(strcmp(msgs[t], msgs[0]) == 0, "round %d (%s): threads 0 and %d got different messages: '%s' / '%s'",
                  r, round, t, msgs[0], msgs[t]);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test_team_disagree DIR ROUNDS SEED\n");
        return 2;
    }
    int got;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &got);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_set_rank(rank);
    if (got < MPI_THREAD_MULTIPLE) {
        if (rank == 0)
            printf("SKIP: MPI provides thread level %d, not MPI_THREAD_MULTIPLE\n", got);
        MPI_Finalize();
        return CHECK_SKIP;
    }
    int rounds = atoi(argv[2]);
    uint64_t seed = strtoull(argv[3], NULL, 10);
    char dir[512], cfg[1024];
    snprintf(dir, sizeof dir, "%s/crpm-team-disagree-%ld", argv[1], (long)getppid());
    snprintf(cfg, sizeof cfg, "[basic]\nckpt_dir = %s\njob_name = disagree\nkeep_last_ckpt = 0\n[advanced]\n"
             "threads = 2\n", dir);
    REQUIRE(crpm_init_text(cfg, "test_team_disagree", MPI_COMM_WORLD) == 0, "init: %s", crpm_last_error());
    data = malloc((size_t)NT * CHUNK * sizeof(double));
    REQUIRE(data, "malloc");
    REQUIRE(crpm_protect(1, data, (int64_t)NT * CHUNK, CRPM_DOUBLE) == 0, "protect: %s", crpm_last_error());

    int what[NT], id[NT], order[NT], next_id = 1, saved = 0;
    /* the first checkpoint, every thread agreeing */
    fill(next_id);
    for (int t = 0; t < NT; t++) {
        what[t] = CKPT;
        id[t] = next_id;
        order[t] = (t + rank) % NT;
    }
    team_round(what, id, order);
    expect_all(0, "first checkpoint", 0);
    saved = next_id++;

    uint64_t rs = seed; /* the same draws on every rank */
    for (int r = 1; r <= rounds; r++) {
        int kind = (int)rnd_below(&rs, 4), odd_rank = (int)rnd_below(&rs, (uint64_t)nranks);
        int shift = (int)rnd_below(&rs, NT), odd_thread = (r + rank) % NT;
        for (int t = 0; t < NT; t++) { /* another thread first on each rank */
            order[t] = (t + shift + rank) % NT;
            what[t] = CKPT;
            id[t] = next_id;
        }
        const char *name = "";
        switch (kind) {
        case 0:
            name = "one thread recovers on every rank";
            what[odd_thread] = RECOVER;
            break;
        case 1:
            name = "one thread recovers on one rank";
            if (rank == odd_rank)
                what[odd_thread] = RECOVER;
            break;
        case 2:
            name = "different ids on one rank";
            if (rank == odd_rank)
                id[odd_thread] = next_id + 1;
            break;
        case 3:
            name = "one rank recovers, the others checkpoint";
            if (rank == odd_rank)
                for (int t = 0; t < NT; t++)
                    what[t] = RECOVER;
            break;
        }
        fill(next_id);
        team_round(what, id, order);
        expect_all(CRPM_ERR_STATE, name, r);
        if (r <= 4) /* what a user reads */
            printf("rank %d, round %d (%s): %s\n", rank, r, name, msgs[0]);

        /* the library is still usable: a consistent call works */
        for (int t = 0; t < NT; t++)
            id[t] = next_id;
        if (r % 3 == 0) {
            fill(next_id + 7); /* changed since the last checkpoint */
            for (int t = 0; t < NT; t++)
                what[t] = RECOVER;
            team_round(what, id, order);
            expect_all(0, "recovery after a disagreement", r);
            size_t bad = wrong(saved);
            CHECK(bad == 0, "round %d: %zu values not recovered to checkpoint %d", r, bad, saved);
        } else if (r % 3 == 1 && rank == odd_rank) {
            /* a team of one here (outside a parallel region), teams of NT elsewhere */
            int rc = crpm_checkpoint_team(next_id, CRPM_L1);
            for (int t = 0; t < NT; t++) {
                rcs[t] = rc;
                msgs[t][0] = '\0';
            }
            expect_all(0, "checkpoint by a team of one beside teams", r);
            saved = next_id++;
        } else {
            for (int t = 0; t < NT; t++)
                what[t] = CKPT;
            team_round(what, id, order);
            expect_all(0, "checkpoint after a disagreement", r);
            saved = next_id++;
        }
    }
    CHECK(crpm_finalize() == 0, "finalize: %s", crpm_last_error());
    free(data);
    int fails = check_failures(), all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        rmdir(dir);
        printf("test_team_disagree: %d ranks, %d rounds: %s (%d checks on rank 0)\n", nranks, rounds,
               all ? "FAILED" : "passed", check_count());
    }
    MPI_Finalize();
    return all ? 1 : 0;
}
