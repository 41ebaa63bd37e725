/* How many workers a rank's engine gets ([advanced] threads, threads.h). */
#include "threads.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "mpi_error.h"

/* The first number of OMP_NUM_THREADS ("8" or a nested list "8,2"), or 0. */
static int omp_threads(void)
{
    const char *v = getenv("OMP_NUM_THREADS");
    if (!v || !*v)
        return 0;
    char *end;
    long n = strtol(v, &end, 10);
    if (end == v || (*end && *end != ',') || n < 1)
        return 0;
    return n > CRPM_THREADS_MAX ? CRPM_THREADS_MAX : (int)n;
}

/* The CPUs of all masks together, and rank r's share of its own mask: its
 * CPUs divided among the ranks whose masks meet it. */
static long share_of(const cpu_set_t *masks, int n, int r)
{
    int k = 0;
    for (int q = 0; q < n; q++) {
        cpu_set_t both;
        CPU_AND(&both, &masks[r], &masks[q]);
        k += CPU_COUNT(&both) > 0;
    }
    long share = k ? CPU_COUNT(&masks[r]) / k : 1;
    return share < 1 ? 1 : share;
}

int crpm_threads_share(const cpu_set_t *masks, int n, int me)
{
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int r = 0; r < n; r++)
        CPU_OR(&all, &all, &masks[r]);
    long total = 0, mine = 1, cores = CPU_COUNT(&all);
    for (int r = 0; r < n; r++) {
        long share = share_of(masks, n, r);
        total += share;
        if (r == me)
            mine = share;
    }
    if (total > cores && cores > 0) /* overlapping masks: never more workers than the node's cores */
        mine = mine * cores / total;
    if (mine < 1)
        mine = 1;
    return mine > CRPM_THREADS_MAX ? CRPM_THREADS_MAX : (int)mine;
}

int crpm_threads_cap(const cpu_set_t *masks, int n)
{
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int r = 0; r < n; r++)
        CPU_OR(&all, &all, &masks[r]);
    long cap = n > 0 ? CPU_COUNT(&all) / n : 1;
    return cap < 1 ? 1 : cap > CRPM_THREADS_MAX ? CRPM_THREADS_MAX : (int)cap;
}

/* The affinity masks of the ranks of this rank's shared-memory node
 * (collective over comm; *all malloc'ed, *n entries, *me this rank's). */
static int node_masks(MPI_Comm comm, cpu_set_t **all, int *n, int *me)
{
    *all = NULL;
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0)
        CPU_SET(0, &mask);
    MPI_Comm node;
    int rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    if (rc != MPI_SUCCESS)
        return crpm_mpi_fail(rc, "threads = auto: MPI_Comm_split_type");
    MPI_Comm_size(node, n);
    MPI_Comm_rank(node, me);
    /* every rank of the node has the buffer, or none gathers (no mismatched counts) */
    cpu_set_t *buf = malloc((size_t)*n * sizeof *buf);
    int ok = buf != NULL, all_ok = 0;
    rc = MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, node);
    if (rc == MPI_SUCCESS && all_ok)
        rc = MPI_Allgather(&mask, (int)sizeof mask, MPI_BYTE, buf, (int)sizeof mask, MPI_BYTE, node);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS || !all_ok) {
        free(buf);
        return rc != MPI_SUCCESS ? crpm_mpi_fail(rc, "threads = auto: exchange of the affinity masks")
                                 : crpm_error(CRPM_ERR_NOMEM, "threads = auto: out of memory on a rank of the node");
    }
    *all = buf;
    return CRPM_SUCCESS;
}

int crpm_threads_for(MPI_Comm comm, int configured, int *out, const char **why)
{
    /* exchanged whatever this rank's setting, so that every rank makes the
     * same collective calls */
    *out = 1;
    *why = "";
    cpu_set_t *all;
    int n = 1, me = 0;
    int rc = node_masks(comm, &all, &n, &me);
    if (rc)
        return rc;
    int omp = omp_threads(), cap = crpm_threads_cap(all, n);
    if (configured > 0) {
        *out = configured;
        *why = "threads in [advanced]";
    } else if (omp > 0) {
        *out = omp < cap ? omp : cap;
        *why = omp <= cap ? "OMP_NUM_THREADS" : "OMP_NUM_THREADS, capped at the node's cores per rank";
    } else {
        *out = crpm_threads_share(all, n, me);
        *why = "the cores of the rank's affinity mask shared among the ranks of its node";
    }
    free(all);
    return CRPM_SUCCESS;
}
