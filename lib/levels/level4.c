/* Level 4: one parallel-HDF5 file per global checkpoint (layout in level4.h).
 *
 * Design notes
 * - Datasets are contiguous and written independently, each rank its own
 *   arrays, so the raw-data writes of all ranks proceed in parallel.  HDF5's
 *   Fletcher32 filter would force one collective H5Dwrite per dataset (the
 *   ranks would take turns), so each dataset instead carries a zlib CRC-32 of
 *   its stored bytes in the attribute "crc32"; HDF5's own metadata checksums
 *   (format >= 1.8 object headers, requested through libver bounds) cover the
 *   structure.
 * - Metadata operations are collective in parallel HDF5: every rank creates
 *   every group, dataset and attribute with identical arguments, so the
 *   region lists and checksums are exchanged (Allgatherv) first.
 * - Each collective function runs the same sequence of collective calls on
 *   every rank whatever fails locally, and agrees on the outcome with
 *   crpm_agree() (comm layer), so no rank hangs or continues alone. */
#include "level4.h"
#include "agree.h"
#include "error.h"
#include "l4_global.h"
#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define L4_PATH_MAX CRPM_PATH_MAX

#ifndef CRPM_HAVE_HDF5

static int l4_notsup(void)
{
    return crpm_error(CRPM_ERR_NOTSUP, "level-4 checkpoints need parallel HDF5, which this build lacks");
}

int crpm_l4_write(MPI_Comm comm, const char *glbl_dir, const char *job, int ckpt_id, uint64_t epoch,
                  int nregions, const crpm_array *regions, int keep)
{
    (void)comm; (void)glbl_dir; (void)job; (void)ckpt_id; (void)epoch;
    (void)nregions; (void)regions; (void)keep;
    return l4_notsup();
}

int crpm_l4_write_global(MPI_Comm comm, const char *glbl_dir, const char *job, int ckpt_id, uint64_t epoch,
                         int nregions, const crpm_array *regions, int keep, const crpm_l4_global *g)
{
    (void)g;
    return crpm_l4_write(comm, glbl_dir, job, ckpt_id, epoch, nregions, regions, keep);
}

int crpm_l4_find_latest(MPI_Comm comm, const char *glbl_dir, const char *job, char *path, size_t pathlen,
                        int *ckpt_id, uint64_t *epoch, uint64_t run[2], int *has_run)
{
    (void)comm; (void)glbl_dir; (void)job; (void)path; (void)pathlen; (void)ckpt_id; (void)epoch;
    (void)run; (void)has_run;
    return l4_notsup();
}

int crpm_l4_read(MPI_Comm comm, const char *path, int nregions, const crpm_array *regions)
{
    (void)comm; (void)path; (void)nregions; (void)regions;
    return l4_notsup();
}

int crpm_l4_stored(const char *path, int rank, int32_t id, crpm_array *shape)
{
    (void)path; (void)rank; (void)id; (void)shape;
    return l4_notsup();
}

int crpm_l4_export(const char *path, const char *job, int ckpt_id, uint64_t epoch, int nranks,
                   int nentries, const crpm_l4_rank *entries, crpm_l4_fetch_fn fetch, void *arg)
{
    (void)path; (void)job; (void)ckpt_id; (void)epoch; (void)nranks;
    (void)nentries; (void)entries; (void)fetch; (void)arg;
    return l4_notsup();
}

int crpm_l4_verify_file(const char *path, FILE *out)
{
    (void)path; (void)out;
    return l4_notsup();
}

#else /* CRPM_HAVE_HDF5 */

#include "l4_common.h"

/* ---- parallel write ------------------------------------------------------------- */

static hid_t mpio_fapl(MPI_Comm comm, int coll_meta)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0)
        return -1;
    if (H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL) < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) < 0 ||
        (coll_meta && (H5Pset_all_coll_metadata_ops(fapl, 1) < 0 || H5Pset_coll_metadata_write(fapl, 1) < 0))) {
        H5Pclose(fapl);
        return -1;
    }
    return fapl;
}

