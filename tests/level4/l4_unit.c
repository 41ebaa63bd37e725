/* Level-4 layer tests that call crpm_l4_* directly (no crpm_init): round
 * trip of every type family, pruning, sequence ordering, agreed errors,
 * corruption and truncation fallbacks, rank-count checks, serial export and
 * verification.  Usage: mpirun -np N l4_unit <base dir>  (N >= 2); works in a
 * fresh directory under <base dir>, removed when every check passed. */
#include "check.h"
#include "crpm.h"
#include "level4.h"

#include <hdf5.h>

#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int g_rank, g_size;

typedef struct user_rec {
    double x[3];
    int32_t k;
    int32_t pad;
} user_rec;

enum { NREG_MAX = 10 };

/* The protected state of one rank; values depend on (rank, tag). */
typedef struct state {
    int iter;
    size_t nd;
    double *d;
    float cf[10][2];
    int32_t logical[5];
    user_rec user[4];
    char text[16];
    long double ld[3];
    size_t nbig;
    int64_t *big;
    double extra[7];
    int nreg;
    crpm_array reg[NREG_MAX];
} state;

static void add(state *s, int32_t id, int32_t code, uint64_t esz, uint64_t count, void *ptr)
{
    s->reg[s->nreg++] = (crpm_array){ id, code, esz, count, ptr, NULL, NULL };
}

/* Regions differ between ranks on purpose: sizes, an extra id on rank 2,
 * no text on rank 1, and a 9.6 MB array on rank 0 (streamed verification). */
static void state_init(state *s, int rank)
{
    memset(s, 0, sizeof *s);
    s->nd = 1000 + 7 * (size_t)rank;
    s->d = calloc(s->nd, sizeof *s->d);
    s->nbig = rank == 0 ? 1200000 : 1000;
    s->big = calloc(s->nbig, sizeof *s->big);
    add(s, 0, CRPM_TC_INT, sizeof(int), 1, &s->iter);
    add(s, 1, CRPM_TC_DOUBLE, sizeof(double), s->nd, s->d);
    add(s, 2, CRPM_TC_COMPLEX_FLOAT, 2 * sizeof(float), 10, s->cf);
    add(s, 3, CRPM_TC_LOGICAL, 4, 5, s->logical);
    add(s, 4, CRPM_TYPE_USER, sizeof(user_rec), 4, s->user);
    add(s, 5, CRPM_TC_DOUBLE, sizeof(double), 0, NULL);
    if (rank != 1)
        add(s, 6, CRPM_TC_CHAR, 1, sizeof s->text, s->text);
    add(s, 7, CRPM_TC_LDOUBLE, sizeof(long double), 3, s->ld);
    add(s, 8, CRPM_TC_INT64, 8, s->nbig, s->big);
    if (rank == 2)
        add(s, 9, CRPM_TC_DOUBLE, sizeof(double), 7, s->extra);
}

static void state_fill(state *s, int rank, int tag)
{
    s->iter = tag * 100 + rank;
    for (size_t i = 0; i < s->nd; i++)
        s->d[i] = tag + rank * 0.5 + (double)i * 1e-3;
    for (int i = 0; i < 10; i++) {
        s->cf[i][0] = (float)(tag + i);
        s->cf[i][1] = (float)(-rank - i);
    }
    for (int i = 0; i < 5; i++)
        s->logical[i] = (i + tag + rank) % 2;
    for (int i = 0; i < 4; i++) {
        user_rec u = { { tag * 1.0, rank * 2.0, i * 3.0 }, tag + i, 0 };
        s->user[i] = u;
    }
    snprintf(s->text, sizeof s->text, "r%d t%d", rank, tag);
    for (int i = 0; i < 3; i++)
        s->ld[i] = (long double)tag / 3.0L + i;
    for (size_t i = 0; i < s->nbig; i++)
        s->big[i] = (int64_t)(i * 2654435761u) ^ (tag * 1000 + rank);
    for (int i = 0; i < 7; i++)
        s->extra[i] = tag * 7.0 + i;
}

static void state_clear(state *s)
{
    s->iter = -1;
    memset(s->d, 0xff, s->nd * sizeof *s->d);
    memset(s->cf, 0xff, sizeof s->cf);
    memset(s->logical, 0xff, sizeof s->logical);
    memset(s->user, 0xff, sizeof s->user);
    memset(s->text, 0, sizeof s->text);
    memset(s->ld, 0xff, sizeof s->ld);
    memset(s->big, 0xff, s->nbig * sizeof *s->big);
    memset(s->extra, 0xff, sizeof s->extra);
}

