/*
 * libcrpm: the MPI-free part of the public API -- return codes, levels,
 * data types, statistics and error text.  crpm.h includes it; code that must
 * not see MPI (the engine, tools) includes only this header.
 */
#ifndef CRPM_TYPES_H
#define CRPM_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include "crpm_version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the exported API; everything else in libcrpm.so is hidden. */
#if defined(__GNUC__)
#define CRPM_API __attribute__((visibility("default")))
#else
#define CRPM_API
#endif

/* ---- return codes ------------------------------------------------------ */
#define CRPM_SUCCESS          0
#define CRPM_ERR_INVAL      (-1)  /* invalid argument */
#define CRPM_ERR_STATE      (-2)  /* call out of order (e.g. protect before init) */
#define CRPM_ERR_NOMEM      (-3)  /* out of memory */
#define CRPM_ERR_IO         (-4)  /* file-system or mapping error */
#define CRPM_ERR_CONFIG     (-5)  /* bad or missing configuration */
#define CRPM_ERR_CORRUPT    (-6)  /* checksum mismatch: corrupt container or file */
#define CRPM_ERR_VERSION    (-7)  /* unsupported on-media format version */
#define CRPM_ERR_FORMAT     (-8)  /* not a libcrpm container (bad magic) */
#define CRPM_ERR_TRUNCATED  (-9)  /* container file shorter than its metadata says */
#define CRPM_ERR_GEOMETRY  (-10)  /* segment/block size differs from the configuration */
#define CRPM_ERR_IDENTITY  (-11)  /* container belongs to another job, rank or rank count */
#define CRPM_ERR_MISMATCH  (-12)  /* protected arrays differ from what was saved */
#define CRPM_ERR_NOCKPT    (-13)  /* no checkpoint to recover */
#define CRPM_ERR_EPOCH     (-14)  /* ranks hold checkpoints that cannot be reconciled */
#define CRPM_ERR_MPI       (-15)  /* an MPI call failed */
#define CRPM_ERR_REMOTE    (-16)  /* the operation failed on another rank */
#define CRPM_ERR_MISSING   (-17)  /* some ranks have no container for this job */
#define CRPM_ERR_NRANKS    (-18)  /* checkpoint was written with another number of ranks */
#define CRPM_ERR_HDF5      (-19)  /* an HDF5 call failed (level 4) */
#define CRPM_ERR_NOTSUP    (-20)  /* feature not available in this build */
#define CRPM_ERR_RANGE     (-21)  /* size or index out of range */
#define CRPM_ERR_BUSY      (-22)  /* checkpoints in use by another job or process */
#define CRPM_ERR_DEVICE    (-23)  /* a GPU (CUDA) call failed, or no usable GPU for device memory */

/* ---- GPU arrays (crpm_protect_device, device_mode; docs/gpu.md) -------- */
#define CRPM_DEVICE_DEFAULT     0 /* the configuration's device_mode (default: diff) */
#define CRPM_DEVICE_DIFF        1 /* a copy of the committed state on the GPU; changed blocks found there */
#define CRPM_DEVICE_FINGERPRINT 2 /* a 128-bit fingerprint per block on the GPU instead of the copy */
#define CRPM_DEVICE_FULL        3 /* every byte copied to the host at each checkpoint (FTI-style) */

/* ---- checkpoint levels ------------------------------------------------- */
#define CRPM_L1 1   /* node-local differential container (persistent memory) */
#define CRPM_L2 2   /* level 1 plus a differential copy on the partner node (survives losing a node) */
#define CRPM_L3 3   /* level 1 plus Reed-Solomon parity over a group of nodes (survives l3_parity lost) */
#define CRPM_L4 4   /* global checkpoint in parallel HDF5 under glbl_dir */

/* ---- crpm_status() results --------------------------------------------- */
/* CRPM_STATUS_Ln == n: the level the restart comes from.  Statuses that are
 * no level get values of their own (16 and up). */
#define CRPM_STATUS_FRESH 0  /* nothing to recover */
#define CRPM_STATUS_L1    1  /* a level-1 checkpoint is available */
#define CRPM_STATUS_L2    2  /* level 1 rebuilt from level-2 partner copies (a node was lost) */
#define CRPM_STATUS_L3    3  /* level 1 rebuilt from level-3 parity (nodes of a group were lost) */
#define CRPM_STATUS_L4    4  /* only a level-4 checkpoint is available */
/* the checkpoint was written by another number of ranks: protect this run's
 * boxes of the global datasets, then recover (docs/reshape.md) */
#define CRPM_STATUS_RESHAPED 16

/* ---- crpm_snapshot() results (non-negative) ----------------------------- */
#define CRPM_SNAP_NONE         0  /* nothing to do this call */
#define CRPM_SNAP_RECOVERED    1  /* protected arrays were restored from a checkpoint */
#define CRPM_SNAP_CHECKPOINTED 2  /* a checkpoint was taken */
#define CRPM_SNAP_EXIT         3  /* the job was asked to stop: a final checkpoint was taken, exit now */

