/* Threads of a rank (issue 31, docs/threads.md), 2 ranks.
 *
 *   test_team DIR late
 *       MPI_THREAD_MULTIPLE, a pthreads team of 4 named by crpm_team_begin:
 *       each thread protects its own array (at once), the team checkpoints
 *       with two threads arriving late; all return together with success.
 *       The arrays are then changed, freed and allocated anew (untouched);
 *       crpm_recover_team, again with a late thread, restores them exactly,
 *       and a punctual member other than the leader took some of the first
 *       touches (their own page faults: they did recovery tasks).
 *   test_team DIR funneled
 *       MPI_THREAD_FUNNELED: the thread that called crpm_init leads and
 *       arrives last; the others wait for it and serve; exact recovery.
 *   test_team DIR misuse
 *       while rank 0's main thread is inside crpm_checkpoint (rank 1 comes
 *       late, so it waits in the agreement), a second thread's
 *       crpm_checkpoint, crpm_recover and crpm_protect fail with
 *       CRPM_ERR_STATE, so does a team of two threads' crpm_checkpoint_team,
 *       and the first checkpoint commits intact; a team whose
 *       threads make different team calls fails on every thread with
 *       CRPM_ERR_STATE; crpm_team_begin(0) is CRPM_ERR_INVAL. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "crpm.h"

#define NT 4
#define ELEMS (1u << 20) /* per thread: 1 Mi doubles (8 MiB) */

static int rank;
static char cfgtext[1024];
static double *arr[NT];
static pthread_barrier_t bar;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static long thread_faults(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return ru.ru_minflt;
}

static void fill(int t, int epoch)
{
    for (size_t i = 0; i < ELEMS; i++)
        arr[t][i] = (double)(epoch * 1000003 + rank * 7919 + t) + (double)i * 0.5;
}

static size_t wrong(int t, int epoch)
{
    size_t bad = 0;
    for (size_t i = 0; i < ELEMS; i++)
        bad += arr[t][i] != (double)(epoch * 1000003 + rank * 7919 + t) + (double)i * 0.5;
    return bad;
}

typedef struct member {
    int t;
    int delay_ms;     /* before each team call */
    int rc_ck, rc_protect, rc_rec;
    double arrived, returned; /* of the checkpoint */
    double rarrived, rreturned; /* of the recovery */
    long faults;      /* page faults during the recovery */
} member;

static void sleep_ms(int ms)
{
    if (ms > 0)
        usleep((useconds_t)ms * 1000);
}

static void *member_run(void *arg)
{
    member *m = arg;
    int t = m->t;
    arr[t] = malloc(ELEMS * sizeof(double));
    fill(t, 1);
    m->rc_protect = crpm_protect(10 + t, arr[t], ELEMS, CRPM_DOUBLE); /* all threads at once */
    pthread_barrier_wait(&bar);
    sleep_ms(m->delay_ms);
    m->arrived = now();
    m->rc_ck = crpm_checkpoint_team(1, CRPM_L1);
    m->returned = now();
    /* changed, then replaced by fresh memory that recovery touches first */
    fill(t, 2);
    free(arr[t]);
    arr[t] = malloc(ELEMS * sizeof(double));
    int rc = crpm_protect(10 + t, arr[t], ELEMS, CRPM_DOUBLE);
    if (rc && !m->rc_protect)
        m->rc_protect = rc;
    pthread_barrier_wait(&bar);
    sleep_ms(m->delay_ms);
    long f0 = thread_faults();
    m->rarrived = now();
    m->rc_rec = crpm_recover_team();
    m->rreturned = now();
    m->faults = thread_faults() - f0;
    return NULL;
}

