/* MPI test of the node topology (lib/mpi/topology.c), run with several rank
 * counts: for node_size 0 (MPI shared-memory nodes) and a range of node
 * sizes, including an uneven last node, every rank's node, local index,
 * partner and owners are gathered and checked against the definition by
 * every rank; then the %n / %h / %% expansion of ckpt_dir. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "error.h"
#include "topology.h"

static int rank, nranks;

/* One rank's view, gathered: node, nnodes, local, nlocal, partner, nowners,
 * then up to nranks owners (-1 padded). */
enum { F_NODE, F_NNODES, F_LOCAL, F_NLOCAL, F_PARTNER, F_NOWNERS, F_OWNERS };

static int nodes_by_host(int *expect)
{
    /* Independent of the library: ranks with the same host name share a node
     * (what MPI_COMM_TYPE_SHARED means on this machine), numbered in order
     * of their lowest rank. */
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    char *all = malloc((size_t)nranks * sizeof host);
    REQUIRE(all);
    MPI_Allgather(host, sizeof host, MPI_CHAR, all, sizeof host, MPI_CHAR, MPI_COMM_WORLD);
    int n = 0;
    for (int r = 0; r < nranks; r++) {
        expect[r] = -1;
        for (int q = 0; q < r && expect[r] < 0; q++)
            if (strcmp(all + (size_t)q * sizeof host, all + (size_t)r * sizeof host) == 0)
                expect[r] = expect[q];
        if (expect[r] < 0)
            expect[r] = n++;
    }
    free(all);
    return n;
}

static void check_topology(int node_size)
{
    crpm_topology t;
    int rc = crpm_topology_build(MPI_COMM_WORLD, node_size, &t);
    REQUIRE(rc == 0, "node_size %d: build failed: %d", node_size, rc);
    const int w = F_OWNERS + nranks;
    int *mine = malloc(sizeof(int) * (size_t)w), *all = malloc(sizeof(int) * (size_t)w * (size_t)nranks);
    int *exp_node = malloc(sizeof(int) * (size_t)nranks);
    REQUIRE(mine && all && exp_node);
    mine[F_NODE] = t.node;
    mine[F_NNODES] = t.nnodes;
    mine[F_LOCAL] = t.local;
    mine[F_NLOCAL] = t.nlocal;
    mine[F_PARTNER] = t.partner;
    mine[F_NOWNERS] = t.nowners;
    CHECK(t.nowners >= 0 && t.nowners <= nranks, "node_size %d: nowners %d", node_size, t.nowners);
    for (int i = 0; i < nranks; i++)
        mine[F_OWNERS + i] = i < t.nowners && t.nowners <= nranks ? t.owners[i] : -1;
    MPI_Allgather(mine, w, MPI_INT, all, w, MPI_INT, MPI_COMM_WORLD);
#define AT(r, f) all[(size_t)(r) * (size_t)w + (f)]

    int exp_nnodes;
    if (node_size > 0) {
        for (int r = 0; r < nranks; r++)
            exp_node[r] = r / node_size;
        exp_nnodes = (nranks + node_size - 1) / node_size;
    } else {
        exp_nnodes = nodes_by_host(exp_node);
    }
    CHECK(strlen(t.host) > 0, "host name empty");
    for (int r = 0; r < nranks; r++) {
        CHECK(AT(r, F_NODE) == exp_node[r], "node_size %d: rank %d on node %d, expected %d", node_size, r,
              AT(r, F_NODE), exp_node[r]);
        CHECK(AT(r, F_NNODES) == exp_nnodes, "node_size %d: rank %d sees %d nodes, expected %d", node_size, r,
              AT(r, F_NNODES), exp_nnodes);
        int local = 0, nlocal = 0;
        for (int q = 0; q < nranks; q++) {
            nlocal += exp_node[q] == exp_node[r];
            local += q < r && exp_node[q] == exp_node[r];
        }
        CHECK(AT(r, F_LOCAL) == local && AT(r, F_NLOCAL) == nlocal, "node_size %d: rank %d local %d of %d, "
              "expected %d of %d", node_size, r, AT(r, F_LOCAL), AT(r, F_NLOCAL), local, nlocal);
    }
    if (exp_nnodes < 2) {
        for (int r = 0; r < nranks; r++)
            CHECK(AT(r, F_PARTNER) == -1 && AT(r, F_NOWNERS) == 0, "node_size %d, one node: rank %d has partner %d "
                  "and %d owners", node_size, r, AT(r, F_PARTNER), AT(r, F_NOWNERS));
    } else {
        int *owned = calloc((size_t)nranks, sizeof(int)), total = 0;
        REQUIRE(owned);
        for (int r = 0; r < nranks; r++) {
            int p = AT(r, F_PARTNER);
            CHECK(p >= 0 && p < nranks, "node_size %d: rank %d partner %d", node_size, r, p);
            if (p < 0 || p >= nranks)
                continue;
            CHECK(exp_node[p] != exp_node[r], "node_size %d: rank %d's partner %d on its own node", node_size, r, p);
            CHECK(exp_node[p] == (exp_node[r] + 1) % exp_nnodes, "node_size %d: rank %d (node %d) partner %d on "
                  "node %d, not the next node", node_size, r, exp_node[r], p, exp_node[p]);
            /* same local rank; wrapped when the next node is smaller */
            CHECK(AT(p, F_LOCAL) == AT(r, F_LOCAL) % AT(p, F_NLOCAL), "node_size %d: rank %d (local %d) partner %d "
                  "(local %d of %d)", node_size, r, AT(r, F_LOCAL), p, AT(p, F_LOCAL), AT(p, F_NLOCAL));
            /* owners are the inverse: r is listed by its partner exactly once */
            int seen = 0;
            for (int i = 0; i < AT(p, F_NOWNERS); i++)
                seen += AT(p, F_OWNERS + i) == r;
            CHECK(seen == 1, "node_size %d: rank %d listed %d times among partner %d's owners", node_size, r, seen, p);
            owned[p]++;
        }
        for (int r = 0; r < nranks; r++) {
            CHECK(AT(r, F_NOWNERS) == owned[r], "node_size %d: rank %d lists %d owners, holds copies of %d",
                  node_size, r, AT(r, F_NOWNERS), owned[r]);
            for (int i = 0; i < AT(r, F_NOWNERS); i++) {
                int o = AT(r, F_OWNERS + i);
                CHECK(o >= 0 && o < nranks && AT(o, F_PARTNER) == r, "node_size %d: rank %d lists owner %d whose "
                      "partner is %d", node_size, r, o, o >= 0 && o < nranks ? AT(o, F_PARTNER) : -2);
            }
            total += AT(r, F_NOWNERS);
        }
        CHECK(total == nranks, "node_size %d: %d partner copies for %d ranks", node_size, total, nranks);
        /* a ring over the nodes: following partners from node 0 visits every node */
        int r = 0, steps = 0;
        do {
            r = AT(r, F_PARTNER);
            steps++;
        } while (r >= 0 && exp_node[r] != 0 && steps <= exp_nnodes);
        CHECK(steps == exp_nnodes, "node_size %d: the partner ring has %d nodes, not %d", node_size, steps,
              exp_nnodes);
        free(owned);
    }
#undef AT
    crpm_topology_free(&t);
    CHECK(t.owners == NULL && t.nowners == 0, "free resets owners");
    free(mine);
    free(all);
    free(exp_node);
}

