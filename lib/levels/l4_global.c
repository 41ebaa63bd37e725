/* Level 4 and the global layout (l4_global.h). */
#include <stdlib.h>
#include <string.h>
#include "error.h"
#include "l4_global.h"

int crpm_l4g_is_box(const crpm_glayout *lay, int32_t id) { return lay && crpm_glayout_subset(lay, id) != NULL; }

#ifndef CRPM_HAVE_HDF5
static int notsup(void) { return crpm_error(CRPM_ERR_NOTSUP, "level-4 checkpoints need parallel HDF5, which this build lacks"); }
int crpm_l4g_write(MPI_Comm comm, const char *path, const crpm_glayout *lay, int n, const crpm_array *a,
                   const uint8_t *run_id, int64_t time_ns)
{
    (void)comm; (void)path; (void)lay; (void)n; (void)a; (void)run_id; (void)time_ns;
    return notsup();
}
int crpm_l4g_list(MPI_Comm comm, const char *glbl_dir, const char *job, crpm_l4g_file **out, int *n)
{
    (void)comm; (void)glbl_dir; (void)job;
    *out = NULL;
    *n = 0;
    return CRPM_SUCCESS;
}
int crpm_l4g_open(MPI_Comm comm, const char *path, const char *job, crpm_l4g **out)
{
    (void)comm; (void)path; (void)job;
    *out = NULL;
    return notsup();
}
void crpm_l4g_close(crpm_l4g *h) { (void)h; }
int crpm_l4g_nranks(const crpm_l4g *h) { (void)h; return 0; }
int32_t crpm_l4g_ckpt_id(const crpm_l4g *h) { (void)h; return 0; }
int crpm_l4g_rank_arrays(crpm_l4g *h, int q, crpm_array **arr, int *n) { (void)h; (void)q; (void)arr; (void)n; return notsup(); }
int crpm_l4g_rank_read(crpm_l4g *h, int q, int32_t id, void *dst, uint64_t bytes)
{
    (void)h; (void)q; (void)id; (void)dst; (void)bytes;
    return notsup();
}
uint64_t crpm_l4g_piece(crpm_l4g *h, int32_t gid) { (void)h; (void)gid; return 0; }
int crpm_l4g_verify_boxes(crpm_l4g *h, int q, const crpm_glayout *lay_q) { (void)h; (void)q; (void)lay_q; return notsup(); }
int crpm_l4g_read_box(crpm_l4g *h, int q, const crpm_glayout *lay_q, int k, uint64_t e0, uint64_t e1, void *dst)
{
    (void)h; (void)q; (void)lay_q; (void)k; (void)e0; (void)e1; (void)dst;
    return notsup();
}
#else
#include <stdio.h>
#include "crc32c.h"
#include "fsutil.h"
#include "l4_common.h"
#include "reserved_ids.h"

static uint64_t piece_of(uint64_t esz)
{
    uint64_t p = CRPM_L4G_PIECE_BYTES / esz;
    return p ? p : 1;
}

static uint64_t npieces(uint64_t vol, uint64_t piece) { return (vol + piece - 1) / piece; }

static void ds_name(const crpm_gds *d, char *out, size_t n)
{
    if (d->name[0])
        snprintf(out, n, "%s", d->name);
    else
        snprintf(out, n, "global_%d", (int)d->gid);
}

static int cmp_gid(const void *a, const void *b)
{
    const crpm_gds *x = a, *y = b;
    return x->gid < y->gid ? -1 : x->gid > y->gid;
}

/* ---- write ------------------------------------------------------------------------ */
/* This rank's pieces: for each box (layout order), the CRC-32 of each piece. */
static int my_pieces(const crpm_glayout *lay, int n, const crpm_array *a, uint32_t **out, uint64_t *nout,
                     const crpm_array ***box_arr)
{
    uint64_t total = 0;
    *box_arr = calloc((size_t)lay->nsub + 1, sizeof **box_arr);
    if (!*box_arr)
        return crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    for (int i = 0; i < lay->nsub; i++) {
        const crpm_subset *b = &lay->sub[i];
        const crpm_gds *d = crpm_glayout_dataset(lay, b->gid);
        const crpm_array *x = NULL;
        for (int k = 0; k < n; k++)
            if (a[k].id == b->id)
                x = &a[k];
        uint64_t vol = crpm_box_volume(b->ndims, b->cnt);
        if (!x || !d || x->count != vol || x->elem_size != d->elem_size)
            return crpm_error(CRPM_ERR_MISMATCH, "level 4: array %d does not hold its box of global dataset %d "
                              "(%llu elements)", b->id, b->gid, (unsigned long long)vol);
        (*box_arr)[i] = x;
        total += npieces(vol, piece_of(d->elem_size));
    }
    uint32_t *c = malloc(sizeof *c * (size_t)(total ? total : 1));
    if (!c)
        return crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    uint64_t j = 0;
    for (int i = 0; i < lay->nsub; i++) {
        const crpm_array *x = (*box_arr)[i];
        uint64_t p = piece_of(x->elem_size);
        for (uint64_t e = 0; e < x->count; e += p) {
            uint64_t m = x->count - e < p ? x->count - e : p;
            c[j++] = l4_crc_update(l4_crc_init(), (const char *)x->ptr + e * x->elem_size, m * x->elem_size);
        }
    }
    *out = c;
    *nout = total;
    return CRPM_SUCCESS;
}

