/* The stop module (lib/mpi/stop.c) on one rank: parsing of end times and
 * signals, the configuration keys and CRPM_END_TIME, and the decision:
 * the end time against the measured cost with the safety factor, the
 * measuring checkpoint, a signal, a HALT file, the sticky verdict and the
 * spacing of the checks. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <mpi.h>
#include "check.h"
#include "config.h"
#include "context.h"
#include "crpm_types.h"
#include "stop.h"

static void time_is(const char *s, double want)
{
    double got = -1;
    CHECK(crpm_stop_parse_time(s, &got) == 0, "'%s' refused", s);
    CHECK(fabs(got - want) < 1e-6, "'%s' = %.6f, expected %.6f", s, got, want);
}

static void time_refused(const char *s)
{
    double got;
    CHECK(crpm_stop_parse_time(s, &got) != 0, "'%s' accepted (%.3f)", s, got);
}

static void parsing(void)
{
    time_is("1718116200", 1718116200);
    time_is("1718116200.25", 1718116200.25);
    time_is("2024-06-11T14:30:00Z", 1718116200);
    time_is("2024-06-11t14:30:00z", 1718116200);
    time_is("2024-06-11 14:30Z", 1718116200);
    time_is("2024-06-11T16:30:00+02:00", 1718116200);
    time_is("2024-06-11T12:00:00-0230", 1718116200);
    time_is("2024-06-11T14:30:00.5Z", 1718116200.5);
    time_is("2024-02-29T00:00:00Z", 1709164800);
    setenv("TZ", "UTC", 1);
    tzset();
    time_is("2024-06-11T14:30:00", 1718116200);
    setenv("TZ", "CET-1CEST,M3.5.0,M10.5.0/3", 1);
    tzset();
    time_is("2024-06-11T16:30:00", 1718116200); /* summer time: UTC+2 */
    unsetenv("TZ");
    tzset();
    const char *bad[] = {"", "soon", "-5", "1e9", "1.2.3", "0x10", "2024-06-11", "2024-06-11T14", "2024-06-11T24:00Z",
                         "2023-02-29T00:00Z", "2024-13-01T00:00Z", "2024-06-11T14:30:00+2", "2024-06-11T14:30:00 Z",
                         "2024-06-11T14:30:00Zx", "2024-6-11T14:30Z", "2024-06-11T14:30:00."};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        time_refused(bad[i]);
    /* 0 is 1970, not "no end time"; nothing beyond the year 9999 (nor 64 bits) */
    const char *out_of_range[] = {"0", "0.0", "00", "253402300800", "99999999999999999999", "1969-12-31T23:59:59Z",
                                  "1970-01-01T00:00:00Z"};
    for (size_t i = 0; i < sizeof out_of_range / sizeof out_of_range[0]; i++)
        time_refused(out_of_range[i]);
    time_is("253402300799", 253402300799.0);
    time_is("9999-12-31T23:59:59Z", 253402300799.0);
    time_is("0.5", 0.5);

    int s = 0;
    CHECK(crpm_stop_parse_signal("USR1", &s) == 0 && s == SIGUSR1);
    CHECK(crpm_stop_parse_signal("SIGUSR2", &s) == 0 && s == SIGUSR2);
    CHECK(crpm_stop_parse_signal("term", &s) == 0 && s == SIGTERM);
    char num[16];
    snprintf(num, sizeof num, "%d", SIGUSR1);
    CHECK(crpm_stop_parse_signal(num, &s) == 0 && s == SIGUSR1);
    CHECK(strcmp(crpm_stop_signal_name(SIGXCPU), "XCPU") == 0);
    const char *badsig[] = {"", "KILL", "SIGSTOP", "SEGV", "USR3", "9", "10x", "0", "-10", "99999999999999999999"};
    for (size_t i = 0; i < sizeof badsig / sizeof badsig[0]; i++)
        CHECK(crpm_stop_parse_signal(badsig[i], &s) != 0, "signal '%s' accepted", badsig[i]);
    /* a signal by number and by name: the same verdict, the same signal, the same explanation */
    for (int n = 1; n < NSIG; n++) {
        const char *abbrev = sigabbrev_np(n);
        if (!abbrev)
            continue;
        char name[32], sname[40];
        snprintf(num, sizeof num, "%d", n);
        snprintf(name, sizeof name, "%s", abbrev);
        snprintf(sname, sizeof sname, "SIG%s", abbrev);
        int by_num = -1, by_name = -1, by_sname = -1;
        int rn = crpm_stop_parse_signal(num, &by_num), ra = crpm_stop_parse_signal(name, &by_name),
            rs = crpm_stop_parse_signal(sname, &by_sname);
        CHECK(rn == ra && ra == rs, "signal %d: '%s' %s, '%s' %s, '%s' %s", n, num, rn ? "refused" : "accepted",
              name, ra ? "refused" : "accepted", sname, rs ? "refused" : "accepted");
        if (rn == 0 && ra == 0)
            CHECK(by_num == n && by_name == n && by_sname == n, "signal %d: %d / %d / %d", n, by_num, by_name,
                  by_sname);
        else
            CHECK(strcmp(crpm_stop_signal_expected(num), crpm_stop_signal_expected(name)) == 0,
                  "signal %d: '%s' and '%s' refused with different explanations", n, num, name);
    }
    CHECK(strstr(crpm_stop_signal_expected("9"), "SIGKILL and SIGSTOP cannot"), "%s", crpm_stop_signal_expected("9"));
    CHECK(strstr(crpm_stop_signal_expected("sigkill"), "SIGKILL and SIGSTOP cannot"));
    CHECK(!strstr(crpm_stop_signal_expected("SEGV"), "cannot be caught"));
}

