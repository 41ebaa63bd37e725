/* The topology through the public API: ckpt_interval_l2 with one node is a
 * configuration error on every rank; %n in ckpt_dir gives each simulated
 * node its own directory; an unknown %x is an error on every rank; and
 * verbosity 2 prints the topology (one line for the job, one per node). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "crpm.h"

static int rank, nranks;
static char base[256];

static const char *write_cfg(const char *name, const char *fmt, ...)
{
    static char p[400];
    snprintf(p, sizeof p, "%s/%s.ini", base, name);
    if (rank == 0) {
        FILE *f = fopen(p, "w");
        REQUIRE(f, "%s", p);
        va_list ap;
        va_start(ap, fmt);
        vfprintf(f, fmt, ap);
        va_end(ap);
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return p;
}

static int exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* crpm_init with this rank's stdout going to a file; returns its rc and
 * what was printed (static buffer). */
static int init_capture(const char *cfg, const char **printed)
{
    static char text[8192];
    char path[400];
    snprintf(path, sizeof path, "%s/out-%d.txt", base, rank);
    fflush(stdout);
    int saved = dup(STDOUT_FILENO), fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(saved >= 0 && fd >= 0);
    dup2(fd, STDOUT_FILENO);
    close(fd);
    int rc = crpm_init(cfg, MPI_COMM_WORLD);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    FILE *f = fopen(path, "r");
    REQUIRE(f);
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(path);
    *printed = text;
    return rc;
}

static void one_node_error(int node_size)
{
    const char *out;
    char ns[64] = "";
    if (node_size >= 0)
        snprintf(ns, sizeof ns, "node_size = %d\n", node_size);
    const char *cfg = write_cfg("l2one", "[basic]\nckpt_dir = %s/ckpt\njob_name = one\nverbosity = 0\n"
                                "ckpt_interval = 5\nckpt_interval_l2 = 2\n%s", base, ns);
    int rc = init_capture(cfg, &out);
    CHECK(rc == CRPM_ERR_CONFIG, "node_size %d: ckpt_interval_l2 with one node: rc %d", node_size, rc);
    CHECK(strstr(crpm_last_error(), "ckpt_interval_l2 needs at least two nodes"), "node_size %d: message",
          node_size);
    CHECK(strstr(crpm_last_error(), cfg), "node_size %d: message names the file", node_size);
    CHECK(strstr(crpm_last_error(), "node_size"), "node_size %d: message points at node_size", node_size);
    if (rc == 0)
        crpm_finalize();
    /* ckpt_interval_l2 = 0 is fine with one node */
    cfg = write_cfg("l2zero", "[basic]\nckpt_dir = %s/ckpt\njob_name = zero\nverbosity = 0\nckpt_interval_l2 = 0\n%s",
                    base, ns);
    rc = init_capture(cfg, &out);
    CHECK(rc == 0, "node_size %d: ckpt_interval_l2 = 0 with one node: rc %d", node_size, rc);
    if (rc == 0)
        CHECK(crpm_finalize() == 0);
}

/* Verbosity 2: rank 0 prints the job line, the first rank of each node its
 * node line, and nobody else anything about the topology. */
static void check_lines(const char *out, int node_size, int node, int nnodes, int local, int nlocal)
{
    char want[512], host[256] = "";
    gethostname(host, sizeof host - 1);
    snprintf(want, sizeof want, "[crpm] %d ranks on %d node%s (%s)\n", nranks, nnodes, nnodes == 1 ? "" : "s",
             node_size ? "node_size from the configuration" : "MPI shared-memory nodes");
    CHECK((strstr(out, want) != NULL) == (rank == 0), "node_size %d: job line '%s' in:\n%s", node_size, want, out);
    snprintf(want, sizeof want, "[crpm] node %d on %s: rank %d first of %d", node, host, rank, nlocal);
    CHECK((strstr(out, want) != NULL) == (local == 0), "node_size %d: node line '%s' in:\n%s", node_size, want,
          out);
    int lines = 0;
    for (const char *p = out; (p = strstr(p, "[crpm] node ")); p++)
        lines++;
    CHECK(lines == (local == 0), "node_size %d: %d node lines:\n%s", node_size, lines, out);
    if (local == 0 && nnodes > 1) {
        snprintf(want, sizeof want, "first of %d; partner copies on node %d\n", nlocal, (node + 1) % nnodes);
        CHECK(strstr(out, want), "node_size %d: partner node '%s' in:\n%s", node_size, want, out);
    }
}

