/* Real process kills: a child checkpoints ~32 MiB in a loop and is SIGKILLed;
 * after each kill the parent opens the container and checks that it holds
 * exactly one committed epoch (the last one the child reported, or the one it
 * was committing), then the next child resumes from it.
 *
 *   test_kill DIR TRIALS [SEED|-] [track|device|-] [WORKERS]
 * device: the child's arrays are in mock device memory (mock_device.h), the
 * largest in a kind that stages its own changes, the others copy-only.
 * WORKERS > 1: the child's checkpoints and recovery run on a pool of that
 * many workers (killed with all its threads, wherever each one was).
 *
 * Where the kills land does not depend on the machine's speed or load: a
 * third of the trials kill at a random moment (open and recovery included), a
 * third at a random moment after a first commit, and a third inside a
 * checkpoint, found through the container's own progress points (its hook):
 * either held at one of them (before the data, after the data, after the
 * commit) and killed there, or killed at a random moment of the data phase.
 * Whether the child died inside a checkpoint is read from its shared flag
 * after it died; if too few did, further trials kill at progress points. */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <poll.h>
#include <sched.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "mock_device.h"
#include "pool.h"

#define NREG 3
static const uint64_t sizes[NREG] = {24u << 20, 8u << 20, 1000};

/* Deterministic change of epoch k: dense rewrites, sparse words and runs. */
static void apply_epoch(char **buf, uint64_t k)
{
    uint64_t s = k * 7919;
    for (int r = 0; r < NREG; r++) {
        uint64_t nw = sizes[r] / 8, kind = rnd_below(&s, 4);
        uint64_t *w = (uint64_t *)buf[r];
        if (kind == 0) { /* unchanged */
        } else if (kind == 1) { /* sparse */
            for (int i = 0; i < 3000; i++)
                w[rnd_below(&s, nw)] = rnd(&s);
        } else { /* run of up to 1/4 of the array */
            uint64_t off = rnd_below(&s, nw), len = rnd_below(&s, nw / 4 + 1);
            if (off + len > nw) len = nw - off;
            for (uint64_t i = 0; i < len; i++)
                w[off + i] = k ^ (i * 0x9E3779B97F4A7C15ull);
        }
        buf[r][sizes[r] - 1] = (char)k; /* tail bytes beyond the last word */
    }
}

/* Shared between the child and the parent (one anonymous shared page). */
typedef struct shared {
    volatile int in_ckpt; /* the child is inside crpm_container_checkpoint */
    volatile int phase;   /* its last progress point in this checkpoint (0: none yet) */
    volatile int hold_at; /* set by the parent: stop at this progress point (0: never) */
    volatile int held;    /* the child stopped at hold_at and waits to be killed */
    volatile long data_us; /* the last completed data phase (before_data..after_data) */
} shared;

static shared *sh;
static int track, device, workers;

static long now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000L + ts.tv_nsec / 1000;
}

/* The container's progress points, in the child. */
static void progress(void *arg, int point, uint64_t epoch)
{
    (void)arg;
    (void)epoch;
    static long t0;
    if (point == CRPM_HOOK_BEFORE_DATA)
        t0 = now_us();
    else if (point == CRPM_HOOK_AFTER_DATA)
        sh->data_us = now_us() - t0;
    sh->phase = point;
    if (sh->hold_at == point) {
        sh->held = 1;
        for (;;)
            pause(); /* until the SIGKILL */
    }
}

