/*
 * libcrpm -- crash-consistent differential checkpoint/restart for MPI
 * applications on persistent memory.
 *
 * Typical use (FTI-like; needs <stdlib.h> for calloc):
 *
 *   int iter = 0;
 *   double *grid = calloc(n, sizeof *grid);
 *   crpm_init("crpm.ini", MPI_COMM_WORLD);
 *   crpm_protect(0, &iter, 1, CRPM_INT);
 *   crpm_protect(1, grid, n, CRPM_DOUBLE);
 *   if (crpm_status() > 0)          // a checkpoint exists; < 0 is an error
 *       crpm_recover();
 *   while (iter < niter) {
 *       ...compute iteration `iter`...
 *       iter++;                     // the arrays now hold `iter` iterations
 *       if (iter % 10 == 0)         // saved with the counter that matches them,
 *           crpm_checkpoint(iter, CRPM_L1); // so a restart is bitwise identical
 *   }
 *   crpm_finalize();
 *
 * Every function returns CRPM_SUCCESS (0) or a negative CRPM_ERR_* code;
 * crpm_strerror() turns a code into text and crpm_last_error() gives the
 * detailed message of the most recent failure on this rank.  Collective
 * functions agree on failure: when one rank fails, every rank returns an error
 * (CRPM_ERR_REMOTE on the ranks that did not fail themselves).  The library
 * does not print the errors it returns (only at verbosity 3, for debugging):
 * the application prints crpm_last_error() once.
 */
#ifndef CRPM_H
#define CRPM_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CRPM_VERSION_MAJOR 1
#define CRPM_VERSION_MINOR 0
#define CRPM_VERSION_PATCH 0

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

/* ---- checkpoint levels ------------------------------------------------- */
#define CRPM_L1 1   /* node-local differential container (persistent memory) */
#define CRPM_L4 4   /* global checkpoint in parallel HDF5 under glbl_dir */

/* ---- crpm_status() results --------------------------------------------- */
#define CRPM_STATUS_FRESH 0  /* nothing to recover */
#define CRPM_STATUS_L1    1  /* a level-1 checkpoint is available */
#define CRPM_STATUS_L4    2  /* only a level-4 checkpoint is available */

/* ---- crpm_snapshot() results (non-negative) ----------------------------- */
#define CRPM_SNAP_NONE         0  /* nothing to do this call */
#define CRPM_SNAP_RECOVERED    1  /* protected arrays were restored from a checkpoint */
#define CRPM_SNAP_CHECKPOINTED 2  /* a checkpoint was taken */

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

extern const crpm_type_t CRPM_CHAR, CRPM_SHORT, CRPM_INT, CRPM_LONG, CRPM_LLONG,
    CRPM_UINT, CRPM_ULONG, CRPM_FLOAT, CRPM_DOUBLE, CRPM_LDOUBLE, CRPM_BYTE;

/* Define a user type of `size` bytes per element (e.g. sizeof(struct atom)). */
int crpm_init_type(crpm_type_t *type, size_t size);

/* ---- API ---------------------------------------------------------------- */

/* Collective over comm.  Reads the INI config (see config/ and README),
 * opens or creates this rank's container under ckpt_dir/job_name/ and
 * decides, with every rank, whether a restart is possible.  The environment
 * variables CRPM_CKPT_DIR and CRPM_JOB_NAME override the file. */
int crpm_init(const char *config_file, MPI_Comm comm);

/* Register (or re-register with a new pointer or count) array `id`. Local.
 * Arrays must stay valid until the next protect of that id or finalize. */
int crpm_protect(int id, void *ptr, int64_t count, crpm_type_t type);

/* CRPM_STATUS_FRESH, CRPM_STATUS_L1 or CRPM_STATUS_L4 (negative on error). */
int crpm_status(void);

/* Collective: restore every protected array from the checkpoint all ranks
 * agreed on at init.  The protected ids and sizes must match what was saved. */
int crpm_recover(void);

/* Collective: take checkpoint `id` at `level` (CRPM_L1 or CRPM_L4).
 * Returns after every rank has committed it. */
int crpm_checkpoint(int id, int level);

/* Call once per iteration.  On the first call after a restart it recovers
 * (CRPM_SNAP_RECOVERED); otherwise it checkpoints when the configured
 * interval (ckpt_interval iterations or ckpt_interval_s seconds, the latter
 * agreed collectively) has elapsed (CRPM_SNAP_CHECKPOINTED), else returns
 * CRPM_SNAP_NONE.  Collective.  Negative on error. */
int crpm_snapshot(void);

/* Collective: close the containers; removes this job's checkpoints unless
 * keep_last_ckpt = 1. */
int crpm_finalize(void);

/* Text for a return code (never NULL). */
const char *crpm_strerror(int code);

/* Detailed message of this rank's most recent error ("" if none). */
const char *crpm_last_error(void);

/* Statistics of this rank's checkpoints. */
typedef struct crpm_stats {
    uint64_t checkpoints;      /* number of checkpoints taken */
    uint64_t protected_bytes;  /* bytes protected at the last checkpoint */
    uint64_t bytes_compared;   /* bytes of working copy compared */
    uint64_t bytes_written;    /* bytes written to the container */
    uint64_t blocks_written;   /* blocks written to the container */
    uint64_t drains;           /* persistence fences */
    double   seconds;          /* wall time spent in checkpoints */
} crpm_stats_t;

/* last: the most recent checkpoint; total: since init.  Either may be NULL. */
int crpm_get_stats(crpm_stats_t *last, crpm_stats_t *total);

#ifdef __cplusplus
}
#endif
#endif /* CRPM_H */