/* node_size 2: every simulated node writes under its own node<n>. */
static void per_node_dirs(void)
{
    const char *out;
    const int ns = 2, node = rank / ns, nnodes = (nranks + ns - 1) / ns;
    const char *cfg = write_cfg("pernode", "[basic]\nckpt_dir = %s/node%%n/c%%%%\njob_name = pn\nverbosity = 2\n"
                                "node_size = %d\nckpt_interval = 3\nckpt_interval_l2 = %d\n", base, ns,
                                nnodes > 1 ? 2 : 0);
    int rc = init_capture(cfg, &out);
    REQUIRE(rc == 0, "init with node%%n: rc %d", rc);
    check_lines(out, ns, node, nnodes, rank % ns, rank / ns == nnodes - 1 ? nranks - ns * (nnodes - 1) : ns);
    char p[512];
    snprintf(p, sizeof p, "%s/node%d/c%%/pn/rank-%d.crpm", base, node, rank);
    CHECK(exists(p), "%s exists", p);
    for (int n = 0; n < nnodes; n++) {
        snprintf(p, sizeof p, "%s/node%d/c%%/pn/rank-%d.crpm", base, n, rank);
        CHECK(n == node || !exists(p), "%s exists, but rank %d is on node %d", p, rank, node);
    }
    snprintf(p, sizeof p, "%s/node%%n", base);
    CHECK(!exists(p), "%s created unexpanded", p);
    int x = rank;
    CHECK(crpm_protect(0, &x, 1, CRPM_INT) == 0);
    CHECK(crpm_checkpoint(1, CRPM_L1) == 0);
    CHECK(crpm_finalize() == 0);
}

static void one_node_lines(void)
{
    const char *out;
    const char *cfg = write_cfg("shm", "[basic]\nckpt_dir = %s/ckpt\njob_name = shm\nverbosity = 2\n", base);
    int rc = init_capture(cfg, &out);
    REQUIRE(rc == 0, "init: rc %d", rc);
    /* all ranks of this test run on one host */
    check_lines(out, 0, 0, 1, rank, nranks);
    CHECK(crpm_finalize() == 0);
    /* verbosity 1: nothing about the topology */
    cfg = write_cfg("quiet", "[basic]\nckpt_dir = %s/ckpt\njob_name = quiet\nnode_size = 1\n", base);
    rc = init_capture(cfg, &out);
    REQUIRE(rc == 0, "init: rc %d", rc);
    CHECK(!strstr(out, "[crpm]"), "verbosity 1 printed:\n%s", out);
    CHECK(crpm_finalize() == 0);
}

static void unknown_escape(void)
{
    const char *out;
    const char *cfg = write_cfg("badpct", "[basic]\nckpt_dir = %s/n%%x\njob_name = bad\nverbosity = 0\n", base);
    int rc = init_capture(cfg, &out);
    CHECK(rc == CRPM_ERR_CONFIG, "ckpt_dir with %%x: rc %d", rc);
    CHECK(strstr(crpm_last_error(), "unknown '%x'"), "message names %%x");
    if (rc == 0)
        crpm_finalize();
    char p[400];
    snprintf(p, sizeof p, "%s/n%%x", base);
    CHECK(!exists(p), "%s created", p);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_set_rank(rank);
    check_set_note(crpm_last_error);
    int id = (int)getpid();
    MPI_Bcast(&id, 1, MPI_INT, 0, MPI_COMM_WORLD);
    snprintf(base, sizeof base, "%s/crpm-topo-%d", argc > 1 ? argv[1] : "/tmp", id);
    if (rank == 0)
        REQUIRE(mkdir(base, 0755) == 0, "mkdir %s", base);
    MPI_Barrier(MPI_COMM_WORLD);

    one_node_error(-1);        /* no node_size: MPI shared-memory nodes, one host */
    one_node_error(0);
    one_node_error(nranks);
    one_node_error(nranks + 3);
    one_node_lines();
    per_node_dirs();
    unknown_escape();

    MPI_Barrier(MPI_COMM_WORLD);
    int fails = check_failures(), any;
    MPI_Allreduce(&fails, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
        CHECK(system(cmd) == 0);
    }
    check_summary("test_topology_init");
    MPI_Finalize();
    return any ? 1 : 0;
}