/* Datasets sorted by gid; every rank must declare the same ones. */
static int same_datasets(MPI_Comm comm, const crpm_glayout *lay, crpm_gds **sorted)
{
    *sorted = malloc(sizeof **sorted * (size_t)(lay->nds + 1));
    if (!*sorted)
        return crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    memcpy(*sorted, lay->ds, sizeof **sorted * (size_t)lay->nds);
    qsort(*sorted, (size_t)lay->nds, sizeof **sorted, cmp_gid);
    crpm_glayout tmp = {*sorted, lay->nds, lay->nds, NULL, 0, 0, NULL, 0, 0};
    size_t len = crpm_glayout_serialize(&tmp, NULL, 0);
    unsigned char *buf = malloc(len);
    if (!buf)
        return crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    crpm_glayout_serialize(&tmp, buf, len);
    int64_t mine[2], lo[2];
    mine[0] = (int64_t)crpm_crc32c(buf, len, 0);
    mine[1] = -mine[0];
    free(buf);
    if (MPI_Allreduce(mine, lo, 2, MPI_INT64_T, MPI_MIN, comm) != MPI_SUCCESS)
        return crpm_error(CRPM_ERR_MPI, "level 4: MPI_Allreduce failed");
    if (lo[0] != -lo[1])
        return crpm_error(CRPM_ERR_INVAL, "level 4: the ranks define different global datasets (crpm_define_global "
                          "must be called with the same arguments on every rank)");
    return CRPM_SUCCESS;
}

static hid_t create_nd(hid_t f, const crpm_gds *d)
{
    char name[CRPM_GLAYOUT_NAME_MAX + 16];
    ds_name(d, name, sizeof name);
    hsize_t dims[CRPM_GLAYOUT_MAX_DIMS];
    for (int k = 0; k < d->ndims; k++)
        dims[k] = (hsize_t)d->dims[k];
    hid_t type = l4_type(d->type_code, d->elem_size), sp = H5Screate_simple(d->ndims, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), ds = -1;
    if (type >= 0 && sp >= 0 && dcpl >= 0 && H5Pset_layout(dcpl, H5D_CONTIGUOUS) >= 0 &&
        H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) >= 0)
        ds = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    uint64_t piece = piece_of(d->elem_size);
    if (ds >= 0 && (l4_put_attr(ds, "crpm_gid", H5T_NATIVE_INT32, &d->gid) < 0 ||
                    l4_put_attr(ds, "type_code", H5T_NATIVE_INT32, &d->type_code) < 0 ||
                    l4_put_attr(ds, "elem_size", H5T_NATIVE_UINT64, &d->elem_size) < 0 ||
                    l4_put_attr(ds, "crc_piece", H5T_NATIVE_UINT64, &piece) < 0)) {
        H5Dclose(ds);
        ds = -1;
    }
    l4_close_id(&dcpl, H5Pclose);
    l4_close_id(&sp, H5Sclose);
    l4_close_id(&type, H5Tclose);
    return ds;
}

/* One box written from memory into the global dataset (independent I/O). */
static int write_box(hid_t ds, const crpm_subset *b, const crpm_array *x)
{
    hsize_t off[CRPM_GLAYOUT_MAX_DIMS], cnt[CRPM_GLAYOUT_MAX_DIMS], n = x->count;
    for (int k = 0; k < b->ndims; k++) {
        off[k] = b->off[k];
        cnt[k] = b->cnt[k];
    }
    if (!n)
        return CRPM_SUCCESS;
    hid_t fsp = H5Dget_space(ds), msp = H5Screate_simple(1, &n, NULL), mt = l4_type(x->type_code, x->elem_size);
    int rc = fsp >= 0 && msp >= 0 && mt >= 0 && H5Sselect_hyperslab(fsp, H5S_SELECT_SET, off, NULL, cnt, NULL) >= 0 &&
                     H5Dwrite(ds, mt, msp, fsp, H5P_DEFAULT, x->ptr) >= 0
                 ? CRPM_SUCCESS
                 : l4_h5_fail("level 4: writing array %d into its global dataset", x->id);
    l4_close_id(&mt, H5Tclose);
    l4_close_id(&msp, H5Sclose);
    l4_close_id(&fsp, H5Sclose);
    return rc;
}

