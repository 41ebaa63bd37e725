/* The collective agreement (lib/comm/agree.c), blocking and idle: success
 * everywhere only when every rank succeeded; the failing rank keeps its own
 * code and the others get CRPM_ERR_REMOTE naming it with its message; the
 * extra values are reduced with MIN in the same round; a rank arriving late
 * at the idle agreement (the end of an unbalanced phase) is waited for, not
 * overtaken.  Run with 3 ranks. */
#define _POSIX_C_SOURCE 200809L /* nanosleep under -std=c11 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "agree.h"
#include "check.h"
#include "crpm_types.h"
#include "error.h"

static int rank, nranks;

static int call(int idle, int rc, const char *what)
{
    return idle ? crpm_agree_idle(MPI_COMM_WORLD, rank, rc, what) : crpm_agree(MPI_COMM_WORLD, rank, rc, what);
}

static void one_fails(int idle, int bad)
{
    const char *kind = idle ? "idle" : "blocking";
    int rc = rank == bad ? crpm_error(CRPM_ERR_IO, "disk %d is on fire", bad) : CRPM_SUCCESS;
    int got = call(idle, rc, "agree test");
    if (rank == bad) {
        CHECK(got == CRPM_ERR_IO, "%s: the failing rank got %d, not its own code", kind, got);
    } else {
        char want[64];
        snprintf(want, sizeof want, "failed on rank %d", bad);
        CHECK(got == CRPM_ERR_REMOTE, "%s: rank %d got %d, not CRPM_ERR_REMOTE", kind, rank, got);
        CHECK(strstr(crpm_last_error(), want) && strstr(crpm_last_error(), "disk") &&
                  strstr(crpm_last_error(), "on fire"),
              "%s: message '%s' does not name rank %d and its reason", kind, crpm_last_error(), bad);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_set_rank(rank);
    REQUIRE(nranks >= 2, "needs at least 2 ranks");
    for (int idle = 0; idle < 2; idle++) {
        CHECK(call(idle, CRPM_SUCCESS, "agree test") == CRPM_SUCCESS, "idle %d: all succeeded", idle);
        one_fails(idle, nranks - 1);
        one_fails(idle, 0);
        /* two failing ranks: the lowest is named everywhere else */
        int rc = rank == 0 ? CRPM_SUCCESS : crpm_error(CRPM_ERR_STATE, "rank %d broke", rank);
        int got = call(idle, rc, "agree test");
        CHECK(rank == 0 ? got == CRPM_ERR_REMOTE && strstr(crpm_last_error(), "failed on rank 1")
                        : got == CRPM_ERR_STATE,
              "idle %d, two failing: rank %d got %d (%s)", idle, rank, got, crpm_last_error());
    }
    /* the last rank comes late to the idle agreement, with an error: the
     * others must wait for it and learn of it */
    if (rank == nranks - 1) {
        struct timespec t = {0, 200 * 1000 * 1000};
        nanosleep(&t, NULL);
    }
    one_fails(1, nranks - 1);
    /* extras: min and max of a value in the same round */
    int64_t ext[2] = {10 + rank, -(10 + rank)};
    CHECK(crpm_agree_ext(MPI_COMM_WORLD, rank, CRPM_SUCCESS, "agree test", ext, 2) == CRPM_SUCCESS);
    CHECK(ext[0] == 10 && -ext[1] == 10 + nranks - 1, "extras: min %lld, max %lld", (long long)ext[0],
          (long long)-ext[1]);
    int fails = check_failures(), all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("agree: %d checks per rank, %d failures in all\n", check_count(), all);
    MPI_Finalize();
    return all ? 1 : 0;
}