/* A team of NT: thread 0 is the caller (the thread that called crpm_init). */
static void run_team(const int delays[NT], int want_guest_faults)
{
    member m[NT];
    pthread_t tid[NT];
    pthread_barrier_init(&bar, NULL, NT);
    REQUIRE(crpm_team_begin(NT) == 0, "crpm_team_begin: %s", crpm_last_error());
    for (int t = 0; t < NT; t++) {
        m[t] = (member){.t = t, .delay_ms = delays[t]};
        if (t)
            REQUIRE(pthread_create(&tid[t], NULL, member_run, &m[t]) == 0, "pthread_create");
    }
    member_run(&m[0]);
    for (int t = 1; t < NT; t++)
        pthread_join(tid[t], NULL);
    pthread_barrier_destroy(&bar);
    CHECK(crpm_team_end() == 0, "crpm_team_end");
    double last = 0, rlast = 0;
    for (int t = 0; t < NT; t++) {
        last = m[t].arrived > last ? m[t].arrived : last;
        rlast = m[t].rarrived > rlast ? m[t].rarrived : rlast;
    }
    long punctual = 0, top = 0, all_faults = 0;
    for (int t = 0; t < NT; t++) {
        CHECK(m[t].rc_protect == 0, "thread %d: crpm_protect: %s", t, crpm_strerror(m[t].rc_protect));
        CHECK(m[t].rc_ck == 0, "thread %d: crpm_checkpoint_team: %s", t, crpm_strerror(m[t].rc_ck));
        CHECK(m[t].rc_rec == 0, "thread %d: crpm_recover_team: %s", t, crpm_strerror(m[t].rc_rec));
        CHECK(m[t].returned >= last, "thread %d returned from the checkpoint %.3f s before the last member arrived",
              t, last - m[t].returned);
        CHECK(m[t].rreturned >= rlast, "thread %d returned from the recovery %.3f s before the last member "
              "arrived", t, rlast - m[t].rreturned);
        size_t bad = wrong(t, 1);
        CHECK(bad == 0, "thread %d: %zu elements not recovered", t, bad);
        all_faults += m[t].faults;
        if (m[t].delay_ms < 100) {
            punctual += m[t].faults;
            top = m[t].faults > top ? m[t].faults : top;
        }
        free(arr[t]);
    }
    if (want_guest_faults) /* whichever punctual member led, another punctual one did tasks */
        CHECK(punctual - top > 0, "one member took all %ld first touches of the punctual ones (%ld in all)", top,
              all_faults);
}

static void test_late(void)
{
    /* MULTIPLE: the first to arrive leads (thread 0 or 1), two come late */
    const int delays[NT] = {0, 0, 150, 300};
    run_team(delays, 1);
}

static void test_funneled(void)
{
    const int delays[NT] = {250, 0, 0, 100}; /* the only possible leader comes last */
    run_team(delays, 0);
}

/* ---- misuse ---------------------------------------------------------------------- */

static atomic_int inside, intruders_done;
static int rc2[4];

/* Rank 1 enters its checkpoint only when rank 0's three intruders are done
 * (the last one tells it), so rank 0's main thread stays inside
 * crpm_checkpoint, waiting for rank 1, all the while they try: no sleep has
 * to outlast them on a loaded machine. */
static void intruder_done(void)
{
    if (atomic_fetch_add(&intruders_done, 1) == 2) {
        int go = 1;
        MPI_Send(&go, 1, MPI_INT, 1, 4242, MPI_COMM_WORLD);
    }
}

static void *intruder(void *arg)
{
    (void)arg;
    while (!atomic_load(&inside))
        usleep(1000);
    usleep(300 * 1000); /* the main thread is in crpm_checkpoint now (rank 1 is late) */
    double x = 1;
    rc2[0] = crpm_checkpoint(99, CRPM_L1);
    rc2[1] = crpm_recover();
    rc2[2] = crpm_protect(77, &x, 1, CRPM_DOUBLE);
    rc2[3] = crpm_snapshot();
    intruder_done();
    return NULL;
}

typedef struct mixed_arg {
    int t, rc;
} mixed_arg;

/* a team of 2 that checkpoints while the main thread is in crpm_checkpoint */
static void *team_intruder(void *arg)
{
    mixed_arg *a = arg;
    while (!atomic_load(&inside))
        usleep(1000);
    usleep(300 * 1000);
    a->rc = crpm_checkpoint_team(98, CRPM_L1);
    intruder_done();
    return NULL;
}

static void *mixed_member(void *arg)
{
    mixed_arg *a = arg;
    a->rc = a->t == 1 ? crpm_recover_team() : crpm_checkpoint_team(3, CRPM_L1);
    return NULL;
}

