/* FTI configuration files, read with inih and mapped onto libcrpm's
 * configuration.  Pure: no MPI; the file is only read, never written. */
#ifndef CRPM_FTI_CONFIG_H
#define CRPM_FTI_CONFIG_H

#include <stddef.h>

#define FTI_CFG_PATH_MAX 4096

typedef struct fti_settings {
    char ckpt_dir[FTI_CFG_PATH_MAX];  /* "" = not given */
    char glbl_dir[FTI_CFG_PATH_MAX];  /* "" = not given: no level 4 */
    int ckpt_min[5];                  /* [1..4]: ckpt_l1..ckpt_l4 in minutes, 0 = off */
    int keep_last_ckpt, keep_l4_ckpt;
    int verbosity;                    /* FTI's scale: 1 debug .. 4 errors only */
    int head, node_size, group_size;  /* no heads here; node_size (ranks per node) makes the nodes; */
                                      /* group_size (default 4) the nodes of a level-3 group */
    int node_size_set;                /* node_size was in the file (else MPI's shared-memory nodes) */
    int async;                        /* some inline_l2..l4 = 0: libcrpm's async = 1 (a thread, not a head) */
    int inline_l[5];                  /* [2..4]: inline_l2..l4 (default 1) */
    int ckpt_io;                      /* FTI's I/O library 1..5 (FTI_GetConfig only; default 1, POSIX) */
    int enable_dcp;                   /* FTI_GetConfig only */
    int enable_staging;               /* FTI_SendFile and friends (fti_stage.c) */
    char meta_dir[FTI_CFG_PATH_MAX];  /* FTI_GetConfig only */
    char ignored[1024];               /* keys that have no meaning here: "a, [s] b, ..." */
    int restart_keys;                 /* [restart] keys were among them */
} fti_settings;

/* Parses the text of FTI configuration file `file` (name for messages).
 * Returns 0, or -1 with a message naming the file and line in err. */
__attribute__((visibility("hidden")))
int fti_config_parse(const char *text, const char *file, fti_settings *s, char *err, size_t errlen);

/* The equivalent libcrpm INI text (malloc'ed), or NULL if out of memory.
 * l3 != 0: the job's nodes form whole groups of s->group_size, which is
 * passed on with l3_parity = group_size / 2 (FTI's level 3 survives the loss
 * of half of a group). */
__attribute__((visibility("hidden")))
char *fti_config_crpm_text(const fti_settings *s, int l3);

/* libcrpm verbosity for an FTI verbosity. */
__attribute__((visibility("hidden")))
int fti_config_crpm_verbosity(int fti_verbosity);

#endif
