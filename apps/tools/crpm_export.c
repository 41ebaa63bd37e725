/* crpm-export: writes the latest committed state of one or many rank
 * containers as an HDF5 file in the level-4 layout (see lib/level4.h), for
 * h5dump/h5py analysis or for a restart from level 4. */
#include "container.h"
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
    fputs("usage: crpm-export [-f] -o OUT.h5 CONTAINER|JOBDIR...\n"
          "\n"
          "Writes the committed checkpoint of the given rank containers\n"
          "(rank-<r>.crpm; a directory stands for all rank-*.crpm in it) into one\n"
          "HDF5 file with the level-4 layout: group /rank_<r> per rank, dataset\n"
          "id_<id> per protected array with its native type, crc32 attributes;\n"
          "a rank's persistent heap is the byte dataset id_-2147483648.\n"
          "Copied to <glbl_dir>/<job>/l4-<id>.h5 it can serve as a level-4 restart\n"
          "when every rank is included.\n"
          "\n"
          "  -o, --output FILE  output file (written under FILE.tmp, then renamed)\n"
          "  -f, --force        export even if the containers hold different\n"
          "                     epochs (the file then records the lowest)\n"
          "  -h, --help         show this help\n"
          "\n"
          "Exit status: 0 written, 1 a container could not be read or the set is\n"
          "inconsistent, 2 usage error.\n",
          out);
}

typedef struct input {
    char *path;
    crpm_container *c;
    int32_t rank, nranks;
    char job[CRPM_JOB_MAX + 1];
    uint64_t epoch, user_id;
    int nregions;
    crpm_array *regions;
} input;

typedef struct inputs {
    input *v;
    int n, cap;
} inputs;

static int add_path(inputs *in, const char *path)
{
    if (in->n == in->cap) {
        int cap = in->cap ? 2 * in->cap : 16;
        input *nv = realloc(in->v, (size_t)cap * sizeof *nv);
        if (!nv)
            return -1;
        in->v = nv;
        in->cap = cap;
    }
    memset(&in->v[in->n], 0, sizeof in->v[0]);
    in->v[in->n].path = strdup(path);
    return in->v[in->n++].path ? 0 : -1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Adds every rank-<r>.crpm of dir, in name order. */
static int add_dir(inputs *in, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    char **names = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (crpm_parse_container_name(e->d_name) < 0)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            char **nn = realloc(names, (size_t)cap * sizeof *nn);
            if (!nn) {
                rc = -1;
                break;
            }
            names = nn;
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
        if (rc == 0 && add_path(in, names[i]) != 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    if (rc == 0 && n == 0) {
        fprintf(stderr, "crpm-export: %s: no rank-*.crpm containers\n", dir);
        return -2;
    }
    return rc;
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
        x->regions[i] = (crpm_array){ info.id, info.type_code, info.elem_size, info.count, NULL, NULL };
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
                fprintf(stderr, "crpm-export: %s and %s are both rank %d\n", in->v[j].path, x->path, (int)x->rank);
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
    int force = 0;
    inputs in = { NULL, 0, 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--force")) {
            force = 1;
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
        } else {
            struct stat st;
            int rc = stat(a, &st) == 0 && S_ISDIR(st.st_mode) ? add_dir(&in, a) : add_path(&in, a);
            if (rc == -1) {
                fprintf(stderr, "crpm-export: %s: cannot read\n", a);
                return 1;
            }
            if (rc < 0)
                return 1;
        }
    }
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
            printf("exported %d of %d rank(s) of job '%s' (checkpoint id %llu, epoch %llu, %llu bytes) to %s\n",
                   in.n, (int)in.v[0].nranks, in.v[0].job, (unsigned long long)ckpt_id,
                   (unsigned long long)min_epoch, (unsigned long long)bytes, out);
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
