/* The version and the statistics' ABI (issue 41), 1 rank:
 *
 *   version_test DIR CMAKE_VERSION CONFIG_VERSION_FILE
 *
 * - crpm_version() at run time equals the header's CRPM_VERSION_* and
 *   CRPM_VERSION_STRING, the project version CMake configured
 *   (CMAKE_VERSION) and the version of the CMake package
 *   (crpmConfigVersion.cmake's PACKAGE_VERSION); NULL pointers are allowed;
 * - crpm_get_stats_sized fills exactly the caller's struct: a 2.0-sized one
 *   leaves the bytes after it alone, a larger (newer) one gets zeros past
 *   the fields this library knows, a smaller one is CRPM_ERR_INVAL; the
 *   crpm_get_stats macro and the 2.0 entry point (crpm_get_stats) agree. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <mpi.h>

#include "check.h"
#include "crpm.h"

#define STR_(x) #x
#define STR(x) STR_(x)

static void versions(const char *cmake_version, const char *config_file)
{
    int ma = -1, mi = -1, pa = -1;
    const char *s = crpm_version(&ma, &mi, &pa);
    REQUIRE(s != NULL, "crpm_version returned NULL");
    CHECK(ma == CRPM_VERSION_MAJOR && mi == CRPM_VERSION_MINOR && pa == CRPM_VERSION_PATCH,
          "runtime %d.%d.%d, header %d.%d.%d", ma, mi, pa, CRPM_VERSION_MAJOR, CRPM_VERSION_MINOR,
          CRPM_VERSION_PATCH);
    CHECK(strcmp(s, CRPM_VERSION_STRING) == 0, "runtime string '%s', header '%s'", s, CRPM_VERSION_STRING);
    char joined[64];
    snprintf(joined, sizeof joined, "%d.%d.%d", ma, mi, pa);
    CHECK(strcmp(s, joined) == 0, "the string '%s' is not its numbers %s", s, joined);
    CHECK(strcmp(STR(CRPM_VERSION_MAJOR) "." STR(CRPM_VERSION_MINOR) "." STR(CRPM_VERSION_PATCH),
                 CRPM_VERSION_STRING) == 0,
          "header macros disagree: %s", CRPM_VERSION_STRING);
    CHECK(strcmp(s, cmake_version) == 0, "runtime '%s', CMake project version '%s'", s, cmake_version);
    CHECK(crpm_version(NULL, NULL, NULL) == s, "NULL pointers");

    FILE *f = fopen(config_file, "r");
    REQUIRE(f, "cannot open %s", config_file);
    char line[512], pkg[64] = "";
    while (fgets(line, sizeof line, f))
        if (sscanf(line, " set(PACKAGE_VERSION \"%63[^\"]\")", pkg) == 1)
            break;
    fclose(f);
    CHECK(pkg[0] && strcmp(pkg, s) == 0, "CMake package version '%s' (%s), runtime '%s'", pkg, config_file, s);
    printf("libcrpm %s (header %s, CMake package %s)\n", s, CRPM_VERSION_STRING, pkg);
}

/* The bytes of crpm_stats_t 2.0: eight 8-byte fields. */
enum { SIZE_2_0 = 64, PAD = 40 };