/* Exchanges the region lists: all[displ[r] .. displ[r]+cnt[r]) are rank r's. */
static int gather_descs(MPI_Comm comm, int nregions, const crpm_array *regions, l4_desc **all_out,
                        int **cnt_out, int **displ_out, int *total_out)
{
    int rank = 0, size = 0, rc = CRPM_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    l4_desc *mine = calloc((size_t)(nregions > 0 ? nregions : 1), sizeof *mine);
    int *cnt = calloc((size_t)size, sizeof *cnt);
    int *displ = calloc((size_t)size, sizeof *displ);
    int *wcnt = calloc((size_t)size, sizeof *wcnt);
    int *wdispl = calloc((size_t)size, sizeof *wdispl);
    l4_desc *all = NULL;
    if (!mine || !cnt || !displ || !wcnt || !wdispl)
        rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    for (int i = 0; rc == CRPM_SUCCESS && i < nregions; i++) {
        const crpm_array *r = &regions[i];
        mine[i].id = (uint64_t)(int64_t)r->id;
        mine[i].type_code = (uint64_t)(int64_t)r->type_code;
        mine[i].elem_size = r->elem_size;
        mine[i].count = r->count;
        const void *bytes = NULL;
        void *tmp = NULL; /* arrays not in host memory: a host copy (util/memkind.h) */
        rc = crpm_array_view(r, &bytes, &tmp);
        mine[i].crc = r->count && bytes ? l4_crc_update(l4_crc_init(), bytes, r->count * r->elem_size) : l4_crc_init();
        crpm_array_view_end(tmp);
    }
    /* Allocation failures must not skip the collectives below. */
    rc = crpm_agree(comm, rank, rc, "level 4: describing the arrays");
    if (rc != CRPM_SUCCESS)
        goto fail;
    int mrc = MPI_Allgather(&nregions, 1, MPI_INT, cnt, 1, MPI_INT, comm);
    if (mrc != MPI_SUCCESS) {
        rc = crpm_mpi_fail(mrc, "level 4: MPI_Allgather");
        goto fail;
    }
    int total = 0;
    for (int r = 0; r < size; r++) {
        displ[r] = total;
        wcnt[r] = cnt[r] * L4_DESC_WORDS;
        wdispl[r] = total * L4_DESC_WORDS;
        total += cnt[r];
    }
    all = calloc((size_t)(total > 0 ? total : 1), sizeof *all);
    rc = crpm_agree(comm, rank, all ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory"),
                    "level 4: exchanging the array lists");
    if (rc != CRPM_SUCCESS)
        goto fail;
    mrc = MPI_Allgatherv(mine, nregions * L4_DESC_WORDS, MPI_UINT64_T, all, wcnt, wdispl, MPI_UINT64_T, comm);
    if (mrc != MPI_SUCCESS) {
        rc = crpm_mpi_fail(mrc, "level 4: MPI_Allgatherv");
        goto fail;
    }
    free(mine);
    free(wcnt);
    free(wdispl);
    *all_out = all;
    *cnt_out = cnt;
    *displ_out = displ;
    *total_out = total;
    return CRPM_SUCCESS;
fail:
    free(all);
    free(mine);
    free(cnt);
    free(displ);
    free(wcnt);
    free(wdispl);
    return rc;
}

/* Collective: creates `tmp`, every rank's groups and datasets (identical
 * metadata calls everywhere), then each rank writes its own arrays. */
/* boxes: bytes and count of this rank's boxes of global datasets, which
 * crpm_l4g_write adds to the same file next (its storage is reserved here). */
