/* Level 4 helpers: HDF5 errors and types, attributes, datasets, the
 * directory scan and pruning (see l4_common.h). */
#ifdef CRPM_HAVE_HDF5
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "error.h"
#include "fsutil.h"
#include "grow.h"
#include "l4_common.h"
#include "mpi_error.h"

#define L4_PATH_MAX CRPM_PATH_MAX

/* ---- small helpers ------------------------------------------------------ */

/* HDF5 prints its error stack on every failed call unless told not to; the
 * caller's own setting is restored on the way out. */

void l4_quiet_begin(l4_quiet *q)
{
    q->fn = NULL;
    q->data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &q->fn, &q->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void l4_quiet_end(const l4_quiet *q)
{
    H5Eset_auto2(H5E_DEFAULT, q->fn, q->data);
}

typedef struct h5_cause {
    char text[200];
    int found;
    int corrupt;
} h5_cause;

static herr_t cause_cb(unsigned n, const H5E_error2_t *e, void *arg)
{
    h5_cause *c = arg;
    (void)n;
    if (!e->desc)
        return 0;
    /* Walking upward, the first entry is the innermost (most specific). */
    if (!c->found) {
        snprintf(c->text, sizeof c->text, "%s", e->desc);
        c->found = 1;
    }
    if (strstr(e->desc, "checksum") || strstr(e->desc, "truncated") || strstr(e->desc, "signature") ||
        strstr(e->desc, "bad object header") || strstr(e->desc, "wrong B-tree") ||
        strstr(e->desc, "bad version number"))
        c->corrupt = 1;
    return 0;
}

/* Turns the pending HDF5 error stack into a crpm error: CRPM_ERR_CORRUPT when
 * HDF5 found damaged data or metadata, CRPM_ERR_HDF5 otherwise. */
int l4_h5_fail(const char *fmt, ...)
{
    int err = errno; /* the write under HDF5 (MPI-IO) that ran out of space leaves it */
    char what[640];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    h5_cause c = { .text = "", .found = 0, .corrupt = 0 };
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, cause_cb, &c);
    H5Eclear2(H5E_DEFAULT);
    if (c.corrupt)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: file damaged (HDF5: %s)", what, c.text);
    if (err == ENOSPC || err == EDQUOT)
        return crpm_error(CRPM_ERR_IO, "%s: %s (HDF5: %s)", what, strerror(err), c.found ? c.text : "no detail");
    return crpm_error(CRPM_ERR_HDF5, "%s (HDF5: %s)", what, c.found ? c.text : "no detail");
}

/* Metadata room per object (object header, its attributes, its group's
 * B-tree and heap entries) and for the file (superblock, root group,
 * attributes, free-space slack): generous, a shortfall would hang. */
#define L4_META_PER_OBJECT 8192u
#define L4_META_FILE (1u << 20)

int l4_reserve(MPI_Comm comm, const char *path, uint64_t bytes, uint64_t nobjects)
{
    int rank = 0, rc = CRPM_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    uint64_t mine[2] = {bytes, nobjects}, sum[2] = {0, 0};
    int mrc = MPI_Allreduce(mine, sum, 2, MPI_UINT64_T, MPI_SUM, comm);
    if (mrc != MPI_SUCCESS)
        rc = crpm_mpi_fail(mrc, "level 4: MPI_Allreduce of the file's size");
    if (rc == CRPM_SUCCESS && rank == 0) {
        uint64_t len = sum[0] + sum[0] / 64 + sum[1] * L4_META_PER_OBJECT + L4_META_FILE;
        int fd = open(path, O_RDWR | O_CLOEXEC), err = 0;
        if (fd < 0) {
            err = errno;
        } else {
            err = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)len) == 0 ? 0 : errno;
            if (err == EOPNOTSUPP || err == ENOSYS)
                err = posix_fallocate(fd, 0, (off_t)len);
            close(fd);
        }
        if (err)
            rc = crpm_error(CRPM_ERR_IO, "level 4: cannot allocate %llu bytes for %s: %s", (unsigned long long)len,
                            path, strerror(err));
    }
    return crpm_agree(comm, rank, rc, "level 4: reserving the file's storage");
}

