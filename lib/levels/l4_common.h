/* Level 4 internals shared by level4.c (parallel write, find, read),
 * l4_common.c (HDF5 helpers, attributes, datasets, directory scan) and
 * l4_export.c (serial export and verification).  HDF5 builds only. */
#ifndef CRPM_LEVELS_L4_COMMON_H
#define CRPM_LEVELS_L4_COMMON_H
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include "agree.h"
#include "level4.h"

#include <hdf5.h>
#include <zlib.h>

#ifndef H5_HAVE_PARALLEL
#error "level 4 needs a parallel HDF5 build"
#endif

/* Streaming verification reads at most this much per H5Dread. */
#define L4_STREAM_BYTES ((size_t)8 << 20)

/* A region as exchanged between ranks and stored in the file. */
typedef struct l4_desc {
    uint64_t id;          /* int32 stored in 64 bits for the exchange */
    uint64_t type_code;
    uint64_t elem_size;
    uint64_t count;
    uint64_t crc;
} l4_desc;
#define L4_DESC_WORDS 5

/* One level-4 file found in a job directory. */
typedef struct l4_file {
    char name[64];        /* l4-<id>.h5 */
    int32_t ckpt_id;
    int32_t nranks;
    uint64_t epoch;
    uint64_t seq;
    int usable;           /* root attributes readable, same job */
    char why[512];        /* why not usable */
} l4_file;

typedef struct l4_quiet {
    H5E_auto2_t fn;
    void *data;
} l4_quiet;

typedef struct l4_root {
    int32_t format, ckpt_id, nranks;
    uint64_t epoch, seq;
    char job[256];
    uint64_t run[2];           /* the run of the job that wrote it (has_run: recorded; older files lack it) */
    int has_run;
} l4_root;

typedef struct l4_saved {
    int32_t type_code;
    uint64_t elem_size;
    uint64_t count;
    uint32_t crc;
} l4_saved;

void l4_quiet_begin(l4_quiet *q);
void l4_quiet_end(const l4_quiet *q);
int l4_h5_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint32_t l4_crc_update(uint32_t crc, const void *buf, uint64_t len);
uint32_t l4_crc_init(void);
int l4_job_dir(char *out, size_t len, const char *glbl_dir, const char *job);
hid_t l4_type(int32_t code, uint64_t esz);
int l4_put_attr(hid_t obj, const char *name, hid_t type, const void *val);
int l4_put_str_attr(hid_t obj, const char *name, const char *s);
int l4_get_attr(hid_t obj, const char *name, hid_t type, void *val);
int l4_get_str_attr(hid_t obj, const char *name, char *buf, size_t len);
int l4_put_root(hid_t f, const l4_root *r);
int l4_get_root(hid_t f, const char *where, l4_root *r);
int l4_check_desc(const crpm_array *r, int i, int nregions, const crpm_array *all, int need_ptr);
hid_t l4_create_dataset(hid_t grp, const l4_desc *d, int fill_never);
hid_t l4_create_group(hid_t f, int32_t rank, int32_t nregions);
int l4_read_saved(hid_t ds, const char *where, l4_saved *s);
int l4_read_checked(hid_t ds, const char *where, const l4_saved *s, void *dst, hid_t mtype);
int l4_check_group(hid_t f, const char *fname, int rank, int read_into, int nregions,
                       const crpm_array *regions, FILE *out);
void l4_close_id(hid_t *id, herr_t (*fn)(hid_t));
int l4_open_serial(const char *path, hid_t *f);
int l4_scan_dir(const char *dir, const char *job, l4_file **out, int *nout);
/* l4_global.c, serial (tools): every piece of every rank's boxes of global
 * datasets in the open file f, reported to out (may be NULL); CRPM_SUCCESS
 * when the file has none. */
int crpm_l4g_verify_file(hid_t f, const char *path, FILE *out);
void l4_prune(const char *dir, const l4_file *v, int n, const char *keep_name, uint64_t seq, int keep);

/* Collective: the file at path (created, HDF5 writes next) gets storage
 * for `bytes` raw data on all ranks together plus room for `nobjects`
 * objects' metadata, before HDF5 writes a byte: a write that fails for
 * want of space inside HDF5's collective flush and close leaves the ranks
 * in different collectives (a hang), so a full file system fails here, on
 * every rank, as CRPM_ERR_IO naming the file and the cause.  Rank 0
 * reserves (fallocate with FALLOC_FL_KEEP_SIZE: HDF5 sees the file's size
 * unchanged; posix_fallocate where the file system lacks it). */
int l4_reserve(MPI_Comm comm, const char *path, uint64_t bytes, uint64_t nobjects);
/* Local, once HDF5 closed the file: what the reservation holds past its
 * end is given back (a truncation to its own size). */
void l4_unreserve(const char *path);

/* Level 4's collectives agree through the comm layer: one rank's failure is
 * an error on every rank (the message names the failing rank). */
static inline int l4_agree(MPI_Comm comm, int rc)
{
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    return crpm_agree(comm, rank, rc, "level 4");
}

#endif
