/* crpm-inspect: checks libcrpm checkpoint files and prints what they hold.
 * Containers (rank-<r>.crpm), level-2 partner copies (partner-<r>.crpm,
 * byte-identical mirrors of rank r's container) and level-3 parity
 * containers (parity-<r>.crpm, ordinary containers whose regions are the
 * parity of the codewords rank r holds) go through the engine's inspector; level-4 HDF5 files (l4-<id>.h5, crpm-export output) through the
 * level-4 verifier.  A directory stands for the checkpoint files in it. */
#include "container.h"
#include "fsutil.h"
#include "grow.h"
#include "heap.h"
#include "level4.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *out)
{
    fputs("usage: crpm-inspect [-q] [--verify] FILE|DIR...\n"
          "\n"
          "Checks libcrpm checkpoint files and prints their contents.\n"
          "  container (rank-<r>.crpm): superblock, geometry, committed epoch and\n"
          "    checkpoint id, protected regions with sizes, and the verdict of\n"
          "    every checksum (superblock, commit record, epoch metadata), after\n"
          "    its layout record (what the file is, the node layout, group_size\n"
          "    and l3_parity it was made under; a file named as the other kind\n"
          "    fails); its persistent heap if it has one (size, address, used\n"
          "    bytes, roots, allocator invariants checked);\n"
          "  partner copy (partner-<r>.crpm, level 2): the same, labelled as the\n"
          "    copy of rank r's container that this node holds for it;\n"
          "  parity container (parity-<r>.crpm, level 3): the same, labelled with\n"
          "    the codewords whose parity rank r holds (its region ids);\n"
          "  level-4 file (l4-<id>.h5 or crpm-export output): root attributes,\n"
          "    every rank group and dataset, and each dataset's crc32.\n"
          "  directory (a job directory): lists its containers, partner copies,\n"
          "    parity containers and level-4 files, then inspects each.\n"
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

/* A partner copy is a mirror of its owner's container, so the container
 * report applies to it as is; this line says whose it is.  A copy whose
 * superblock names another rank than its file name is not a usable copy. */
static int label_partner(const char *path, int owner, FILE *out)
{
    crpm_open_opts o = {.path = path, .read_only = 1};
    crpm_container *c;
    if (crpm_format_open(&o, &c, NULL) != CRPM_SUCCESS) {
        /* the container report that follows says why */
        if (out)
            fprintf(out, "kind:           partner copy of rank %d's container\n", owner);
        return CRPM_SUCCESS;
    }
    char job[CRPM_JOB_MAX];
    int32_t r, n;
    crpm_container_identity(c, job, sizeof job, &r, &n);
    unsigned long long epoch = (unsigned long long)crpm_container_epoch(c);
    crpm_format_close(c);
    if (out)
        fprintf(out, "kind:           partner copy of rank %d's container (job %s, owner rank %d of %d, epoch %llu)\n",
                owner, job, r, n, epoch);
    if (r != owner)
        return crpm_error(CRPM_ERR_IDENTITY, "%s: partner copy of rank %d, but its container is rank %d's", path,
                          owner, r);
    return CRPM_SUCCESS;
}

/* A parity container is an ordinary container of its holder rank; its
 * regions are the codewords it holds parity for (region id = codeword). */
static int label_parity(const char *path, int holder, FILE *out)
{
    crpm_open_opts o = {.path = path, .read_only = 1};
    crpm_container *c;
    if (crpm_format_open(&o, &c, NULL) != CRPM_SUCCESS) {
        if (out)
            fprintf(out, "kind:           level-3 parity container of rank %d\n", holder);
        return CRPM_SUCCESS;
    }
    char job[CRPM_JOB_MAX];
    int32_t r, n;
    crpm_container_identity(c, job, sizeof job, &r, &n);
    if (out) {
        fprintf(out, "kind:           level-3 parity container of rank %d (codewords: ", holder);
        int nreg = crpm_container_nregions(c);
        for (int i = 0; i < nreg; i++) {
            crpm_array a;
            if (crpm_container_region(c, i, &a) == CRPM_SUCCESS)
                fprintf(out, "%s%d", i ? ", " : "", (int)a.id);
        }
        /* its own epochs count its commits; the job epoch it describes is
         * what it stores as the checkpoint id */
        fprintf(out, "%s; job %s, rank %d of %d): parity of the job's epoch %llu (the checkpoint id below), "
                "not rank data\n", nreg ? "" : "none", job, r, n, (unsigned long long)crpm_container_user_id(c));
    }
    crpm_format_close(c);
    if (r != holder)
        return crpm_error(CRPM_ERR_IDENTITY, "%s: parity container of rank %d, but its container is rank %d's",
                          path, holder, r);
    return CRPM_SUCCESS;
}

/* The persistent heap a container holds (the array CRPM_HEAP_ARRAY_ID):
 * its extent, address, used bytes and roots, the allocator's invariants
 * checked on a copy.  Nothing when it has none. */
static int report_heap(const char *path, FILE *out)
{
    crpm_open_opts o = {.path = path, .read_only = 1};
    crpm_container *c;
    if (crpm_format_open(&o, &c, NULL) != CRPM_SUCCESS)
        return CRPM_SUCCESS; /* the container report said why */
    if (crpm_container_snapshot(c) != CRPM_SUCCESS) {
        crpm_format_close(c);
        return CRPM_SUCCESS;
    }
    int idx = -1, rc = CRPM_SUCCESS;
    crpm_array a;
    for (int i = 0; i < crpm_container_nregions(c) && idx < 0; i++)
        if (crpm_container_region(c, i, &a) == CRPM_SUCCESS && a.id == CRPM_HEAP_ARRAY_ID)
            idx = i;
    uint64_t bytes = idx >= 0 ? crpm_array_bytes(&a) : 0;
    char *copy = bytes ? aligned_alloc(CRPM_HEAP_PAGE, (bytes + CRPM_HEAP_PAGE - 1) / CRPM_HEAP_PAGE * CRPM_HEAP_PAGE)
                       : NULL;
    crpm_heap *h = NULL;
    if (idx < 0) {
        /* no heap in this checkpoint */
    } else if (!bytes) {
        if (out)
            fprintf(out, "heap:           configured, nothing allocated (array %d)\n", (int)CRPM_HEAP_ARRAY_ID);
    } else if (!copy) {
        rc = crpm_error(CRPM_ERR_NOMEM, "out of memory for the heap's %llu bytes", (unsigned long long)bytes);
    } else if ((rc = crpm_container_read_region(c, idx, copy)) == CRPM_SUCCESS &&
               (rc = crpm_heap_attach(&h, copy, bytes, CRPM_HEAP_MAX_BYTES, 0, NULL, NULL)) == CRPM_SUCCESS) {
        crpm_heap_info in;
        crpm_heap_get_info(h, &in);
        rc = crpm_heap_check(h, NULL);
        if (out) {
            fprintf(out, "heap:           %llu bytes saved of the persistent heap at %#llx (array %d), %llu arenas "
                    "of %llu bytes\n", (unsigned long long)in.extent, (unsigned long long)in.base,
                    (int)CRPM_HEAP_ARRAY_ID, (unsigned long long)in.arenas, (unsigned long long)in.arena_bytes);
            fprintf(out, "heap used:      %llu bytes in %llu blocks; allocator state %s\n",
                    (unsigned long long)in.used, (unsigned long long)in.blocks,
                    rc == CRPM_SUCCESS ? "consistent" : crpm_last_error());
            int n = 0;
            for (int i = 0; i < CRPM_HEAP_ROOTS; i++)
                if (in.roots[i])
                    fprintf(out, "%s%d = %#llx", n++ ? ", " : "heap roots:     ", i, (unsigned long long)in.roots[i]);
            fprintf(out, n ? "\n" : "heap roots:     none set\n");
        }
        crpm_heap_close(h);
    }
    if (rc != CRPM_SUCCESS && out)
        fprintf(out, "heap:           INVALID: %s\n", crpm_last_error());
    free(copy);
    crpm_format_close(c);
    return rc;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* The layout record (format.h): what the file is and the job layout it was
 * made under.  A file whose name says one kind and whose record says the
 * other fails: a restart would refuse it. */
static int label_layout(const char *path, FILE *out)
{
    crpm_header_facts h;
    if (crpm_header_read(path, &h) != CRPM_SUCCESS) {
        crpm_error_clear(); /* the container report that follows says why */
        return CRPM_SUCCESS;
    }
    const crpm_layout *l = &h.layout;
    const char *role = l->role == CRPM_ROLE_PARITY ? "level-3 parity container" : "rank's container";
    if (out && h.has_layout == 1) {
        fprintf(out, "layout:         %s of rank %d; node %d of %d (node_size %d%s), group_size %d, l3_parity %d\n",
                role, (int)h.rank, l->node, l->nnodes, l->node_size, l->node_size ? "" : ": MPI's nodes",
                l->group_size, l->l3_parity);
    } else if (out) {
        fprintf(out, "layout:         %s\n", h.has_layout ? "record damaged (checksum mismatch)"
                                                          : "not recorded (a file made before layout records)");
    }
    if (h.has_layout < 0)
        return crpm_error(CRPM_ERR_CORRUPT, "%s: layout record checksum mismatch", path);
    const char *b = base_name(path);
    int named_parity = crpm_parse_parity_name(b) >= 0;
    int named_rank = crpm_parse_container_name(b) >= 0 || crpm_parse_partner_name(b) >= 0;
    if (h.has_layout == 1 && ((named_parity && l->role != CRPM_ROLE_PARITY) ||
                              (named_rank && l->role != CRPM_ROLE_RANK)))
        return crpm_error(CRPM_ERR_IDENTITY, "%s: named as a %s but its layout record says it is a %s", path,
                          named_parity ? "level-3 parity container" : "rank's container", role);
    return CRPM_SUCCESS;
}

static int inspect_one(const char *path, FILE *out, int verify)
{
    int hdf5 = 0, rc = examine(path, &hdf5);
    if (rc != CRPM_SUCCESS) {
        if (out)
            fprintf(out, "file:           %s\nstatus:         INVALID: %s\n", path, crpm_last_error());
    } else if (hdf5) {
        rc = crpm_l4_verify_file(path, out);
    } else {
        int owner = crpm_parse_partner_name(base_name(path)), holder = crpm_parse_parity_name(base_name(path));
        if ((rc = label_layout(path, out)) != CRPM_SUCCESS ||
            (owner >= 0 && (rc = label_partner(path, owner, out)) != CRPM_SUCCESS) ||
            (holder >= 0 && (rc = label_parity(path, holder, out)) != CRPM_SUCCESS)) {
            /* not that rank's file: its report would only mislead */
            if (out)
                fprintf(out, "container:      %s\nstatus:         INVALID: %s\n", path, crpm_last_error());
        } else {
            /* The engine's inspector always prints; silence it with -q. */
            FILE *sink = out ? out : fopen("/dev/null", "w");
            rc = crpm_inspect_file_verify(path, sink ? sink : stdout, verify);
            if (sink && sink != out)
                fclose(sink);
            if (rc == CRPM_SUCCESS && holder < 0)
                rc = report_heap(path, out);
        }
    }
    if (rc != CRPM_SUCCESS)
        fprintf(stderr, "crpm-inspect: %s: FAILED: %s: %s\n", path, crpm_strerror(rc), crpm_last_error());
    return rc;
}

/* Checkpoint files of a directory: containers by rank, partner copies by
 * owner, parity containers by holder, level-4 files by id. */
enum { E_CONTAINER, E_PARTNER, E_PARITY, E_L4, E_KINDS };
typedef struct entry {
    int kind; /* E_* */
    long long num;
    char *name;
} entry;

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->kind != y->kind)
        return x->kind - y->kind;
    return (x->num > y->num) - (x->num < y->num);
}

static void print_numbers(FILE *out, const entry *v, int n, int kind)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (v[i].kind == kind)
            fprintf(out, "%s%lld", k++ ? ", " : "", v[i].num);
}