void l4_unreserve(const char *path)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return;
    if (fstat(fd, &st) == 0)
        (void)!ftruncate(fd, st.st_size); /* drops blocks reserved past the end; nothing else changes */
    close(fd);
}

void l4_close_id(hid_t *id, herr_t (*fn)(hid_t))
{
    if (*id >= 0)
        fn(*id);
    *id = -1;
}

uint32_t l4_crc_update(uint32_t crc, const void *buf, uint64_t len)
{
    return (uint32_t)crc32_z(crc, buf, (z_size_t)len);
}

uint32_t l4_crc_init(void)
{
    return (uint32_t)crc32_z(0L, Z_NULL, 0);
}

int l4_job_dir(char *out, size_t len, const char *glbl_dir, const char *job)
{
    if (!glbl_dir || !glbl_dir[0])
        return crpm_error(CRPM_ERR_CONFIG, "level 4: glbl_dir is not set");
    if (!crpm_job_name_valid(job))
        return crpm_error(CRPM_ERR_INVAL, "level 4: invalid job name '%s'", job ? job : "(null)");
    if ((size_t)snprintf(out, len, "%s/%s", glbl_dir, job) >= len)
        return crpm_error(CRPM_ERR_RANGE, "level 4: path too long: %s/%s", glbl_dir, job);
    return CRPM_SUCCESS;
}

/* ---- types ---------------------------------------------------------------- */

