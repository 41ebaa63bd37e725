/* INI configuration of the MPI layer (documented examples in config/). Parsing
 * is pure: no MPI, no file-system changes. */
#ifndef CRPM_CONFIG_H
#define CRPM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "fsutil.h" /* CRPM_PATH_MAX, CRPM_JOB_MAX */

#define CRPM_KEEP_GLOBAL 2

typedef struct crpm_config {
    /* [basic] */
    char ckpt_dir[CRPM_PATH_MAX];   /* required (file or CRPM_CKPT_DIR) */
    char job_name[CRPM_JOB_MAX];   /* default "crpm" */
    char glbl_dir[CRPM_PATH_MAX];   /* "" = no level 4 */
    long ckpt_interval;                 /* snapshot iterations; 0 = off */
    double ckpt_interval_s;             /* snapshot seconds; 0 = off */
    long ckpt_interval_l4;              /* every N-th snapshot checkpoint is L4; 0 = never */
    long ckpt_interval_l2;              /* every N-th snapshot checkpoint is L2 (L4 wins); 0 = never */
    long ckpt_interval_l3;              /* every N-th snapshot checkpoint is L3 (L4 wins, beats L2); 0 = never */
    long group_size;                    /* level 3: nodes per group (default 4) */
    long l3_parity;                     /* level 3: parity units per codeword, 1 .. group_size / 2 (default 1) */
    int node_size;                      /* ranks per node (consecutive); 0 = MPI shared-memory nodes */
    int ckpt_interval_auto;             /* ckpt_interval_s = auto: Young/Daly from cost and mtbf_s */
    int ckpt_interval_l4_auto;          /* ckpt_interval_l4 = auto: the same for level 4 */
    double mtbf_s;                      /* mean time between failures; required by auto */
    double mtbf_l4_s;                   /* MTBF of failures level 1 does not survive (default mtbf_s) */
    int keep_last_ckpt;                 /* 1: finalize leaves the checkpoints; CRPM_KEEP_GLOBAL: */
                                        /* only a level-4 newest one, in glbl_dir (FTI's keep_last_ckpt) */
    int keep_l4;                        /* level-4 files kept (newest first) */
    int verbosity;                      /* 0 quiet .. 3 debug */
    uint64_t heap_size;                 /* persistent heap: bytes reserved; 0 = no heap */
    double end_time;                    /* end of the allocation, Unix seconds; 0 = not given */
    int end_time_env;                   /* 1: end_time came from CRPM_END_TIME */
    double end_time_safety;             /* final checkpoint's measured cost x this = stop margin */
    int exit_signal;                    /* signal that asks the job to stop; 0 = none */
    int async;                          /* 1: levels 2-4 drain in the background (docs/async.md) */
    int async_skip;                     /* async_backpressure = skip: crpm_snapshot takes no checkpoint while
                                           the previous one's levels still run in the background */
    /* [advanced] */
    uint64_t segment_size;              /* 0 = engine default */
    uint64_t block_size;                /* 0 = engine default */
    int persistence;                    /* enum crpm_persistence */
    int method;                         /* CRPM_METHOD_*: differential container or full files */
    int change_tracking;                /* crpm_open_opts.change_tracking: 0 compare, 1 pagemap, 2 instrumented,
                                           3 instrumented-verify */
    double lock_wait_s;                 /* how long init waits for another process's locks */
    int on_unrecoverable_fresh;         /* 1: start fresh when no checkpoint can be used */
    int huge_pages;                     /* 1: recovery advises huge pages on the arrays it fills */
    uint64_t heap_base;                 /* persistent heap: its fixed address */
    int device_mode;                    /* GPU arrays: CRPM_DEVICE_DIFF, _FINGERPRINT or _FULL (docs/gpu.md) */
    int threads;                        /* the engine's workers per rank; 0 = auto (docs/threads.md) */
    char log_file[CRPM_PATH_MAX];       /* the run log (mpi/runlog.h); "" = off */
} crpm_config;

#define CRPM_THREADS_MAX 1024

/* method = full writes FTI-level-1-style full files (lib/levels/full.c): the
 * baseline the differential engine is benchmarked against. */
enum { CRPM_METHOD_DIFFERENTIAL = 0, CRPM_METHOD_FULL = 1 };

/* The persistent heap's default address (the research libcrpm's; with
 * AddressSanitizer, which keeps that range for itself, 80 TiB) and the most
 * it may reserve. */
#if defined(__SANITIZE_ADDRESS__)
#define CRPM_HEAP_BASE_DEFAULT 0x500000000000ull
#else
#define CRPM_HEAP_BASE_DEFAULT 0x10000000000ull
#endif
#define CRPM_HEAP_SIZE_MAX (1ull << 40)

/* Defaults for every key. */
void crpm_config_defaults(crpm_config *cfg);

/* Parses INI text (NUL-terminated) that came from file `name` (used only in
 * messages), then applies the CRPM_CKPT_DIR / CRPM_JOB_NAME environment
 * overrides and checks required keys.  Returns 0 or CRPM_ERR_CONFIG with a
 * message naming the file and line (crpm_last_error()). */
int crpm_config_parse(const char *text, const char *name, crpm_config *cfg);

/* Configurations are small: larger files are refused. */
#define CRPM_CONFIG_MAX (1 << 20)

/* Reads a whole regular file into a malloc'ed NUL-terminated buffer. */
int crpm_config_read_file(const char *path, char **text, size_t *len);

#endif
