/* The plan of a restart on another number of ranks: a pure function from
 * what the ranks found (files in their node directories, level-4 files) to
 * where every old rank's data comes from and which rank reads it.  No MPI,
 * no files: reshape.c gathers the facts and carries the plan out. */
#ifndef CRPM_MPI_RESHAPE_PLAN_H
#define CRPM_MPI_RESHAPE_PLAN_H
#include <stdint.h>

enum { CRPM_RS_CONT, CRPM_RS_COPY, CRPM_RS_PARITY };

/* A file of the job found in a node's job directory (fixed size: gathered as bytes). */
typedef struct crpm_rs_file {
    int32_t kind;        /* CRPM_RS_CONT, _COPY (partner copy), _PARITY */
    int32_t held;        /* its name carries ".held-<tag>" (kept by an earlier reshaped restart) */
    int32_t q;           /* rank (of its run) whose container it is or copies */
    int32_t nranks;      /* rank count of its run */
    int32_t rc;          /* 0: opened, the fields below are valid; else the error */
    int32_t node;        /* node of this job whose directory holds it */
    int32_t scanner;     /* the rank that found it */
    int32_t prev_ok;     /* epoch - 1 is readable too */
    int32_t bad;         /* its verification failed: an erasure */
    int32_t rebuilt;     /* a container rebuilt from level-3 parity by an earlier launch (reshape_l3.c) */
    int32_t has_lay;     /* its layout record was read: the fields below are valid */
    int32_t lay_node, lay_nsize, lay_nnodes; /* its run's node of the file's rank, node_size, nodes */
    int32_t lay_K, lay_M;                    /* its run's group_size and l3_parity */
    int32_t pad;
    uint64_t epoch, user_id, prev_user_id;
    uint64_t seg, blk;   /* its segment and block size */
    int64_t created_ns;  /* when its run made the file */
    int64_t time_ns;     /* when its committed epoch was written */
    uint8_t run[16];     /* run identity */
    char name[112];      /* file name in that directory */
} crpm_rs_file;

/* A level-4 file of the job that holds a global layout. */
typedef struct crpm_rs_l4 {
    int32_t nranks, ckpt_id;
    int32_t bad;         /* failed its check */
    int32_t pad;
    uint64_t seq;        /* the job's level-4 files in write order */
    int64_t time_ns;
    char name[64];
} crpm_rs_l4;

enum { CRPM_RS_NONE, CRPM_RS_L1, CRPM_RS_L4, CRPM_RS_ERROR };

typedef struct crpm_rs_facts {
    int M;                 /* ranks of this job */
    const int *node_of;    /* M entries: node of each rank */
    const crpm_rs_file *f;
    int nf;
    const crpm_rs_l4 *l4;  /* newest (seq) first */
    int nl4;
    int ordinary_l4;       /* the ordinary decision restores a level-4 file of this rank count ... */
    uint64_t ordinary_seq; /* ... with this sequence */
} crpm_rs_facts;

typedef struct crpm_rs_plan {
    int kind;
    int code;              /* CRPM_RS_ERROR */
    char msg[1600];
    int N;                 /* old rank count */
    uint64_t epoch, user_id;
    uint8_t run[16];
    int *src;              /* CRPM_RS_L1: N file indexes ... */
    int *reader;           /* ... and the rank of this job reading each */
    int held_level;        /* 1..3: the old generation's highest node-local level */
    int l4;                /* CRPM_RS_L4: index into l4 */
    /* CRPM_RS_L1 with old ranks rebuilt from level-3 parity (reshape_l3plan.c):
     * src[q] is -1 and build[q] the rank of this job rebuilding it */
    int nbuild;
    int *build;            /* N: the rebuilding rank, -1: none */
    int K, M;              /* the old run's group_size and l3_parity */
    int nsize, nnodes;     /* its node_size and number of nodes */
    int *node;             /* N: each old rank's node in the old run, */
    int *member, *group;   /* its level-3 member index and group */
    int *par;              /* N: the parity file of each old rank serving the epoch, -1: none */
    int *par_reader;       /* N: the rank of this job reading it */
} crpm_rs_plan;

int crpm_rs_plan_make(const crpm_rs_facts *f, crpm_rs_plan *p);
void crpm_rs_plan_free(crpm_rs_plan *p);

/* Level-3 part of the plan (reshape_l3plan.c): which old ranks without a
 * source (src[q] < 0) the parity of run `run` (N ranks) rebuilds at epoch
 * e, from the containers in src and the parity files found.  1: all of
 * them (p->build and the rest set); 0: not all, why says which and why
 * (-2: some of the units lacking failed their checks); -1: out of memory. */
int crpm_rs_plan_l3(const crpm_rs_facts *f, const uint8_t run[16], int N, uint64_t e, const int *src,
                    crpm_rs_plan *p, char *why, size_t wn);
/* The level-3 fields of p freed. */
void crpm_rs_plan_l3_free(crpm_rs_plan *p);

#endif
