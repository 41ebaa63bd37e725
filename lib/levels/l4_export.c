/* Level 4, serial side: export of rank containers to one file, and
 * verification of a file (tools; no MPI_Init needed). */
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
#include "l4_common.h"
#include "l4_global.h"

#define L4_PATH_MAX CRPM_PATH_MAX

/* ---- serial export and verification ------------------------------------------------ */

static int l4_export(const char *path, const char *job, int ckpt_id, uint64_t epoch, int nranks, int nentries,
                     const crpm_l4_rank *entries, crpm_l4_fetch_fn fetch, void *arg)
{
    if (!path || !crpm_job_name_valid(job) || nranks <= 0 || nentries < 0 || (nentries > 0 && !entries) || !fetch)
        return crpm_error(CRPM_ERR_INVAL, "export: invalid arguments");
    for (int e = 0; e < nentries; e++) {
        if (entries[e].rank < 0 || entries[e].rank >= nranks || entries[e].nregions < 0 ||
            (entries[e].nregions > 0 && !entries[e].regions))
            return crpm_error(CRPM_ERR_INVAL, "export: entry %d: invalid rank %d or region list", e,
                              (int)entries[e].rank);
        for (int j = 0; j < e; j++)
            if (entries[j].rank == entries[e].rank)
                return crpm_error(CRPM_ERR_INVAL, "export: rank %d given twice", (int)entries[e].rank);
        for (int i = 0; i < entries[e].nregions; i++) {
            int rc = l4_check_desc(&entries[e].regions[i], i, entries[e].nregions, entries[e].regions, 0);
            if (rc != CRPM_SUCCESS)
                return rc;
        }
    }
    char tmp[L4_PATH_MAX + 8];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return crpm_error(CRPM_ERR_RANGE, "export: path too long: %s", path);

    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    hid_t f = -1;
    if (fapl >= 0 && H5Pset_fapl_sec2(fapl) >= 0 && H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_V18) >= 0)
        f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    l4_close_id(&fapl, H5Pclose);
    if (f < 0)
        return l4_h5_fail("export: cannot create %s", tmp);

    /* An exported file has no place in a job's write sequence: 0 ranks it
     * below every file the library writes. */
    l4_root root = { .format = CRPM_L4_FORMAT, .ckpt_id = ckpt_id, .nranks = nranks, .epoch = epoch, .seq = 0 };
    snprintf(root.job, sizeof root.job, "%s", job);
    int rc = l4_put_root(f, &root) < 0 ? l4_h5_fail("export: cannot write root attributes") : CRPM_SUCCESS;
    void *buf = NULL;
    size_t bufcap = 0;
    for (int e = 0; e < nentries && rc == CRPM_SUCCESS; e++) {
        const crpm_l4_rank *en = &entries[e];
        hid_t g = l4_create_group(f, en->rank, en->nregions);
        if (g < 0) {
            rc = l4_h5_fail("export: cannot create group rank_%d", (int)en->rank);
            break;
        }
        for (int i = 0; i < en->nregions && rc == CRPM_SUCCESS; i++) {
            const crpm_array *r = &en->regions[i];
            size_t nb = (size_t)(r->count * r->elem_size);
            if (nb > bufcap) {
                void *nbuf = realloc(buf, nb);
                if (!nbuf) {
                    rc = crpm_error(CRPM_ERR_NOMEM, "export: no memory for %zu bytes", nb);
                    break;
                }
                buf = nbuf;
                bufcap = nb;
            }
            if (nb && (rc = fetch(arg, e, i, buf)) != CRPM_SUCCESS)
                break;
            l4_desc d = { (uint64_t)(int64_t)r->id, (uint64_t)(int64_t)r->type_code, r->elem_size, r->count,
                          nb ? l4_crc_update(l4_crc_init(), buf, nb) : l4_crc_init() };
            hid_t ds = l4_create_dataset(g, &d, 1);
            hid_t mt = l4_type(r->type_code, r->elem_size);
            if (ds < 0 || mt < 0 || (nb && H5Dwrite(ds, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0))
                rc = l4_h5_fail("export: cannot write rank_%d/id_%d", (int)en->rank, (int)r->id);
            l4_close_id(&mt, H5Tclose);
            l4_close_id(&ds, H5Dclose);
        }
        H5Gclose(g);
    }
    free(buf);
    if (H5Fclose(f) < 0 && rc == CRPM_SUCCESS)
        rc = l4_h5_fail("export: closing %s failed", tmp);
    if (rc == CRPM_SUCCESS) {
        rc = crpm_sync_file(tmp);
        if (rc == CRPM_SUCCESS)
            rc = crpm_durable_rename(tmp, path);
    }
    if (rc != CRPM_SUCCESS)
        unlink(tmp);
    return rc;
}