static int write_contents(MPI_Comm comm, const char *tmp, const l4_root *root, const l4_desc *all, const int *cnt,
                          const int *displ, int total, int nregions, const crpm_array *regions,
                          const uint64_t boxes[2])
{
    int rank = 0, size = 0, rc = CRPM_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    hid_t f = -1;
    hid_t *dsets = malloc((size_t)(total > 0 ? total : 1) * sizeof *dsets);
    if (!dsets) {
        rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    } else {
        for (int i = 0; i < total; i++)
            dsets[i] = -1;
        hid_t fapl = mpio_fapl(comm, 1);
        f = fapl >= 0 ? H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : -1;
        rc = f >= 0 ? CRPM_SUCCESS : l4_h5_fail("level 4: cannot create %s", tmp);
        l4_close_id(&fapl, H5Pclose);
    }
    /* one agreement covers the handle array and the (collective) creation */
    rc = crpm_agree(comm, rank, rc, "level 4: creating the file");
    if (rc == CRPM_SUCCESS) {
        uint64_t bytes = boxes[0];
        for (int i = 0; i < nregions; i++)
            bytes += crpm_array_bytes(&regions[i]);
        /* objects: every dataset and group, once (rank 0), and the boxes' datasets */
        rc = l4_reserve(comm, tmp, bytes, boxes[1] + (rank == 0 ? (uint64_t)total + (uint64_t)size : 0));
    }
    if (rc != CRPM_SUCCESS) {
        l4_close_id(&f, H5Fclose);
        free(dsets);
        return rc;
    }
    /* Metadata: identical calls on every rank. */
    if (l4_put_root(f, root) < 0)
        rc = l4_h5_fail("level 4: cannot write the root attributes of %s", tmp);
    for (int r = 0; r < size && rc == CRPM_SUCCESS; r++) {
        hid_t g = l4_create_group(f, r, cnt[r]);
        if (g < 0) {
            rc = l4_h5_fail("level 4: cannot create group rank_%d in %s", r, tmp);
            break;
        }
        for (int i = 0; i < cnt[r]; i++) {
            const l4_desc *d = &all[displ[r] + i];
            dsets[displ[r] + i] = l4_create_dataset(g, d, 1);
            if (dsets[displ[r] + i] < 0) {
                rc = l4_h5_fail("level 4: cannot create dataset rank_%d/id_%d in %s", r, (int)(int32_t)d->id, tmp);
                break;
            }
        }
        H5Gclose(g);
    }
    /* Metadata creation is deterministic, so a failure is normally seen by
     * every rank; agree anyway before the independent raw-data writes. */
    rc = crpm_agree(comm, rank, rc, "level 4: creating the datasets");
    for (int i = 0; rc == CRPM_SUCCESS && i < nregions; i++) {
        const crpm_array *reg = &regions[i];
        if (reg->count == 0)
            continue;
        const void *bytes = NULL;
        void *host = NULL; /* arrays not in host memory: a host copy (util/memkind.h) */
        if ((rc = crpm_array_view(reg, &bytes, &host)) != CRPM_SUCCESS)
            break;
        hid_t mt = l4_type(reg->type_code, reg->elem_size);
        if (mt < 0 || H5Dwrite(dsets[displ[rank] + i], mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes) < 0)
            rc = l4_h5_fail("level 4: writing rank_%d/id_%d of %s failed", rank, (int)reg->id, tmp);
        l4_close_id(&mt, H5Tclose);
        crpm_array_view_end(host);
    }
    for (int i = 0; i < total; i++)
        l4_close_id(&dsets[i], H5Dclose);
    /* H5Fflush syncs through MPI_File_sync on every rank (the close alone
     * would not), so the data is durable before the rename publishes it. */
    if (H5Fflush(f, H5F_SCOPE_GLOBAL) < 0 && rc == CRPM_SUCCESS)
        rc = l4_h5_fail("level 4: flushing %s failed", tmp);
    if (H5Fclose(f) < 0 && rc == CRPM_SUCCESS)
        rc = l4_h5_fail("level 4: closing %s failed", tmp);
    free(dsets);
    return crpm_agree(comm, rank, rc, "level 4: writing the arrays");
}

