/* What the API layer's files share (api.c, api_global.c): the context, the
 * protect that also takes the library's reserved ids, error reporting, and
 * the hooks api.c calls for the global layout (restart on another number of
 * ranks, docs/reshape.md). */
#ifndef CRPM_API_INTERNAL_H
#define CRPM_API_INTERNAL_H
#include "context.h"
#include "crpm.h"

/* The library's context (NULL before init and after finalize). */
crpm_ctx *crpm_api_ctx(void);
/* Prints rc at verbosity 3 (debugging) and returns it. */
int crpm_api_report(int rc, const char *fn);
/* crpm_protect without the check that `id` is not reserved. */
int crpm_protect_any(int id, void *ptr, int64_t count, crpm_type_t type, const char *fn);
/* ... that also chooses a GPU array's mode (CRPM_DEVICE_*; DEFAULT: the
 * configuration's) and, with device_only, refuses host memory
 * (crpm_protect_device, api_device.c). */
int crpm_protect_mem(int id, void *ptr, int64_t count, crpm_type_t type, const char *fn, int device_mode,
                     int device_only);

/* api_global.c: the layout region and the checks around it. */
int crpm_global_after_init(crpm_ctx *ctx);          /* after crpm_restart */
int crpm_global_before_checkpoint(crpm_ctx *ctx);   /* before any level writes */
void crpm_global_committed(crpm_ctx *ctx, int level); /* every rank committed at `level` */
int crpm_global_finalize(crpm_ctx *ctx);            /* finalize removing the checkpoints */
void crpm_global_free(crpm_ctx *ctx);

/* api_team.c: the engine's workers, made at init (collective) and freed
 * after the levels closed. */
int crpm_threads_setup(crpm_ctx *ctx);
void crpm_threads_free(crpm_ctx *ctx);
/* The guard of the entry points (api_team.c): an exclusive call fails with
 * CRPM_ERR_STATE while another thread is in an exclusive one; a short call
 * waits for another thread's short call and fails during an exclusive one.
 * Nested calls of one thread pass.  CRPM_GUARD opens it at the top of an
 * entry point and closes it at every return. */
int crpm_api_enter(const char *fn, int exclusive);
void crpm_api_leave(void);
void crpm_api_leave_cb(int *entered);
#define CRPM_GUARD(fn, exclusive)                                                                  \
    __attribute__((cleanup(crpm_api_leave_cb))) int crpm_guard_ = crpm_api_enter(fn, exclusive);  \
    if (crpm_guard_ != 0)                                                                          \
    return crpm_api_report(crpm_guard_, fn)

#endif