/* /crpm_global/crc and crc_index, each rank its slice; root attributes. */
static int write_pieces(MPI_Comm comm, hid_t f, const uint32_t *crc, uint64_t n, const uint8_t *run_id,
                        int64_t time_ns)
{
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    uint64_t *all = calloc((size_t)size, sizeof *all);
    int64_t *index = calloc((size_t)size + 1, sizeof *index);
    if (!all || !index || MPI_Allgather(&n, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, comm) != MPI_SUCCESS) {
        free(all);
        free(index);
        return crpm_error(CRPM_ERR_MPI, "level 4: gathering the piece counts failed");
    }
    for (int r = 0; r < size; r++)
        index[r + 1] = index[r] + (int64_t)all[r];
    free(all);
    int one = 1, rc = CRPM_SUCCESS;
    char hex[40] = "";
    for (int i = 0; run_id && i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", run_id[i]);
    hid_t g = H5Gcreate2(f, "crpm_global", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hsize_t nt = (hsize_t)index[size], ni = (hsize_t)size + 1, off = (hsize_t)index[rank], cnt = n;
    hid_t sp = H5Screate_simple(1, &nt, NULL), spi = H5Screate_simple(1, &ni, NULL);
    hid_t dc = g >= 0 && sp >= 0 ? H5Dcreate2(g, "crc", H5T_NATIVE_UINT32, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT) : -1;
    hid_t di = g >= 0 && spi >= 0 ? H5Dcreate2(g, "crc_index", H5T_NATIVE_INT64, spi, H5P_DEFAULT, H5P_DEFAULT,
                                               H5P_DEFAULT) : -1;
    if (dc < 0 || di < 0 || l4_put_attr(f, "crpm_glayout", H5T_NATIVE_INT32, &one) < 0 ||
        l4_put_attr(f, "time_ns", H5T_NATIVE_INT64, &time_ns) < 0 || l4_put_str_attr(f, "run_id", hex) < 0)
        rc = l4_h5_fail("level 4: creating the checksums of the global datasets");
    rc = l4_agree(comm, rc);
    if (rc == 0 && n) {
        hid_t msp = H5Screate_simple(1, &cnt, NULL);
        if (msp < 0 || H5Sselect_hyperslab(sp, H5S_SELECT_SET, &off, NULL, &cnt, NULL) < 0 ||
            H5Dwrite(dc, H5T_NATIVE_UINT32, msp, sp, H5P_DEFAULT, crc) < 0)
            rc = l4_h5_fail("level 4: writing the checksums of the global datasets");
        l4_close_id(&msp, H5Sclose);
    }
    if (rc == 0 && rank == 0 && H5Dwrite(di, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, index) < 0)
        rc = l4_h5_fail("level 4: writing the checksum index");
    l4_close_id(&dc, H5Dclose);
    l4_close_id(&di, H5Dclose);
    l4_close_id(&sp, H5Sclose);
    l4_close_id(&spi, H5Sclose);
    l4_close_id(&g, H5Gclose);
    free(index);
    return rc;
}

int crpm_l4g_write(MPI_Comm comm, const char *path, const crpm_glayout *lay, int n, const crpm_array *a,
                   const uint8_t *run_id, int64_t time_ns)
{
    static const crpm_glayout none;
    const crpm_glayout *l = lay ? lay : &none;
    int any = !crpm_glayout_empty(l), all_any = 0;
    if (MPI_Allreduce(&any, &all_any, 1, MPI_INT, MPI_MAX, comm) != MPI_SUCCESS)
        return crpm_error(CRPM_ERR_MPI, "level 4: MPI_Allreduce failed");
    if (!all_any)
        return CRPM_SUCCESS;
    l4_quiet q;
    l4_quiet_begin(&q);
    crpm_gds *sorted = NULL;
    uint32_t *crc = NULL;
    uint64_t ncrc = 0;
    const crpm_array **box_arr = NULL;
    int rc = same_datasets(comm, l, &sorted);
    if (rc == 0)
        rc = my_pieces(l, n, a, &crc, &ncrc, &box_arr);
    rc = l4_agree(comm, rc);
    hid_t f = -1, fapl = -1;
    if (rc == 0) {
        fapl = H5Pcreate(H5P_FILE_ACCESS);
        if (fapl >= 0 && H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) >= 0 &&
            H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) >= 0 && H5Pset_all_coll_metadata_ops(fapl, 1) >= 0 &&
            H5Pset_coll_metadata_write(fapl, 1) >= 0)
            f = H5Fopen(path, H5F_ACC_RDWR, fapl);
        rc = l4_agree(comm, f >= 0 ? CRPM_SUCCESS : l4_h5_fail("level 4: cannot reopen %s", path));
    }
    for (int i = 0; rc == 0 && i < l->nds; i++) {
        hid_t ds = create_nd(f, &sorted[i]);
        int lrc = ds >= 0 ? CRPM_SUCCESS : l4_h5_fail("level 4: cannot create global dataset %d", (int)sorted[i].gid);
        lrc = l4_agree(comm, lrc);
        for (int k = 0; lrc == 0 && k < l->nsub; k++)
            if (l->sub[k].gid == sorted[i].gid)
                lrc = write_box(ds, &l->sub[k], box_arr[k]);
        l4_close_id(&ds, H5Dclose);
        rc = l4_agree(comm, lrc);
    }
    if (rc == 0)
        rc = l4_agree(comm, write_pieces(comm, f, crc, ncrc, run_id, time_ns));
    if (f >= 0) {
        if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0 && rc == 0)
            rc = l4_h5_fail("level 4: flushing %s failed", path);
        if (H5Fclose(f) < 0 && rc == 0)
            rc = l4_h5_fail("level 4: closing %s failed", path);
        rc = l4_agree(comm, rc);
    }
    l4_close_id(&fapl, H5Pclose);
    free(sorted);
    free(crc);
    free(box_arr);
    l4_quiet_end(&q);
    return rc;
}