static void test_misuse(void)
{
    arr[0] = malloc(ELEMS * sizeof(double));
    fill(0, 1);
    REQUIRE(crpm_protect(10, arr[0], ELEMS, CRPM_DOUBLE) == 0, "protect");
    pthread_t tid, ttid[2];
    mixed_arg ta[2] = {{0, 0}, {1, 0}};
    REQUIRE(crpm_team_begin(2) == 0, "crpm_team_begin(2)");
    if (rank == 0) {
        REQUIRE(pthread_create(&tid, NULL, intruder, NULL) == 0, "pthread_create");
        for (int t = 0; t < 2; t++)
            REQUIRE(pthread_create(&ttid[t], NULL, team_intruder, &ta[t]) == 0, "pthread_create");
    }
    atomic_store(&inside, 1);
    if (rank == 1) { /* late: until rank 0's intruders are done */
        int go;
        MPI_Recv(&go, 1, MPI_INT, 0, 4242, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    int rc = crpm_checkpoint(1, CRPM_L1);
    CHECK(rc == 0, "the first thread's checkpoint: %s", crpm_strerror(rc));
    if (rank == 0) {
        pthread_join(tid, NULL);
        const char *what[4] = {"crpm_checkpoint", "crpm_recover", "crpm_protect", "crpm_snapshot"};
        for (int i = 0; i < 4; i++)
            CHECK(rc2[i] == CRPM_ERR_STATE, "a second thread's %s during a checkpoint: %d (%s), not CRPM_ERR_STATE",
                  what[i], rc2[i], crpm_strerror(rc2[i]));
        for (int t = 0; t < 2; t++) {
            pthread_join(ttid[t], NULL);
            CHECK(ta[t].rc == CRPM_ERR_STATE, "member %d of a team checkpointing during a checkpoint: %d (%s), not "
                  "CRPM_ERR_STATE", t, ta[t].rc, crpm_strerror(ta[t].rc));
        }
    }
    CHECK(crpm_team_end() == 0, "crpm_team_end");
    fill(0, 2);
    rc = crpm_recover();
    CHECK(rc == 0, "recover: %s", crpm_strerror(rc));
    size_t bad = wrong(0, 1);
    CHECK(bad == 0, "%zu elements not as checkpointed", bad);

    /* a team whose threads disagree */
    REQUIRE(crpm_team_begin(2) == 0, "crpm_team_begin(2)");
    mixed_arg a[2] = {{0, 0}, {1, 0}};
    REQUIRE(pthread_create(&tid, NULL, mixed_member, &a[1]) == 0, "pthread_create");
    mixed_member(&a[0]);
    pthread_join(tid, NULL);
    for (int t = 0; t < 2; t++)
        CHECK(a[t].rc == CRPM_ERR_STATE, "thread %d of a team with mixed calls: %d (%s), not CRPM_ERR_STATE", t,
              a[t].rc, crpm_strerror(a[t].rc));
    CHECK(crpm_team_end() == 0, "crpm_team_end");
    CHECK(crpm_team_begin(0) == CRPM_ERR_INVAL, "crpm_team_begin(0) accepted");
    CHECK(crpm_team_begin(100000) == CRPM_ERR_INVAL, "crpm_team_begin(100000) accepted");
    /* the library still works, and the data is intact */
    fill(0, 3);
    CHECK(crpm_recover() == 0, "recover after the misuse: %s", crpm_last_error());
    bad = wrong(0, 1);
    CHECK(bad == 0, "%zu elements not as checkpointed after the misuse", bad);
    free(arr[0]);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_team DIR late|funneled|misuse\n");
        return 2;
    }
    const char *mode = argv[2];
    int want = strcmp(mode, "funneled") == 0 ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE, got;
    MPI_Init_thread(&argc, &argv, want, &got);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    check_set_rank(rank);
    check_set_note(crpm_last_error);
    if (got < want) {
        if (rank == 0)
            printf("SKIP: MPI provides thread level %d, not %d\n", got, want);
        MPI_Finalize();
        return CHECK_SKIP;
    }
    char dir[512];
    snprintf(dir, sizeof dir, "%s/crpm-team-%s-%ld", argv[1], mode, (long)getppid());
    /* 2 workers of its own: a team replaces them while it lends its threads */
    snprintf(cfgtext, sizeof cfgtext,
             "[basic]\nckpt_dir = %s\njob_name = team\nkeep_last_ckpt = 0\n[advanced]\nthreads = 2\n", dir);
    REQUIRE(crpm_init_text(cfgtext, "test_team", MPI_COMM_WORLD) == 0, "init: %s", crpm_last_error());
    if (strcmp(mode, "late") == 0)
        test_late();
    else if (strcmp(mode, "funneled") == 0)
        test_funneled();
    else if (strcmp(mode, "misuse") == 0)
        test_misuse();
    else
        REQUIRE(0, "unknown mode %s", mode);
    CHECK(crpm_finalize() == 0, "finalize: %s", crpm_last_error());
    int fails = check_failures(), all = 0;
    MPI_Allreduce(&fails, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        rmdir(dir); /* finalize removed the job's files: the empty ckpt_dir goes too */
    if (rank == 0)
        printf("test_team %s: %s (%d checks on rank 0)\n", mode, all ? "FAILED" : "passed", check_count());
    MPI_Finalize();
    return all ? 1 : 0;
}