int crpm_l4_export(const char *path, const char *job, int ckpt_id, uint64_t epoch, int nranks, int nentries,
                   const crpm_l4_rank *entries, crpm_l4_fetch_fn fetch, void *arg)
{
    l4_quiet q;
    l4_quiet_begin(&q);
    int rc = l4_export(path, job, ckpt_id, epoch, nranks, nentries, entries, fetch, arg);
    l4_quiet_end(&q);
    return rc;
}

static int l4_verify(const char *path, FILE *out)
{
    if (!path)
        return crpm_error(CRPM_ERR_INVAL, "verify: no path");
    if (access(path, R_OK) != 0)
        return crpm_error(CRPM_ERR_IO, "%s: %s", path, strerror(errno));
    hid_t f = -1;
    int orc = l4_open_serial(path, &f);
    if (orc != CRPM_SUCCESS)
        return orc;
    l4_root root;
    int rc = l4_get_root(f, path, &root);
    if (rc == CRPM_SUCCESS && out)
        fprintf(out,
                "level-4 file %s\n  format %d  job '%s'  checkpoint id %d  epoch %llu  ranks %d  sequence %llu\n",
                path, (int)root.format, root.job, (int)root.ckpt_id, (unsigned long long)root.epoch,
                (int)root.nranks, (unsigned long long)root.seq);
    int first = rc, missing = 0;
    for (int r = 0; rc == CRPM_SUCCESS && r < root.nranks; r++) {
        int grc = l4_check_group(f, path, r, 0, 0, NULL, out);
        if (grc == CRPM_ERR_MISSING) {
            missing++;
            if (out)
                fprintf(out, "  rank %d: not present\n", r);
            continue;
        }
        if (grc != CRPM_SUCCESS && out)
            fprintf(out, "  rank %d: %s\n", r, crpm_last_error());
        /* Keep checking the other ranks, but report the first failure. */
        if (grc != CRPM_SUCCESS && first == CRPM_SUCCESS)
            first = grc;
    }
    if (rc == CRPM_SUCCESS) { /* the global datasets' pieces (l4_global.h) */
        int grc = crpm_l4g_verify_file(f, path, out);
        first = first == CRPM_SUCCESS ? grc : first;
    }
    if (H5Fclose(f) < 0 && first == CRPM_SUCCESS)
        first = l4_h5_fail("%s: close failed", path);
    if (out)
        fprintf(out, "checksums: %s\n", first == CRPM_SUCCESS ? "all ok" : "FAILED");
    if (first == CRPM_SUCCESS && missing) {
        if (out)
            fprintf(out, "incomplete: %d of %d rank group(s) missing\n", missing, (int)root.nranks);
        first = crpm_error(CRPM_ERR_MISSING, "%s: %d of %d rank group(s) missing", path, missing, (int)root.nranks);
    }
    return first;
}

int crpm_l4_verify_file(const char *path, FILE *out)
{
    l4_quiet q;
    l4_quiet_begin(&q);
    int rc = l4_verify(path, out);
    l4_quiet_end(&q);
    return rc;
}

/* One saved array's shape, read serially (every rank may open the file). */
static int l4_stored(const char *path, int rank, int32_t id, crpm_array *shape)
{
    hid_t f = -1, g = -1, ds = -1;
    char gname[64], dname[64], where[L4_PATH_MAX + 128];
    snprintf(gname, sizeof gname, "rank_%d", rank);
    snprintf(dname, sizeof dname, "id_%d", (int)id);
    snprintf(where, sizeof where, "%s: %s/%s", path, gname, dname);
    int rc = l4_open_serial(path, &f);
    if (rc == CRPM_SUCCESS && (g = H5Gopen2(f, gname, H5P_DEFAULT)) < 0)
        rc = crpm_error(CRPM_ERR_CORRUPT, "%s: no group %s", path, gname);
    if (rc == CRPM_SUCCESS && (H5Lexists(g, dname, H5P_DEFAULT) <= 0 || (ds = H5Dopen2(g, dname, H5P_DEFAULT)) < 0))
        rc = crpm_error(CRPM_ERR_MISMATCH, "array %d is not in the checkpoint", (int)id);
    l4_saved sv;
    if (rc == CRPM_SUCCESS && (rc = l4_read_saved(ds, where, &sv)) == CRPM_SUCCESS)
        *shape = (crpm_array){id, sv.type_code, sv.elem_size, sv.count, NULL, NULL, NULL};
    l4_close_id(&ds, H5Dclose);
    l4_close_id(&g, H5Gclose);
    l4_close_id(&f, H5Fclose);
    return rc;
}

int crpm_l4_stored(const char *path, int rank, int32_t id, crpm_array *shape)
{
    l4_quiet q;
    l4_quiet_begin(&q);
    int rc = l4_stored(path, rank, id, shape);
    l4_quiet_end(&q);
    return rc;
}

#endif /* CRPM_HAVE_HDF5 */