/* ---- list --------------------------------------------------------------------------- */
static void file_attrs(const char *dir, crpm_l4g_file *x)
{
    char path[CRPM_PATH_MAX];
    hid_t f = -1;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, x->name) >= sizeof path || l4_open_serial(path, &f) != 0) {
        crpm_error_clear();
        return;
    }
    int32_t one = 0;
    int64_t t = 0;
    if (l4_get_attr(f, "crpm_glayout", H5T_NATIVE_INT32, &one) == 0 && one == 1 &&
        l4_get_attr(f, "time_ns", H5T_NATIVE_INT64, &t) == 0) {
        x->layout = 1;
        x->time_ns = t;
    }
    H5Eclear2(H5E_DEFAULT);
    H5Fclose(f);
}

int crpm_l4g_list(MPI_Comm comm, const char *glbl_dir, const char *job, crpm_l4g_file **out, int *nout)
{
    int rank = 0, n = 0, rc = CRPM_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    *out = NULL;
    *nout = 0;
    l4_quiet q;
    l4_quiet_begin(&q);
    crpm_l4g_file *v = NULL;
    if (rank == 0) {
        char dir[CRPM_PATH_MAX];
        l4_file *files = NULL;
        rc = l4_job_dir(dir, sizeof dir, glbl_dir, job);
        if (rc == 0)
            rc = l4_scan_dir(dir, job, &files, &n);
        if (rc == 0 && !(v = calloc((size_t)n + 1, sizeof *v)))
            rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
        int k = 0;
        for (int i = 0; rc == 0 && i < n; i++) {
            if (!files[i].usable)
                continue;
            crpm_l4g_file *x = &v[k++];
            x->nranks = files[i].nranks;
            x->ckpt_id = files[i].ckpt_id;
            x->seq = files[i].seq;
            snprintf(x->name, sizeof x->name, "%s", files[i].name);
            file_attrs(dir, x);
        }
        n = k;
        free(files);
    }
    rc = l4_agree(comm, rc);
    if (rc == 0 && MPI_Bcast(&n, 1, MPI_INT, 0, comm) != MPI_SUCCESS)
        rc = crpm_error(CRPM_ERR_MPI, "level 4: MPI_Bcast failed");
    if (rc == 0 && rank != 0 && !(v = calloc((size_t)n + 1, sizeof *v)))
        rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    rc = l4_agree(comm, rc);
    if (rc == 0 && n && MPI_Bcast(v, (int)(sizeof *v * (size_t)n), MPI_BYTE, 0, comm) != MPI_SUCCESS)
        rc = crpm_error(CRPM_ERR_MPI, "level 4: MPI_Bcast failed");
    l4_quiet_end(&q);
    if (rc != 0) {
        free(v);
        return rc;
    }
    *out = v;
    *nout = n;
    return CRPM_SUCCESS;
}

/* ---- open and read ------------------------------------------------------------------ */
typedef struct gref {
    int32_t gid;
    uint64_t piece;
    hid_t ds;
} gref;

