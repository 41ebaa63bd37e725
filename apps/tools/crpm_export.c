/* crpm-export: writes the latest committed state of one or many rank
 * containers as an HDF5 file in the level-4 layout (see lib/level4.h), for
 * h5dump/h5py analysis or for a restart from level 4.  Level-3 parity
 * containers are never rank data; a level-2 partner copy (a byte mirror of
 * its owner's container) stands for its owner only when asked (-p), and the
 * report says which ranks came from one. */
#include "container.h"
#include "grow.h"
#include "heap.h"
#include "level4.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

static void usage(FILE *out)
{
    fputs("usage: crpm-export [-f] [-p] -o OUT.h5 CONTAINER|JOBDIR...\n"
          "\n"
          "Writes the committed checkpoint of the given rank containers\n"
          "(rank-<r>.crpm; a directory stands for all rank-*.crpm in it) into one\n"
          "HDF5 file with the level-4 layout: group /rank_<r> per rank, dataset\n"
          "id_<id> per protected array with its native type, crc32 attributes;\n"
          "a rank's persistent heap is the byte dataset id_-2147483648.\n"
          "Copied to <glbl_dir>/<job>/l4-<id>.h5 it can serve as a level-4 restart\n"
          "when every rank is included.\n"
          "Level-3 parity containers (parity-<r>.crpm) are not rank data and are\n"
          "refused; level-2 partner copies (partner-<r>.crpm) are refused unless\n"
          "-p is given.\n"
          "\n"
          "  -o, --output FILE  output file (written under FILE.tmp, then renamed)\n"
          "  -f, --force        export even if the containers hold different\n"
          "                     epochs (the file then records the lowest)\n"
          "  -p, --partner-copies  take a partner copy partner-<r>.crpm as rank r's\n"
          "                     data (it mirrors rank r's container); in a directory,\n"
          "                     for the ranks no container is given for.  The\n"
          "                     report names every rank that came from a copy\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 written, 1 a container could not be read or the set is\n"
          "inconsistent, 2 usage error.\n",
          out);
}

/* What a file is, by its name: a rank's container (any other name), a
 * partner copy or a parity container. */
enum { K_CONTAINER, K_PARTNER, K_PARITY };

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static int kind_of(const char *path, int *num)
{
    if ((*num = crpm_parse_partner_name(base_name(path))) >= 0)
        return K_PARTNER;
    if ((*num = crpm_parse_parity_name(base_name(path))) >= 0)
        return K_PARITY;
    *num = crpm_parse_container_name(base_name(path));
    return K_CONTAINER;
}

typedef struct input {
    char *path;
    int kind;                  /* K_CONTAINER or K_PARTNER (then owner: the rank of its name) */
    int owner;
    crpm_container *c;
    int32_t rank, nranks;
    char job[CRPM_JOB_MAX + 1];
    uint64_t epoch, user_id;
    int nregions;
    crpm_array *regions;
} input;

typedef struct inputs {
    input *v;
    int n;
    size_t cap;
} inputs;