/* File/memory type of a region; the caller closes it. */
hid_t l4_type(int32_t code, uint64_t esz)
{
    hid_t native = -1;
    switch (code) {
    case CRPM_TC_CHAR:    native = H5T_NATIVE_CHAR; break;
    case CRPM_TC_SHORT:   native = H5T_NATIVE_SHORT; break;
    case CRPM_TC_INT:     native = H5T_NATIVE_INT; break;
    case CRPM_TC_LONG:    native = H5T_NATIVE_LONG; break;
    case CRPM_TC_LLONG:   native = H5T_NATIVE_LLONG; break;
    case CRPM_TC_UINT:    native = H5T_NATIVE_UINT; break;
    case CRPM_TC_ULONG:   native = H5T_NATIVE_ULONG; break;
    case CRPM_TC_FLOAT:   native = H5T_NATIVE_FLOAT; break;
    case CRPM_TC_DOUBLE:  native = H5T_NATIVE_DOUBLE; break;
    case CRPM_TC_LDOUBLE: native = H5T_NATIVE_LDOUBLE; break;
    case CRPM_TC_BYTE:    native = H5T_NATIVE_UINT8; break;
    case CRPM_TC_INT8:    native = H5T_NATIVE_INT8; break;
    case CRPM_TC_INT16:   native = H5T_NATIVE_INT16; break;
    case CRPM_TC_INT32:   native = H5T_NATIVE_INT32; break;
    case CRPM_TC_INT64:   native = H5T_NATIVE_INT64; break;
    case CRPM_TC_LOGICAL:
        /* Fortran LOGICAL of any kind: a signed integer of that size. */
        native = esz == 1 ? H5T_NATIVE_INT8 : esz == 2 ? H5T_NATIVE_INT16 :
                 esz == 4 ? H5T_NATIVE_INT32 : esz == 8 ? H5T_NATIVE_INT64 : -1;
        break;
    case CRPM_TC_COMPLEX_FLOAT:
    case CRPM_TC_COMPLEX_DOUBLE: {
        hid_t part = code == CRPM_TC_COMPLEX_FLOAT ? H5T_NATIVE_FLOAT : H5T_NATIVE_DOUBLE;
        size_t psz = H5Tget_size(part);
        if (esz != 2 * psz)
            break;
        /* Field names r/i are what h5py maps to numpy complex. */
        hid_t t = H5Tcreate(H5T_COMPOUND, esz);
        if (t < 0)
            return -1;
        if (H5Tinsert(t, "r", 0, part) < 0 || H5Tinsert(t, "i", psz, part) < 0) {
            H5Tclose(t);
            return -1;
        }
        return t;
    }
    default:
        break;
    }
    if (native >= 0 && H5Tget_size(native) == esz)
        return H5Tcopy(native);
    /* User types and sizes without a native match: opaque records. */
    hid_t t = H5Tcreate(H5T_OPAQUE, esz);
    if (t < 0)
        return -1;
    char tag[48];
    snprintf(tag, sizeof tag, "crpm type %d (%llu bytes)", (int)code, (unsigned long long)esz);
    if (H5Tset_tag(t, tag) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

/* ---- attributes ----------------------------------------------------------- */

int l4_put_attr(hid_t obj, const char *name, hid_t type, const void *val)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    if (sp < 0)
        return -1;
    hid_t a = H5Acreate2(obj, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, type, val) >= 0 ? 0 : -1;
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

int l4_put_str_attr(hid_t obj, const char *name, const char *s)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return -1;
    int rc = H5Tset_size(t, strlen(s) + 1) >= 0 && H5Tset_strpad(t, H5T_STR_NULLTERM) >= 0
                 ? l4_put_attr(obj, name, t, s) : -1;
    H5Tclose(t);
    return rc;
}

int l4_get_attr(hid_t obj, const char *name, hid_t type, void *val)
{
    if (H5Aexists(obj, name) <= 0)
        return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    hid_t sp = H5Aget_space(a);
    int rc = sp >= 0 && H5Sget_simple_extent_npoints(sp) == 1 && H5Aread(a, type, val) >= 0 ? 0 : -1;
    if (sp >= 0)
        H5Sclose(sp);
    H5Aclose(a);
    return rc;
}

int l4_get_str_attr(hid_t obj, const char *name, char *buf, size_t len)
{
    if (H5Aexists(obj, name) <= 0)
        return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0)
        return -1;
    int rc = -1;
    hid_t ft = H5Aget_type(a);
    if (ft >= 0 && H5Tget_class(ft) == H5T_STRING && !H5Tis_variable_str(ft)) {
        size_t n = H5Tget_size(ft);
        hid_t mt = H5Tcopy(H5T_C_S1);
        char *tmp = malloc(n + 1);
        if (mt >= 0 && tmp && H5Tset_size(mt, n + 1) >= 0 && H5Aread(a, mt, tmp) >= 0) {
            tmp[n] = '\0';
            snprintf(buf, len, "%s", tmp);
            rc = 0;
        }
        free(tmp);
        if (mt >= 0)
            H5Tclose(mt);
    }
    if (ft >= 0)
        H5Tclose(ft);
    H5Aclose(a);
    return rc;
}


int l4_put_root(hid_t f, const l4_root *r)
{
    if (l4_put_attr(f, "crpm_format", H5T_NATIVE_INT32, &r->format) < 0 ||
        l4_put_attr(f, "ckpt_id", H5T_NATIVE_INT32, &r->ckpt_id) < 0 ||
        l4_put_attr(f, "epoch", H5T_NATIVE_UINT64, &r->epoch) < 0 ||
        l4_put_attr(f, "nranks", H5T_NATIVE_INT32, &r->nranks) < 0 ||
        l4_put_str_attr(f, "job_name", r->job) < 0 ||
        l4_put_attr(f, "sequence", H5T_NATIVE_UINT64, &r->seq) < 0 ||
        l4_put_str_attr(f, "checksum", "zlib crc32 of each dataset's stored bytes (attribute crc32)") < 0)
        return -1;
    /* the run identity: a restart compares a file's epoch with the containers' only within one run */
    if (r->has_run && (l4_put_attr(f, "run_id0", H5T_NATIVE_UINT64, &r->run[0]) < 0 ||
                       l4_put_attr(f, "run_id1", H5T_NATIVE_UINT64, &r->run[1]) < 0))
        return -1;
    return 0;
}

