/* Format versions (format.h): a container written by a version-2 library
 * (data/v2.crpm, made by 9eaae1e with "make" below) opens, recovers its
 * committed epoch and rolls back to the one before; checkpoints into it keep
 * it version 2 (its slots have no room for packs: small arrays get segments
 * of their own) and read back exactly; inspection and verification work.  A
 * new container is version 3; a version beyond it, or version 1, is refused
 * with CRPM_ERR_VERSION naming the versions read.
 *
 *   test_compat DIR FIXTURE     the checks (on a copy of FIXTURE in DIR)
 *   test_compat make OUT        writes the fixture (compiled with
 *                               -DCRPM_COMPAT_MAKE and linked with a version-2
 *                               libcrpm's crpm_engine, e.g. of 9eaae1e) */
#include <sys/stat.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"

#define NREG 3
static const uint64_t sizes[NREG] = {10000, 40, 8};

/* The bytes of array r at epoch k: a pure function of both. */
static void epoch_bytes(int r, int k, char *out)
{
    uint64_t s = 1000u * (uint64_t)r + 17;
    fill_random(&s, out, sizes[r]);
    for (int e = 2; e <= k; e++) {
        uint64_t t = (uint64_t)e * 31 + (uint64_t)r;
        for (int i = 0; i < 5; i++)
            out[rnd_below(&t, sizes[r])] ^= (char)(1 + rnd_below(&t, 250));
    }
}

static int make(const char *out)
{
    unlink(out);
    crpm_open_opts o = {.path = out, .segment_size = 4096, .block_size = 256, .job_name = "compat", .nranks = 1,
                        .create = 1, .persistence = CRPM_PERSIST_MSYNC, .slot_size = 8192};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    REQUIRE(c->sb.version == 2, "the fixture must be written by a version-2 library (this one writes %u)",
            c->sb.version);
    char *buf[NREG];
    for (int r = 0; r < NREG; r++) {
        buf[r] = malloc(sizes[r]);
        REQUIRE(crpm_container_protect(c, r + 1, buf[r], sizes[r], CRPM_TC_BYTE, 1) == 0, "protect");
    }
    for (int k = 1; k <= 3; k++) {
        for (int r = 0; r < NREG; r++)
            epoch_bytes(r, k, buf[r]);
        REQUIRE(crpm_container_checkpoint(c, (uint64_t)k, NULL) == 0, "checkpoint: %s", crpm_last_error());
    }
    crpm_container_close(c);
    printf("wrote %s (version 2, epochs 1-3)\n", out);
    return 0;
}

#ifdef CRPM_COMPAT_MAKE
int main(int argc, char **argv)
{
    REQUIRE(argc == 3 && !strcmp(argv[1], "make"), "usage: test_compat make OUT");
    return make(argv[2]);
}
#else
static void copy(const char *from, const char *to)
{
    FILE *f = fopen(from, "rb"), *g = fopen(to, "wb");
    REQUIRE(f && g, "copy %s to %s", from, to);
    char b[65536];
    size_t n;
    while ((n = fread(b, 1, sizeof b, f)) > 0)
        REQUIRE(fwrite(b, 1, n, g) == n, "write %s", to);
    fclose(f);
    fclose(g);
}

/* The committed epoch of c holds epoch k's bytes. */
static int holds(crpm_container *c, int k)
{
    char want[10000], got[10000];
    if (crpm_container_nregions(c) != NREG)
        return 0;
    for (int i = 0; i < NREG; i++) {
        crpm_array a;
        if (crpm_container_region(c, i, &a) != 0 || a.id < 1 || a.id > NREG || crpm_array_bytes(&a) != sizes[a.id - 1])
            return 0;
        epoch_bytes(a.id - 1, k, want);
        if (crpm_container_read_region(c, i, got) != 0 || memcmp(got, want, sizes[a.id - 1]) != 0)
            return 0;
    }
    return 1;
}

/* A file of format version v: its superblock rewritten with a checksum that
 * holds (a real file of that version, not a damaged field). */
