/* Internal test hook, compiled into builds with CRPM_TEST_HOOKS only (the
 * test suites): CRPM_TEST_KILL=<rank>:<point>:<n>[,...] makes that rank
 * SIGKILL itself at a point (before_data, after_data, after_commit; level 2:
 * l2_sent = the owner's data posted to its partner, l2_applied = a partner
 * copy's data written but not committed, l2_committed = the copies
 * committed, before the job agreed; reshape_removing, see below) of its n-th checkpoint, so tests can
 * leave ranks and copies on different epochs. */
#ifndef CRPM_MPI_TESTHOOK_H
#define CRPM_MPI_TESTHOOK_H
#include "context.h"

/* Reads CRPM_TEST_KILL into ctx (nothing without CRPM_TEST_HOOKS). */
int crpm_testhook_parse(crpm_ctx *ctx);
/* Installs the hook on a container when ctx asks for kills. */
void crpm_testhook_attach(crpm_ctx *ctx, crpm_container *c);
/* The same for level 2's points. */
void crpm_testhook_l2(crpm_ctx *ctx, crpm_l2_opts *o);
/* Level 3: kill points l3_sent, l3_applied, l3_committed; CRPM_TEST_L3_VERIFY=1
 * checks the parity against a full re-encode after every level-3 checkpoint. */
void crpm_testhook_l3(crpm_ctx *ctx, crpm_l3_opts *o);
/* Kill points outside the levels: reshape_removing (the files of an older
 * rank count about to be removed after this job's checkpoint committed). */
void crpm_testhook_point(crpm_ctx *ctx, const char *point);

#endif
