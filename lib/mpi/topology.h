/* Nodes and level-2 partners.  A node is a set of ranks sharing node-local
 * storage: MPI's shared-memory split by default, or `node_size` consecutive
 * ranks (simulated nodes on one machine, or a machine where that detection
 * is wrong).  Nodes are numbered by their lowest rank. */
#ifndef CRPM_MPI_TOPOLOGY_H
#define CRPM_MPI_TOPOLOGY_H
#include <mpi.h>
#include <stddef.h>

typedef struct crpm_topology {
    int node, nnodes;          /* this rank's node, number of nodes */
    int local, nlocal;         /* rank within its node, ranks on its node */
    char host[256];            /* host name (gethostname) */
    /* Level 2: the rank holding this rank's partner copy, the same local
     * rank on the next node (a ring over nodes; local % size of that node
     * when nodes differ in size); -1 with one node. */
    int partner;
    int *owners;               /* ranks whose partner copies this rank holds */
    int nowners;
    int *node_of;              /* every rank's node (nranks entries) */
} crpm_topology;

/* Level 3, collective over comm: groups of K consecutive nodes; groups[r]
 * and members[r] (nranks entries each, allocated) are rank r's group and
 * member index (its node within the group); the ranks of one group are one
 * per node with the same local rank.  CRPM_ERR_CONFIG with the reason when
 * no such layout exists (l3_code.h rules, or nodes of one group holding
 * different numbers of ranks). */
int crpm_topology_l3(MPI_Comm comm, const crpm_topology *t, int K, int M, int **groups, int **members);

/* Collective over comm. */
int crpm_topology_build(MPI_Comm comm, int node_size, crpm_topology *t);
void crpm_topology_free(crpm_topology *t);
/* Expands %n (node index), %h (host name) and %% in a ckpt_dir pattern. */
int crpm_topology_expand(const crpm_topology *t, const char *pattern, char *out, size_t len);

#endif