/* Reads and checks the root attributes; `where` names the file in messages. */
int l4_get_root(hid_t f, const char *where, l4_root *r)
{
    if (l4_get_attr(f, "crpm_format", H5T_NATIVE_INT32, &r->format) < 0)
        return l4_h5_fail("%s: not a libcrpm level-4 file (no crpm_format attribute)", where);
    if (r->format != CRPM_L4_FORMAT)
        return crpm_error(CRPM_ERR_VERSION, "%s: level-4 format %d, this library reads %d", where,
                          (int)r->format, CRPM_L4_FORMAT);
    if (l4_get_attr(f, "ckpt_id", H5T_NATIVE_INT32, &r->ckpt_id) < 0 ||
        l4_get_attr(f, "epoch", H5T_NATIVE_UINT64, &r->epoch) < 0 ||
        l4_get_attr(f, "nranks", H5T_NATIVE_INT32, &r->nranks) < 0 ||
        l4_get_attr(f, "sequence", H5T_NATIVE_UINT64, &r->seq) < 0 ||
        l4_get_str_attr(f, "job_name", r->job, sizeof r->job) < 0)
        return l4_h5_fail("%s: missing or unreadable root attribute", where);
    if (r->nranks <= 0)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: invalid rank count %d", where, (int)r->nranks);
    r->has_run = l4_get_attr(f, "run_id0", H5T_NATIVE_UINT64, &r->run[0]) == 0 &&
                 l4_get_attr(f, "run_id1", H5T_NATIVE_UINT64, &r->run[1]) == 0;
    return CRPM_SUCCESS;
}

/* ---- datasets ---------------------------------------------------------------- */

int l4_check_desc(const crpm_array *r, int i, int nregions, const crpm_array *all, int need_ptr)
{
    if (r->elem_size == 0)
        return crpm_error(CRPM_ERR_INVAL, "level 4: region %d has element size 0", (int)r->id);
    if (r->elem_size > UINT32_MAX)
        return crpm_error(CRPM_ERR_RANGE, "level 4: region %d element size %llu too large", (int)r->id,
                          (unsigned long long)r->elem_size);
    if (r->count > UINT64_MAX / r->elem_size || r->count * r->elem_size > (uint64_t)SIZE_MAX)
        return crpm_error(CRPM_ERR_RANGE, "level 4: region %d size overflows", (int)r->id);
    if (need_ptr && r->count > 0 && !r->ptr)
        return crpm_error(CRPM_ERR_INVAL, "level 4: region %d has a NULL pointer", (int)r->id);
    for (int j = 0; j < i && j < nregions; j++)
        if (all[j].id == r->id)
            return crpm_error(CRPM_ERR_INVAL, "level 4: region id %d given twice", (int)r->id);
    return CRPM_SUCCESS;
}

/* Creates /rank_<r>/id_<id> with its attributes (same call on every rank in
 * parallel). */