struct crpm_l4g {
    hid_t f, crc;
    char path[CRPM_PATH_MAX];
    l4_root root;
    int64_t *index;            /* nranks + 1 */
    gref *g;
    int ng;
};

static herr_t collect_global(hid_t loc, const char *name, const H5L_info_t *info, void *arg)
{
    crpm_l4g *h = arg;
    (void)info;
    if (strncmp(name, "rank_", 5) == 0 || strcmp(name, "crpm_global") == 0)
        return 0;
    hid_t ds = H5Dopen2(loc, name, H5P_DEFAULT);
    int32_t gid;
    uint64_t piece;
    if (ds < 0 || l4_get_attr(ds, "crpm_gid", H5T_NATIVE_INT32, &gid) < 0 ||
        l4_get_attr(ds, "crc_piece", H5T_NATIVE_UINT64, &piece) < 0 || piece == 0) {
        if (ds >= 0)
            H5Dclose(ds);
        H5Eclear2(H5E_DEFAULT);
        return 0; /* not one of ours */
    }
    gref *n = realloc(h->g, sizeof *n * (size_t)(h->ng + 1));
    if (!n) {
        H5Dclose(ds);
        return -1;
    }
    h->g = n;
    h->g[h->ng++] = (gref){gid, piece, ds};
    return 0;
}

void crpm_l4g_close(crpm_l4g *h)
{
    if (!h)
        return;
    for (int i = 0; i < h->ng; i++)
        l4_close_id(&h->g[i].ds, H5Dclose);
    l4_close_id(&h->crc, H5Dclose);
    l4_close_id(&h->f, H5Fclose);
    free(h->g);
    free(h->index);
    free(h);
}

/* The file's root, piece index and global datasets, on h->f (serial). */
static int attach(crpm_l4g *h, const char *path, const char *job)
{
    int rc = l4_get_root(h->f, path, &h->root);
    if (rc == 0 && job && strcmp(h->root.job, job) != 0)
        rc = crpm_error(CRPM_ERR_IDENTITY, "%s: belongs to job '%s', not '%s'", path, h->root.job, job);
    if (rc == 0 && !(h->index = calloc((size_t)h->root.nranks + 1, sizeof *h->index)))
        rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    if (rc == 0) {
        hid_t di = H5Dopen2(h->f, "crpm_global/crc_index", H5P_DEFAULT), sp = di >= 0 ? H5Dget_space(di) : -1;
        h->crc = H5Dopen2(h->f, "crpm_global/crc", H5P_DEFAULT);
        hssize_t np = sp >= 0 ? H5Sget_simple_extent_npoints(sp) : -1;
        if (di < 0 || h->crc < 0 || np != (hssize_t)h->root.nranks + 1 ||
            H5Dread(di, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, h->index) < 0)
            rc = l4_h5_fail("%s: the checksums of the global datasets are missing or unreadable", path);
        l4_close_id(&sp, H5Sclose);
        l4_close_id(&di, H5Dclose);
    }
    hsize_t pos = 0;
    if (rc == 0 && H5Literate(h->f, H5_INDEX_NAME, H5_ITER_INC, &pos, collect_global, h) < 0)
        rc = l4_h5_fail("%s: cannot list the global datasets", path);
    return rc;
}

int crpm_l4g_open(MPI_Comm comm, const char *path, const char *job, crpm_l4g **out)
{
    l4_quiet q;
    l4_quiet_begin(&q);
    crpm_l4g *h = calloc(1, sizeof *h);
    int rc = h ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    if (h) {
        h->f = h->crc = -1;
        snprintf(h->path, sizeof h->path, "%s", path);
        hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
        if (fapl >= 0 && H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) >= 0)
            h->f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
        rc = h->f >= 0 ? CRPM_SUCCESS : l4_h5_fail("level 4: cannot open %s", path);
        l4_close_id(&fapl, H5Pclose);
    }
    rc = l4_agree(comm, rc);
    if (rc == 0)
        rc = attach(h, path, job);
    rc = l4_agree(comm, rc);
    l4_quiet_end(&q);
    if (rc != 0) {
        crpm_l4g_close(h);
        return rc;
    }
    *out = h;
    return CRPM_SUCCESS;
}

