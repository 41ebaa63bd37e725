/*
 * fti.h -- FTI 1.6 application interface, implemented on libcrpm.
 *
 * An FTI application includes this header and links libfti from libcrpm
 * (pkg-config fti, or CMake crpm::fti) instead of FTI; no source change.
 * The names, types, constants and signatures are FTI's; behaviour and the
 * calls without a counterpart here are described in lib/fti/README.md.
 * Functions return FTI_SCES (0) on success and FTI_NSCS (-1) on failure
 * unless stated otherwise; every failure prints its reason on stderr.
 */
#ifndef CRPM_FTI_H
#define CRPM_FTI_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks this header as libcrpm's FTI layer (a real FTI does not define it). */
#define FTI_CRPM 1

#define FTI_BUFS 256     /* length of name buffers */
#define FTI_WORD 16

/* return codes */
#define FTI_DONE 1       /* FTI_Checkpoint / FTI_Snapshot: a checkpoint was taken */
#define FTI_SCES 0       /* success */
#define FTI_NSCS (-1)    /* failure */
#define FTI_NREC (-2)    /* recovery failed or nothing to recover */
#define FTI_HEAD 2       /* FTI_Init on a head process (never returned here: no heads) */

/* The token an FTI program sends its node's head at the end (FTI's value;
 * there are no heads here, so nobody waits for it). */
#define FTI_ENDW 995

/* FTI's I/O modes (FTI_GetConfig's ioMode: ckpt_io = 1..5). */
#define FTI_IO_POSIX 1001
#define FTI_IO_MPI 1002
#define FTI_IO_FTIFF 1003
#define FTI_IO_SIONLIB 1004
#define FTI_IO_HDF5 1005

/* FTI's allocation shorthand, which FTI's header gives its programs:
 * `num` elements of `type`, from malloc. */
#ifndef talloc
#define talloc(type, num) ((type *)malloc(sizeof(type) * (size_t)(num)))
#endif

/* verbosity levels of the configuration file */
#define FTI_DBUG 1
#define FTI_INFO 2
#define FTI_WARN 3
#define FTI_EROR 4

/* stage request states (staging is not supported; see FTI_GetStageStatus) */
#define FTI_SI_FAIL 0x4
#define FTI_SI_SCES 0x3
#define FTI_SI_ACTV 0x2
#define FTI_SI_PEND 0x1
#define FTI_SI_NINI 0x0

/* A handle for a data type (predefined, FTI_InitType or a composite). */
typedef int fti_id_t;
/* FTI 1.4 name of the type handle. */
#define FTIT_type fti_id_t

typedef unsigned long long FTIT_hsize_t;

/* Checkpoint levels: 1-4, and 5-8 for FTI's differential variants of them
 * (libcrpm checkpoints are always differential, so 5-8 act as 1-4). */
typedef enum FTIT_level {
    FTI_L1 = 1, FTI_L2, FTI_L3, FTI_L4,
    FTI_L1_DCP, FTI_L2_DCP, FTI_L3_DCP, FTI_L4_DCP,
    FTI_L4_H5_SINGLE,
    FTI_MIN_LEVEL_ID = FTI_L1,
    FTI_MAX_LEVEL_ID = FTI_L4_H5_SINGLE
} FTIT_level;

/* An HDF5 group name (kept for level 4; no HDF5 group is created). */
typedef struct FTIT_H5Group {
    int id;
    char name[FTI_BUFS];
    char fullName[FTI_BUFS];
    int childrenNo;
    int childrenID[FTI_BUFS];
} FTIT_H5Group;

/* Dataset attributes for FTI_SetAttribute. */
#define FTI_MAX_DIMS 32
typedef struct FTIT_dimension {
    int ndims;
    FTIT_hsize_t count[FTI_MAX_DIMS];
} FTIT_dimension;

typedef struct FTIT_attribute {
    char name[FTI_BUFS];
    FTIT_dimension dim;
} FTIT_attribute;

typedef enum FTIT_attributeFlag {
    FTI_ATTRIBUTE_NULL = 0,
    FTI_ATTRIBUTE_NAME = 1,
    FTI_ATTRIBUTE_DIM = 2
} FTIT_attributeFlag;