/* Compares s with the values of `tag`, element by element (long double by
 * value: its padding bytes are unspecified). */
static int state_equal(const state *s, int rank, int tag)
{
    state e;
    state_init(&e, rank);
    state_fill(&e, rank, tag);
    int ok = s->iter == e.iter && memcmp(s->d, e.d, s->nd * sizeof *s->d) == 0 &&
             memcmp(s->cf, e.cf, sizeof s->cf) == 0 && memcmp(s->logical, e.logical, sizeof s->logical) == 0 &&
             memcmp(s->user, e.user, sizeof s->user) == 0 && memcmp(s->big, e.big, s->nbig * sizeof *s->big) == 0 &&
             (rank == 1 || strcmp(s->text, e.text) == 0) && (rank != 2 || memcmp(s->extra, e.extra, sizeof s->extra) == 0);
    for (int i = 0; i < 3; i++)
        ok = ok && s->ld[i] == e.ld[i];
    free(e.d);
    free(e.big);
    return ok;
}

static int all_ok(int ok)
{
    int r = 0;
    MPI_Allreduce(&ok, &r, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return r;
}

static int exists(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

/* Flips one bit inside the stored bytes of `dset` (contiguous layout). */
static int flip_bit(const char *path, const char *dset, uint64_t byte_off)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return -1;
    hid_t d = H5Dopen2(f, dset, H5P_DEFAULT);
    haddr_t off = d >= 0 ? H5Dget_offset(d) : HADDR_UNDEF;
    if (d >= 0)
        H5Dclose(d);
    H5Fclose(f);
    if (off == HADDR_UNDEF)
        return -1;
    int fd = open(path, O_RDWR);
    unsigned char c;
    if (fd < 0 || pread(fd, &c, 1, (off_t)(off + byte_off)) != 1)
        return -1;
    c ^= 0x10;
    int rc = pwrite(fd, &c, 1, (off_t)(off + byte_off)) == 1 ? 0 : -1;
    close(fd);
    return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Flips one bit inside the object header of `obj` (HDF5 metadata, which the
 * 1.8+ format protects with its own checksum). */
static int flip_header_bit(const char *path, const char *obj, uint64_t byte_off)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        return -1;
    H5O_info_t info;
    herr_t st = H5Oget_info_by_name2(f, obj, &info, H5O_INFO_BASIC, H5P_DEFAULT);
    H5Fclose(f);
    if (st < 0)
        return -1;
    int fd = open(path, O_RDWR);
    unsigned char c;
    if (fd < 0 || pread(fd, &c, 1, (off_t)(info.addr + byte_off)) != 1)
        return -1;
    c ^= 0x04;
    int rc = pwrite(fd, &c, 1, (off_t)(info.addr + byte_off)) == 1 ? 0 : -1;
    close(fd);
    return rc;
}

typedef struct export_src {
    state *st;
} export_src;

static int fetch(void *arg, int entry, int idx, void *dst)
{
    export_src *src = arg;
    const crpm_array *r = &src->st[entry].reg[idx];
    memcpy(dst, r->ptr, r->count * r->elem_size);
    return CRPM_SUCCESS;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    check_set_rank(g_rank);
    check_set_note(crpm_last_error);
    if (argc != 2 || g_size < 2) {
        if (g_rank == 0)
            fprintf(stderr, "usage: mpirun -np N (N >= 2) %s <base dir>\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    char base[2048] = "";
    if (g_rank == 0) {
        snprintf(base, sizeof base, "%s/crpm-l4unit-XXXXXX", argv[1]);
        if (!mkdtemp(base))
            base[0] = '\0';
    }
    MPI_Bcast(base, (int)sizeof base, MPI_CHAR, 0, MPI_COMM_WORLD);
    if (!base[0]) {
        if (g_rank == 0)
            perror("mkdtemp");
        MPI_Finalize();
        return 1;
    }
    const char *job = "unit";
    char dir[2100];
    snprintf(dir, sizeof dir, "%s/%s", base, job);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);

    state s;
    state_init(&s, g_rank);
    int rc;
    char path[4096];
    int id = 0;
    uint64_t epoch = 0;

    /* 1. Nothing there yet. */
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, job, path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_ERR_NOCKPT, "find on empty dir: %d", rc);

    /* 2. Three checkpoints with keep = 2: the oldest is pruned. */
    for (int t = 1; t <= 3; t++) {
        state_fill(&s, g_rank, t);
        rc = crpm_l4_write(MPI_COMM_WORLD, base, job, 10 * t, (uint64_t)t, s.nreg, s.reg, 2);
        CHECK(rc == CRPM_SUCCESS, "write %d: %d", t, rc);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(!exists(dir, "l4-10.h5") && exists(dir, "l4-20.h5") && exists(dir, "l4-30.h5"), "keep=2 pruning");
    CHECK(!exists(dir, ".l4-30.h5.tmp"), "temporary file left");

    /* 3. Newest found and read back exactly. */
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, job, path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_SUCCESS && id == 30 && epoch == 3 && strstr(path, "/l4-30.h5"), "find newest: rc %d id %d",
          rc, id);
    state_clear(&s);
    rc = crpm_l4_read(MPI_COMM_WORLD, path, s.nreg, s.reg);
    CHECK(rc == CRPM_SUCCESS, "read: %d", rc);
    CHECK(all_ok(state_equal(&s, g_rank, 3)), "values after read differ");

    /* 4. A different count on rank 1: MISMATCH there, REMOTE elsewhere. */
    s.reg[1].count--;
    if (g_rank != 1)
        s.reg[1].count++;
    rc = crpm_l4_read(MPI_COMM_WORLD, path, s.nreg, s.reg);
    CHECK(g_rank == 1 ? rc == CRPM_ERR_MISMATCH : rc == CRPM_ERR_REMOTE, "count mismatch: %d", rc);
    CHECK(g_rank == 1 || strstr(crpm_last_error(), "rank 1"), "remote message names rank 1");
    if (g_rank == 1)
        s.reg[1].count++;

    /* 5. An id that was not saved. */
    if (g_rank == 0)
        s.reg[0].id = 42;
    rc = crpm_l4_read(MPI_COMM_WORLD, path, s.nreg, s.reg);
    CHECK(rc == (g_rank == 0 ? CRPM_ERR_MISMATCH : CRPM_ERR_REMOTE), "unsaved id: %d", rc);
    CHECK(g_rank != 0 || strstr(crpm_last_error(), "id_42"), "message names id_42");
    s.reg[0].id = 0;

    /* 6. A type change is a mismatch too. */
    s.reg[1].type_code = CRPM_TC_LONG;
    rc = crpm_l4_read(MPI_COMM_WORLD, path, s.nreg, s.reg);
    CHECK(rc == CRPM_ERR_MISMATCH, "type mismatch: %d", rc);
    s.reg[1].type_code = CRPM_TC_DOUBLE;

    /* 7. Bad arguments on one rank fail the write everywhere, no file. */
    s.reg[2].id = g_rank == g_size - 1 ? 1 : 2; /* duplicate id 1 on the last rank */
    rc = crpm_l4_write(MPI_COMM_WORLD, base, job, 40, 4, s.nreg, s.reg, 2);
    CHECK(rc == (g_rank == g_size - 1 ? CRPM_ERR_INVAL : CRPM_ERR_REMOTE), "duplicate id: %d", rc);
    s.reg[2].id = 2;
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(!exists(dir, "l4-40.h5") && !exists(dir, ".l4-40.h5.tmp"), "failed write left a file");

    /* 8. A flipped bit in rank 1's data: read reports corruption, find
     *    falls back to the previous file. */
    char p30[4200], p20[4200];
    snprintf(p30, sizeof p30, "%s/l4-30.h5", dir);
    snprintf(p20, sizeof p20, "%s/l4-20.h5", dir);
    if (g_rank == 0)
        CHECK(flip_bit(p30, "/rank_1/id_1", 17) == 0, "flip bit");
    MPI_Barrier(MPI_COMM_WORLD);
    rc = crpm_l4_read(MPI_COMM_WORLD, p30, s.nreg, s.reg);
    CHECK(rc == (g_rank == 1 ? CRPM_ERR_CORRUPT : CRPM_ERR_REMOTE), "corrupt read: %d", rc);
    CHECK(strstr(crpm_last_error(), "checksum mismatch") && strstr(crpm_last_error(), "rank_1/id_1"),
          "corruption message");
    if (g_rank == 0)
        printf("corrupt-read message on rank 0: %s\n", crpm_last_error());
    CHECK(crpm_l4_verify_file(p30, NULL) == CRPM_ERR_CORRUPT, "verify_file on corrupt file");
    CHECK(crpm_l4_verify_file(p20, NULL) == CRPM_SUCCESS, "verify_file on good file: %s", crpm_last_error());
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, job, path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_SUCCESS && id == 20 && epoch == 2, "fallback to l4-20: rc %d id %d", rc, id);
    state_clear(&s);
    rc = crpm_l4_read(MPI_COMM_WORLD, path, s.nreg, s.reg);
    CHECK(rc == CRPM_SUCCESS && all_ok(state_equal(&s, g_rank, 2)), "read l4-20: %d", rc);

    /* 9. Newest is by write order, not by id or epoch (epochs may restart),
     *    and keep counts from the new file; stale temporaries are removed. */
    if (g_rank == 0) {
        char stale[4200];
        snprintf(stale, sizeof stale, "%s/.l4-99.h5.tmp", dir);
        FILE *fp = fopen(stale, "w");
        CHECK(fp && fputs("junk", fp) >= 0 && fclose(fp) == 0, "stale temp file");
    }
    state_fill(&s, g_rank, 5);
    rc = crpm_l4_write(MPI_COMM_WORLD, base, job, 5, 1, s.nreg, s.reg, 2);
    CHECK(rc == CRPM_SUCCESS, "write id 5: %d", rc);
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(exists(dir, "l4-5.h5") && exists(dir, "l4-30.h5") && !exists(dir, "l4-20.h5") &&
              !exists(dir, ".l4-99.h5.tmp"),
          "pruning after id 5");
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, job, path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_SUCCESS && id == 5 && epoch == 1, "newest by sequence: rc %d id %d", rc, id);

    /* 10. Other rank counts: skipped by find, refused by read. */
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank < g_size - 1 ? 0 : MPI_UNDEFINED, g_rank, &sub);
    if (sub != MPI_COMM_NULL) {
        rc = crpm_l4_find_latest(sub, base, job, path, sizeof path, &id, &epoch, NULL, NULL);
        CHECK(rc == CRPM_ERR_NOCKPT && strstr(crpm_last_error(), "another rank count"), "find with fewer ranks: %d",
              rc);
        char p5[4200];
        snprintf(p5, sizeof p5, "%s/l4-5.h5", dir);
        rc = crpm_l4_read(sub, p5, s.nreg, s.reg);
        CHECK(rc == CRPM_ERR_NRANKS || rc == CRPM_ERR_REMOTE, "read with fewer ranks: %d", rc);
        MPI_Comm_free(&sub);
    }
    /* Another job's directory is separate. */
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, "otherjob", path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_ERR_NOCKPT, "other job: %d", rc);

    /* 11. Truncated newest + corrupt next: no valid checkpoint, clear error. */
    if (g_rank == 0) {
        char p5[4200];
        snprintf(p5, sizeof p5, "%s/l4-5.h5", dir);
        struct stat st;
        CHECK(stat(p5, &st) == 0 && truncate(p5, st.st_size / 2) == 0, "truncate");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, job, path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), "no valid checkpoint"), "all invalid: %d", rc);
    if (g_rank == 0)
        printf("no-valid message: %s\n", crpm_last_error());

    /* 12. A rank with no regions at all, and a garbage file named l4-*.h5. */
    if (g_rank == 0) {
        char junk[4200];
        snprintf(junk, sizeof junk, "%s/l4-1000.h5", dir);
        FILE *fp = fopen(junk, "w");
        CHECK(fp && fputs("not hdf5", fp) >= 0 && fclose(fp) == 0, "junk file");
    }
    state_fill(&s, g_rank, 6);
    int n6 = g_rank == 1 ? 0 : s.nreg;
    rc = crpm_l4_write(MPI_COMM_WORLD, base, job, 6, 7, n6, s.reg, 1);
    CHECK(rc == CRPM_SUCCESS, "write with an empty rank: %d", rc);
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, job, path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_SUCCESS && id == 6 && epoch == 7, "find after junk: %d id %d", rc, id);
    state_clear(&s);
    rc = crpm_l4_read(MPI_COMM_WORLD, path, n6, s.reg);
    CHECK(rc == CRPM_SUCCESS, "read with an empty rank: %d", rc);
    CHECK(all_ok(g_rank == 1 || state_equal(&s, g_rank, 6)), "values with an empty rank");

    /* 12b. Damaged HDF5 metadata (rank 1's dataset header): reported as
     *      corruption by HDF5's own checksum, and skipped by find. */
    state_fill(&s, g_rank, 9);
    rc = crpm_l4_write(MPI_COMM_WORLD, base, job, 9, 8, s.nreg, s.reg, 2);
    CHECK(rc == CRPM_SUCCESS, "write id 9: %d", rc);
    char p9[4200];
    snprintf(p9, sizeof p9, "%s/l4-9.h5", dir);
    if (g_rank == 0)
        CHECK(flip_header_bit(p9, "/rank_1/id_1", 20) == 0, "flip header bit");
    MPI_Barrier(MPI_COMM_WORLD);
    rc = crpm_l4_read(MPI_COMM_WORLD, p9, s.nreg, s.reg);
    CHECK(rc == (g_rank == 1 ? CRPM_ERR_CORRUPT : CRPM_ERR_REMOTE) && strstr(crpm_last_error(), "checksum"),
          "damaged dataset header: %d", rc);
    if (g_rank == 0)
        printf("damaged-header message: %s\n", crpm_last_error());
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, job, path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_SUCCESS && id == 6, "find skips the damaged header: %d id %d", rc, id);

    /* 13. Serial export by rank 0 of every rank's state, then restart from
     *     it as if it were a level-4 file of a new job. */
    if (g_rank == 0) {
        state *all = calloc((size_t)g_size, sizeof *all);
        crpm_l4_rank *ent = calloc((size_t)g_size, sizeof *ent);
        for (int r = 0; r < g_size; r++) {
            state_init(&all[r], r);
            state_fill(&all[r], r, 8);
            ent[g_size - 1 - r] = (crpm_l4_rank){ r, all[r].nreg, all[r].reg }; /* any order */
        }
        export_src src = { all };
        /* The fetch callback indexes entries, so reorder the states to match. */
        state *ordered = calloc((size_t)g_size, sizeof *ordered);
        for (int e = 0; e < g_size; e++)
            ordered[e] = all[ent[e].rank];
        src.st = ordered;
        char edir[4200], epath[4300];
        snprintf(edir, sizeof edir, "%s/exported", base);
        mkdir(edir, 0777);
        snprintf(epath, sizeof epath, "%s/l4-8.h5", edir);
        rc = crpm_l4_export(epath, "exported", 8, 80, g_size, g_size, ent, fetch, &src);
        CHECK(rc == CRPM_SUCCESS, "export: %d", rc);
        CHECK(crpm_l4_verify_file(epath, NULL) == CRPM_SUCCESS, "verify exported: %s", crpm_last_error());
        /* Only some ranks: verify says incomplete. */
        char ppath[4300];
        snprintf(ppath, sizeof ppath, "%s/partial.h5", base);
        rc = crpm_l4_export(ppath, "exported", 8, 80, g_size, 1, ent, fetch, &src);
        CHECK(rc == CRPM_SUCCESS && crpm_l4_verify_file(ppath, NULL) == CRPM_ERR_MISSING, "partial export");
        for (int r = 0; r < g_size; r++) {
            free(all[r].d);
            free(all[r].big);
        }
        free(all);
        free(ordered);
        free(ent);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    rc = crpm_l4_find_latest(MPI_COMM_WORLD, base, "exported", path, sizeof path, &id, &epoch, NULL, NULL);
    CHECK(rc == CRPM_SUCCESS && id == 8 && epoch == 80, "find exported: %d", rc);
    state_clear(&s);
    rc = crpm_l4_read(MPI_COMM_WORLD, path, s.nreg, s.reg);
    CHECK(rc == CRPM_SUCCESS && all_ok(state_equal(&s, g_rank, 8)), "read exported: %d", rc);

    int total = 0, fails = check_failures();
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (g_rank == 0) {
        printf("l4_unit: %d ranks, %d failed check(s)%s%s\n", g_size, total, total ? "; files kept in " : "",
               total ? base : "");
        if (!total)
            nftw(base, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    free(s.d);
    free(s.big);
    MPI_Finalize();
    return total ? 1 : 0;
}
