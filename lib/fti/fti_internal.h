/* Shared by the files of libfti; not exported. */
#ifndef CRPM_FTI_INTERNAL_H
#define CRPM_FTI_INTERNAL_H

/* A message in FTI's manner: printed when `level` (FTI_DBUG..FTI_EROR) is at
 * least the configured verbosity, errors always; `all`: on every rank that
 * calls, else on rank 0 only. */
__attribute__((visibility("hidden"), format(printf, 3, 4)))
void fti_say(int level, int all, const char *fmt, ...);

/* Says once per process that `fn` is not supported (why: `what`); FTI_NSCS. */
__attribute__((visibility("hidden")))
int fti_unsupported(const char *fn, const char *what);

/* fti.c: the libcrpm type of an FTI type handle (-1: no such handle), and
 * whether FTI_Init succeeded. */
#include <crpm.h>
#include <fti.h>
__attribute__((visibility("hidden")))
int fti_type_of(fti_id_t t, crpm_type_t *ct);
__attribute__((visibility("hidden")))
int fti_initialized(void);
/* fti_global.c: forgets the global datasets (FTI_Finalize). */
__attribute__((visibility("hidden")))
void fti_global_reset(void);
/* fti_stage.c: staging (enable_staging = 1): the stage directory made under
 * ckpt_dir at init; finalize waits for the queued moves and stops the thread. */
#define FTI_STAGE_DIR_MAX 4200
__attribute__((visibility("hidden")))
int fti_stage_init(const char *ckpt_dir, int rank, int enabled);
__attribute__((visibility("hidden")))
void fti_stage_finalize(void);
/* fti_global.c: the number of global datasets defined. */
__attribute__((visibility("hidden")))
int fti_global_count(void);

#endif
