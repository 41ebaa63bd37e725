/* Internal test hook, compiled into builds with CRPM_TEST_HOOKS only (the
 * test suites): CRPM_TEST_KILL=<rank>:<point>:<n>[,...] makes that rank
 * SIGKILL itself at a point (before_data, after_data, after_commit) of its
 * n-th checkpoint, so tests can leave ranks on different epochs. */
#ifndef CRPM_MPI_TESTHOOK_H
#define CRPM_MPI_TESTHOOK_H
#include "context.h"

/* Reads CRPM_TEST_KILL into ctx (nothing without CRPM_TEST_HOOKS). */
int crpm_testhook_parse(crpm_ctx *ctx);
/* Installs the hook on a container when ctx asks for kills. */
void crpm_testhook_attach(crpm_ctx *ctx, crpm_container *c);

#endif
