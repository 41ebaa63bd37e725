/* Return codes, their text, and the per-thread detailed message. */
#include <stdarg.h>
#include <stdio.h>
#include "error.h"

#include <string.h>

static _Thread_local char last_msg[3 * 4096];
/* Callers wrap the last message in a new one (crpm_error(rc, "%s: %s", fn,
 * crpm_last_error())): formatting straight into last_msg would overwrite the
 * cause while reading it, so the text is built here and then copied. */
static _Thread_local char next_msg[sizeof last_msg];

int crpm_error(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(next_msg, sizeof next_msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    size_t len = (size_t)n < sizeof next_msg ? (size_t)n : sizeof next_msg - 1;
    memcpy(last_msg, next_msg, len);
    last_msg[len] = '\0';
    return code;
}

void crpm_error_clear(void)
{
    last_msg[0] = '\0';
}

const char *crpm_last_error(void)
{
    return last_msg;
}

const char *crpm_strerror(int code)
{
    switch (code) {
    case CRPM_SUCCESS:       return "success";
    case CRPM_ERR_INVAL:     return "invalid argument";
    case CRPM_ERR_STATE:     return "call out of order (library not initialized or already finalized?)";
    case CRPM_ERR_NOMEM:     return "out of memory";
    case CRPM_ERR_IO:        return "I/O error on a checkpoint file";
    case CRPM_ERR_CONFIG:    return "bad or missing configuration";
    case CRPM_ERR_CORRUPT:   return "checkpoint data is corrupt (checksum mismatch)";
    case CRPM_ERR_VERSION:   return "unsupported checkpoint format version";
    case CRPM_ERR_FORMAT:    return "not a libcrpm container";
    case CRPM_ERR_TRUNCATED: return "checkpoint file is truncated";
    case CRPM_ERR_GEOMETRY:  return "container geometry differs from the configuration";
    case CRPM_ERR_IDENTITY:  return "container belongs to another job or rank";
    case CRPM_ERR_MISMATCH:  return "protected arrays differ from the saved checkpoint";
    case CRPM_ERR_NOCKPT:    return "no checkpoint to recover";
    case CRPM_ERR_EPOCH:     return "ranks hold checkpoints that cannot be reconciled";
    case CRPM_ERR_MPI:       return "MPI error";
    case CRPM_ERR_REMOTE:    return "the operation failed on another rank";
    case CRPM_ERR_MISSING:   return "some ranks have no checkpoint container for this job";
    case CRPM_ERR_NRANKS:    return "checkpoint was written by a different number of ranks";
    case CRPM_ERR_HDF5:      return "HDF5 error";
    case CRPM_ERR_NOTSUP:    return "not supported by this build";
    case CRPM_ERR_RANGE:     return "size or index out of range";
    case CRPM_ERR_BUSY:      return "checkpoint in use by another job or process";
    case CRPM_ERR_DEVICE:    return "GPU error (CUDA call failed or no usable GPU)";
    default:                 return "unknown error code";
    }
}