static void stats_abi(const char *dir)
{
    crpm_stats_t st;
    CHECK(crpm_get_stats_sized(&st, NULL, sizeof st) == CRPM_ERR_STATE, "sized stats before init");
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "[basic]\nckpt_dir = %s\njob_name = version\nkeep_last_ckpt = 0\nverbosity = 0\n", dir);
    REQUIRE(crpm_init_text(cfg, "version-test", MPI_COMM_WORLD) == 0, "init: %s", crpm_last_error());
    double a[4096];
    for (int i = 0; i < 4096; i++)
        a[i] = i;
    REQUIRE(crpm_protect(1, a, 4096, CRPM_DOUBLE) == 0, "protect: %s", crpm_last_error());
    REQUIRE(crpm_checkpoint(1, CRPM_L1) == 0, "checkpoint 1: %s", crpm_last_error());
    a[7] = -1;
    REQUIRE(crpm_checkpoint(2, CRPM_L1) == 0, "checkpoint 2: %s", crpm_last_error());

    crpm_stats_t last, total;
    REQUIRE(crpm_get_stats(&last, &total) == 0, "crpm_get_stats: %s", crpm_last_error());
    CHECK(total.checkpoints == 2 && last.checkpoints == 1 && last.protected_bytes == sizeof a &&
          total.bytes_written >= last.bytes_written && last.bytes_written > 0,
          "stats: %llu checkpoints, %llu protected, %llu/%llu written", (unsigned long long)total.checkpoints,
          (unsigned long long)last.protected_bytes, (unsigned long long)last.bytes_written,
          (unsigned long long)total.bytes_written);

    /* the 2.0 entry point, as a program built against 2.0.0 calls it */
    unsigned char old[2][SIZE_2_0 + PAD];
    memset(old, 0xA5, sizeof old);
    REQUIRE((crpm_get_stats)((crpm_stats_t *)(void *)old[0], (crpm_stats_t *)(void *)old[1]) == 0,
            "(crpm_get_stats): %s", crpm_last_error());
    CHECK(memcmp(old[0], &last, SIZE_2_0) == 0 && memcmp(old[1], &total, SIZE_2_0) == 0,
          "the 2.0 entry point's fields differ from the macro's");
    for (int k = 0; k < 2; k++)
        for (int i = SIZE_2_0; i < SIZE_2_0 + PAD; i++)
            CHECK(old[k][i] == 0xA5, "the 2.0 entry point wrote byte %d past a 2.0 struct", i);

    /* a caller of the 2.0 size through the sized form */
    memset(old, 0x5A, sizeof old);
    CHECK(crpm_get_stats_sized((crpm_stats_t *)(void *)old[0], NULL, SIZE_2_0) == 0, "sized 2.0: %s",
          crpm_last_error());
    CHECK(memcmp(old[0], &last, SIZE_2_0) == 0, "sized 2.0: fields differ");
    for (int i = SIZE_2_0; i < SIZE_2_0 + PAD; i++)
        CHECK(old[0][i] == 0x5A, "sized 2.0 wrote byte %d past the caller's struct", i);

    /* a newer caller: fields this library does not know read 0 */
    unsigned char newer[sizeof(crpm_stats_t) + PAD + 8];
    memset(newer, 0xC3, sizeof newer);
    CHECK(crpm_get_stats_sized(NULL, (crpm_stats_t *)(void *)newer, sizeof(crpm_stats_t) + PAD) == 0,
          "a larger struct: %s", crpm_last_error());
    CHECK(memcmp(newer, &total, sizeof total) == 0, "a larger struct: known fields differ");
    for (size_t i = sizeof(crpm_stats_t); i < sizeof(crpm_stats_t) + PAD; i++)
        CHECK(newer[i] == 0, "a larger struct: byte %zu past the known fields is %#x, not 0", i, newer[i]);
    for (size_t i = sizeof(crpm_stats_t) + PAD; i < sizeof newer; i++)
        CHECK(newer[i] == 0xC3, "a larger struct: byte %zu past the caller's size written", i);

    /* smaller than 2.0: refused, nothing written */
    memset(old, 0x11, sizeof old);
    int rc = crpm_get_stats_sized((crpm_stats_t *)(void *)old[0], NULL, SIZE_2_0 - 8);
    CHECK(rc == CRPM_ERR_INVAL && strstr(crpm_last_error(), "56 bytes"), "a struct smaller than 2.0: %d %s", rc,
          crpm_last_error());
    for (int i = 0; i < SIZE_2_0 + PAD; i++)
        CHECK(old[0][i] == 0x11, "a refused call wrote byte %d", i);
    CHECK(crpm_finalize() == 0, "finalize: %s", crpm_last_error());
    rmdir(dir);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    check_set_note(crpm_last_error);
    REQUIRE(argc == 4, "usage: version_test DIR CMAKE_VERSION CONFIG_VERSION_FILE");
    _Static_assert(sizeof(crpm_stats_t) >= SIZE_2_0, "crpm_stats_t lost 2.0 fields");
    versions(argv[2], argv[3]);
    char dir[512];
    snprintf(dir, sizeof dir, "%s/crpm-version-%d", argv[1], (int)getpid());
    stats_abi(dir);
    int rc = check_summary("version");
    MPI_Finalize();
    return rc;
}