static void set_version(const char *path, uint32_t v)
{
    struct crpm_super sb;
    FILE *f = fopen(path, "r+b");
    REQUIRE(f && fread(&sb, sizeof sb, 1, f) == 1, "read the superblock");
    sb.version = v;
    sb.crc = 0;
    sb.crc = crpm_meta_crc(&sb, sizeof sb, 0);
    REQUIRE(fseek(f, 0, SEEK_SET) == 0 && fwrite(&sb, sizeof sb, 1, f) == 1, "write version");
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "make"))
        return make(argv[2]);
    REQUIRE(argc == 3, "usage: test_compat DIR FIXTURE | make OUT");
    check_set_note(crpm_last_error);
    char path[512];
    snprintf(path, sizeof path, "%s/compat-%d.crpm", argv[1], (int)getpid());
    copy(argv[2], path);
    crpm_open_opts o = {.path = path, .job_name = "compat", .nranks = 1, .persistence = CRPM_PERSIST_MSYNC};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open a version-2 container: %s", crpm_last_error());
    CHECK(c->sb.version == 2 && crpm_container_epoch(c) == 3 && holds(c, 3), "version-2 epoch 3 reads back");
    char *buf[NREG];
    for (int r = 0; r < NREG; r++) {
        buf[r] = malloc(sizes[r]);
        memset(buf[r], 0, sizes[r]);
        REQUIRE(crpm_container_protect(c, r + 1, buf[r], sizes[r], CRPM_TC_BYTE, 1) == 0, "protect");
    }
    REQUIRE(crpm_container_recover(c) == 0, "recover: %s", crpm_last_error());
    for (int r = 0; r < NREG; r++) {
        char want[10000];
        epoch_bytes(r, 3, want);
        CHECK(memcmp(buf[r], want, sizes[r]) == 0, "array %d recovered from version 2", r + 1);
    }
    CHECK(crpm_container_prev_available(c) && crpm_container_rollback(c) == 0 && holds(c, 2),
          "version 2: rollback to epoch 2");
    for (int k = 3; k <= 5; k++) { /* written on as version 2 */
        for (int r = 0; r < NREG; r++)
            epoch_bytes(r, k, buf[r]);
        REQUIRE(crpm_container_checkpoint(c, (uint64_t)k, NULL) == 0, "checkpoint %d: %s", k, crpm_last_error());
        CHECK(holds(c, k), "epoch %d written into a version-2 container", k);
    }
    CHECK(c->npacks == 0, "a version-2 container got packs");
    crpm_container_close(c);
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "reopen: %s", crpm_last_error());
    CHECK(c->sb.version == 2 && crpm_container_epoch(c) == 5 && holds(c, 5) && crpm_container_verify(c, NULL) == 0,
          "version 2 after reopening");
    CHECK(crpm_container_rollback(c) == 0 && holds(c, 4), "version 2: rollback to epoch 4");
    crpm_container_close(c);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(crpm_inspect_file_verify(path, f, 1) == 0, "inspect --verify of a version-2 container");
    fclose(f);
    CHECK(text && strstr(text, "format version: 2"), "inspect names version 2");
    free(text);

    set_version(path, 4); /* a later format: refused, naming what this library reads */
    CHECK(crpm_container_open(&o, &c, NULL) == CRPM_ERR_VERSION && strstr(crpm_last_error(), "version 4") &&
              strstr(crpm_last_error(), "versions 2 to 3"), "version 4 refused: %s", crpm_last_error());
    unlink(path);

    crpm_open_opts n = {.path = path, .create = 1, .segment_size = 4096};
    REQUIRE(crpm_container_open(&n, &c, NULL) == 0, "create: %s", crpm_last_error());
    CHECK(c->sb.version == 3, "new containers are version 3");
    crpm_container_close(c);
    unlink(path);
    for (int r = 0; r < NREG; r++)
        free(buf[r]);
    return check_summary("compat");
}
#endif
