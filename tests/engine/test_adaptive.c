/* Adaptive change tracking: a densely written array stops costing write
 * faults and is compared whole; once its writes turn sparse it is tracked
 * again (few blocks compared, faults again); the data stays exact throughout. */
#include <sys/resource.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"

enum { N = 4 << 20, PAGE = 4096, NPAGES = N / PAGE };

static long minflt(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
}

static crpm_stats_t ck(crpm_container *c, uint64_t id)
{
    crpm_stats_t st;
    REQUIRE(crpm_container_checkpoint(c, id, &st) == 0, "checkpoint %llu: %s", (unsigned long long)id,
          crpm_last_error());
    return st;
}

/* Writes one byte in every page; returns the faults it took. */
static long dirty_all(char *a, uint64_t *s)
{
    long f = minflt();
    for (size_t p = 0; p < NPAGES; p++)
        a[p * PAGE + rnd_below(s, PAGE)] ^= (char)(1 + rnd_below(s, 255));
    return minflt() - f;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char path[512];
    snprintf(path, sizeof path, "%s/adaptive-%d.crpm", dir, (int)getpid());
    unlink(path);
    crpm_open_opts o = {.path = path, .segment_size = 64 << 10, .block_size = 256, .create = 1,
                        .change_tracking = 1};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    if (strcmp(crpm_container_tracking(c), "pagemap") != 0) {
        printf("SKIP: change tracking not available: %s\n", crpm_container_tracking(c));
        crpm_container_close(c);
        unlink(path);
        return CHECK_SKIP;
    }
    char *a = aligned_alloc(PAGE, N), *ref = malloc(N);
    uint64_t s = 11;
    fill_random(&s, a, N);
    REQUIRE(crpm_container_protect(c, 1, a, N / 8, CRPM_TC_DOUBLE, 8) == 0, "protect: %s", crpm_last_error());
    uint64_t id = 1;
    ck(c, id++);

    /* dense epochs: every page written */
    long f1 = dirty_all(a, &s);
    ck(c, id++); /* judged dense here */
    long f2 = dirty_all(a, &s); /* pages the last scan re-protected fault once more */
    crpm_stats_t st = ck(c, id++);
    long f3 = dirty_all(a, &s); /* nobody re-protected them: no faults */
    crpm_stats_t st3 = ck(c, id++);
    printf("dense: faults per epoch %ld, %ld, %ld (of %d pages); compared %llu, %llu of %d bytes\n", f1, f2, f3,
           NPAGES, (unsigned long long)st.bytes_compared, (unsigned long long)st3.bytes_compared, N);
    REQUIRE(f1 >= NPAGES && f2 >= NPAGES, "a tracked array faults on each page's first write");
    REQUIRE(f3 < NPAGES / 16, "a densely written array is left writable: %ld faults", f3);
    REQUIRE(st.bytes_compared >= N && st3.bytes_compared >= N, "a densely written array is compared whole");

    /* sparse epochs: one byte of one page; tracking must come back after the
     * 4-checkpoint hot period, a re-arming scan and one measured epoch */
    int back = 0;
    long fs = 0;
    for (int k = 0; k < 8 && !back; k++) {
        long f = minflt();
        a[5 * PAGE + rnd_below(&s, PAGE)] ^= 0x20;
        fs = minflt() - f;
        st = ck(c, id++);
        back = st.bytes_compared < N / 64;
        printf("sparse %d: compared %llu, written %llu, faults %ld\n", k, (unsigned long long)st.bytes_compared,
               (unsigned long long)st.bytes_written, fs);
    }
    REQUIRE(back, "sparse writes are tracked again after the hot period");
    REQUIRE(fs >= 1, "a tracked page faults again on its first write");

    /* exactness: recover the last epoch into a wiped array */
    memcpy(ref, a, N);
    memset(a, 0, N);
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    REQUIRE(memcmp(a, ref, N) == 0, "recovered data equals the last checkpoint");
    crpm_container_close(c);
    unlink(path);
    free(a);
    free(ref);
    printf("adaptive tracking: ok\n");
    return 0;
}