static int l4_write(MPI_Comm comm, const char *glbl_dir, const char *job, int ckpt_id, uint64_t epoch,
                    int nregions, const crpm_array *regions, int keep, const crpm_l4_global *glob)
{
    int rank = 0, size = 0, rc = CRPM_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char dir[L4_PATH_MAX], tmp[L4_PATH_MAX + 32], final_path[L4_PATH_MAX + 32], fname[32];

    /* Argument checks are local but agreed, so a bad rank fails everyone. */
    rc = l4_job_dir(dir, sizeof dir, glbl_dir, job);
    if (rc == CRPM_SUCCESS && (nregions < 0 || (nregions > 0 && !regions) ||
                               nregions > INT_MAX / L4_DESC_WORDS))
        rc = crpm_error(CRPM_ERR_INVAL, "level 4: invalid region list (%d regions)", nregions);
    for (int i = 0; rc == CRPM_SUCCESS && i < nregions; i++)
        rc = l4_check_desc(&regions[i], i, nregions, regions, 1);
    if (rc == CRPM_SUCCESS) {
        snprintf(fname, sizeof fname, "l4-%d.h5", ckpt_id);
        if ((size_t)snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, fname) >= sizeof tmp)
            rc = crpm_error(CRPM_ERR_RANGE, "level 4: path too long under %s", dir);
        else
            rc = crpm_name_l4(final_path, sizeof final_path, dir, ckpt_id);
    }
    rc = crpm_agree(comm, rank, rc, "level 4: checking the arrays");
    if (rc != CRPM_SUCCESS)
        return rc;

    /* Rank 0 prepares the directory and picks the sequence number; its scan
     * is kept for pruning. */
    uint64_t seq = 1;
    l4_file *old = NULL;
    int nold = 0;
    if (rank == 0) {
        rc = crpm_mkdir_p(dir);
        if (rc == CRPM_SUCCESS)
            rc = l4_scan_dir(dir, job, &old, &nold);
        for (int i = 0; i < nold; i++)
            if (old[i].usable && old[i].seq >= seq)
                seq = old[i].seq + 1;
    }
    rc = crpm_agree(comm, rank, rc, "level 4: preparing the directory");
    int mrc = rc == CRPM_SUCCESS ? MPI_Bcast(&seq, 1, MPI_UINT64_T, 0, comm) : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS)
        rc = crpm_mpi_fail(mrc, "level 4: MPI_Bcast of the sequence number");
    if (rc != CRPM_SUCCESS) {
        free(old);
        return rc;
    }

    /* boxes of global datasets go into those (l4_global.c), not into the rank's group */
    const crpm_glayout *lay = glob ? glob->glayout : NULL;
    crpm_array *own = calloc((size_t)nregions + 1, sizeof *own);
    int nown = 0;
    uint64_t boxes[2] = {0, 0};
    for (int i = 0; own && i < nregions; i++) {
        if (!crpm_l4g_is_box(lay, regions[i].id)) {
            own[nown++] = regions[i];
        } else {
            boxes[0] += crpm_array_bytes(&regions[i]);
            boxes[1]++;
        }
    }
    rc = l4_agree(comm, own ? CRPM_SUCCESS : crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory"));
    l4_desc *all = NULL;
    int *cnt = NULL, *displ = NULL, total = 0;
    if (rc == CRPM_SUCCESS)
        rc = gather_descs(comm, nown, own, &all, &cnt, &displ, &total);
    if (rc != CRPM_SUCCESS) {
        free(own);
        free(old);
        return rc;
    }

    l4_root root = { .format = CRPM_L4_FORMAT, .ckpt_id = ckpt_id, .nranks = size, .epoch = epoch, .seq = seq };
    snprintf(root.job, sizeof root.job, "%s", job);
    if (glob && glob->run_id) {
        memcpy(root.run, glob->run_id, sizeof root.run);
        root.has_run = 1;
    }
    rc = write_contents(comm, tmp, &root, all, cnt, displ, total, nown, own, boxes);
    if (rc == CRPM_SUCCESS && glob)
        rc = crpm_l4g_write(comm, tmp, lay, nregions, regions, glob->run_id, glob->time_ns);
    free(own);

    if (rank == 0) {
        int rrc = CRPM_SUCCESS;
        if (rc == CRPM_SUCCESS)
            l4_unreserve(tmp);
        if (rc == CRPM_SUCCESS)
            rrc = crpm_durable_rename(tmp, final_path);
        if (rc != CRPM_SUCCESS || rrc != CRPM_SUCCESS)
            unlink(tmp);
        rc = rc == CRPM_SUCCESS ? rrc : rc;
    }
    rc = crpm_agree(comm, rank, rc, "level 4: publishing the checkpoint");
    if (rc == CRPM_SUCCESS && rank == 0)
        l4_prune(dir, old, nold, fname, seq, keep < 1 ? 1 : keep);
    free(old);
    free(all);
    free(cnt);
    free(displ);
    return rc;
}

int crpm_l4_write(MPI_Comm comm, const char *glbl_dir, const char *job, int ckpt_id, uint64_t epoch,
                  int nregions, const crpm_array *regions, int keep)
{
    return crpm_l4_write_global(comm, glbl_dir, job, ckpt_id, epoch, nregions, regions, keep, NULL);
}

int crpm_l4_write_global(MPI_Comm comm, const char *glbl_dir, const char *job, int ckpt_id, uint64_t epoch,
                         int nregions, const crpm_array *regions, int keep, const crpm_l4_global *g)
{
    l4_quiet q;
    l4_quiet_begin(&q);
    int rc = l4_write(comm, glbl_dir, job, ckpt_id, epoch, nregions, regions, keep, g);
    l4_quiet_end(&q);
    return rc;
}