static void config_keys(void)
{
    crpm_config cfg;
    unsetenv("CRPM_END_TIME");
    CHECK(crpm_config_parse("[basic]\nckpt_dir=/x\nend_time=2024-06-11T14:30:00Z\nexit_signal=USR1\n"
                            "end_time_safety=3\n", "t.ini", &cfg) == 0);
    CHECK(cfg.end_time == 1718116200 && !cfg.end_time_env && cfg.exit_signal == SIGUSR1 && cfg.end_time_safety == 3);
    CHECK(crpm_config_parse("[basic]\nckpt_dir=/x\n", "t.ini", &cfg) == 0);
    CHECK(cfg.end_time == 0 && cfg.exit_signal == 0 && cfg.end_time_safety == 2, "defaults");
    CHECK(crpm_config_parse("[basic]\nckpt_dir=/x\nend_time=tomorrow\n", "t.ini", &cfg) == CRPM_ERR_CONFIG);
    CHECK(strstr(crpm_last_error(), "line 3") && strstr(crpm_last_error(), "ISO 8601"), "%s", crpm_last_error());
    CHECK(crpm_config_parse("[basic]\nckpt_dir=/x\nexit_signal=KILL\n", "t.ini", &cfg) == CRPM_ERR_CONFIG);
    CHECK(crpm_config_parse("[basic]\nckpt_dir=/x\nend_time_safety=0.5\n", "t.ini", &cfg) == CRPM_ERR_CONFIG);
    setenv("CRPM_END_TIME", "1718116260", 1);
    CHECK(crpm_config_parse("[basic]\nckpt_dir=/x\nend_time=2024-06-11T14:30:00Z\n", "t.ini", &cfg) == 0);
    CHECK(cfg.end_time == 1718116260 && cfg.end_time_env, "CRPM_END_TIME overrides end_time");
    setenv("CRPM_END_TIME", "later", 1);
    CHECK(crpm_config_parse("[basic]\nckpt_dir=/x\n", "t.ini", &cfg) == CRPM_ERR_CONFIG);
    CHECK(strstr(crpm_last_error(), "CRPM_END_TIME"), "%s", crpm_last_error());
    unsetenv("CRPM_END_TIME");
}

static crpm_ctx ctx;

static void setup(const char *dir, double end_in, int signo)
{
    memset(&ctx, 0, sizeof ctx);
    crpm_config_defaults(&ctx.cfg);
    ctx.comm = MPI_COMM_WORLD;
    snprintf(ctx.job_dir, sizeof ctx.job_dir, "%s", dir);
    ctx.cfg.exit_signal = signo;
    if (end_in != 0)
        ctx.cfg.end_time = (double)time(NULL) + end_in;
    ctx.cfg.verbosity = 0;
    CHECK(crpm_stop_start(&ctx) == 0);
}

static int poll_once(int every_call, int *measure)
{
    int stop = -1;
    CHECK(crpm_stop_poll(&ctx, every_call, &stop, measure) == 0);
    return stop;
}