hid_t l4_create_dataset(hid_t grp, const l4_desc *d, int fill_never)
{
    char name[32];
    snprintf(name, sizeof name, "id_%d", (int)(int32_t)d->id);
    hid_t type = l4_type((int32_t)d->type_code, d->elem_size);
    hsize_t dims[1] = { (hsize_t)d->count };
    hid_t sp = H5Screate_simple(1, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t ds = -1;
    if (type >= 0 && sp >= 0 && dcpl >= 0 && H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 &&
        (!fill_never || H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0))
        ds = H5Dcreate2(grp, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds >= 0) {
        int32_t tc = (int32_t)d->type_code;
        uint32_t crc = (uint32_t)d->crc;
        if (l4_put_attr(ds, "type_code", H5T_NATIVE_INT32, &tc) < 0 ||
            l4_put_attr(ds, "elem_size", H5T_NATIVE_UINT64, &d->elem_size) < 0 ||
            l4_put_attr(ds, "crc32", H5T_NATIVE_UINT32, &crc) < 0) {
            H5Dclose(ds);
            ds = -1;
        }
    }
    l4_close_id(&dcpl, H5Pclose);
    l4_close_id(&sp, H5Sclose);
    l4_close_id(&type, H5Tclose);
    return ds;
}

hid_t l4_create_group(hid_t f, int32_t rank, int32_t nregions)
{
    char name[32];
    snprintf(name, sizeof name, "rank_%d", (int)rank);
    hid_t g = H5Gcreate2(f, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (g >= 0 && (l4_put_attr(g, "rank", H5T_NATIVE_INT32, &rank) < 0 ||
                   l4_put_attr(g, "nregions", H5T_NATIVE_INT32, &nregions) < 0)) {
        H5Gclose(g);
        g = -1;
    }
    return g;
}

/* Saved description of dataset `ds`: attributes, extent, type size. */

int l4_read_saved(hid_t ds, const char *where, l4_saved *s)
{
    if (l4_get_attr(ds, "type_code", H5T_NATIVE_INT32, &s->type_code) < 0 ||
        l4_get_attr(ds, "elem_size", H5T_NATIVE_UINT64, &s->elem_size) < 0 ||
        l4_get_attr(ds, "crc32", H5T_NATIVE_UINT32, &s->crc) < 0)
        return l4_h5_fail("%s: missing dataset attribute (type_code, elem_size or crc32)", where);
    hid_t sp = H5Dget_space(ds);
    hid_t ft = H5Dget_type(ds);
    int rc = CRPM_SUCCESS;
    hsize_t dims[1] = { 0 };
    if (sp < 0 || ft < 0)
        rc = l4_h5_fail("%s: cannot read dataspace or type", where);
    else if (H5Sget_simple_extent_ndims(sp) != 1 || H5Sget_simple_extent_dims(sp, dims, NULL) != 1)
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: dataset is not one-dimensional", where);
    else if (H5Tget_size(ft) != s->elem_size)
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: stored type has %zu bytes, elem_size attribute says %llu",
                        where, H5Tget_size(ft), (unsigned long long)s->elem_size);
    s->count = dims[0];
    if (rc == CRPM_SUCCESS && s->elem_size && s->count > UINT64_MAX / s->elem_size)
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: dataset size overflows", where);
    l4_close_id(&ft, H5Tclose);
    l4_close_id(&sp, H5Sclose);
    return rc;
}

/* Reads dataset `ds` (stored bytes, no conversion) and checks its CRC.
 * dst != NULL: the whole dataset goes there and is then converted from the
 * stored type to mtype if they differ.  dst == NULL: streamed through a
 * bounded buffer only to check the CRC. */
int l4_read_checked(hid_t ds, const char *where, const l4_saved *s, void *dst, hid_t mtype)
{
    if (s->count == 0)
        return s->crc == l4_crc_init() ? CRPM_SUCCESS
                                    : crpm_error(CRPM_ERR_CORRUPT, "%s: checksum mismatch (empty)", where);
    hid_t ft = H5Dget_type(ds);
    hid_t fsp = H5Dget_space(ds);
    hid_t msp = -1;
    void *buf = NULL;
    int rc = CRPM_SUCCESS;
    uint32_t crc = l4_crc_init();
    if (ft < 0 || fsp < 0) {
        rc = l4_h5_fail("%s: cannot read dataspace or type", where);
        goto out;
    }
    uint64_t per = dst ? s->count : L4_STREAM_BYTES / s->elem_size;
    if (per == 0)
        per = 1;
    if (!dst && !(buf = malloc((size_t)(per < s->count ? per : s->count) * s->elem_size))) {
        rc = crpm_error(CRPM_ERR_NOMEM, "%s: no memory for a %llu-byte read buffer", where,
                        (unsigned long long)(per * s->elem_size));
        goto out;
    }
    for (uint64_t off = 0; off < s->count && rc == CRPM_SUCCESS; off += per) {
        uint64_t n = s->count - off < per ? s->count - off : per;
        hsize_t start[1] = { off }, cnt[1] = { n };
        void *to = dst ? dst : buf;
        l4_close_id(&msp, H5Sclose);
        msp = H5Screate_simple(1, cnt, NULL);
        if (msp < 0 || H5Sselect_hyperslab(fsp, H5S_SELECT_SET, start, NULL, cnt, NULL) < 0 ||
            H5Dread(ds, ft, msp, fsp, H5P_DEFAULT, to) < 0) {
            rc = l4_h5_fail("%s: read failed", where);
            break;
        }
        crc = l4_crc_update(crc, to, n * s->elem_size);
    }
    if (rc == CRPM_SUCCESS && crc != s->crc)
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: checksum mismatch (stored crc32 %08x, data %08x): data corrupted",
                        where, (unsigned)s->crc, (unsigned)crc);
    if (rc == CRPM_SUCCESS && dst && mtype >= 0) {
        htri_t eq = H5Tequal(ft, mtype);
        if (eq < 0 || (eq == 0 && H5Tconvert(ft, mtype, (size_t)s->count, dst, NULL, H5P_DEFAULT) < 0))
            rc = l4_h5_fail("%s: cannot convert the stored type to the native one", where);
    }
out:
    free(buf);
    l4_close_id(&msp, H5Sclose);
    l4_close_id(&fsp, H5Sclose);
    l4_close_id(&ft, H5Tclose);
    return rc;
}

