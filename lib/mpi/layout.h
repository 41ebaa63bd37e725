/* The job layout recorded in checkpoint files (format.h, struct
 * crpm_layout_rec): node_size, each rank's node, the number of nodes,
 * group_size and l3_parity, and what a file is (a rank's container, a
 * partner copy of one, or a level-3 parity container).  Restart compares
 * them with this run before any decision, so a changed configuration is
 * reported as such, never taken for lost nodes or decoded with the wrong
 * code. */
#ifndef CRPM_MPI_LAYOUT_H
#define CRPM_MPI_LAYOUT_H
#include "context.h"

/* Sets ctx->layout from the configuration and the topology (after both). */
void crpm_layout_of_run(crpm_ctx *ctx);

/* Collective, before the restart decision: each rank reads the layout
 * records of the files it holds (its container, its parity container, the
 * partner copies it keeps; its whole job directory when its container is
 * missing), for files of this job and rank count that hold a checkpoint.
 * A difference fails crpm_init on every rank with one message naming the
 * key, both values and the file: CRPM_ERR_CONFIG (node_size, number of
 * nodes, a rank's node, group_size, l3_parity), CRPM_ERR_IDENTITY (a file
 * whose record says it is a parity container where a rank's container is
 * expected, or the reverse).  Nothing is changed or removed.  Files without
 * a record (made before records existed) are not compared. */
int crpm_layout_check(crpm_ctx *ctx);

#endif