/* ---- data types -------------------------------------------------------- */
/* A type is its code plus element size in bytes.  Codes below
 * CRPM_TYPE_USER are the predefined C types; user types (structs) are
 * opaque byte records made with crpm_init_type(). */
typedef struct crpm_type {
    int32_t code;
    int32_t reserved;
    int64_t size;
} crpm_type_t;

enum crpm_type_code {
    CRPM_TC_CHAR = 1, CRPM_TC_SHORT, CRPM_TC_INT, CRPM_TC_LONG, CRPM_TC_LLONG,
    CRPM_TC_UINT, CRPM_TC_ULONG, CRPM_TC_FLOAT, CRPM_TC_DOUBLE, CRPM_TC_LDOUBLE,
    CRPM_TC_BYTE,
    /* fixed-width codes used by the Fortran bindings */
    CRPM_TC_INT8, CRPM_TC_INT16, CRPM_TC_INT32, CRPM_TC_INT64,
    CRPM_TC_COMPLEX_FLOAT, CRPM_TC_COMPLEX_DOUBLE, CRPM_TC_LOGICAL,
    CRPM_TYPE_USER = 100
};

CRPM_API extern const crpm_type_t CRPM_CHAR, CRPM_SHORT, CRPM_INT, CRPM_LONG, CRPM_LLONG,
    CRPM_UINT, CRPM_ULONG, CRPM_FLOAT, CRPM_DOUBLE, CRPM_LDOUBLE, CRPM_BYTE;

/* Define a user type of `size` bytes per element (e.g. sizeof(struct atom)).
 * Errors: CRPM_ERR_INVAL (NULL type, size 0). */
CRPM_API int crpm_init_type(crpm_type_t *type, size_t size);

/* Text for a return code (never NULL). */
CRPM_API const char *crpm_strerror(int code);

/* Detailed message of this rank's most recent error ("" if none). */
CRPM_API const char *crpm_last_error(void);

/* The library's version at run time, "MAJOR.MINOR.PATCH" (static, never
 * NULL); fills each of major, minor, patch that is not NULL.  The
 * CRPM_VERSION_* macros (crpm_version.h) are the version compiled against:
 * a program may refuse a library of another major version.  Any thread, at
 * any time (no crpm_init needed). */
CRPM_API const char *crpm_version(int *major, int *minor, int *patch);

/* Statistics of this rank's checkpoints. */
typedef struct crpm_stats {
    uint64_t checkpoints;      /* number of checkpoints taken */
    uint64_t protected_bytes;  /* bytes protected at the last checkpoint */
    uint64_t bytes_compared;   /* bytes of working copy compared */
    uint64_t bytes_written;    /* bytes written to the container */
    uint64_t blocks_written;   /* blocks written to the container */
    uint64_t drains;           /* persistence fences */
    double   seconds;          /* wall time spent in checkpoints */
    uint64_t bytes_sent;       /* bytes sent to other nodes (level-2 partner copies, level-3 parity) */
} crpm_stats_t;

/* last: the most recent checkpoint; total: since init.  Either may be NULL.
 * Errors: CRPM_ERR_STATE (before init).
 *
 * crpm_stats_t may gain fields at the end in a minor version.  The macro
 * passes the caller's sizeof(crpm_stats_t), so a program fills exactly the
 * struct it was compiled with: fields the library does not know are zeroed,
 * fields the program does not know are not written.  size must hold at least
 * the fields of version 2.0 (64 bytes); CRPM_ERR_INVAL otherwise.  The
 * function crpm_get_stats (reached as `(crpm_get_stats)(...)`, and by
 * programs built against 2.0.0) fills the 2.0 fields only. */
CRPM_API int crpm_get_stats_sized(crpm_stats_t *last, crpm_stats_t *total, size_t size);
CRPM_API int(crpm_get_stats)(crpm_stats_t *last, crpm_stats_t *total);
#define crpm_get_stats(last, total) crpm_get_stats_sized((last), (total), sizeof(crpm_stats_t))

/* Progress of long work: a restart's level-2 restore ("L2 sync", also a
 * partner copy's whole-file sync at a checkpoint), level-3 rebuild ("L3
 * rebuild"), a restart on another number of ranks ("reshape").  fn gets, on
 * every rank that does such work, its name, this rank's bytes done of its total
 * (an upper bound while it runs), bytes per second and seconds left (-1:
 * unknown), at most every every_s seconds (0: at every step; < 0: every 3 s)
 * and once at the end with done == total.  Process-wide, callable before
 * crpm_init; fn NULL turns it off.  (At verbosity >= 2 rank 0 prints the
 * same every 3 s once the work took that long.)  Returns CRPM_SUCCESS. */
typedef void (*crpm_progress_fn)(const char *what, uint64_t done, uint64_t total, double rate,
                                 double seconds_left, void *user);
CRPM_API int crpm_set_progress(crpm_progress_fn fn, void *user, double every_s);

#ifdef __cplusplus
}
#endif
#endif /* CRPM_TYPES_H */