/* Dataset names of a group, collected by H5Literate (n = -1: bad name). */
typedef struct l4_names {
    char (*v)[32];
    int n, cap;
} l4_names;

static herr_t name_cb(hid_t g, const char *name, const H5L_info_t *info, void *arg)
{
    l4_names *nm = arg;
    (void)g;
    (void)info;
    if (nm->n < 0 || nm->n >= nm->cap || strlen(name) >= sizeof nm->v[0]) {
        nm->n = -1;
        return 1; /* stop: more or longer names than a valid group has */
    }
    snprintf(nm->v[nm->n++], sizeof nm->v[0], "%s", name);
    return 0;
}

/* Checks group rank_<rank> of an open file.  read_into: the saved set must
 * equal regions[0..nregions) and the data is read into them.  Otherwise every
 * dataset is verified and, if out != NULL, described. */
/* A saved dataset into the protected array r, after its description was
 * checked against r's. */
static int read_into_array(hid_t ds, const char *dwhere, const l4_saved *s, const crpm_array *r)
{
    int rc = CRPM_SUCCESS;
    if (s->type_code != r->type_code || s->elem_size != r->elem_size || s->count != r->count)
        rc = crpm_error(CRPM_ERR_MISMATCH,
                        "%s: saved type %d x %llu elements of %llu bytes, protected type %d x %llu of %llu",
                        dwhere, (int)s->type_code, (unsigned long long)s->count,
                        (unsigned long long)s->elem_size, (int)r->type_code,
                        (unsigned long long)r->count, (unsigned long long)r->elem_size);
    void *bytes = NULL, *host = NULL; /* not host memory: checked in a host buffer, then copied in */
    if (rc == CRPM_SUCCESS)
        rc = crpm_array_fill_begin(r, &bytes, &host);
    if (rc == CRPM_SUCCESS) {
        hid_t mt = l4_type(r->type_code, r->elem_size);
        rc = mt < 0 ? l4_h5_fail("%s: cannot build the memory type", dwhere)
                    : l4_read_checked(ds, dwhere, s, bytes, mt);
        l4_close_id(&mt, H5Tclose);
        int frc = crpm_array_fill_end(r, host, rc == CRPM_SUCCESS);
        rc = rc ? rc : frc;
    }
    return rc;
}

