/* crpm-inspect: checks libcrpm checkpoint files and prints what they hold.
 * Containers (rank-<r>.crpm) go through the engine's inspector; level-4
 * HDF5 files (l4-<id>.h5, crpm-export output) through the level-4 verifier. */
#include "container.h"
#include "fsutil.h"
#include "level4.h"

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fputs("usage: crpm-inspect [-q] [--verify] FILE...\n"
          "\n"
          "Checks libcrpm checkpoint files and prints their contents.\n"
          "  container (rank-<r>.crpm): superblock, geometry, committed epoch and\n"
          "    checkpoint id, protected regions with sizes, and the verdict of\n"
          "    every checksum (superblock, commit record, epoch metadata);\n"
          "  level-4 file (l4-<id>.h5 or crpm-export output): root attributes,\n"
          "    every rank group and dataset, and each dataset's crc32.\n"
          "\n"
          "  --verify      containers: also check the CRC32C of every data chunk of\n"
          "                the committed epoch, naming each bad array and offset\n"
          "  -q, --quiet   print only the files that fail, with the reason\n"
          "  -h, --help    show this help\n"
          "\n"
          "Exit status: 0 every file is valid, 1 some file failed a check,\n"
          "2 usage error.\n",
          out);
}

/* Regular files only (a FIFO would block, a device never end); *hdf5 says
 * whether it starts with the HDF5 signature, as libcrpm's HDF5 files do. */
static int examine(const char *path, int *hdf5)
{
    static const unsigned char sig[8] = { 0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n' };
    unsigned char buf[8];
    int fd, rc = crpm_open_regular(path, O_RDONLY, &fd, NULL);
    if (rc != CRPM_SUCCESS)
        return rc;
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    close(fd);
    *hdf5 = n == (ssize_t)sizeof buf && memcmp(buf, sig, sizeof sig) == 0;
    return CRPM_SUCCESS;
}

int main(int argc, char **argv)
{
    int quiet = 0, verify = 0, nfiles = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet"))
            quiet = 1;
        else if (!strcmp(argv[i], "--verify"))
            verify = 1;
        else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "crpm-inspect: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else
            nfiles++;
    }
    if (nfiles == 0) {
        usage(stderr);
        return 2;
    }
    int first = 1;
    for (int i = 1; i < argc; i++) {
        if (argv[i][0] == '-' && argv[i][1])
            continue;
        const char *path = argv[i];
        FILE *out = quiet ? NULL : stdout;
        if (out && !first)
            fputc('\n', out);
        first = 0;
        int hdf5 = 0, rc = examine(path, &hdf5);
        if (rc != CRPM_SUCCESS) {
            if (out)
                fprintf(out, "file:           %s\nstatus:         INVALID: %s\n", path, crpm_last_error());
        } else if (hdf5) {
            rc = crpm_l4_verify_file(path, out);
        } else {
            /* The engine's inspector always prints; silence it with -q. */
            FILE *sink = out ? out : fopen("/dev/null", "w");
            rc = crpm_inspect_file_verify(path, sink ? sink : stdout, verify);
            if (sink && sink != out)
                fclose(sink);
        }
        if (rc != CRPM_SUCCESS) {
            bad++;
            fprintf(stderr, "crpm-inspect: %s: FAILED: %s: %s\n", path, crpm_strerror(rc), crpm_last_error());
        }
    }
    return bad ? 1 : 0;
}