static int add_path(inputs *in, const char *path, int kind, int owner)
{
    if (CRPM_GROW(in->v, in->cap, (size_t)in->n + 1, 16))
        return -1;
    memset(&in->v[in->n], 0, sizeof in->v[0]);
    in->v[in->n].kind = kind;
    in->v[in->n].owner = owner;
    in->v[in->n].path = strdup(path);
    return in->v[in->n++].path ? 0 : -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds every rank-<r>.crpm of dir, in name order, to in; its partner
 * copies go to spare (-p: candidates for ranks without a container).  The
 * partner copies and parity containers left out are named on stderr, so a
 * directory that mixes them with containers is never taken for more ranks
 * than it holds. */
static int add_dir(inputs *in, inputs *spare, const char *dir, int partners)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **names = NULL;
    int n = 0, rc = 0, ncont = 0, npart = 0, npar = 0;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int num, kind = kind_of(e->d_name, &num);
        if (num < 0)
            continue;
        npart += kind == K_PARTNER;
        npar += kind == K_PARITY;
        if (kind == K_PARITY || (kind == K_PARTNER && !partners))
            continue;
        if (CRPM_GROW(names, cap, (size_t)n + 1, 16)) {
            rc = -1;
            break;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        if (!(names[n] = malloc(len))) {
            rc = -1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n > 1)
        qsort(names, (size_t)n, sizeof *names, cmp_str);
    for (int i = 0; i < n; i++) {
        int num, kind = kind_of(names[i], &num);
        ncont += kind == K_CONTAINER;
        if (rc == 0 && add_path(kind == K_CONTAINER ? in : spare, names[i], kind, num) != 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    if (rc == 0 && npar)
        fprintf(stderr, "crpm-export: %s: left out %d level-3 parity container(s): parity is not rank data\n", dir,
                npar);
    if (rc == 0 && npart && !partners)
        fprintf(stderr, "crpm-export: %s: left out %d level-2 partner copy file(s) (-p takes them as their owners' "
                "data for ranks without a container)\n", dir, npart);
    if (rc == 0 && ncont == 0 && !(partners && npart)) {
        fprintf(stderr, "crpm-export: %s: no rank-*.crpm containers\n", dir);
        return -2;
    }
    return rc;
}

/* A file given by name: a parity container is refused, a partner copy
 * without -p too; the message says what the file is. */
static int add_file(inputs *in, const char *path, int partners)
{
    int num, kind = kind_of(path, &num);
    if (kind == K_PARITY) {
        fprintf(stderr, "crpm-export: %s is a level-3 parity container (rank %d holds the parity of other ranks' "
                "data there), not rank data: export the ranks' containers rank-<r>.crpm\n", path, num);
        return -2;
    }
    if (kind == K_PARTNER && !partners) {
        fprintf(stderr, "crpm-export: %s is a level-2 partner copy of rank %d's container, not a rank's own "
                "container: export rank-%d.crpm, or pass -p to export this copy as rank %d's data\n", path, num,
                num, num);
        return -2;
    }
    return add_path(in, path, kind, num);
}

/* -p: partner copies found in directories stand in for the ranks that no
 * container (or copy given by name) covers; one copy per rank. */
static int add_spares(inputs *in, const inputs *spare)
{
    for (int i = 0; i < spare->n; i++) {
        const input *x = &spare->v[i];
        int covered = 0;
        for (int j = 0; j < in->n && !covered; j++)
            covered = in->v[j].kind == K_CONTAINER ? crpm_parse_container_name(base_name(in->v[j].path)) == x->owner
                                                    : in->v[j].owner == x->owner;
        if (!covered && add_path(in, x->path, K_PARTNER, x->owner) != 0)
            return -1;
    }
    return 0;
}

static int fetch(void *arg, int entry, int idx, void *dst)
{
    inputs *in = arg;
    return crpm_container_read_region(in->v[entry].c, idx, dst);
}

/* Opens x read-only (a live job may be writing it) and takes a consistent
 * snapshot of its committed epoch; again on a later call. */
static int load(input *x)
{
    int rc;
    if (!x->c) {
        crpm_open_opts o = { .path = x->path, .read_only = 1 };
        if ((rc = crpm_format_open(&o, &x->c, NULL)) != CRPM_SUCCESS)
            return rc;
    }
    if ((rc = crpm_container_snapshot(x->c)) != CRPM_SUCCESS)
        return rc;
    crpm_container_identity(x->c, x->job, sizeof x->job, &x->rank, &x->nranks);
    crpm_layout lay;
    if ((rc = crpm_container_layout(x->c, &lay)) < 0)
        return rc;
    if (rc == 1 && lay.role == CRPM_ROLE_PARITY)
        return crpm_error(CRPM_ERR_IDENTITY, "%s is a level-3 parity container (its layout record says so; rank %d "
                          "holds the parity of other ranks' data there), not rank data", x->path, (int)x->rank);
    if (x->kind == K_PARTNER && x->rank != x->owner)
        return crpm_error(CRPM_ERR_IDENTITY, "%s: named as the partner copy of rank %d, but it mirrors rank %d's "
                          "container", x->path, x->owner, (int)x->rank);
    x->epoch = crpm_container_epoch(x->c);
    x->user_id = crpm_container_user_id(x->c);
    if (x->epoch == 0)
        return crpm_error(CRPM_ERR_NOCKPT, "%s: no committed checkpoint", x->path);
    x->nregions = crpm_container_nregions(x->c);
    free(x->regions);
    x->regions = calloc((size_t)(x->nregions > 0 ? x->nregions : 1), sizeof *x->regions);
    if (!x->regions)
        return crpm_error(CRPM_ERR_NOMEM, "out of memory");
    for (int i = 0; i < x->nregions; i++) {
        crpm_array info;
        if ((rc = crpm_container_region(x->c, i, &info)) != CRPM_SUCCESS)
            return rc;
        x->regions[i] = (crpm_array){ info.id, info.type_code, info.elem_size, info.count, NULL, NULL, NULL };
    }
    return CRPM_SUCCESS;
}

/* Snapshots of every input; returns 1 on a failure (reported). */
static int load_all(inputs *in, uint64_t *min_epoch, uint64_t *max_epoch, uint64_t *bytes)
{
    *min_epoch = UINT64_MAX;
    *max_epoch = 0;
    *bytes = 0;
    for (int i = 0; i < in->n; i++) {
        input *x = &in->v[i];
        int rc = load(x);
        if (rc != CRPM_SUCCESS) {
            fprintf(stderr, "crpm-export: %s: %s: %s\n", x->path, crpm_strerror(rc), crpm_last_error());
            return 1;
        }
        const input *f = &in->v[0];
        if (strcmp(x->job, f->job) != 0 || x->nranks != f->nranks) {
            fprintf(stderr, "crpm-export: %s belongs to job '%s' with %d ranks, %s to job '%s' with %d ranks\n",
                    x->path, x->job, (int)x->nranks, f->path, f->job, (int)f->nranks);
            return 1;
        }
        for (int j = 0; j < i; j++)
            if (in->v[j].rank == x->rank) {
                fprintf(stderr, "crpm-export: %s and %s are both rank %d%s\n", in->v[j].path, x->path, (int)x->rank,
                        in->v[j].kind == K_PARTNER || x->kind == K_PARTNER ? "'s data (a container and its partner "
                        "copy, or two copies): give one" : "");
                return 1;
            }
        if (x->epoch < *min_epoch)
            *min_epoch = x->epoch;
        if (x->epoch > *max_epoch)
            *max_epoch = x->epoch;
        for (int k = 0; k < x->nregions; k++)
            *bytes += x->regions[k].count * x->regions[k].elem_size;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    int force = 0, partners = 0;
    inputs in = { NULL, 0, 0 }, spare = { NULL, 0, 0 };
    /* options first, wherever they are: -p changes how every path is taken */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--force")) {
            force = 1;
        } else if (!strcmp(a, "-p") || !strcmp(a, "--partner-copies")) {
            partners = 1;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (++i == argc) {
                usage(stderr);
                return 2;
            }
            out = argv[i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "crpm-export: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            i++;
            continue;
        }
        if (a[0] == '-' && a[1])
            continue;
        struct stat st;
        int rc = stat(a, &st) == 0 && S_ISDIR(st.st_mode) ? add_dir(&in, &spare, a, partners)
                                                          : add_file(&in, a, partners);
        if (rc == -1) {
            fprintf(stderr, "crpm-export: %s: cannot read\n", a);
            return 1;
        }
        if (rc < 0)
            return 1;
    }
    if (add_spares(&in, &spare) != 0) {
        fprintf(stderr, "crpm-export: out of memory\n");
        return 1;
    }
    for (int i = 0; i < spare.n; i++)
        free(spare.v[i].path);
    free(spare.v);
    if (!out || in.n == 0) {
        usage(stderr);
        return 2;
    }

    int status;
    uint64_t min_epoch, max_epoch, bytes;
    /* On a live job the ranks commit one after the other: a set one epoch
     * apart may settle if read again. */
    for (int tries = 0;; tries++) {
        status = load_all(&in, &min_epoch, &max_epoch, &bytes);
        if (status || min_epoch == max_epoch || tries == 20)
            break;
        struct timespec pause = { 0, 20000000 };
        nanosleep(&pause, NULL);
    }
    /* Ranks one epoch apart are normal after a crash mid-checkpoint, but such
     * a set is not one consistent global state. */
    if (!status && min_epoch != max_epoch) {
        fprintf(stderr, "crpm-export: %s: containers hold epochs %llu to %llu (not one consistent checkpoint)\n",
                force ? "warning" : "error", (unsigned long long)min_epoch, (unsigned long long)max_epoch);
        if (!force)
            status = 1;
    }
    uint64_t ckpt_id = 0;
    for (int i = 0; i < in.n && !status; i++)
        if (in.v[i].epoch == min_epoch)
            ckpt_id = in.v[i].user_id;
    if (!status && ckpt_id > INT32_MAX) {
        fprintf(stderr, "crpm-export: checkpoint id %llu does not fit the file's int32 attribute\n",
                (unsigned long long)ckpt_id);
        status = 1;
    }
    if (!status) {
        crpm_l4_rank *ent = calloc((size_t)in.n, sizeof *ent);
        int rc = ent ? CRPM_SUCCESS : CRPM_ERR_NOMEM;
        for (int i = 0; ent && i < in.n; i++)
            ent[i] = (crpm_l4_rank){ in.v[i].rank, in.v[i].nregions, in.v[i].regions };
        if (rc == CRPM_SUCCESS)
            rc = crpm_l4_export(out, in.v[0].job, (int)ckpt_id, min_epoch, in.v[0].nranks, in.n, ent, fetch, &in);
        free(ent);
        if (rc != CRPM_SUCCESS) {
            fprintf(stderr, "crpm-export: %s: %s: %s\n", out, crpm_strerror(rc), crpm_last_error());
            status = 1;
        } else {
            int ncopies = 0;
            for (int i = 0; i < in.n; i++)
                ncopies += in.v[i].kind == K_PARTNER;
            printf("exported %d of %d rank(s) of job '%s' (checkpoint id %llu, epoch %llu, %llu bytes) to %s",
                   in.n, (int)in.v[0].nranks, in.v[0].job, (unsigned long long)ckpt_id,
                   (unsigned long long)min_epoch, (unsigned long long)bytes, out);
            if (ncopies)
                printf("; %d of them from level-2 partner copies", ncopies);
            printf("\n");
            for (int i = 0; i < in.n; i++)
                if (in.v[i].kind == K_PARTNER)
                    printf("rank %d: from its partner copy %s (a mirror of its container)\n", (int)in.v[i].rank,
                           in.v[i].path);
            for (int i = 0; i < in.n; i++)
                for (int k = 0; k < in.v[i].nregions; k++)
                    if (in.v[i].regions[k].id == CRPM_HEAP_ARRAY_ID)
                        printf("rank %d: persistent heap, %llu bytes, as the byte dataset /rank_%d/id_%d\n",
                               (int)in.v[i].rank, (unsigned long long)crpm_array_bytes(&in.v[i].regions[k]),
                               (int)in.v[i].rank, (int)CRPM_HEAP_ARRAY_ID);
        }
    }
    for (int i = 0; i < in.n; i++) {
        if (in.v[i].c)
            crpm_format_close(in.v[i].c);
        free(in.v[i].regions);
        free(in.v[i].path);
    }
    free(in.v);
    return status;
}
