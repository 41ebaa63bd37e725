/* A program with no code compiled with the pass asks for instrumented
 * tracking: its arrays are compared (with the reason), never followed by
 * marks that cannot come, and every epoch recovers exactly.  Compiled by the
 * project's compiler, without the plugin. */
#include <unistd.h>
#include "check.h"
#include "engine.h"

int main(int argc, char **argv)
{
    char path[600];
    snprintf(path, sizeof path, "%s/noinstr-%d.crpm", argc > 1 ? argv[1] : "/tmp", (int)getpid());
    unlink(path);
    crpm_open_opts o = {.path = path, .segment_size = 1 << 20, .create = 1, .change_tracking = CRPM_TRACK_INSTR};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    enum { N = 4 << 20 };
    char *a = malloc(N), *ref = malloc(N);
    uint64_t s = 4;
    fill_random(&s, a, N);
    REQUIRE(crpm_container_protect(c, 1, a, N, CRPM_TC_BYTE, 1) == 0, "protect: %s", crpm_last_error());
    const char *why = crpm_container_untracked_reason(c, 1);
    REQUIRE(why && strstr(why, "pass plugin"), "an uninstrumented program's array must be compared: %s",
            why ? why : "(followed by marks)");
    for (int e = 1; e <= 4; e++) {
        fill_random(&s, a + rnd_below(&s, N - 1000), 1000);
        REQUIRE(crpm_container_checkpoint(c, (uint64_t)e, NULL) == 0, "checkpoint: %s", crpm_last_error());
        memcpy(ref, a, N);
        memset(a, 0, N);
        REQUIRE(crpm_container_recover(c) == 0 && memcmp(a, ref, N) == 0, "epoch %d recovers", e);
    }
    crpm_container_close(c);
    unlink(path);
    printf("ok\n");
    return 0;
}