int l4_check_group(hid_t f, const char *fname, int rank, int read_into, int nregions,
                       const crpm_array *regions, FILE *out)
{
    char where[L4_PATH_MAX + 64];
    char gname[32];
    snprintf(gname, sizeof gname, "rank_%d", rank);
    snprintf(where, sizeof where, "%s:/%s", fname, gname);
    htri_t ex = H5Lexists(f, gname, H5P_DEFAULT);
    if (ex < 0)
        return l4_h5_fail("%s: cannot look up the group", where);
    if (ex == 0)
        return crpm_error(CRPM_ERR_MISSING, "%s: group missing (rank %d not saved)", where, rank);
    hid_t g = H5Gopen2(f, gname, H5P_DEFAULT);
    if (g < 0)
        return l4_h5_fail("%s: cannot open the group", where);
    int rc = CRPM_SUCCESS;
    int32_t saved_n = -1, saved_rank = -1;
    H5G_info_t info;
    l4_names names = { NULL, 0, 0 };
    if (l4_get_attr(g, "nregions", H5T_NATIVE_INT32, &saved_n) < 0 ||
        l4_get_attr(g, "rank", H5T_NATIVE_INT32, &saved_rank) < 0 || H5Gget_info(g, &info) < 0) {
        rc = l4_h5_fail("%s: missing group attributes", where);
        goto out;
    }
    if (saved_rank != rank || saved_n < 0 || info.nlinks != (hsize_t)saved_n) {
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: group holds %llu datasets for rank %d, attributes say %d for rank %d",
                        where, (unsigned long long)info.nlinks, rank, (int)saved_n, (int)saved_rank);
        goto out;
    }
    if (read_into && saved_n != nregions) {
        rc = crpm_error(CRPM_ERR_MISMATCH, "%s: %d arrays saved, %d protected now", where, (int)saved_n, nregions);
        goto out;
    }
    if (out)
        fprintf(out, "  rank %d: %d dataset(s)\n", rank, (int)saved_n);
    if (!read_into) {
        names.cap = saved_n;
        names.v = calloc((size_t)(saved_n > 0 ? saved_n : 1), sizeof *names.v);
        if (!names.v) {
            rc = crpm_error(CRPM_ERR_NOMEM, "%s: out of memory", where);
            goto out;
        }
        hsize_t pos = 0;
        if (H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &pos, name_cb, &names) < 0 || names.n != saved_n) {
            rc = names.n < 0 ? crpm_error(CRPM_ERR_CORRUPT, "%s: unexpected link name in the group", where)
                             : l4_h5_fail("%s: cannot list the datasets", where);
            goto out;
        }
    }
    for (int i = 0; i < saved_n && rc == CRPM_SUCCESS; i++) {
        char dname[256];
        if (read_into) {
            snprintf(dname, sizeof dname, "id_%d", (int)regions[i].id);
        } else {
            snprintf(dname, sizeof dname, "%s", names.v[i]);
        }
        char dwhere[L4_PATH_MAX + 400];
        snprintf(dwhere, sizeof dwhere, "%s/%s", where, dname);
        ex = H5Lexists(g, dname, H5P_DEFAULT);
        if (ex <= 0) {
            rc = ex < 0 ? l4_h5_fail("%s: cannot look up the dataset", dwhere)
                        : crpm_error(CRPM_ERR_MISMATCH, "%s: protected id %d was not saved", dwhere,
                                     (int)regions[i].id);
            break;
        }
        hid_t ds = H5Dopen2(g, dname, H5P_DEFAULT);
        if (ds < 0) {
            rc = l4_h5_fail("%s: cannot open the dataset", dwhere);
            break;
        }
        l4_saved s;
        rc = l4_read_saved(ds, dwhere, &s);
        if (rc == CRPM_SUCCESS && read_into) {
            rc = read_into_array(ds, dwhere, &s, &regions[i]);
        } else if (rc == CRPM_SUCCESS) {
            rc = l4_read_checked(ds, dwhere, &s, NULL, -1);
            if (out)
                fprintf(out, "    %-12s type %-3d elem %-5llu count %-10llu crc32 %08x  %s\n", dname,
                        (int)s.type_code, (unsigned long long)s.elem_size, (unsigned long long)s.count,
                        (unsigned)s.crc, rc == CRPM_SUCCESS ? "ok" : "BAD");
        }
        H5Dclose(ds);
    }
out:
    free(names.v);
    H5Gclose(g);
    return rc;
}

/* ---- directory scan (serial, rank 0) ------------------------------------------ */

/* Serial open without MPI-IO (a parallel build still has the sec2 driver).
 * On failure the error is set before any other HDF5 call clears the stack. */