/* ---- find / read ------------------------------------------------------------------ */

/* Collective open read-only; metadata reads stay independent because each
 * rank then reads only its own group. */
static int open_parallel(MPI_Comm comm, const char *path, hid_t *f)
{
    if (access(path, R_OK) != 0)
        return crpm_error(errno == ENOENT ? CRPM_ERR_NOCKPT : CRPM_ERR_IO, "level 4: cannot open %s: %s", path,
                          strerror(errno));
    hid_t fapl = mpio_fapl(comm, 0);
    *f = fapl >= 0 ? H5Fopen(path, H5F_ACC_RDONLY, fapl) : -1;
    int rc = *f >= 0 ? CRPM_SUCCESS : l4_h5_fail("level 4: cannot open %s as HDF5", path);
    l4_close_id(&fapl, H5Pclose);
    return rc;
}

/* Opens `path` on every rank, checks the root attributes against the job and
 * the communicator, and reads (read_into) or verifies this rank's group. */
static int open_and_check(MPI_Comm comm, const char *path, const char *job, int read_into, int nregions,
                          const crpm_array *regions, l4_root *root)
{
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    hid_t f = -1;
    int rc = open_parallel(comm, path, &f);
    rc = crpm_agree(comm, rank, rc, "level 4: opening the checkpoint");
    if (rc != CRPM_SUCCESS) {
        l4_close_id(&f, H5Fclose);
        return rc;
    }
    rc = l4_get_root(f, path, root);
    if (rc == CRPM_SUCCESS && job && strcmp(root->job, job) != 0)
        rc = crpm_error(CRPM_ERR_IDENTITY, "%s: belongs to job '%s', not '%s'", path, root->job, job);
    if (rc == CRPM_SUCCESS && root->nranks != size)
        rc = crpm_error(CRPM_ERR_NRANKS, "%s: written by %d ranks, running with %d", path, (int)root->nranks,
                        size);
    if (rc == CRPM_SUCCESS)
        rc = l4_check_group(f, path, rank, read_into, nregions, regions, NULL);
    if (H5Fclose(f) < 0 && rc == CRPM_SUCCESS)
        rc = l4_h5_fail("level 4: closing %s failed", path);
    return crpm_agree(comm, rank, rc, read_into ? "level 4: reading the checkpoint" : "level 4: checking a checkpoint");
}

