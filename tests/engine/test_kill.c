/* Real process kills: a child checkpoints ~32 MiB in a loop and is SIGKILLed at
 * random moments; after each kill the parent opens the container and checks
 * that it holds exactly one committed epoch (the last one the child reported,
 * or the one it was committing), then the next child resumes from it.
 *
 *   test_kill DIR TRIALS [SEED|-] [track|device|-] [WORKERS]
 * device: the child's arrays are in mock device memory (mock_device.h), the
 * largest in a kind that stages its own changes, the others copy-only.
 * WORKERS > 1: the child's checkpoints and recovery run on a pool of that
 * many workers (killed with all its threads, wherever each one was). */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <poll.h>
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

static volatile int *in_ckpt;
static int track, device, workers;

static void child(const char *path, int fd)
{
    crpm_open_opts o = {.path = path, .job_name = "kill", .rank = 0, .nranks = 1, .create = 1,
                        .change_tracking = track};
    crpm_container *c;
    if (crpm_container_open(&o, &c, NULL)) _exit(3);
    crpm_pool *pool = NULL;
    if (workers > 1 && crpm_pool_create(workers, &pool)) _exit(7);
    crpm_container_set_pool(c, pool);
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
        *in_ckpt = 1;
        if (crpm_container_checkpoint(c, k, NULL)) _exit(5);
        *in_ckpt = 0;
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
    in_ckpt = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
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
    int during = 0;
    for (int t = 0; t < trials; t++) {
        int p[2];
        REQUIRE(pipe(p) == 0, "pipe");
        *in_ckpt = 0;
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            child(path, p[1]);
        }
        close(p[1]);
        uint64_t k;
        /* Every other trial lets the child commit once first: progress does
         * not depend on how loaded the machine is; the others kill it at any
         * moment, in open and recovery too. */
        if (t % 2) {
            struct pollfd pf = {.fd = p[0], .events = POLLIN};
            if (poll(&pf, 1, 60000) == 1 && read(p[0], &k, sizeof k) == (ssize_t)sizeof k)
                reported = k;
        }
        usleep((useconds_t)(5000 + rnd_below(&seed, 120000)));
        int was_in = *in_ckpt;
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 77) {
            printf("SKIP: change tracking not available\n");
            return CHECK_SKIP;
        }
        REQUIRE(WIFSIGNALED(st), "child exited early with status %d", WEXITSTATUS(st));
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
        printf("trial %2d: killed %s checkpoint, recovered epoch %llu\n", t, was_in ? "during" : "outside",
               (unsigned long long)e);
    }
    unlink(path);
    for (int r = 0; r < NREG; r++) {
        free(ref[r]);
        free(got[r]);
    }
    printf("kills: %d, during a checkpoint: %d, final epoch %llu\n", trials, during, (unsigned long long)ref_epoch);
    REQUIRE(ref_epoch > (uint64_t)trials / 2, "too few checkpoints made progress");
    REQUIRE(during >= trials / 5, "too few kills landed inside a checkpoint (%d)", during);
    return 0;
}