/* The application's communicator, set by FTI_Init: a duplicate of the
 * communicator given to it (there are no head processes). */
extern MPI_Comm FTI_COMM_WORLD;

/* Predefined types (valid before FTI_Init). */
extern fti_id_t FTI_CHAR;   /* char */
extern fti_id_t FTI_SHRT;   /* short */
extern fti_id_t FTI_INTG;   /* int */
extern fti_id_t FTI_LONG;   /* long */
extern fti_id_t FTI_UCHR;   /* unsigned char */
extern fti_id_t FTI_USHT;   /* unsigned short */
extern fti_id_t FTI_UINT;   /* unsigned int */
extern fti_id_t FTI_ULNG;   /* unsigned long */
extern fti_id_t FTI_SFLT;   /* float */
extern fti_id_t FTI_DBLE;   /* double */
extern fti_id_t FTI_LDBE;   /* long double */

/* FTI_GetConfig: what a configuration file sets, as FTI reports it.  The
 * fields are the ones with a meaning in libcrpm. */
typedef struct FTIT_configuration {
    char cfgFile[FTI_BUFS];
    int ioMode;             /* FTI_IO_POSIX .. FTI_IO_HDF5 from ckpt_io; -1: the file was not read */
    int verbosity;          /* FTI's scale, 1 (debug) .. 4 (errors) */
    int saveLastCkpt;       /* keep_last_ckpt */
    int keepL4Ckpt;         /* keep_l4_ckpt */
    int dcpEnabled;         /* enable_dcp (libcrpm is always differential) */
    char localDir[FTI_BUFS];  /* ckpt_dir */
    char glbalDir[FTI_BUFS];  /* glbl_dir ("" if none) */
    char metadDir[FTI_BUFS];  /* meta_dir ("" if none; not used here) */
} FTIT_configuration;

typedef struct FTIT_topology {
    int nbProc;             /* ranks of the communicator */
    int nbNodes;            /* nodes: nbProc / nodeSize, rounded up */
    int myRank;             /* this rank in the communicator */
    int nodeSize;           /* node_size (1 when absent) */
    int nbHeads;            /* head as configured (no heads run here) */
    int nbApprocs;          /* application ranks per node */
    int groupSize;          /* group_size */
    int nodeID;             /* this rank's node */
} FTIT_topology;

typedef struct FTIT_checkpoint {
    int ckptIntv;           /* ckpt_lN in minutes, 0 = off ([1..4]; [0] unused) */
    int isInline;           /* inline_lN ([2..4]; 1 for level 1) */
} FTIT_checkpoint;

typedef struct FTIT_allConfiguration {
    FTIT_configuration configuration;
    FTIT_topology topology;
    FTIT_checkpoint checkpoints[5];
} FTIT_allConfiguration;

/* ---- life cycle ---------------------------------------------------------- */
/* Collective.  Reads the FTI configuration file (never rewrites it), sets
 * FTI_COMM_WORLD and decides, from the checkpoints found, whether this is a
 * restart.  FTI_NSCS: bad configuration; FTI_NREC: checkpoints exist that
 * cannot be used.  Either way FTI is not initialised. */
int FTI_Init(const char *configFile, MPI_Comm globalComm);
/* 1 while a checkpoint is waiting to be recovered (3 when it was written by
 * another number of ranks: recovered through global datasets), 0 otherwise
 * (also after a successful recovery); FTI_NSCS before FTI_Init. */
int FTI_Status(void);
/* Collective; removes the checkpoints unless keep_last_ckpt = 1. */
int FTI_Finalize(void);
/* Collective over comm: the settings of configFile (also before FTI_Init);
 * configuration.ioMode is -1 when the file cannot be read or is invalid. */
FTIT_allConfiguration FTI_GetConfig(const char *configFile, MPI_Comm comm);