/* Returns the number of files that failed, or -1 if the directory cannot
 * be listed or holds no checkpoint file. */
static int inspect_dir(const char *dir, FILE *out, int verify, int *first)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "crpm-inspect: %s: FAILED: cannot list the directory: %s\n", dir, strerror(errno));
        return -1;
    }
    entry *v = NULL;
    int n = 0, count[E_KINDS] = {0}, bad = 0;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int32_t l4;
        entry x = {.name = NULL};
        if ((x.num = crpm_parse_container_name(e->d_name)) >= 0)
            x.kind = E_CONTAINER;
        else if ((x.num = crpm_parse_partner_name(e->d_name)) >= 0)
            x.kind = E_PARTNER;
        else if ((x.num = crpm_parse_parity_name(e->d_name)) >= 0)
            x.kind = E_PARITY;
        else if (crpm_parse_l4_name(e->d_name, &l4) == 0)
            x.kind = E_L4, x.num = l4;
        else
            continue;
        if (CRPM_GROW(v, cap, (size_t)n + 1, 16))
            break;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(x.name = malloc(len)))
            break;
        snprintf(x.name, len, "%s/%s", dir, e->d_name);
        v[n++] = x;
        count[x.kind]++;
    }
    int listed = e == NULL;
    closedir(d);
    if (!listed) {
        fprintf(stderr, "crpm-inspect: %s: FAILED: out of memory listing the directory\n", dir);
        bad = -1;
    } else if (n == 0) {
        fprintf(stderr, "crpm-inspect: %s: FAILED: no checkpoint files (rank-*.crpm, partner-*.crpm, parity-*.crpm, "
                "l4-*.h5)\n", dir);
        bad = -1;
    } else {
        qsort(v, (size_t)n, sizeof *v, cmp_entry);
        if (out) {
            if (!*first)
                fputc('\n', out);
            fprintf(out, "directory:      %s\n", dir);
            fprintf(out, "containers:     %d", count[E_CONTAINER]);
            if (count[E_CONTAINER]) {
                fputs(" (ranks ", out);
                print_numbers(out, v, n, E_CONTAINER);
                fputc(')', out);
            }
            fprintf(out, "\npartner copies: %d", count[E_PARTNER]);
            if (count[E_PARTNER]) {
                fputs(" (of ranks ", out);
                print_numbers(out, v, n, E_PARTNER);
                fputs(", whose containers are on other nodes)", out);
            }
            fprintf(out, "\nparity:         %d", count[E_PARITY]);
            if (count[E_PARITY]) {
                fputs(" (level-3 parity containers of ranks ", out);
                print_numbers(out, v, n, E_PARITY);
                fputc(')', out);
            }
            fprintf(out, "\nlevel-4 files:  %d\n", count[E_L4]);
        }
        *first = 0;
        for (int i = 0; i < n; i++) {
            if (out)
                fputc('\n', out);
            bad += inspect_one(v[i].name, out, verify) != CRPM_SUCCESS;
        }
    }
    for (int i = 0; i < n; i++)
        free(v[i].name);
    free(v);
    return bad;
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
        struct stat st;
        if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            int b = inspect_dir(path, out, verify, &first);
            bad += b < 0 ? 1 : b;
            continue;
        }
        if (out && !first)
            fputc('\n', out);
        first = 0;
        bad += inspect_one(path, out, verify) != CRPM_SUCCESS;
    }
    return bad ? 1 : 0;
}