int crpm_l4g_verify_file(hid_t f, const char *path, FILE *out)
{
    int32_t one = 0;
    if (l4_get_attr(f, "crpm_glayout", H5T_NATIVE_INT32, &one) != 0 || one != 1) {
        H5Eclear2(H5E_DEFAULT);
        return CRPM_SUCCESS; /* no global datasets */
    }
    crpm_l4g h;
    memset(&h, 0, sizeof h);
    h.f = f;
    h.crc = -1;
    snprintf(h.path, sizeof h.path, "%s", path);
    int rc = attach(&h, path, NULL), first = rc;
    for (int q = 0; rc == 0 && q < h.root.nranks; q++) {
        crpm_array *a = NULL;
        int n = 0, k = -1;
        int grc = crpm_l4g_rank_arrays(&h, q, &a, &n);
        for (int i = 0; grc == 0 && i < n; i++)
            if (a[i].id == CRPM_ID_GLAYOUT)
                k = i;
        crpm_glayout lay;
        memset(&lay, 0, sizeof lay);
        uint64_t bl = k >= 0 ? a[k].count * a[k].elem_size : 0;
        void *blob = k >= 0 ? malloc(bl ? bl : 1) : NULL;
        if (grc == 0 && k >= 0)
            grc = blob ? crpm_l4g_rank_read(&h, q, CRPM_ID_GLAYOUT, blob, bl)
                       : crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
        if (grc == 0 && k >= 0)
            grc = crpm_glayout_parse(blob, bl, &lay, path);
        if (grc == 0)
            grc = crpm_l4g_verify_boxes(&h, q, &lay);
        if (out)
            fprintf(out, "  rank %d: %d box(es) of global datasets: %s\n", q, lay.nsub,
                    grc == 0 ? "ok" : crpm_last_error());
        first = first ? first : grc;
        crpm_glayout_free(&lay);
        free(blob);
        free(a);
    }
    for (int i = 0; i < h.ng; i++)
        l4_close_id(&h.g[i].ds, H5Dclose);
    l4_close_id(&h.crc, H5Dclose);
    free(h.g);
    free(h.index);
    return first;
}

int crpm_l4g_nranks(const crpm_l4g *h) { return h ? h->root.nranks : 0; }
int32_t crpm_l4g_ckpt_id(const crpm_l4g *h) { return h ? h->root.ckpt_id : 0; }

static const gref *find_g(const crpm_l4g *h, int32_t gid)
{
    for (int i = 0; i < h->ng; i++)
        if (h->g[i].gid == gid)
            return &h->g[i];
    return NULL;
}

uint64_t crpm_l4g_piece(crpm_l4g *h, int32_t gid)
{
    const gref *g = find_g(h, gid);
    return g ? g->piece : 0;
}

typedef struct id_list {
    int32_t *v;
    int n, cap, bad;
} id_list;

static herr_t collect_ids(hid_t loc, const char *name, const H5L_info_t *info, void *arg)
{
    id_list *l = arg;
    int id, end = 0;
    (void)loc;
    (void)info;
    if (sscanf(name, "id_%d%n", &id, &end) != 1 || name[end]) {
        l->bad = 1;
        return 0;
    }
    if (l->n == l->cap) {
        int c = l->cap ? 2 * l->cap : 16;
        int32_t *n = realloc(l->v, sizeof *n * (size_t)c);
        if (!n)
            return -1;
        l->v = n;
        l->cap = c;
    }
    l->v[l->n++] = id;
    return 0;
}

int crpm_l4g_rank_arrays(crpm_l4g *h, int q, crpm_array **arr, int *n)
{
    l4_quiet qq;
    l4_quiet_begin(&qq);
    *arr = NULL;
    *n = 0;
    /* the group's structure and every dataset's CRC-32 */
    int rc = l4_check_group(h->f, h->path, q, 0, 0, NULL, NULL);
    char gname[32];
    snprintf(gname, sizeof gname, "rank_%d", q);
    hid_t g = rc == 0 ? H5Gopen2(h->f, gname, H5P_DEFAULT) : -1;
    id_list l = {NULL, 0, 0, 0};
    hsize_t pos = 0;
    if (rc == 0 && (g < 0 || H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, &pos, collect_ids, &l) < 0 || l.bad))
        rc = l4_h5_fail("%s:/%s: cannot list its datasets", h->path, gname);
    crpm_array *a = rc == 0 ? calloc((size_t)l.n + 1, sizeof *a) : NULL;
    if (rc == 0 && !a)
        rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    for (int i = 0; rc == 0 && i < l.n; i++) {
        char dn[32], where[CRPM_PATH_MAX + 128];
        snprintf(dn, sizeof dn, "id_%d", (int)l.v[i]);
        snprintf(where, sizeof where, "%s:/%s/%s", h->path, gname, dn);
        hid_t ds = H5Dopen2(g, dn, H5P_DEFAULT);
        l4_saved s;
        rc = ds >= 0 ? l4_read_saved(ds, where, &s) : l4_h5_fail("%s: cannot open", where);
        if (rc == 0)
            a[i] = (crpm_array){l.v[i], s.type_code, s.elem_size, s.count, NULL, NULL, NULL};
        l4_close_id(&ds, H5Dclose);
    }
    l4_close_id(&g, H5Gclose);
    free(l.v);
    l4_quiet_end(&qq);
    if (rc != 0) {
        free(a);
        return rc;
    }
    *arr = a;
    *n = l.n;
    return CRPM_SUCCESS;
}