/* ---- data types ------------------------------------------------------------ */
int FTI_InitType(fti_id_t *type, int size);
/* Returns the new type's handle, or FTI_NSCS. */
fti_id_t FTI_InitCompositeType(const char *name, size_t size, FTIT_H5Group *h5g);
int FTI_AddScalarField(fti_id_t id, const char *name, fti_id_t fid, size_t offset);
/* dim_sizes: ndims lengths, as FTI declares them (int64_t). */
int FTI_AddVectorField(fti_id_t id, const char *name, fti_id_t tid, size_t offset, int ndims, int64_t *dim_sizes);

/* ---- protection ------------------------------------------------------------ */
int FTI_Protect(int id, void *ptr, int64_t count, fti_id_t tid);
int FTI_SetAttribute(int id, FTIT_attribute attribute, FTIT_attributeFlag flag);
/* dimLength: `rank` lengths, as FTI declares them (int64_t). */
int FTI_DefineDataset(int id, int rank, int64_t *dimLength, const char *name, FTIT_H5Group *h5group);
int FTI_InitGroup(FTIT_H5Group *h5group, const char *name, FTIT_H5Group *parent);
int FTI_RenameGroup(FTIT_H5Group *h5group, const char *name);
/* The id of `name`, allocating the next free id for a new name. */
int FTI_setIDFromString(const char *name);
/* The id of `name`, or FTI_NSCS if it has none. */
int FTI_getIDFromString(const char *name);

/* ---- checkpoint and recovery ------------------------------------------------ */
/* Collective; FTI_DONE when every rank has committed checkpoint `id`. */
int FTI_Checkpoint(int id, int level);
/* Collective; FTI_SCES, or FTI_NREC when nothing could be recovered. */
int FTI_Recover(void);
/* Collective; once per iteration: recovers on the first call after a restart
 * (FTI_SCES or FTI_NREC), then checkpoints when the ckpt_l1..ckpt_l4 interval
 * of a level has passed (FTI_DONE), else FTI_SCES. */
int FTI_Snapshot(void);
int FTI_RecoverVarInit(void);
/* Local; restores one protected variable. */
int FTI_RecoverVar(int id);
int FTI_RecoverVarFinalize(void);
/* Bytes of variable `id` in the checkpoint to recover (0 if none). */
int64_t FTI_GetStoredSize(int id);
/* While a checkpoint waits to be recovered: reallocates ptr to the stored
 * size of `id` and protects it with that size; returns the new pointer (NULL
 * if realloc fails).  Otherwise returns ptr unchanged. */
void *FTI_Realloc(int id, void *ptr);

/* ---- global datasets: restart on another number of ranks ---------------------
 * (libcrpm's crpm_define_global and friends; C order; the datasets go to the
 * root of level-4 files, h5group is accepted and not used) */
/* Dataset `id` of `rank` dimensions dimLength[] and type tid; same on every rank. */
int FTI_DefineGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength, const char *name, FTIT_H5Group *h5group,
                            fti_id_t tid);
/* Protected variable `id` holds the box offset .. offset+count of dataset did. */
int FTI_AddSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int did);
int FTI_UpdateGlobalDataset(int id, int rank, FTIT_hsize_t *dimLength);
int FTI_UpdateSubset(int id, int rank, FTIT_hsize_t *offset, FTIT_hsize_t *count, int did);
/* While a checkpoint waits to be recovered: dataset did takes the saved dimensions. */
int FTI_RecoverDatasetDimension(int did);
/* The dimensions of did (a static array), NULL if rank is not its rank. */
FTIT_hsize_t *FTI_GetDatasetSpan(int did, int rank);
int FTI_GetDatasetRank(int did);

/* ---- no counterpart in libcrpm: return FTI_NSCS (or NULL) with a message -- */
int FTI_BitFlip(int datasetID);
int FTI_InitICP(int id, int level, bool activate);
int FTI_AddVarICP(int varID);
int FTI_FinalizeICP(void);
int FTI_GetStageDir(char *stageDir, int maxLen);
int FTI_GetStageStatus(int ID);
int FTI_SendFile(const char *lpath, const char *rpath);

#ifdef __cplusplus
}
#endif
#endif /* CRPM_FTI_H */
