/* [advanced] threads (issue 31): the automatic rule on made-up affinity
 * masks, the key's parsing and CRPM_THREADS (no MPI at run time). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include "check.h"
#include "config.h"
#include "error.h"
#include "threads.h"

/* masks[r] = CPUs [lo, lo + n) */
static void set_range(cpu_set_t *m, int lo, int n)
{
    CPU_ZERO(m);
    for (int c = lo; c < lo + n; c++)
        CPU_SET(c, m);
}

static int parse_threads(const char *value, int *out)
{
    char text[256];
    snprintf(text, sizeof text, "[basic]\nckpt_dir = /tmp/x\n[advanced]\nthreads = %s\n", value);
    crpm_config cfg;
    int rc = crpm_config_parse(text, "test", &cfg);
    *out = cfg.threads;
    return rc;
}

int main(void)
{
    cpu_set_t m[4];
    /* two ranks with 4 CPUs each of their own: 4 workers each */
    set_range(&m[0], 0, 4);
    set_range(&m[1], 4, 4);
    CHECK(crpm_threads_share(m, 2, 0) == 4 && crpm_threads_share(m, 2, 1) == 4, "disjoint masks: %d, %d",
          crpm_threads_share(m, 2, 0), crpm_threads_share(m, 2, 1));
    /* two ranks sharing 8 CPUs (no binding): 4 each */
    set_range(&m[0], 0, 8);
    set_range(&m[1], 0, 8);
    CHECK(crpm_threads_share(m, 2, 0) == 4, "shared mask: %d", crpm_threads_share(m, 2, 0));
    /* three ranks on 2 CPUs: 1 each, never 0 */
    for (int r = 0; r < 3; r++)
        set_range(&m[r], 0, 2);
    CHECK(crpm_threads_share(m, 3, 2) == 1, "3 ranks on 2 CPUs: %d", crpm_threads_share(m, 3, 2));
    CHECK(crpm_threads_cap(m, 3) == 1, "cap of 3 ranks on 2 CPUs: %d", crpm_threads_cap(m, 3));
    /* overlapping masks: rank 0 alone on 0-3, ranks 1 and 2 both on 2-7: the
     * node's 8 CPUs are never exceeded in total */
    set_range(&m[0], 0, 4);
    set_range(&m[1], 2, 6);
    set_range(&m[2], 2, 6);
    int total = 0;
    for (int r = 0; r < 3; r++)
        total += crpm_threads_share(m, 3, r);
    CHECK(total <= 8 && total >= 3, "overlapping masks: %d workers in total on 8 CPUs", total);
    set_range(&m[0], 0, 16);
    CHECK(crpm_threads_cap(m, 1) == 16 && crpm_threads_cap(m, 4) == 4, "cap: %d, %d", crpm_threads_cap(m, 1),
          crpm_threads_cap(m, 4));

    int v = -1;
    unsetenv("CRPM_THREADS");
    CHECK(parse_threads("auto", &v) == 0 && v == 0, "threads = auto: %d", v);
    CHECK(parse_threads("8", &v) == 0 && v == 8, "threads = 8: %d", v);
    CHECK(parse_threads("1", &v) == 0 && v == 1, "threads = 1: %d", v);
    CHECK(parse_threads("0", &v) == CRPM_ERR_CONFIG, "threads = 0 accepted");
    CHECK(parse_threads("many", &v) == CRPM_ERR_CONFIG, "threads = many accepted");
    CHECK(parse_threads("2000", &v) == CRPM_ERR_CONFIG, "threads = 2000 accepted");
    crpm_config cfg;
    crpm_config_defaults(&cfg);
    CHECK(cfg.threads == 0, "the default is not auto");
    setenv("CRPM_THREADS", "3", 1);
    CHECK(parse_threads("auto", &v) == 0 && v == 3, "CRPM_THREADS=3 over auto: %d", v);
    setenv("CRPM_THREADS", "zero", 1);
    CHECK(parse_threads("2", &v) == CRPM_ERR_CONFIG, "CRPM_THREADS=zero accepted");
    return check_summary("test_auto");
}
