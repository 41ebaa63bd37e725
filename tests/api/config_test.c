/* Serial tests of the INI parser (lib/mpi/config.c): defaults, every key, size
 * suffixes, comments, environment overrides, and the file:line messages. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "config.h"
#include "engine.h"

static int parse(const char *text, crpm_config *c) { return crpm_config_parse(text, "t.ini", c); }

static int fails_with(const char *text, const char *msg)
{
    crpm_config c;
    return parse(text, &c) == CRPM_ERR_CONFIG && strstr(crpm_last_error(), msg) != NULL;
}

/* The shipped examples must parse. */
static void check_examples(const char *dir)
{
    const char *names[] = {"crpm.ini", "pmem.ini", "level4.ini", "level2.ini", "level3.ini"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[1024], *text = NULL;
        size_t len;
        crpm_config c;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        CHECK(crpm_config_read_file(path, &text, &len) == 0);
        CHECK(text && crpm_config_parse(text, path, &c) == 0);
        free(text);
    }
}

/* Every numeric key: beyond 64 bits, negative, zero where zero is no value of
 * the key, and the bounds; the message names the line, the key and what was
 * expected.  [section, key, value, what the message must hold ("" = accepted)] */
static void range_checks(void)
{
    const char *cases[][4] = {
        {"basic", "ckpt_interval", "99999999999999999999", "bad value '99999999999999999999' for ckpt_interval: "
                                   "expected a count of iterations from 0 (off) to 2^40"},
        {"basic", "ckpt_interval", "1099511627776", ""},
        {"basic", "ckpt_interval", "1099511627777", "expected a count of iterations from 0 (off) to 2^40"},
        {"basic", "ckpt_interval", "-3", "bad value '-3' for ckpt_interval"},
        {"basic", "ckpt_interval", "0", ""},
        {"basic", "ckpt_interval_s", "1e400", "bad value '1e400' for ckpt_interval_s: expected seconds"},
        {"basic", "ckpt_interval_s", "-1", "bad value '-1' for ckpt_interval_s"},
        {"basic", "ckpt_interval_s", "nan", "bad value 'nan' for ckpt_interval_s"},
        {"basic", "ckpt_interval_s", "inf", "bad value 'inf' for ckpt_interval_s"},
        {"basic", "ckpt_interval_l2", "18446744073709551617", "expected a count of checkpoints from 0 (never) to 2^40"},
        {"basic", "ckpt_interval_l2", "-1", "bad value '-1' for ckpt_interval_l2"},
        {"basic", "ckpt_interval_l4", "-1", "expected a count of checkpoints from 0 (never) to 2^40, or auto"},
        {"basic", "keep_l4", "0", "bad value '0' for keep_l4: expected a count of level-4 checkpoints from 1 to 1000000"},
        {"basic", "keep_l4", "1000001", "bad value '1000001' for keep_l4"},
        {"basic", "keep_l4", "99999999999999999999", "bad value '99999999999999999999' for keep_l4"},
        {"basic", "node_size", "-2", "bad value '-2' for node_size: expected ranks per node from 1 to 2^24, or 0 to "
                                     "detect the nodes"},
        {"basic", "node_size", "16777217", "bad value '16777217' for node_size"},
        {"basic", "node_size", "0", ""},
        {"basic", "verbosity", "4", "bad value '4' for verbosity: expected 0, 1, 2 or 3"},
        {"basic", "verbosity", "-1", "bad value '-1' for verbosity"},
        {"basic", "mtbf_s", "0", "bad value '0' for mtbf_s: expected seconds > 0"},
        {"basic", "mtbf_s", "-5", "bad value '-5' for mtbf_s"},
        {"basic", "mtbf_s", "1e999", "bad value '1e999' for mtbf_s"},
        {"basic", "heap_size", "-1", "bad value '-1' for heap_size: expected bytes up to 1T"},
        {"basic", "heap_size", "18446744073709551616", "bad value '18446744073709551616' for heap_size"},
        {"basic", "heap_size", "16777216T", "bad value '16777216T' for heap_size"},
        {"basic", "heap_size", "0", ""},
        {"basic", "end_time", "0", "bad value '0' for end_time: expected a time after 1970-01-01T00:00:00Z (0 is no "
                                   "end time: leave end_time empty or remove it)"},
        {"basic", "end_time", "0.0", "(0 is no end time: leave end_time empty or remove it)"},
        {"basic", "end_time", "99999999999999999999", "bad value '99999999999999999999' for end_time: expected Unix "
                                                      "seconds or an ISO 8601 time (2024-06-11T14:30:00Z) from 1970 to "
                                                      "9999-12-31, or nothing"},
        {"basic", "end_time", "253402300800", "from 1970 to 9999-12-31"},
        {"basic", "end_time", "253402300799", ""},
        {"basic", "end_time", "-1718116200", "bad value '-1718116200' for end_time"},
        {"basic", "end_time", "1969-12-31T23:59:59Z", "bad value '1969-12-31T23:59:59Z' for end_time"},
        {"basic", "end_time", "", ""},
        {"basic", "end_time_safety", "0", "bad value '0' for end_time_safety: expected a factor from 1 to 100"},
        {"basic", "end_time_safety", "101", "bad value '101' for end_time_safety"},
        {"basic", "exit_signal", "9", "bad value '9' for exit_signal: expected a signal that can be caught (SIGKILL "
                                      "and SIGSTOP cannot: the job would end or stop before it could checkpoint"},
        {"basic", "exit_signal", "KILL", "bad value 'KILL' for exit_signal: expected a signal that can be caught"},
        {"basic", "exit_signal", "SIGSTOP", "expected a signal that can be caught"},
        {"basic", "exit_signal", "0", "bad value '0' for exit_signal: expected a signal name or number: HUP, INT, "
                                      "QUIT, USR1, USR2, ALRM, TERM, URG, XCPU, VTALRM, PROF or WINCH"},
        {"basic", "exit_signal", "-10", "bad value '-10' for exit_signal: expected a signal name or number"},
        {"basic", "exit_signal", "99999999999999999999", "expected a signal name or number"},
        {"basic", "exit_signal", "SEGV", "bad value 'SEGV' for exit_signal: expected a signal name or number"},
        {"basic", "exit_signal", "15", ""},
        {"basic", "exit_signal", "TERM", ""},
        {"basic", "group_size", "99999999999999999999", "bad value '99999999999999999999' for group_size"},
        {"advanced", "lock_wait_s", "-1", "bad value '-1' for lock_wait_s: expected seconds >= 0 (0: do not wait"},
        {"advanced", "lock_wait_s", "1e400", "bad value '1e400' for lock_wait_s"},
        {"advanced", "lock_wait_s", "0", ""},
        {"advanced", "threads", "0", "bad value '0' for threads: expected auto or a number of threads from 1 to 1024"},
        {"advanced", "threads", "1025", "bad value '1025' for threads"},
        {"advanced", "threads", "-1", "bad value '-1' for threads"},
        {"advanced", "segment_size", "0", "bad value '0' for segment_size: expected a power of two from 64 bytes to "
                                          "1G"},
        {"advanced", "segment_size", "32", "bad value '32' for segment_size"},
        {"advanced", "segment_size", "2G", "bad value '2G' for segment_size"},
        {"advanced", "segment_size", "1G", ""},
        {"advanced", "segment_size", "-4096", "bad value '-4096' for segment_size"},
        {"advanced", "segment_size", "18446744073709551616", "bad value '18446744073709551616' for segment_size"},
        {"advanced", "block_size", "4", "bad value '4' for block_size: expected a power of two from 8 bytes to 1G"},
        {"advanced", "block_size", "0", "bad value '0' for block_size"},
        /* beside the default segment (2 MiB) */
        {"advanced", "block_size", "4M", "line 4: block_size 4194304 exceeds segment_size 2097152 (the default)"},
        {"advanced", "segment_size", "128", "line 4: block_size 256 (the default) exceeds segment_size 128"},
        {"advanced", "heap_base", "-4194304", "bad value '-4194304' for heap_base"},
        {"advanced", "heap_base", "0x10000000000000000", "bad value '0x10000000000000000' for heap_base"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char t[512];
        crpm_config c;
        snprintf(t, sizeof t, "[basic]\nckpt_dir = /d\n%s%s = %s\n", strcmp(cases[i][0], "advanced") ? "" : "[advanced]\n",
                 cases[i][1], cases[i][2]);
        int rc = parse(t, &c);
        if (!cases[i][3][0])
            CHECK(rc == 0, "%s = '%s' refused", cases[i][1], cases[i][2]);
        else
            CHECK(rc == CRPM_ERR_CONFIG && strstr(crpm_last_error(), cases[i][3]),
                  "%s = '%s': %d, message lacks \"%s\"", cases[i][1], cases[i][2], rc, cases[i][3]);
    }
    /* the environment's end time, checked alike */
    crpm_config c;
    setenv("CRPM_END_TIME", "0", 1);
    CHECK(fails_with("[basic]\nckpt_dir = /d\n", "environment CRPM_END_TIME='0': expected a time after "
                     "1970-01-01T00:00:00Z (0 is no end time"));
    setenv("CRPM_END_TIME", "1e30", 1);
    CHECK(fails_with("[basic]\nckpt_dir = /d\n", "environment CRPM_END_TIME='1e30': expected Unix seconds"));
    unsetenv("CRPM_END_TIME");
    CHECK(parse("[basic]\nckpt_dir = /d\nexit_signal = 15\n", &c) == 0 && c.exit_signal == 15);
}

/* A message that wraps the last one (the API's "fn(id): cause") keeps the
 * whole cause, once: formatting must not read the text it overwrites. */
static void nested_messages(void)
{
    crpm_error(CRPM_ERR_INVAL, "global dataset %d: dimension %d is %lld", 0, 1, -1LL);
    crpm_error(CRPM_ERR_INVAL, "%s(%d): %s", "crpm_define_global", 0, crpm_last_error());
    CHECK(strcmp(crpm_last_error(), "crpm_define_global(0): global dataset 0: dimension 1 is -1") == 0, "got '%s'",
          crpm_last_error());
    /* a cause as long as the buffer: cut at its end, never at its start */
    static char big[3 * 4096 + 100];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    big[0] = 'A';
    crpm_error(CRPM_ERR_IO, "%s", big);
    crpm_error(CRPM_ERR_IO, "outer: %s", crpm_last_error());
    const char *m = crpm_last_error();
    size_t len = strlen(m);
    int starts = strncmp(m, "outer: Axxx", 11) == 0;
    char head[17];
    snprintf(head, sizeof head, "%s", m);
    crpm_error_clear(); /* not 12 KiB of text after a failure */
    CHECK(starts && len == 3 * 4096 - 1, "len %zu, starts '%s'", len, head);
    CHECK(crpm_last_error()[0] == '\0');
}

int main(int argc, char **argv)
{
    check_set_note(crpm_last_error);
    unsetenv("CRPM_CKPT_DIR");
    unsetenv("CRPM_JOB_NAME");
    crpm_config c;

    CHECK(parse("[basic]\nckpt_dir = /d\n", &c) == 0);
    CHECK(strcmp(c.ckpt_dir, "/d") == 0 && strcmp(c.job_name, "crpm") == 0);
    CHECK(c.ckpt_interval == 0 && c.ckpt_interval_s == 0 && c.keep_last_ckpt == 0 && c.verbosity == 1);
    CHECK(c.glbl_dir[0] == '\0' && c.ckpt_interval_l4 == 0 && c.keep_l4 == 1);
    CHECK(c.segment_size == 0 && c.block_size == 0 && c.persistence == CRPM_PERSIST_AUTO);

    const char *full =
        "# full example\n"
        "[basic]\n"
        "ckpt_dir = /mnt/pmem0/ckpt   ; inline comment\n"
        "job_name = run-7.b_x\n"
        "ckpt_interval = 25\n"
        "ckpt_interval_s = 1.5\n"
        "keep_last_ckpt = 1\n"
        "verbosity = 3\n"
        "glbl_dir = /gpfs/ckpt\n"
        "ckpt_interval_l4 = 4\n"
        "keep_l4 = 3\n"
        "\n"
        "[advanced]\r\n"
        "segment_size = 64KiB\r\n"
        "block_size = 512\n"
        "persistence = msync\n";
    CHECK(parse(full, &c) == 0);
    CHECK(strcmp(c.ckpt_dir, "/mnt/pmem0/ckpt") == 0 && strcmp(c.job_name, "run-7.b_x") == 0);
    CHECK(c.ckpt_interval == 25 && c.ckpt_interval_s == 1.5 && c.keep_last_ckpt == 1 && c.verbosity == 3);
    CHECK(strcmp(c.glbl_dir, "/gpfs/ckpt") == 0 && c.ckpt_interval_l4 == 4 && c.keep_l4 == 3);
    CHECK(c.segment_size == 65536 && c.block_size == 512 && c.persistence == CRPM_PERSIST_MSYNC);

    CHECK(parse("[basic]\nckpt_dir=/d\n[advanced]\nsegment_size=2M\nblock_size=1k\npersistence=pmem\n", &c) == 0);
    CHECK(c.segment_size == 2u << 20 && c.block_size == 1024 && c.persistence == CRPM_PERSIST_PMEM);
    CHECK(parse("[basic]\nckpt_dir=/d\n[advanced]\nsegment_size=1G\n", &c) == 0 && c.segment_size == 1u << 30);
    CHECK(parse("[basic]\nckpt_dir=/d\nkeep_last_ckpt=0\n", &c) == 0 && c.keep_last_ckpt == 0);
    CHECK(parse("[basic]\nckpt_dir=/d\nkeep_last_ckpt=global\n", &c) == 0 && c.keep_last_ckpt == CRPM_KEEP_GLOBAL);
    /* booleans are exactly 0 or 1, as documented */
    const char *not_bool[] = {"yes", "no", "true", "false", "on", "off", "01", "1.0", " 1x"};
    for (size_t i = 0; i < sizeof not_bool / sizeof not_bool[0]; i++) {
        char t[128], m[64];
        snprintf(t, sizeof t, "[basic]\nckpt_dir = /d\nkeep_last_ckpt = %s\n", not_bool[i]);
        snprintf(m, sizeof m, "for keep_last_ckpt: expected 0, 1 or global");
        CHECK(fails_with(t, m));
    }
    /* automatic interval */
    CHECK(parse("[basic]\nckpt_dir=/d\nckpt_interval_s = auto\nmtbf_s = 3600\n", &c) == 0);
    CHECK(c.ckpt_interval_auto == 1 && c.mtbf_s == 3600 && c.ckpt_interval_s == 0 && !c.ckpt_interval_l4_auto);
    CHECK(parse("[basic]\nckpt_dir=/d\nglbl_dir=/g\nckpt_interval_s=auto\nckpt_interval_l4=auto\nmtbf_s=60\n",
                &c) == 0);
    CHECK(c.ckpt_interval_l4_auto == 1 && c.mtbf_l4_s == 60);
    CHECK(parse("[basic]\nckpt_dir=/d\nglbl_dir=/g\nckpt_interval_l4=auto\nmtbf_l4_s=7200\n", &c) == 0);
    CHECK(c.ckpt_interval_l4_auto == 1 && c.mtbf_l4_s == 7200 && !c.ckpt_interval_auto);
    CHECK(fails_with("[basic]\nckpt_dir = /d\nckpt_interval_s = auto\n", "line 3: ckpt_interval_s = auto needs mtbf_s"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nmtbf_s = 10\n", "line 3: mtbf_s is used only with"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nmtbf_s = 0\n", "line 3: bad value '0' for mtbf_s"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nckpt_interval_s = Auto\n", "bad value 'Auto' for ckpt_interval_s"));
    /* background levels (docs/async.md) */
    CHECK(parse("[basic]\nckpt_dir=/d\n", &c) == 0 && c.async == 0 && c.async_skip == 0);
    CHECK(parse("[basic]\nckpt_dir=/d\nasync = 1\nasync_backpressure = skip\n", &c) == 0 && c.async == 1 &&
          c.async_skip == 1);
    CHECK(parse("[basic]\nckpt_dir=/d\nasync_backpressure = wait\n", &c) == 0 && c.async_skip == 0);
    CHECK(fails_with("[basic]\nckpt_dir = /d\nasync = yes\n", "bad value 'yes' for async: expected 0 or 1"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nasync_backpressure = later\n",
                     "bad value 'later' for async_backpressure: expected wait or skip"));
    /* ownership and fallback keys */
    CHECK(parse("[basic]\nckpt_dir=/d\n", &c) == 0 && c.lock_wait_s == 5 && c.on_unrecoverable_fresh == 0);
    CHECK(parse("[basic]\nckpt_dir=/d\n[advanced]\nlock_wait_s = 7.5\non_unrecoverable = fresh\n", &c) == 0);
    CHECK(c.lock_wait_s == 7.5 && c.on_unrecoverable_fresh == 1 && c.huge_pages == 0);
    CHECK(parse("[basic]\nckpt_dir=/d\n[advanced]\nhuge_pages = 1\n", &c) == 0 && c.huge_pages == 1);
    CHECK(fails_with("[basic]\nckpt_dir=/d\n[advanced]\nhuge_pages = 2\n", "bad value '2' for huge_pages"));
    CHECK(fails_with("[basic]\nckpt_dir=/d\n[advanced]\non_unrecoverable = maybe\n",
                     "bad value 'maybe' for on_unrecoverable"));
    CHECK(fails_with("[basic]\nckpt_dir=/d\n[advanced]\nlock_wait_s = -1\n", "bad value '-1' for lock_wait_s"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nckpt_interval_l4 = auto\nmtbf_s = 9\n",
                     "line 3: ckpt_interval_l4 needs glbl_dir"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nglbl_dir = /g\nckpt_interval_l4 = auto\n",
                     "line 4: ckpt_interval_l4 = auto needs mtbf_l4_s or mtbf_s"));

    /* level 2: nodes and partner copies */
    CHECK(parse("[basic]\nckpt_dir=/d\n", &c) == 0 && c.node_size == 0 && c.ckpt_interval_l2 == 0);
    CHECK(parse("[basic]\nckpt_dir=/d/node%n\nnode_size = 2\nckpt_interval_l2 = 3\n", &c) == 0);
    CHECK(c.node_size == 2 && c.ckpt_interval_l2 == 3 && strcmp(c.ckpt_dir, "/d/node%n") == 0);
    CHECK(parse("[basic]\nckpt_dir=/d\nnode_size = 0\nckpt_interval_l2 = 0\n", &c) == 0);
    CHECK(c.node_size == 0 && c.ckpt_interval_l2 == 0);
    /* benchmark baselines are no user keys (the benchmarks select them) */
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\nl2_full_copy = 1\n",
                     "line 4: unknown key 'l2_full_copy' in [advanced]"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\nl3_full_encode = 1\n",
                     "line 4: unknown key 'l3_full_encode' in [advanced]"));
    const char *bad_l2[][3] = {
        {"node_size", "-1", "line 3: bad value '-1' for node_size: expected ranks per node"},
        {"node_size", "2x", "line 3: bad value '2x' for node_size"},
        {"node_size", "", "line 3: bad value '' for node_size"},
        {"node_size", "auto", "line 3: bad value 'auto' for node_size"},
        {"node_size", "1.5", "line 3: bad value '1.5' for node_size"},
        {"node_size", "99999999999", "line 3: bad value '99999999999' for node_size"},
        {"ckpt_interval_l2", "-2", "line 3: bad value '-2' for ckpt_interval_l2: expected a count of checkpoints from 0 (never) to 2^40"},
        {"ckpt_interval_l2", "auto", "line 3: bad value 'auto' for ckpt_interval_l2"},
        {"ckpt_interval_l2", "3 4", "line 3: bad value '3 4' for ckpt_interval_l2"},
    };
    for (size_t i = 0; i < sizeof bad_l2 / sizeof bad_l2[0]; i++) {
        char t[256];
        snprintf(t, sizeof t, "[basic]\nckpt_dir = /d\n%s = %s\n", bad_l2[i][0], bad_l2[i][1]);
        CHECK(fails_with(t, bad_l2[i][2]), "%s = '%s'", bad_l2[i][0], bad_l2[i][1]);
    }
    for (size_t i = 0; i < sizeof not_bool / sizeof not_bool[0]; i++) {
        char t[128];
        snprintf(t, sizeof t, "[basic]\nckpt_dir = /d\n[advanced]\nhuge_pages = %s\n", not_bool[i]);
        CHECK(fails_with(t, "for huge_pages: expected 0 or 1"), "huge_pages = '%s'", not_bool[i]);
    }
    /* level 3: groups of nodes and parity */
    CHECK(parse("[basic]\nckpt_dir=/d\n", &c) == 0 && c.group_size == 4 && c.l3_parity == 1 && c.ckpt_interval_l3 == 0);
    CHECK(parse("[basic]\nckpt_dir=/d\ngroup_size = 8\nl3_parity = 4\nckpt_interval_l3 = 5\n", &c) == 0);
    CHECK(c.group_size == 8 && c.l3_parity == 4 && c.ckpt_interval_l3 == 5);
    CHECK(parse("[basic]\nckpt_dir=/d\ngroup_size = 2\nl3_parity = 1\nckpt_interval_l3 = 0\n", &c) == 0);
    CHECK(c.group_size == 2 && c.l3_parity == 1 && c.ckpt_interval_l3 == 0);
    CHECK(parse("[basic]\nckpt_dir=/d\ngroup_size = 255\nl3_parity = 127\n", &c) == 0);
    CHECK(c.group_size == 255 && c.l3_parity == 127);
    const char *bad_l3[][3] = {
        {"ckpt_interval_l3", "-1", "line 3: bad value '-1' for ckpt_interval_l3: expected a count of checkpoints from 0 (never) to 2^40"},
        {"ckpt_interval_l3", "auto", "line 3: bad value 'auto' for ckpt_interval_l3"},
        {"ckpt_interval_l3", "2.5", "line 3: bad value '2.5' for ckpt_interval_l3"},
        {"group_size", "-4", "line 3: bad value '-4' for group_size: expected nodes per group, 2 .. 255"},
        {"group_size", "0", "line 3: bad value '0' for group_size"},
        {"group_size", "1", "line 3: bad value '1' for group_size"},
        {"group_size", "256", "line 3: bad value '256' for group_size"},
        {"group_size", "4x", "line 3: bad value '4x' for group_size"},
        {"l3_parity", "0", "line 3: bad value '0' for l3_parity: expected parity units per codeword"},
        {"l3_parity", "-1", "line 3: bad value '-1' for l3_parity"},
        {"l3_parity", "", "line 3: bad value '' for l3_parity"},
        /* within range, but more than group_size (4 by default) / 2 */
        {"l3_parity", "3", "line 3: l3_parity 3 exceeds group_size / 2 (group_size 4)"},
    };
    for (size_t i = 0; i < sizeof bad_l3 / sizeof bad_l3[0]; i++) {
        char t[256];
        snprintf(t, sizeof t, "[basic]\nckpt_dir = /d\n%s = %s\n", bad_l3[i][0], bad_l3[i][1]);
        CHECK(fails_with(t, bad_l3[i][2]), "%s = '%s'", bad_l3[i][0], bad_l3[i][1]);
    }
    CHECK(fails_with("[basic]\nckpt_dir = /d\nl3_parity = 2\ngroup_size = 3\n",
                     "line 3: l3_parity 2 exceeds group_size / 2 (group_size 3)"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\ngroup_size = 4\n",
                     "line 4: unknown key 'group_size' in [advanced]"));

    /* each key in its own section only */
    CHECK(fails_with("[basic]\nckpt_dir = /d\nhuge_pages = 1\n", "line 3: unknown key 'huge_pages' in [basic]"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\nnode_size = 2\n",
                     "line 4: unknown key 'node_size' in [advanced]"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nnode_size = 2\nnode_size = 4\n",
                     "line 4: duplicate key 'node_size' (first set on line 3)"));

    CHECK(fails_with("[basic]\nckpt_dir = /d\nckpt_intervall = 3\n", "t.ini, line 3: unknown key 'ckpt_intervall'"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nckpt_interval = -1\n", "line 3: bad value '-1' for ckpt_interval"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nckpt_interval = 3x\n", "line 3: bad value '3x'"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nckpt_interval_s = fast\n", "line 3: bad value 'fast'"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nkeep_last_ckpt = 2\n", "line 3: bad value '2' for keep_last_ckpt"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nkeep_l4 = 0\n", "line 3: bad value '0' for keep_l4"));
    CHECK(fails_with("[basic]\nckpt_dir =\n", "line 2: bad value '' for ckpt_dir"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\njob_name = ..\n", "line 3: bad value '..' for job_name"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\nblock_size = 100\n", "line 4: bad value '100'"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\nsegment_size = 4M4\n", "line 4: bad value '4M4'"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\nsegment_size = 4K\nblock_size = 8K\n",
                     "line 5: block_size 8192 exceeds segment_size 4096"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced\n", "line 3: syntax error"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\njob_name\n", "line 3: syntax error"));
    CHECK(fails_with("\n\n[basic]\nckpt_dir = /d\nverbosity = 1\nverbosity = 2\n",
                     "line 6: duplicate key 'verbosity' (first set on line 5)"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[Basic]\nx=1\n", "line 4: unknown section [Basic]"));
    CHECK(fails_with("[advanced]\nsegment_size = 4K\n", "t.ini: required key ckpt_dir missing"));
    /* the first error is the one reported */
    CHECK(fails_with("[basic]\nfoo = 1\nbar\n", "line 2: unknown key 'foo'"));
    CHECK(fails_with("[basic]\nbar\nfoo = 1\n", "line 2: syntax error"));

    setenv("CRPM_CKPT_DIR", "/from/env", 1);
    setenv("CRPM_JOB_NAME", "envjob", 1);
    CHECK(parse("[basic]\nckpt_dir = /d\njob_name = j\n", &c) == 0);
    CHECK(strcmp(c.ckpt_dir, "/from/env") == 0 && strcmp(c.job_name, "envjob") == 0);
    CHECK(parse("[basic]\nverbosity = 0\n", &c) == 0 && strcmp(c.ckpt_dir, "/from/env") == 0);
    setenv("CRPM_JOB_NAME", "a b", 1);
    CHECK(fails_with("[basic]\n", "environment CRPM_JOB_NAME='a b'"));
    unsetenv("CRPM_CKPT_DIR");
    unsetenv("CRPM_JOB_NAME");

    /* persistent heap: off by default, sizes rounded to whole 4-MiB arenas */
    CHECK(parse("[basic]\nckpt_dir = /d\n", &c) == 0 && c.heap_size == 0 && c.heap_base == CRPM_HEAP_BASE_DEFAULT);
    CHECK(parse("[basic]\nckpt_dir = /d\nheap_size = 16G\n[advanced]\nheap_base = 0x20000000000\n", &c) == 0);
    CHECK(c.heap_size == 16ull << 30 && c.heap_base == 0x20000000000ull);
    CHECK(parse("[basic]\nckpt_dir = /d\nheap_size = 1T\n", &c) == 0 && c.heap_size == 1ull << 40);
    CHECK(parse("[basic]\nckpt_dir = /d\nheap_size = 5M\n", &c) == 0 && c.heap_size == 8ull << 20);
    CHECK(fails_with("[basic]\nckpt_dir = /d\nheap_size = 2T\n", "bad value '2T' for heap_size"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\nheap_base = 0x10000001000\n", "multiple of 4 MiB"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\n[advanced]\nheap_base = 0\n", "for heap_base"));
    CHECK(fails_with("[basic]\nckpt_dir = /d\nheap_size = 1T\n[advanced]\nheap_base = 0x7f8000000000\n",
                     "beyond the user address space"));

    range_checks();
    nested_messages();

    if (argc > 1)
        check_examples(argv[1]);
    char *text = NULL;
    size_t len;
    CHECK(crpm_config_read_file("/nonexistent/x.ini", &text, &len) == CRPM_ERR_CONFIG);
    CHECK(strstr(crpm_last_error(), "/nonexistent/x.ini: cannot open") != NULL);

    return check_summary("config_test");
}