static int l4_find_latest(MPI_Comm comm, const char *glbl_dir, const char *job, char *path, size_t pathlen,
                          int *ckpt_id, uint64_t *epoch, uint64_t run[2], int *has_run)
{
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char dir[L4_PATH_MAX];
    int rc = l4_job_dir(dir, sizeof dir, glbl_dir, job);
    if (rc == CRPM_SUCCESS && (!path || pathlen == 0))
        rc = crpm_error(CRPM_ERR_INVAL, "level 4: no buffer for the path");
    rc = crpm_agree(comm, rank, rc, "level 4: looking for a checkpoint");
    if (rc != CRPM_SUCCESS)
        return rc;

    /* Rank 0 scans and ranks the candidates; the list is broadcast. */
    l4_file *v = NULL;
    int n = 0, skipped_other = 0, skipped_unreadable = 0;
    if (rank == 0) {
        rc = l4_scan_dir(dir, job, &v, &n);
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (!v[i].usable) {
                skipped_unreadable++;
                fprintf(stderr, "crpm: warning: skipping level-4 checkpoint: %s\n", v[i].why);
            } else if (v[i].nranks != size) {
                skipped_other++;
                fprintf(stderr, "crpm: note: level-4 checkpoint %s/%s was written by %d ranks, not %d\n", dir,
                        v[i].name, (int)v[i].nranks, size);
            } else {
                v[k++] = v[i];
            }
        }
        n = k;
    }
    rc = crpm_agree(comm, rank, rc, "level 4: scanning the directory");
    int hdr[3] = { n, skipped_other, skipped_unreadable };
    int mrc = rc == CRPM_SUCCESS ? MPI_Bcast(hdr, 3, MPI_INT, 0, comm) : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS)
        rc = crpm_mpi_fail(mrc, "level 4: MPI_Bcast of the candidates");
    if (rc == CRPM_SUCCESS && rank != 0) {
        n = hdr[0];
        v = calloc((size_t)(n > 0 ? n : 1), sizeof *v);
        if (!v)
            rc = crpm_error(CRPM_ERR_NOMEM, "level 4: out of memory");
    }
    rc = crpm_agree(comm, rank, rc, "level 4: looking for a checkpoint");
    mrc = rc == CRPM_SUCCESS && n > 0 ? MPI_Bcast(v, (int)(n * sizeof *v), MPI_BYTE, 0, comm) : MPI_SUCCESS;
    if (mrc != MPI_SUCCESS)
        rc = crpm_mpi_fail(mrc, "level 4: MPI_Bcast of the candidates");
    if (rc != CRPM_SUCCESS) {
        free(v);
        return rc;
    }

    /* Every rank walks the same list and skips a candidate together (the
     * outcome of each is agreed), so no rank can leave the loop alone. */
    int skipped_bad = 0, found = 0;
    char first_reason[400] = "";
    for (int i = 0; i < n && !found; i++) {
        char cand[L4_PATH_MAX + 64];
        snprintf(cand, sizeof cand, "%s/%s", dir, v[i].name);
        l4_root root;
        rc = open_and_check(comm, cand, job, 0, 0, NULL, &root);
        if (rc == CRPM_SUCCESS) {
            rc = strlen(cand) < pathlen ? CRPM_SUCCESS
                                        : crpm_error(CRPM_ERR_RANGE, "level 4: path buffer too small for %s", cand);
            rc = crpm_agree(comm, rank, rc, "level 4: looking for a checkpoint");
            if (rc != CRPM_SUCCESS)
                break;
            snprintf(path, pathlen, "%s", cand);
            if (ckpt_id)
                *ckpt_id = root.ckpt_id;
            if (epoch)
                *epoch = root.epoch;
            if (run && has_run) {
                memcpy(run, root.run, sizeof root.run);
                *has_run = root.has_run;
            }
            found = 1;
            break;
        }
        skipped_bad++;
        if (!first_reason[0])
            snprintf(first_reason, sizeof first_reason, "%s", crpm_last_error());
        if (rank == 0)
            fprintf(stderr, "crpm: warning: skipping level-4 checkpoint: %s\n", crpm_last_error());
    }
    free(v);
    if (found)
        return CRPM_SUCCESS;
    if (rc == CRPM_ERR_RANGE || (rc == CRPM_ERR_REMOTE && skipped_bad == 0 && n > 0))
        return rc;
    /* Files of this job that cannot be used are damage, not absence. */
    return crpm_error(skipped_bad + hdr[2] > 0 ? CRPM_ERR_CORRUPT : CRPM_ERR_NOCKPT,
                      "level 4: no valid checkpoint for job '%s' with %d ranks in %s "
                      "(%d invalid, %d for another rank count, %d unreadable)%s%s",
                      job, size, dir, skipped_bad, hdr[1], hdr[2], first_reason[0] ? "; newest invalid: " : "",
                      first_reason);
}

int crpm_l4_find_latest(MPI_Comm comm, const char *glbl_dir, const char *job, char *path, size_t pathlen,
                        int *ckpt_id, uint64_t *epoch, uint64_t run[2], int *has_run)
{
    l4_quiet q;
    l4_quiet_begin(&q);
    int rc = l4_find_latest(comm, glbl_dir, job, path, pathlen, ckpt_id, epoch, run, has_run);
    l4_quiet_end(&q);
    return rc;
}

int crpm_l4_read(MPI_Comm comm, const char *path, int nregions, const crpm_array *regions)
{
    l4_quiet q;
    l4_quiet_begin(&q);
    int rank = 0, rc = CRPM_SUCCESS;
    MPI_Comm_rank(comm, &rank);
    if (!path || nregions < 0 || (nregions > 0 && !regions))
        rc = crpm_error(CRPM_ERR_INVAL, "level 4: invalid arguments to read");
    for (int i = 0; rc == CRPM_SUCCESS && i < nregions; i++)
        rc = l4_check_desc(&regions[i], i, nregions, regions, 1);
    rc = crpm_agree(comm, rank, rc, "level 4: checking the arrays");
    if (rc == CRPM_SUCCESS) {
        l4_root root;
        rc = open_and_check(comm, path, NULL, 1, nregions, regions, &root);
    }
    l4_quiet_end(&q);
    return rc;
}

#endif /* CRPM_HAVE_HDF5 */