static void child(const char *path, int fd)
{
    crpm_open_opts o = {.path = path, .job_name = "kill", .rank = 0, .nranks = 1, .create = 1,
                        .change_tracking = track};
    crpm_container *c;
    if (crpm_container_open(&o, &c, NULL)) _exit(3);
    crpm_pool *pool = NULL;
    if (workers > 1 && crpm_pool_create(workers, &pool)) _exit(7);
    crpm_container_set_pool(c, pool);
    crpm_container_set_hook(c, progress, NULL);
    if (track && strcmp(crpm_container_tracking(c), "pagemap") != 0) _exit(CHECK_SKIP);
    char *buf[NREG];
    for (int r = 0; r < NREG; r++) {
        if (!device) {
            buf[r] = calloc(1, sizes[r]);
            crpm_container_protect(c, r, buf[r], sizes[r], CRPM_TC_BYTE, 1);
            continue;
        }
        buf[r] = mock_malloc(sizes[r]);
        memset(buf[r], 0, sizes[r]);
        crpm_array a = {r, CRPM_TC_BYTE, 1, sizes[r], mock_dev(buf[r]), NULL, r == 0 ? &mock_kind_diff : &mock_kind_copy};
        crpm_container_protect_array(c, &a);
    }
    uint64_t e = crpm_container_epoch(c);
    if (e && crpm_container_recover(c)) _exit(4);
    for (uint64_t k = e + 1;; k++) {
        apply_epoch(buf, k);
        sh->phase = 0;
        sh->in_ckpt = 1;
        if (crpm_container_checkpoint(c, k, NULL)) _exit(5);
        sh->in_ckpt = 0;
        if (write(fd, &k, sizeof k) != (ssize_t)sizeof k) _exit(6);
    }
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    int trials = argc > 2 ? atoi(argv[2]) : 50;
    char path[512];
    snprintf(path, sizeof path, "%s/kill-%d.crpm", dir, (int)getpid());
    unlink(path);
    sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(sh != MAP_FAILED, "mmap");
    char *ref[NREG], *got[NREG];
    for (int r = 0; r < NREG; r++) {
        ref[r] = calloc(1, sizes[r]);
        got[r] = malloc(sizes[r]);
    }
    uint64_t ref_epoch = 0, reported = 0, seed = (uint64_t)time(NULL);
    if (argc > 3 && strcmp(argv[3], "-") != 0) seed = strtoull(argv[3], NULL, 10);
    track = argc > 4 && strcmp(argv[4], "track") == 0;
    device = argc > 4 && strcmp(argv[4], "device") == 0;
    workers = argc > 5 ? atoi(argv[5]) : 0;
    printf("seed %llu, %d workers\n", (unsigned long long)seed, workers > 1 ? workers : 1);
    static const char *const point_name[] = {"", "before the data", "after the data", "after the commit"};
    int during = 0, need = trials / 5, t;
    /* Further trials (held at progress points, so each lands inside) only
     * while too few kills landed inside; at most as many again. */
    for (t = 0; t < trials || (during < need && t < 2 * trials); t++) {
        /* 0: at any moment; 1: at any moment after a first commit; 2: inside a
         * checkpoint, held at a progress point (3 cases) or at a random moment
         * of the data phase (a fourth) */
        int mode = t < trials ? t % 3 : 2;
        int hold = 0;
        if (mode == 2) {
            long pick = (long)rnd_below(&seed, 4);
            hold = t >= trials || pick < 3 ? CRPM_HOOK_BEFORE_DATA + (int)rnd_below(&seed, 3) : 0;
        }
        int p[2];
        REQUIRE(pipe(p) == 0, "pipe");
        sh->in_ckpt = sh->phase = sh->held = 0;
        sh->hold_at = 0;
        sh->data_us = 0;
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            child(path, p[1]);
        }
        close(p[1]);
        uint64_t k;
        /* Progress does not depend on how loaded the machine is: the trials of
         * modes 1 and 2 let the child commit once before they kill it. */
        if (mode) {
            struct pollfd pf = {.fd = p[0], .events = POLLIN};
            if (poll(&pf, 1, 120000) == 1 && read(p[0], &k, sizeof k) == (ssize_t)sizeof k)
                reported = k;
        }
        long wait0 = now_us();
        int st, reaped = 0; /* a child that exits by itself (a skip) ends every wait */
        if (mode == 0 || mode == 1) {
            usleep((useconds_t)(5000 + rnd_below(&seed, 120000)));
        } else if (hold) {
            sh->hold_at = hold; /* the next checkpoint stops there */
            while (!sh->held && now_us() - wait0 < 120000000L && !(reaped = waitpid(pid, &st, WNOHANG) == pid))
                usleep(200);
        } else {
            /* the next checkpoint's data phase, then a random moment in it
             * (as long as the previous data phase; later still counts where
             * it lands) */
            while (!(sh->in_ckpt && sh->phase == CRPM_HOOK_BEFORE_DATA) && now_us() - wait0 < 120000000L &&
                   !(reaped = waitpid(pid, &st, WNOHANG) == pid))
                sched_yield();
            long span = sh->data_us > 1 ? sh->data_us : 1;
            long d = (long)rnd_below(&seed, (uint64_t)span);
            for (long t1 = now_us(); !reaped && now_us() - t1 < d;)
                ; /* spin: a sleep would overshoot short phases */
        }
        if (!reaped) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
            printf("SKIP: change tracking not available\n");
            return CHECK_SKIP;
        }
        REQUIRE(WIFSIGNALED(st), "child exited early with status %d", WEXITSTATUS(st));
        REQUIRE(!hold || sh->held, "trial %d: the child never reached the progress point %s", t, point_name[hold]);
        /* the child is dead: its flags say exactly where it was */
        int was_in = sh->in_ckpt, phase = sh->phase;
        REQUIRE(!hold || (was_in && phase == hold), "trial %d: held at %s but died outside it", t, point_name[hold]);
        while (read(p[0], &k, sizeof k) == (ssize_t)sizeof k)
            reported = k;
        close(p[0]);
        during += was_in;

        crpm_open_opts o = {.path = path, .job_name = "kill", .rank = 0, .nranks = 1};
        crpm_container *c;
        if (access(path, F_OK) != 0) {
            REQUIRE(reported == 0, "container missing after epoch %llu was reported", (unsigned long long)reported);
            continue;
        }
        REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open after kill: %s", crpm_last_error());
        uint64_t e = crpm_container_epoch(c);
        REQUIRE(e == reported || e == reported + 1, "recovered epoch %llu, child reported %llu",
              (unsigned long long)e, (unsigned long long)reported);
        while (ref_epoch < e)
            apply_epoch(ref, ++ref_epoch);
        if (e > 0) {
            REQUIRE(crpm_container_nregions(c) == NREG, "regions");
            for (int r = 0; r < NREG; r++) {
                REQUIRE(crpm_container_read_region(c, r, got[r]) == 0, "read");
                REQUIRE(memcmp(got[r], ref[r], sizes[r]) == 0, "trial %d: region %d differs from epoch %llu", t, r,
                      (unsigned long long)e);
            }
        }
        crpm_container_close(c);
        reported = e;
        printf("trial %2d: killed %s checkpoint%s%s, recovered epoch %llu\n", t, was_in ? "inside a" : "outside a",
               was_in && phase ? ", last progress point " : "", was_in ? point_name[phase] : "", (unsigned long long)e);
    }
    unlink(path);
    for (int r = 0; r < NREG; r++) {
        free(ref[r]);
        free(got[r]);
    }
    printf("kills: %d, inside a checkpoint: %d, final epoch %llu\n", t, during, (unsigned long long)ref_epoch);
    REQUIRE(ref_epoch > (uint64_t)trials / 2, "too few checkpoints made progress (epoch %llu after %d kills)",
            (unsigned long long)ref_epoch, t);
    REQUIRE(during >= need, "too few kills landed inside a checkpoint (%d of %d)", during, t);
    return 0;
}