int l4_open_serial(const char *path, hid_t *f)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0)
        return l4_h5_fail("%s: cannot open", path);
    *f = H5Pset_fapl_sec2(fapl) >= 0 ? H5Fopen(path, H5F_ACC_RDONLY, fapl) : -1;
    int rc = *f >= 0 ? CRPM_SUCCESS : l4_h5_fail("%s: cannot open as HDF5", path);
    H5Pclose(fapl);
    return rc;
}

static int cmp_newest(const void *a, const void *b)
{
    const l4_file *x = a, *y = b;
    if (x->seq != y->seq)
        return x->seq < y->seq ? 1 : -1;
    if (x->epoch != y->epoch)
        return x->epoch < y->epoch ? 1 : -1;
    return x->ckpt_id < y->ckpt_id ? 1 : x->ckpt_id > y->ckpt_id ? -1 : 0;
}

/* Lists the l4-*.h5 files of `dir`, reading their root attributes; files of
 * another job or unreadable ones get usable = 0.  Sorted newest first. */
int l4_scan_dir(const char *dir, const char *job, l4_file **out, int *nout)
{
    *out = NULL;
    *nout = 0;
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT)
            return CRPM_SUCCESS;
        return crpm_error(CRPM_ERR_IO, "level 4: cannot read directory %s: %s", dir, strerror(errno));
    }
    l4_file *v = NULL;
    int n = 0, rc = CRPM_SUCCESS;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int32_t id;
        if (crpm_parse_l4_name(e->d_name, &id) != 0 || strlen(e->d_name) >= sizeof v->name)
            continue;
        if (CRPM_GROW(v, cap, (size_t)n + 1, 16)) {
            rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory scanning %s", dir);
            break;
        }
        l4_file *lf = &v[n++];
        memset(lf, 0, sizeof *lf);
        memcpy(lf->name, e->d_name, strlen(e->d_name) + 1); /* length checked above */
        lf->ckpt_id = id;
        char path[L4_PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path)
            continue;
        hid_t f = -1;
        if (l4_open_serial(path, &f) != CRPM_SUCCESS) {
            snprintf(lf->why, sizeof lf->why, "%s", crpm_last_error());
            continue;
        }
        l4_root r;
        if (l4_get_root(f, path, &r) != CRPM_SUCCESS) {
            snprintf(lf->why, sizeof lf->why, "%s", crpm_last_error());
        } else if (strcmp(r.job, job) != 0) {
            snprintf(lf->why, sizeof lf->why, "%.100s: belongs to job '%.100s'", e->d_name, r.job);
        } else {
            lf->usable = 1;
            lf->nranks = r.nranks;
            lf->epoch = r.epoch;
            lf->seq = r.seq;
            lf->ckpt_id = r.ckpt_id;
        }
        H5Eclear2(H5E_DEFAULT);
        H5Fclose(f);
    }
    closedir(d);
    if (rc != CRPM_SUCCESS) {
        free(v);
        return rc;
    }
    if (n > 1)
        qsort(v, (size_t)n, sizeof *v, cmp_newest);
    *out = v;
    *nout = n;
    return CRPM_SUCCESS;
}

/* After a successful write of `keep_name` (sequence seq): removes this job's
 * older files beyond the newest `keep` and stale temporary files.  v is the
 * scan taken before the write (newest first), which saves opening every file
 * again.  Errors here do not fail the checkpoint. */
void l4_prune(const char *dir, const l4_file *v, int n, const char *keep_name, uint64_t seq, int keep)
{
    int kept = 1; /* the new file */
    for (int i = 0; i < n; i++) {
        if (!v[i].usable || strcmp(v[i].name, keep_name) == 0 || v[i].seq >= seq)
            continue;
        if (kept < keep) {
            kept++;
            continue;
        }
        char path[L4_PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, v[i].name) < sizeof path)
            unlink(path);
    }
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, ".l4-", 4) == 0 && len > 11 && strcmp(e->d_name + len - 7, ".h5.tmp") == 0) {
            char path[L4_PATH_MAX];
            if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path)
                unlink(path);
        }
    }
    closedir(d);
    crpm_sync_dir(dir); /* best effort: removing stale temporaries */
}

#endif /* CRPM_HAVE_HDF5 */