static void expands_to(const crpm_topology *t, const char *pattern, const char *want)
{
    char out[64];
    int rc = crpm_topology_expand(t, pattern, out, sizeof out);
    CHECK(rc == 0 && strcmp(out, want) == 0, "'%s' -> rc %d '%s', expected '%s'", pattern, rc,
                 rc == 0 ? out : "", want);
}

static void expand_fails(const crpm_topology *t, const char *pattern, size_t len, const char *msg)
{
    char out[64];
    int rc = crpm_topology_expand(t, pattern, out, len);
    CHECK(rc == CRPM_ERR_CONFIG && strstr(crpm_last_error(), msg), "'%s' (%zu bytes): rc %d, expected "
                 "CRPM_ERR_CONFIG saying '%s'", pattern, len, rc, msg);
}

static void check_expand(void)
{
    crpm_topology t;
    REQUIRE(crpm_topology_build(MPI_COMM_WORLD, 2, &t) == 0);
    char want[512], host[256] = "";
    gethostname(host, sizeof host - 1);
    CHECK(strcmp(t.host, host) == 0, "host '%s', gethostname '%s'", t.host, host);
    crpm_topology_free(&t);

    crpm_topology f = {.node = 17};
    strcpy(f.host, "hostA");
    expands_to(&f, "/dev/shm/x/node%n", "/dev/shm/x/node17");
    expands_to(&f, "%n", "17");
    expands_to(&f, "/d/%h/n%n/", "/d/hostA/n17/");
    expands_to(&f, "%h%h", "hostAhostA");
    expands_to(&f, "/a%%b", "/a%b");
    expands_to(&f, "%%n", "%n");
    expands_to(&f, "%%%n", "%17");
    expands_to(&f, "/plain/dir", "/plain/dir");
    expands_to(&f, "", "");
    f.node = 0;
    expands_to(&f, "n%n", "n0");
    snprintf(want, sizeof want, "/d/%s", host);
    strcpy(f.host, host);
    expands_to(&f, "/d/%h", want);

    expand_fails(&f, "/d/%x", 64, "unknown '%x'");
    expand_fails(&f, "/d/%N", 64, "unknown '%N'");
    expand_fails(&f, "/d/%", 64, "unknown '%");
    expand_fails(&f, "/d/%x", 64, "ckpt_dir '/d/%x'");
    /* the result and its NUL must fit */
    f.node = 123;
    char out[8];
    CHECK(crpm_topology_expand(&f, "/ab%n", out, 7) == 0 && strcmp(out, "/ab123") == 0, "exact fit");
    expand_fails(&f, "/ab%n", 6, "too long once expanded");
    expand_fails(&f, "/abcdef", 7, "too long once expanded");
    expand_fails(&f, "/abcde%%", 7, "too long once expanded");
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    check_set_rank(rank);
    check_set_note(crpm_last_error);

    check_topology(0);
    for (int ns = 1; ns <= nranks + 1; ns++)
        check_topology(ns);
    check_topology(1 << 24);
    check_expand();

    int fails = check_failures(), any;
    MPI_Allreduce(&fails, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    check_summary("test_topology");
    MPI_Finalize();
    return any ? 1 : 0;
}