static void decisions(const char *dir)
{
    int measure;
    /* No reason at all. */
    setup(dir, 0, 0);
    CHECK(poll_once(1, &measure) == 0 && measure == 0, "nothing to stop for");

    /* An end time, nothing measured: go on, and measure the final level
     * once half the time is gone. */
    setup(dir, 100, 0);
    CHECK(poll_once(1, &measure) == 0 && measure == 0, "100 s left: not measured yet");
    ctx.stop.end[0] = (double)time(NULL) + 60;
    CHECK(poll_once(1, &measure) == 0 && measure == 0, "60 s of 100 left: not measured yet");
    ctx.stop.end[0] = (double)time(NULL) + 45;
    CHECK(poll_once(1, &measure) == 0 && measure == 1, "45 s of 100 left: measure now");
    /* A 10 s checkpoint with safety 2 needs 20 s: 100 s is enough... */
    crpm_stop_record(&ctx, 1, 10);
    CHECK(poll_once(1, &measure) == 0 && measure == 0, "100 s left, margin 20 s");
    /* ...but not with a 60 s one among the last four, */
    crpm_stop_record(&ctx, 1, 60);
    CHECK(poll_once(1, &measure) == 1, "100 s left, margin 120 s");
    CHECK(ctx.stop.reason == CRPM_STOP_END_TIME);
    /* and the verdict stays. */
    ctx.cfg.end_time_safety = 1;
    CHECK(poll_once(1, &measure) == 1, "sticky");

    /* Only the last CRPM_STOP_COSTS checkpoints count. */
    setup(dir, 100, 0);
    crpm_stop_record(&ctx, 1, 60);
    for (int i = 0; i < CRPM_STOP_COSTS; i++)
        crpm_stop_record(&ctx, 1, 1);
    CHECK(poll_once(1, &measure) == 0, "an old slow checkpoint forgotten");
    /* A safety factor of 1 with a 60 s cost and 100 s left: go on; 2: stop. */
    setup(dir, 100, 0);
    crpm_stop_record(&ctx, 1, 60);
    ctx.cfg.end_time_safety = 1;
    CHECK(poll_once(1, &measure) == 0, "safety 1");
    ctx.cfg.end_time_safety = 2;
    CHECK(poll_once(1, &measure) == 1, "safety 2");

    /* The end already passed: stop at once, measured or not. */
    setup(dir, -10, 0);
    CHECK(poll_once(0, &measure) == 1, "past end time");

    /* The final level's cost is used; without it, the costliest measured. */
    setup(dir, 100, 0);
    ctx.cfg.ckpt_interval_l2 = 1;
    ctx.fol[0].level = CRPM_L2; /* level 2 is available: its follower is open (any non-NULL ops) */
    ctx.fol[0].lv.ops = (const crpm_level_ops *)&ctx;
    ctx.nfol = 1;
    CHECK(crpm_stop_level(&ctx) == 2);
    crpm_stop_record(&ctx, 1, 1);
    crpm_stop_record(&ctx, 2, 55);
    CHECK(poll_once(1, &measure) == 1, "level 2's cost decides");
    setup(dir, 100, 0);
    ctx.cfg.ckpt_interval_l2 = 1;
    ctx.fol[0].level = CRPM_L2;
    ctx.fol[0].lv.ops = (const crpm_level_ops *)&ctx;
    ctx.nfol = 1;
    crpm_stop_record(&ctx, 1, 55);
    CHECK(poll_once(1, &measure) == 1 && measure == 0, "no level-2 cost: level 1's is used");

    /* The signal: only with exit_signal, and the handler is restored. */
    setup(dir, 0, SIGUSR1);
    CHECK(poll_once(1, NULL) == 0);
    raise(SIGUSR1);
    CHECK(poll_once(1, NULL) == 1 && ctx.stop.reason == CRPM_STOP_SIGNAL, "signal");
    crpm_stop_end(&ctx);
    struct sigaction sa;
    sigaction(SIGUSR1, NULL, &sa);
    CHECK(sa.sa_handler == SIG_DFL, "handler restored");

    /* A HALT file in the job directory. */
    setup(dir, 0, 0);
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, CRPM_HALT_FILE);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    fclose(f);
    CHECK(poll_once(0, NULL) == 1 && ctx.stop.reason == CRPM_STOP_HALT, "halt");
    unlink(p);

    /* Short calls are checked every ~0.1 s worth of calls, not every call. */
    setup(dir, 0, 0);
    CHECK(poll_once(0, NULL) == 0);
    usleep(20000);
    CHECK(poll_once(0, NULL) == 0); /* one call took >= 20 ms: at most 5 calls apart */
    CHECK(ctx.stop.every >= 1 && ctx.stop.every <= 5, "every %ld", ctx.stop.every);
    ctx.stop.step_s = 1e-4; /* as if calls took 0.1 ms */
    ctx.stop.calls = 0;
    ctx.stop.every = 1000;
    f = fopen(p, "w");
    fclose(f);
    int seen = 0;
    for (int i = 0; i < 999 && !seen; i++)
        seen = poll_once(0, NULL);
    CHECK(!seen, "checked before the 1000th call");
    CHECK(poll_once(0, NULL) == 1, "checked at the 1000th call");
    unlink(p);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    check_set_note(crpm_last_error);
    parsing();
    config_keys();
    char dir[] = "/tmp/crpm-stop-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    decisions(dir);
    rmdir(dir);
    int rc = check_summary("test_stop");
    MPI_Finalize();
    return rc;
}
