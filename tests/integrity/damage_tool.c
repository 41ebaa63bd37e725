/* Flips one bit of a checkpoint file for the integrity tests
 * (integrity_scenarios.py, fuzz_restart.c):
 *
 *   damage_tool <container> <kind> <seed>      kind: damage.h's
 *   damage_tool --l4 <file.h5> data|any <seed> a byte of a dataset, or any
 *                                               byte (then classified by
 *                                               crpm_l4_verify_file)
 *
 * Prints "damaged <file>: <what> [class <none|data|meta>]", with
 * " (previous epoch too)" when the damaged data is also the previous
 * epoch's; exit 0, or 3 when the file has nothing of that kind, 2 on bad
 * arguments.  A separate program: the tests that use it link the public
 * library, this one the internals. */
#include <stdio.h>
#include <stdlib.h>
#include "damage.h"
#include "level4.h"
#ifdef CRPM_HAVE_HDF5
#include <hdf5.h>

/* A byte of a random dataset (contiguous storage) of a level-4 file. */
static int l4_dataset_byte(const char *path, uint64_t *rng, uint64_t *foff)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    int ok = 0;
    H5G_info_t root;
    if (f >= 0 && H5Gget_info(f, &root) >= 0 && root.nlinks > 0) {
        char gn[64], dn[64];
        H5Lget_name_by_idx(f, ".", H5_INDEX_NAME, H5_ITER_INC, rnd_below(rng, root.nlinks), gn, sizeof gn,
                           H5P_DEFAULT);
        hid_t g = H5Gopen2(f, gn, H5P_DEFAULT);
        H5G_info_t info;
        if (g >= 0 && H5Gget_info(g, &info) >= 0 && info.nlinks > 0) {
            H5Lget_name_by_idx(g, ".", H5_INDEX_NAME, H5_ITER_INC, rnd_below(rng, info.nlinks), dn, sizeof dn,
                               H5P_DEFAULT);
            hid_t ds = H5Dopen2(g, dn, H5P_DEFAULT);
            haddr_t a = ds >= 0 ? H5Dget_offset(ds) : HADDR_UNDEF;
            hsize_t sz = ds >= 0 ? H5Dget_storage_size(ds) : 0;
            if (a != HADDR_UNDEF && sz > 0) {
                *foff = (uint64_t)a + rnd_below(rng, sz);
                ok = 1;
            }
            if (ds >= 0)
                H5Dclose(ds);
        }
        if (g >= 0)
            H5Gclose(g);
    }
    if (f >= 0)
        H5Fclose(f);
    return ok;
}
#endif

static int damage_l4(const char *path, const char *mode, uint64_t rng)
{
    uint64_t foff = 0;
    int in_data = 0;
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size == 0)
        return 3;
#ifdef CRPM_HAVE_HDF5
    in_data = strcmp(mode, "data") == 0 && l4_dataset_byte(path, &rng, &foff);
#endif
    if (strcmp(mode, "data") == 0 && !in_data)
        return 3;
    if (!in_data)
        foff = rnd_below(&rng, (uint64_t)st.st_size);
    check_flip(path, (long long)foff, 1u << rnd_below(&rng, 8));
    /* a dataset byte fails its CRC; any other is what the file check says */
    int cls = in_data || crpm_l4_verify_file(path, NULL) != 0 ? DMG_C_DATA : DMG_C_NONE;
    printf("damaged %s: byte %llu%s [class %s]\n", path, (unsigned long long)foff, in_data ? " (a dataset)" : "",
           dmg_class_names[cls]);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--l4") == 0 && (!strcmp(argv[3], "data") || !strcmp(argv[3], "any")))
        return damage_l4(argv[2], argv[3], strtoull(argv[4], NULL, 0));
    int kind = argc == 4 ? dmg_kind(argv[2]) : -1;
    if (kind < 0) {
        fprintf(stderr, "usage: damage_tool <file> data|fresh|segments|crc|crcs|chunks|super|commit|slot|any <seed>\n"
                        "       damage_tool --l4 <file.h5> data|any <seed>\n");
        return 2;
    }
    uint64_t rng = strtoull(argv[3], NULL, 0);
    char what[256];
    int in_prev = 0, cls = 0;
    if (damage_file(argv[1], kind, &rng, &cls, &in_prev, what, sizeof what) != 0) {
        printf("nothing to damage in %s as '%s'\n", argv[1], argv[2]);
        return 3;
    }
    printf("damaged %s: %s [class %s]%s\n", argv[1], what, dmg_class_names[cls], in_prev ? " (previous epoch too)" : "");
    return 0;
}
