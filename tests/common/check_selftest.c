/* Self-test of check.h: a failing CHECK is counted and the run goes on, a
 * failing REQUIRE ends the process with status 1, passing checks count, the
 * summary's exit status follows the failures, CHECK_CLOSE uses a relative
 * tolerance, and rnd is splitmix64 (fixed reference values). */
#define _GNU_SOURCE
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static int fails_in_child(int require)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr))
            _exit(9);
        int x = 1;
        if (require) {
            REQUIRE(x == 2, "x is %d", x);
            _exit(0); /* REQUIRE did not stop the process */
        }
        CHECK(x == 2, "x is %d", x);
        CHECK(x == 1);
        CHECK_CLOSE(1.0 + 1e-9, 1.0, 1e-6, "close");
        CHECK_CLOSE(1.1, 1.0, 1e-6, "not close");
        _exit(check_failures() == 2 && check_count() == 4 ? 3 : 4);
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

int main(void)
{
    int failed = 0;
    int rc = fails_in_child(0);
    if (rc != 3) {
        fprintf(stderr, "check_selftest: CHECK counted wrongly or stopped the run (child status %d)\n", rc);
        failed++;
    }
    rc = fails_in_child(1);
    if (rc != 1) {
        fprintf(stderr, "check_selftest: a failing REQUIRE did not exit with 1 (child status %d)\n", rc);
        failed++;
    }
    /* splitmix64 from seed 0: first outputs of the reference generator. */
    uint64_t s = 0;
    uint64_t a = rnd(&s), b = rnd(&s);
    if (a != 0xE220A8397B1DCDAFull || b != 0x6E789E6AA1B965F4ull) {
        fprintf(stderr, "check_selftest: rnd is not splitmix64: %016llx %016llx\n", (unsigned long long)a,
                (unsigned long long)b);
        failed++;
    }
    /* The verdict must not depend on the CHECK under test. */
    printf("check_selftest: %d of 3 self-tests failed\n", failed);
    return failed != 0;
}