int crpm_l4g_rank_read(crpm_l4g *h, int q, int32_t id, void *dst, uint64_t bytes)
{
    l4_quiet qq;
    l4_quiet_begin(&qq);
    char dn[64], where[CRPM_PATH_MAX + 128];
    snprintf(dn, sizeof dn, "rank_%d/id_%d", q, (int)id);
    snprintf(where, sizeof where, "%s:/%s", h->path, dn);
    hid_t ds = H5Dopen2(h->f, dn, H5P_DEFAULT);
    l4_saved s;
    int rc = ds >= 0 ? l4_read_saved(ds, where, &s) : l4_h5_fail("%s: cannot open", where);
    if (rc == 0 && s.count * s.elem_size != bytes)
        rc = crpm_error(CRPM_ERR_MISMATCH, "%s: holds %llu bytes, %llu expected", where,
                        (unsigned long long)(s.count * s.elem_size), (unsigned long long)bytes);
    hid_t mt = rc == 0 ? l4_type(s.type_code, s.elem_size) : -1;
    if (rc == 0)
        rc = mt >= 0 ? l4_read_checked(ds, where, &s, dst, mt) : l4_h5_fail("%s: no memory type", where);
    l4_close_id(&mt, H5Tclose);
    l4_close_id(&ds, H5Dclose);
    l4_quiet_end(&qq);
    return rc;
}

/* Selects elements [e0, e1) (C order) of box (off, cnt) in the file space:
 * at most two blocks per dimension. */
static int select_range(hid_t fsp, int nd, const uint64_t *off, const uint64_t *cnt, uint64_t e0, uint64_t e1)
{
    uint64_t stride[CRPM_GLAYOUT_MAX_DIMS];
    stride[nd - 1] = 1;
    for (int k = nd - 2; k >= 0; k--)
        stride[k] = stride[k + 1] * cnt[k + 1];
    H5S_seloper_t op = H5S_SELECT_SET;
    while (e0 < e1) {
        hsize_t start[CRPM_GLAYOUT_MAX_DIMS], count[CRPM_GLAYOUT_MAX_DIMS];
        uint64_t r = e0;
        for (int k = 0; k < nd; k++) {
            start[k] = off[k] + r / stride[k];
            r %= stride[k];
        }
        /* the outermost dimension at whose boundary e0 sits, and how far the block goes there */
        int j = 0;
        while (j < nd - 1 && e0 % stride[j] != 0)
            j++;
        uint64_t cj = start[j] - off[j], n = (e1 - e0) / stride[j];
        if (n > cnt[j] - cj)
            n = cnt[j] - cj;
        while (n == 0) { /* less than one block at this level: go one level in */
            j++;
            cj = start[j] - off[j];
            n = (e1 - e0) / stride[j];
            if (n > cnt[j] - cj)
                n = cnt[j] - cj;
        }
        for (int k = 0; k < nd; k++)
            count[k] = k < j ? 1 : k == j ? n : cnt[k];
        if (H5Sselect_hyperslab(fsp, op, start, NULL, count, NULL) < 0)
            return -1;
        op = H5S_SELECT_OR;
        e0 += n * stride[j];
    }
    return 0;
}

/* Where old rank q's box k starts in the piece table. */
static int first_piece(crpm_l4g *h, int q, const crpm_glayout *lay, int k, uint64_t *out)
{
    uint64_t p = (uint64_t)h->index[q];
    for (int i = 0; i < k; i++) {
        const gref *g = find_g(h, lay->sub[i].gid);
        if (!g)
            return crpm_error(CRPM_ERR_CORRUPT, "%s: global dataset %d is missing", h->path, lay->sub[i].gid);
        p += npieces(crpm_box_volume(lay->sub[i].ndims, lay->sub[i].cnt), g->piece);
    }
    *out = p;
    return CRPM_SUCCESS;
}

