/* Error reporting shared by every layer: a negative CRPM_ERR_* code plus a
 * per-thread detailed message (crpm_last_error). */
#ifndef CRPM_UTIL_ERROR_H
#define CRPM_UTIL_ERROR_H
#include "crpm_types.h"

/* Sets this thread's detailed message and returns code. */
int crpm_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Empties the detailed message (a call that succeeds leaves no stale text). */
void crpm_error_clear(void);

#endif