int crpm_l4g_read_box(crpm_l4g *h, int q, const crpm_glayout *lay_q, int k, uint64_t e0, uint64_t e1, void *dst)
{
    if (q < 0 || q >= h->root.nranks || k < 0 || k >= lay_q->nsub)
        return crpm_error(CRPM_ERR_RANGE, "level 4: no box %d of old rank %d", k, q);
    const crpm_subset *b = &lay_q->sub[k];
    const crpm_gds *d = crpm_glayout_dataset(lay_q, b->gid);
    const gref *g = find_g(h, b->gid);
    uint64_t vol = crpm_box_volume(b->ndims, b->cnt), p0 = 0;
    if (!g || !d)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: global dataset %d is missing", h->path, b->gid);
    if (e1 > vol || e0 >= e1 || e0 % g->piece || (e1 % g->piece && e1 != vol))
        return crpm_error(CRPM_ERR_RANGE, "level 4: elements %llu..%llu of a box of %llu do not fall on pieces of %llu",
                          (unsigned long long)e0, (unsigned long long)e1, (unsigned long long)vol,
                          (unsigned long long)g->piece);
    int rc = first_piece(h, q, lay_q, k, &p0);
    if (rc != 0)
        return rc;
    l4_quiet qq;
    l4_quiet_begin(&qq);
    uint64_t np = npieces(e1 - e0, g->piece);
    hsize_t n = e1 - e0, poff = p0 + e0 / g->piece, pn = np;
    uint32_t *want = malloc(sizeof *want * (size_t)np);
    hid_t ft = H5Dget_type(g->ds), fsp = H5Dget_space(g->ds), msp = H5Screate_simple(1, &n, NULL);
    hid_t csp = H5Dget_space(h->crc), cms = H5Screate_simple(1, &pn, NULL);
    size_t esz = ft >= 0 ? H5Tget_size(ft) : 0;
    if (!want)
        rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    else if (ft < 0 || fsp < 0 || msp < 0 || csp < 0 || cms < 0 || esz == 0 ||
             select_range(fsp, b->ndims, b->off, b->cnt, e0, e1) < 0 ||
             H5Dread(g->ds, ft, msp, fsp, H5P_DEFAULT, dst) < 0 ||
             H5Sselect_hyperslab(csp, H5S_SELECT_SET, &poff, NULL, &pn, NULL) < 0 ||
             H5Dread(h->crc, H5T_NATIVE_UINT32, cms, csp, H5P_DEFAULT, want) < 0)
        rc = l4_h5_fail("%s: reading global dataset %d (rank %d's box %d)", h->path, b->gid, q, k);
    for (uint64_t i = 0; rc == 0 && i < np; i++) {
        uint64_t a = i * g->piece, m = n - a < g->piece ? n - a : g->piece;
        uint32_t c = l4_crc_update(l4_crc_init(), (const char *)dst + a * esz, m * esz);
        if (c != want[i])
            rc = crpm_error(CRPM_ERR_CORRUPT, "%s: global dataset %d is corrupt in rank %d's box %d, elements "
                            "%llu..%llu (stored crc32 %08x, data %08x)", h->path, b->gid, q, k,
                            (unsigned long long)(e0 + a), (unsigned long long)(e0 + a + m), want[i], c);
    }
    hid_t mt = rc == 0 ? l4_type(d->type_code, d->elem_size) : -1;
    if (rc == 0) {
        htri_t eq = mt >= 0 ? H5Tequal(ft, mt) : -1;
        if (eq < 0 || (eq == 0 && H5Tconvert(ft, mt, (size_t)n, dst, NULL, H5P_DEFAULT) < 0))
            rc = l4_h5_fail("%s: cannot convert global dataset %d to the native type", h->path, b->gid);
    }
    l4_close_id(&mt, H5Tclose);
    l4_close_id(&cms, H5Sclose);
    l4_close_id(&csp, H5Sclose);
    l4_close_id(&msp, H5Sclose);
    l4_close_id(&fsp, H5Sclose);
    l4_close_id(&ft, H5Tclose);
    free(want);
    l4_quiet_end(&qq);
    return rc;
}

int crpm_l4g_verify_boxes(crpm_l4g *h, int q, const crpm_glayout *lay_q)
{
    int rc = CRPM_SUCCESS;
    char *buf = NULL;
    for (int k = 0; rc == 0 && k < lay_q->nsub; k++) {
        const crpm_subset *b = &lay_q->sub[k];
        const crpm_gds *d = crpm_glayout_dataset(lay_q, b->gid);
        const gref *g = find_g(h, b->gid);
        if (!g || !d) {
            rc = crpm_error(CRPM_ERR_CORRUPT, "%s: global dataset %d is missing", h->path, b->gid);
            break;
        }
        uint64_t vol = crpm_box_volume(b->ndims, b->cnt);
        char *nb = realloc(buf, (size_t)(g->piece * d->elem_size));
        if (!nb) {
            rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
            break;
        }
        buf = nb;
        for (uint64_t e = 0; rc == 0 && e < vol; e += g->piece)
            rc = crpm_l4g_read_box(h, q, lay_q, k, e, vol - e < g->piece ? vol : e + g->piece, buf);
    }
    free(buf);
    return rc;
}
#endif /* CRPM_HAVE_HDF5 */
