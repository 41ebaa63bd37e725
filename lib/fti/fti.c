/* FTI 1.6 interface on libcrpm's public API (crpm.h) only.
 *
 * libcrpm does the checkpointing, the restart decision and the agreement
 * between ranks; this layer keeps what FTI has and libcrpm does not: type
 * handles, variable names and dimensions, string ids, FTI's status and
 * snapshot semantics with per-level timers, and the level mapping. */
#include <fti.h>

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <crpm.h>

#include "fti_config.h"
#include "fti_internal.h"
#include "grow.h"

MPI_Comm FTI_COMM_WORLD = MPI_COMM_NULL;

/* Predefined handles: indexes into predef[] below. */
fti_id_t FTI_CHAR = 0, FTI_SHRT = 1, FTI_INTG = 2, FTI_LONG = 3, FTI_UCHR = 4, FTI_USHT = 5, FTI_UINT = 6,
         FTI_ULNG = 7, FTI_SFLT = 8, FTI_DBLE = 9, FTI_LDBE = 10;
#define NPREDEF 11

typedef struct field {
    char name[FTI_BUFS];
    fti_id_t type;
    size_t offset;
    int ndims;
    int64_t dims[FTI_MAX_DIMS];
} field;

typedef struct type_rec {
    crpm_type_t ct;
    char name[FTI_BUFS];
    int composite;
    field *fields;
    int nfields;
} type_rec;

typedef struct var_rec {
    int id;
    void *ptr;
    int64_t count;
    fti_id_t type;
    char name[FTI_BUFS];
    FTIT_dimension dim;
    void *icp_copy;         /* FTI_AddVarICP: the value when it was added */
} var_rec;

typedef struct str_id {
    char name[FTI_BUFS];
    int id;
} str_id;

static struct {
    int init;
    int own_world;          /* FTI_COMM_WORLD is ours to free at the next init */
    MPI_Comm comm;          /* private duplicate for the snapshot timers */
    int have_comm;          /* comm is set */
    int rank, nranks;
    fti_settings cfg;
    int pending;            /* a checkpoint waits to be recovered (FTI_Status) */
    double minute;          /* seconds per configured minute */
    double t0;              /* start of the snapshot timers */
    long long ticks[5];     /* intervals of each level already served */
    int snap_id;            /* id of the last FTI_Snapshot checkpoint */
    long ckpts;             /* checkpoints taken in this run */
    int nnodes;             /* nodes as libcrpm sees them: level 2 needs two */
    int nodes_even;         /* every node has the same number of ranks */
    int l3;                 /* the nodes form whole groups of group_size: FTI level 3 is libcrpm's */
    int notice_l23, notice_l3, notice_l4;
    int icp_open, icp_on;   /* between FTI_InitICP and FTI_FinalizeICP; activated */
    char *crpm_text;        /* the libcrpm configuration FTI_Init made (a second FTI_Init compares) */
    int icp_id, icp_level;
    int rv_failed;          /* an FTI_RecoverVar failed since FTI_RecoverVarInit */
    int last_cl, last_id;   /* libcrpm level and id of this run's newest checkpoint (0: none) */
    type_rec *types;        /* handles NPREDEF.. */
    int ntypes;
    var_rec *vars;
    int nvars;
    str_id *ids;
    int nids;
} F;

/* ---- messages ---------------------------------------------------------- */
/* FTI's rule: a message is printed when its level is at least the configured
 * verbosity; errors always are.  `all`: every rank, else rank 0 only. */
void fti_say(int level, int all, const char *fmt, ...)
{
    int v = F.init ? F.cfg.verbosity : 2;
    if (level < v && level != FTI_EROR)
        return;
    if (!all && F.init && F.rank != 0)
        return;
    int rank = F.init ? F.rank : -1, mpi = 0, fin = 0;
    MPI_Initialized(&mpi);
    MPI_Finalized(&fin);
    if (rank < 0 && mpi && !fin)
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    const char *tag = level == FTI_EROR ? "error" : level == FTI_WARN ? "warning" : "info";
    fprintf(level >= FTI_WARN ? stderr : stdout, "[FTI/libcrpm rank %d] %s: %s\n", rank, tag, msg);
    fflush(level >= FTI_WARN ? stderr : stdout);
}

/* libcrpm returns its errors and leaves printing them to its caller: this
 * layer prints them as FTI does, on the ranks where they happen. */
static int crpm_ok(int rc, const char *fn)
{
    if (rc < 0)
        fti_say(FTI_EROR, 1, "%s: %s: %s", fn, crpm_strerror(rc), crpm_last_error());
    return rc >= 0;
}

static int not_init(const char *fn)
{
    fti_say(FTI_EROR, 1, "%s: FTI is not initialised (call FTI_Init first)", fn);
    return FTI_NSCS;
}

/* ---- types ------------------------------------------------------------- */
static int type_of(fti_id_t t, crpm_type_t *ct)
{
    static const crpm_type_t *const pre[NPREDEF] = {&CRPM_CHAR, &CRPM_SHORT, &CRPM_INT, &CRPM_LONG, &CRPM_BYTE,
                                                    NULL, &CRPM_UINT, &CRPM_ULONG, &CRPM_FLOAT, &CRPM_DOUBLE,
                                                    &CRPM_LDOUBLE};
    if (t >= 0 && t < NPREDEF) {
        if (pre[t])
            *ct = *pre[t];
        else
            crpm_init_type(ct, sizeof(unsigned short)); /* no unsigned 16-bit code: a 2-byte record */
        return 0;
    }
    if (t >= NPREDEF && t < NPREDEF + F.ntypes) {
        *ct = F.types[t - NPREDEF].ct;
        return 0;
    }
    return -1;
}

int fti_type_of(fti_id_t t, crpm_type_t *ct) { return type_of(t, ct); }
int fti_initialized(void) { return F.init; }

static fti_id_t new_type(const char *fn, size_t size, const char *name, int composite)
{
    if (!F.init)
        return not_init(fn);
    crpm_type_t ct;
    if (size == 0 || size > (size_t)INT64_MAX || crpm_init_type(&ct, size) != CRPM_SUCCESS) {
        fti_say(FTI_EROR, 1, "%s: the size of a type must be > 0 (got %zu)", fn, size);
        return FTI_NSCS;
    }
    type_rec *t = realloc(F.types, sizeof *t * (size_t)(F.ntypes + 1));
    if (!t) {
        fti_say(FTI_EROR, 1, "%s: out of memory", fn);
        return FTI_NSCS;
    }
    F.types = t;
    t += F.ntypes;
    memset(t, 0, sizeof *t);
    t->ct = ct;
    t->composite = composite;
    snprintf(t->name, sizeof t->name, "%s", name ? name : "");
    return NPREDEF + F.ntypes++;
}

int FTI_InitType(fti_id_t *type, int size)
{
    if (!type) {
        fti_say(FTI_EROR, 1, "FTI_InitType: type is NULL");
        return FTI_NSCS;
    }
    fti_id_t t = new_type("FTI_InitType", size > 0 ? (size_t)size : 0, NULL, 0);
    if (t < 0)
        return FTI_NSCS;
    *type = t;
    return FTI_SCES;
}

fti_id_t FTI_InitCompositeType(const char *name, size_t size, FTIT_H5Group *h5g)
{
    (void)h5g; /* the group only places the type in an HDF5 file */
    return new_type("FTI_InitCompositeType", size, name, 1);
}

static int add_field(const char *fn, fti_id_t id, const char *name, fti_id_t ftype, size_t offset, int ndims,
                     const int64_t *dims)
{
    if (!F.init)
        return not_init(fn);
    crpm_type_t fct;
    if (id < NPREDEF || id >= NPREDEF + F.ntypes || !F.types[id - NPREDEF].composite) {
        fti_say(FTI_EROR, 1, "%s: %d is not a composite type (FTI_InitCompositeType)", fn, id);
        return FTI_NSCS;
    }
    if (type_of(ftype, &fct) != 0) {
        fti_say(FTI_EROR, 1, "%s: field type %d does not exist", fn, ftype);
        return FTI_NSCS;
    }
    if (ndims < 0 || ndims > FTI_MAX_DIMS || (ndims > 0 && !dims)) {
        fti_say(FTI_EROR, 1, "%s: %d dimensions (at most %d)", fn, ndims, FTI_MAX_DIMS);
        return FTI_NSCS;
    }
    uint64_t bytes = (uint64_t)fct.size;
    for (int d = 0; d < ndims; d++) {
        if (dims[d] <= 0 || (uint64_t)dims[d] > UINT64_MAX / bytes) {
            fti_say(FTI_EROR, 1, "%s: dimension %d of field '%s' is %lld", fn, d, name ? name : "",
                    (long long)dims[d]);
            return FTI_NSCS;
        }
        bytes *= (uint64_t)dims[d];
    }
    type_rec *t = &F.types[id - NPREDEF];
    if (offset > (uint64_t)t->ct.size || bytes > (uint64_t)t->ct.size - offset) {
        fti_say(FTI_EROR, 1, "%s: field '%s' (%llu bytes at offset %zu) does not fit in the %lld bytes of type %d", fn,
            name ? name : "", (unsigned long long)bytes, offset, (long long)t->ct.size, id);
        return FTI_NSCS;
    }
    field *f = realloc(t->fields, sizeof *f * (size_t)(t->nfields + 1));
    if (!f) {
        fti_say(FTI_EROR, 1, "%s: out of memory", fn);
        return FTI_NSCS;
    }
    t->fields = f;
    f += t->nfields++;
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name ? name : "");
    f->type = ftype;
    f->offset = offset;
    f->ndims = ndims;
    for (int d = 0; d < ndims; d++)
        f->dims[d] = dims[d];
    return FTI_SCES;
}

int FTI_AddScalarField(fti_id_t id, const char *name, fti_id_t fid, size_t offset)
{
    return add_field("FTI_AddScalarField", id, name, fid, offset, 0, NULL);
}

int FTI_AddVectorField(fti_id_t id, const char *name, fti_id_t tid, size_t offset, int ndims, int64_t *dim_sizes)
{
    if (ndims < 1) {
        fti_say(FTI_EROR, 1, "FTI_AddVectorField: field '%s' needs at least one dimension", name ? name : "");
        return FTI_NSCS;
    }
    return add_field("FTI_AddVectorField", id, name, tid, offset, ndims, dim_sizes);
}

/* ---- variables and names ----------------------------------------------- */
static var_rec *find_var(int id)
{
    for (int i = 0; i < F.nvars; i++)
        if (F.vars[i].id == id)
            return &F.vars[i];
    return NULL;
}

int FTI_Protect(int id, void *ptr, int64_t count, fti_id_t tid)
{
    const char *fn = "FTI_Protect";
    if (!F.init)
        return not_init(fn);
    crpm_type_t ct;
    if (type_of(tid, &ct) != 0) {
        fti_say(FTI_EROR, 1, "%s(%d): type %d does not exist", fn, id, tid);
        return FTI_NSCS;
    }
    var_rec *v = find_var(id);
    if (!v) {
        var_rec *nv = realloc(F.vars, sizeof *nv * (size_t)(F.nvars + 1));
        if (!nv) {
            fti_say(FTI_EROR, 1, "%s: out of memory", fn);
            return FTI_NSCS;
        }
        F.vars = nv;
        v = &F.vars[F.nvars];
        memset(v, 0, sizeof *v);
        v->id = id;
    }
    if (!crpm_ok(crpm_protect(id, ptr, count, ct), fn))
        return FTI_NSCS;
    if (v == &F.vars[F.nvars])
        F.nvars++;
    v->ptr = ptr;
    v->count = count;
    v->type = tid;
    fti_say(FTI_INFO, 0, "variable %d protected: %lld elements of %lld bytes", id, (long long)count,
            (long long)ct.size);
    return FTI_SCES;
}

static int set_name(const char *fn, var_rec *v, const char *name)
{
    if (!name || !*name)
        return FTI_SCES;
    if (strlen(name) >= FTI_BUFS) {
        fti_say(FTI_EROR, 1, "%s(%d): name longer than %d characters", fn, v->id, FTI_BUFS - 1);
        return FTI_NSCS;
    }
    if (!crpm_ok(crpm_set_name(v->id, name), "FTI_DefineDataset"))
        return FTI_NSCS;
    snprintf(v->name, sizeof v->name, "%s", name);
    return FTI_SCES;
}

static var_rec *protected_var(const char *fn, int id)
{
    var_rec *v = find_var(id);
    if (!v)
        fti_say(FTI_EROR, 1, "%s: variable %d is not protected (call FTI_Protect first)", fn, id);
    return v;
}

int FTI_SetAttribute(int id, FTIT_attribute attribute, FTIT_attributeFlag flag)
{
    const char *fn = "FTI_SetAttribute";
    if (!F.init)
        return not_init(fn);
    var_rec *v = protected_var(fn, id);
    if (!v)
        return FTI_NSCS;
    if (flag & FTI_ATTRIBUTE_DIM) {
        if (attribute.dim.ndims < 0 || attribute.dim.ndims > FTI_MAX_DIMS) {
            fti_say(FTI_EROR, 1, "%s(%d): %d dimensions (at most %d)", fn, id, attribute.dim.ndims, FTI_MAX_DIMS);
            return FTI_NSCS;
        }
        v->dim = attribute.dim;
    }
    if (flag & FTI_ATTRIBUTE_NAME) {
        attribute.name[FTI_BUFS - 1] = '\0';
        return set_name(fn, v, attribute.name);
    }
    return FTI_SCES;
}

int FTI_DefineDataset(int id, int rank, int64_t *dimLength, const char *name, FTIT_H5Group *h5group)
{
    const char *fn = "FTI_DefineDataset";
    (void)h5group;
    if (!F.init)
        return not_init(fn);
    var_rec *v = protected_var(fn, id);
    if (!v)
        return FTI_NSCS;
    if (rank < 0 || rank > FTI_MAX_DIMS || (rank > 0 && !dimLength)) {
        fti_say(FTI_EROR, 1, "%s(%d): rank %d (at most %d dimensions)", fn, id, rank, FTI_MAX_DIMS);
        return FTI_NSCS;
    }
    FTIT_dimension d = {.ndims = rank};
    for (int i = 0; i < rank; i++) {
        if (dimLength[i] < 0) {
            fti_say(FTI_EROR, 1, "%s(%d): dimension %d is %lld", fn, id, i, (long long)dimLength[i]);
            return FTI_NSCS;
        }
        d.count[i] = (FTIT_hsize_t)dimLength[i];
    }
    v->dim = d;
    return set_name(fn, v, name);
}

int FTI_InitGroup(FTIT_H5Group *h5group, const char *name, FTIT_H5Group *parent)
{
    if (!F.init)
        return not_init("FTI_InitGroup");
    if (!h5group || !name || strlen(name) >= FTI_BUFS) {
        fti_say(FTI_EROR, 1, "FTI_InitGroup: need a group and a name shorter than %d characters", FTI_BUFS);
        return FTI_NSCS;
    }
    memset(h5group, 0, sizeof *h5group);
    snprintf(h5group->name, sizeof h5group->name, "%s", name);
    const char *up = parent ? parent->fullName : "";
    if ((size_t)snprintf(h5group->fullName, sizeof h5group->fullName, "%s/%s", up, name) >= FTI_BUFS) {
        fti_say(FTI_EROR, 1, "FTI_InitGroup: full name of '%s' too long", name);
        return FTI_NSCS;
    }
    if (parent && parent->childrenNo < FTI_BUFS)
        parent->childrenNo++;
    return FTI_SCES;
}

int FTI_RenameGroup(FTIT_H5Group *h5group, const char *name)
{
    if (!F.init)
        return not_init("FTI_RenameGroup");
    if (!h5group || !name || strlen(name) >= FTI_BUFS) {
        fti_say(FTI_EROR, 1, "FTI_RenameGroup: need a group and a name shorter than %d characters", FTI_BUFS);
        return FTI_NSCS;
    }
    snprintf(h5group->name, sizeof h5group->name, "%s", name);
    return FTI_SCES;
}

/* String ids survive a restart: the id of a name is derived from the name
 * itself (FNV-1a, in 0x40000000 .. 0x7fffffff, above the ids programs
 * number by hand), so a relaunched program finds the id its checkpoint used
 * whatever order it names its variables in, at every level, with nothing
 * more to store.  Two names of one run with the same id are refused. */
static int name_id(const char *name)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        h = (h ^ *c) * 16777619u;
    return (int)(0x40000000u | (h & 0x3fffffffu));
}

static int add_name(const char *name, int id)
{
    str_id *n = realloc(F.ids, sizeof *n * (size_t)(F.nids + 1));
    if (!n) {
        fti_say(FTI_EROR, 1, "FTI_setIDFromString: out of memory");
        return FTI_NSCS;
    }
    F.ids = n;
    snprintf(n[F.nids].name, sizeof n[F.nids].name, "%s", name);
    n[F.nids].id = id;
    F.nids++;
    return id;
}

int FTI_setIDFromString(const char *name)
{
    if (!F.init)
        return not_init("FTI_setIDFromString");
    if (!name || !*name || strlen(name) >= FTI_BUFS) {
        fti_say(FTI_EROR, 1, "FTI_setIDFromString: need a name of 1 to %d characters", FTI_BUFS - 1);
        return FTI_NSCS;
    }
    int id = name_id(name);
    for (int i = 0; i < F.nids; i++) {
        if (strcmp(F.ids[i].name, name) == 0)
            return F.ids[i].id;
        if (F.ids[i].id == id) {
            fti_say(FTI_EROR, 1, "FTI_setIDFromString: names '%s' and '%s' give the same id %d; rename one",
                    F.ids[i].name, name, id);
            return FTI_NSCS;
        }
    }
    if (find_var(id)) {
        fti_say(FTI_EROR, 1, "FTI_setIDFromString('%s'): its id %d is already protected under a number", name, id);
        return FTI_NSCS;
    }
    return add_name(name, id);
}

/* A name set in this run, or one whose variable the checkpoint waiting to be
 * recovered holds (a restart: the program asks for its names again). */
int FTI_getIDFromString(const char *name)
{
    if (!F.init)
        return not_init("FTI_getIDFromString");
    if (!name || !*name || strlen(name) >= FTI_BUFS)
        return FTI_NSCS;
    for (int i = 0; i < F.nids; i++)
        if (strcmp(F.ids[i].name, name) == 0)
            return F.ids[i].id;
    int id = name_id(name);
    int64_t bytes = 0;
    if (F.pending && crpm_stored_size(id, &bytes) == CRPM_SUCCESS)
        return add_name(name, id);
    return FTI_NSCS;
}

/* ---- checkpoint levels ---------------------------------------------------- */
/* FTI level -> libcrpm level: the one place levels are mapped.  Level 2 is
 * libcrpm's (a differential partner copy on the next node) when the job has
 * two nodes or more, else level 1 (said once).  Level 3 is libcrpm's
 * (Reed-Solomon parity over groups of group_size nodes) when the nodes form
 * whole groups (F.l3); otherwise it is taken as level 2, or 1 on one node
 * (said once).  FTI's differential levels 5-8 are 1-4: every libcrpm
 * checkpoint is differential. */
static int map_level(int level)
{
    if (level >= FTI_L1_DCP && level <= FTI_L4_DCP)
        level -= FTI_L1_DCP - FTI_L1;
    switch (level) {
    case FTI_L1:
        return CRPM_L1;
    case FTI_L2:
    case FTI_L3:
        if (level == FTI_L3 && F.l3)
            return CRPM_L3;
        if (F.nnodes < 2) {
            if (!F.notice_l23++)
                fti_say(FTI_WARN, 0, "checkpoint levels 2 and 3 are taken as level 1: the job runs on one node "
                    "(%d ranks, %s), so there is no other node for a partner copy; said once", F.nranks,
                    F.cfg.node_size_set ? "node_size in the configuration" : "MPI shared-memory nodes");
            return CRPM_L1;
        }
        if (level == FTI_L3 && !F.notice_l3++)
            fti_say(FTI_WARN, 0, "checkpoint level 3 is taken as level 2 (a partner copy on the next node): level 3 "
                "needs whole groups of group_size = %d nodes with the same number of ranks each, and the job has "
                "%d nodes%s; said once", F.cfg.group_size, F.nnodes,
                F.nodes_even ? "" : " of different sizes");
        return CRPM_L2;
    case FTI_L4:
        if (F.cfg.glbl_dir[0])
            return CRPM_L4;
        if (!F.notice_l4++)
            fti_say(FTI_WARN, 0, "level 4 needs glbl_dir in the configuration: taken as level 1; said once");
        return CRPM_L1;
    default:
        fti_say(FTI_EROR, 1, "FTI_Checkpoint: level %d is not supported (1 to 4, or 5 to 8 for differential)", level);
        return -1;
    }
}

/* A checkpoint taken, or recovered from, in this run. */
static int have_checkpoint(void)
{
    return F.pending || crpm_status() > 0 || F.ckpts > 0;
}

int FTI_Checkpoint(int id, int level)
{
    if (!F.init)
        return not_init("FTI_Checkpoint");
    if (!F.icp_on) /* an incremental checkpoint said so at FTI_InitICP */
        fti_say(FTI_INFO, 0, "checkpoint %d requested (FTI level %d)", id, level);
    int cl = map_level(level);
    if (cl < 0)
        return FTI_NSCS;
    if (!crpm_ok(crpm_checkpoint(id, cl), "FTI_Checkpoint"))
        return FTI_NSCS;
    /* the newest state is the one in memory: nothing waits to be recovered */
    F.pending = 0;
    F.ckpts++;
    F.last_cl = cl;
    F.last_id = id;
    fti_say(FTI_INFO, 0, "checkpoint %d (FTI level %d) taken as libcrpm level %d", id, level, cl);
    return FTI_DONE;
}

/* ---- incremental checkpoints (ICP) ------------------------------------------
 * FTI writes each variable when FTI_AddVarICP names it, so the checkpoint
 * holds each variable's value at that moment while the program goes on
 * changing the others.  Here each added variable's bytes are copied then;
 * FTI_FinalizeICP protects the copies in place of the variables, takes one
 * (differential) checkpoint and protects the variables again.  A protected
 * variable that was not added is saved with its value at FTI_FinalizeICP. */
static void icp_drop(void)
{
    for (int i = 0; i < F.nvars; i++) {
        free(F.vars[i].icp_copy);
        F.vars[i].icp_copy = NULL;
    }
    F.icp_open = F.icp_on = 0;
}

int FTI_InitICP(int id, int level, bool activate)
{
    if (!F.init)
        return not_init("FTI_InitICP");
    if (F.icp_open) {
        fti_say(FTI_EROR, 1, "FTI_InitICP(%d): checkpoint %d is still open (FTI_FinalizeICP first)", id, F.icp_id);
        return FTI_NSCS;
    }
    if (activate)
        fti_say(FTI_INFO, 0, "checkpoint %d requested (FTI level %d, incremental)", id, level);
    if (activate && map_level(level) < 0)
        return FTI_NSCS;
    F.icp_open = 1;
    F.icp_on = activate;
    F.icp_id = id;
    F.icp_level = level;
    return FTI_SCES;
}

int FTI_AddVarICP(int varID)
{
    const char *fn = "FTI_AddVarICP";
    if (!F.init)
        return not_init(fn);
    if (!F.icp_open) {
        fti_say(FTI_EROR, 1, "%s(%d): no incremental checkpoint is open (FTI_InitICP first)", fn, varID);
        return FTI_NSCS;
    }
    if (!F.icp_on)
        return FTI_SCES;
    var_rec *v = protected_var(fn, varID);
    crpm_type_t ct;
    if (!v || type_of(v->type, &ct) != 0)
        return FTI_NSCS;
    if (v->icp_copy) {
        fti_say(FTI_EROR, 1, "%s(%d): variable already added to checkpoint %d", fn, varID, F.icp_id);
        return FTI_NSCS;
    }
    size_t bytes = (size_t)v->count * (size_t)ct.size;
    v->icp_copy = malloc(bytes ? bytes : 1);
    if (!v->icp_copy) {
        fti_say(FTI_EROR, 1, "%s(%d): cannot allocate %zu bytes for the variable's value", fn, varID, bytes);
        return FTI_NSCS;
    }
    if (bytes)
        memcpy(v->icp_copy, v->ptr, bytes);
    return FTI_SCES;
}

int FTI_FinalizeICP(void)
{
    const char *fn = "FTI_FinalizeICP";
    if (!F.init)
        return not_init(fn);
    if (!F.icp_open) {
        fti_say(FTI_EROR, 1, "%s: no incremental checkpoint is open (FTI_InitICP first)", fn);
        return FTI_NSCS;
    }
    if (!F.icp_on) {
        icp_drop();
        return FTI_SCES;
    }
    /* The copies stand in for their variables during the checkpoint; every
     * variable gets its own memory back whatever happens. */
    int ok = 1, swapped = 0;
    for (int i = 0; i < F.nvars && ok; i++) {
        var_rec *v = &F.vars[i];
        crpm_type_t ct;
        if (!v->icp_copy)
            continue;
        ok = type_of(v->type, &ct) == 0 && crpm_ok(crpm_protect(v->id, v->icp_copy, v->count, ct), fn);
        swapped = i + 1;
    }
    /* A protection that failed is local: the ranks agree before the
     * (collective) checkpoint, so that none waits in it alone. */
    int all_ok = 0, rc = FTI_NSCS;
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, F.comm) != MPI_SUCCESS)
        all_ok = 0;
    if (all_ok)
        rc = FTI_Checkpoint(F.icp_id, F.icp_level);
    else
        fti_say(FTI_EROR, 1, "%s: checkpoint %d not taken: %s", fn, F.icp_id,
                ok ? "a variable could not be set aside on another rank" : "a variable could not be set aside");
    for (int i = 0; i < swapped; i++) {
        var_rec *v = &F.vars[i];
        crpm_type_t ct;
        if (v->icp_copy && type_of(v->type, &ct) == 0 && !crpm_ok(crpm_protect(v->id, v->ptr, v->count, ct), fn))
            rc = FTI_NSCS;
    }
    icp_drop();
    return rc == FTI_DONE ? FTI_SCES : FTI_NSCS;
}

/* FTI's status, not libcrpm's: 1 whatever level the checkpoint waiting to be
 * recovered came from (crpm_status() returns that level, CRPM_STATUS_Ln == n). */
int FTI_Status(void)
{
    if (!F.init)
        return not_init("FTI_Status");
    /* 3: FTI's status of a recovery through global datasets (another rank count) */
    return F.pending ? (crpm_status() == CRPM_STATUS_RESHAPED ? 3 : 1) : 0;
}

/* FTI's FTI_Recover is local: programs call it on some ranks and
 * FTI_RecoverVar on others, and retry after FTI_Realloc when a variable
 * grew.  It reads variable by variable (crpm_recover_var, local) where the
 * checkpoint allows it; a level-4 checkpoint (read whole) and a restart
 * through global datasets need libcrpm's collective crpm_recover, which
 * every rank must then call. */
static int recover_collective(void)
{
    if (!crpm_ok(crpm_recover(), "FTI_Recover"))
        return FTI_NREC;
    F.pending = 0;
    return FTI_SCES;
}

int FTI_Recover(void)
{
    if (!F.init) {
        not_init("FTI_Recover");
        return FTI_NREC;
    }
    if (crpm_status() == CRPM_STATUS_RESHAPED || fti_global_count() > 0 || F.nvars == 0)
        return recover_collective();
    if (!have_checkpoint()) {
        fti_say(FTI_EROR, 1, "FTI_Recover: there is no checkpoint to recover from (fresh start)");
        return FTI_NREC;
    }
    int failed = 0;
    for (int i = 0; i < F.nvars; i++) {
        int rc = crpm_recover_var(F.vars[i].id);
        if (rc == CRPM_ERR_NOTSUP && i == 0)
            return recover_collective(); /* the same on every rank: the checkpoint's level */
        if (!crpm_ok(rc, "FTI_Recover"))
            failed = 1;
    }
    if (failed)
        return FTI_NREC;
    F.pending = 0;
    return FTI_SCES;
}

int FTI_Snapshot(void)
{
    if (!F.init)
        return not_init("FTI_Snapshot");
    if (F.pending) /* the first call after a restart; a failure leaves the checkpoint untouched */
        return FTI_Recover();
    int any = 0;
    for (int l = 1; l <= 4; l++)
        any |= F.cfg.ckpt_min[l] > 0;
    if (!any)
        return FTI_SCES;
    /* The ranks' clocks differ: all decide on the largest elapsed time. */
    double mine = MPI_Wtime() - F.t0, elapsed = 0;
    int mrc = MPI_Allreduce(&mine, &elapsed, 1, MPI_DOUBLE, MPI_MAX, F.comm);
    if (mrc != MPI_SUCCESS) {
        fti_say(FTI_EROR, 1, "FTI_Snapshot: MPI_Allreduce failed (%d)", mrc);
        return FTI_NSCS;
    }
    /* The highest level whose interval has passed again; a checkpoint at one
     * level serves the lower levels' intervals too. */
    int due = 0;
    long long now[5] = {0};
    for (int l = 4; l >= 1; l--) {
        if (F.cfg.ckpt_min[l] <= 0)
            continue;
        now[l] = (long long)floor(elapsed / (F.cfg.ckpt_min[l] * F.minute));
        if (!due && now[l] > F.ticks[l])
            due = l;
    }
    if (!due)
        return FTI_SCES;
    for (int l = 1; l <= 4; l++)
        F.ticks[l] = now[l];
    return FTI_Checkpoint(++F.snap_id, due);
}

int FTI_RecoverVarInit(void)
{
    if (!F.init)
        return not_init("FTI_RecoverVarInit");
    if (!have_checkpoint()) {
        fti_say(FTI_EROR, 1, "FTI_RecoverVarInit: there is no checkpoint to recover from (fresh start)");
        return FTI_NREC;
    }
    F.rv_failed = 0;
    return FTI_SCES;
}

int FTI_RecoverVar(int id)
{
    if (!F.init)
        return not_init("FTI_RecoverVar");
    if (crpm_ok(crpm_recover_var(id), "FTI_RecoverVar"))
        return FTI_SCES;
    F.rv_failed = 1;
    return FTI_NREC;
}

int FTI_RecoverVarFinalize(void)
{
    if (!F.init)
        return not_init("FTI_RecoverVarFinalize");
    /* The application has recovered what it wanted; after a failed
     * FTI_RecoverVar (a variable that grew) the recovery stays due, so that
     * FTI_Realloc resizes and a retry can read it. */
    if (F.rv_failed) {
        F.rv_failed = 0;
        return FTI_NSCS;
    }
    F.pending = 0;
    return FTI_SCES;
}

int64_t FTI_GetStoredSize(int id)
{
    if (!F.init) {
        not_init("FTI_GetStoredSize");
        return 0;
    }
    int64_t bytes = 0;
    if (!have_checkpoint() || crpm_stored_size(id, &bytes) != CRPM_SUCCESS)
        return 0;
    return bytes;
}

void *FTI_Realloc(int id, void *ptr)
{
    const char *fn = "FTI_Realloc";
    if (!F.init) {
        not_init(fn);
        return ptr;
    }
    if (!F.pending)
        return ptr; /* as in FTI: only while a recovery is due */
    var_rec *v = protected_var(fn, id);
    crpm_type_t ct;
    int64_t bytes = 0;
    if (!v || type_of(v->type, &ct) != 0 || crpm_stored_size(id, &bytes) != CRPM_SUCCESS)
        return ptr;
    if (bytes == 0 || bytes % ct.size != 0) {
        fti_say(FTI_WARN, 1, "%s(%d): stored size %lld is not a positive multiple of the element size %lld; "
            "not reallocated", fn, id, (long long)bytes, (long long)ct.size);
        return ptr;
    }
    void *np = realloc(ptr, (size_t)bytes);
    if (!np) {
        fti_say(FTI_EROR, 1, "%s(%d): cannot allocate %lld bytes", fn, id, (long long)bytes);
        return NULL;
    }
    if (FTI_Protect(id, np, bytes / ct.size, v->type) != FTI_SCES)
        return NULL; /* np stays allocated but unprotected: the caller sees the failure */
    return np;
}

/* ---- init / finalize -------------------------------------------------------- */
/* Rank 0 reads the whole file; every rank gets the text. */
static int read_config(MPI_Comm comm, const char *file, char **text, char *err, size_t errlen)
{
    long long len = -1;
    char *buf = NULL;
    int rank;
    MPI_Comm_rank(comm, &rank);
    if (rank == 0) {
        FILE *f = file ? fopen(file, "rb") : NULL;
        if (!f) {
            snprintf(err, errlen, "FTI config %s: cannot open: %s", file ? file : "(NULL)",
                     file ? strerror(errno) : "no file name given");
        } else {
            size_t cap = 0, n = 0;
            for (;;) { /* room for one more byte and the terminator, until a short read */
                if (CRPM_GROW(buf, cap, n + 2, 4096)) {
                    free(buf);
                    buf = NULL;
                    break;
                }
                n += fread(buf + n, 1, cap - n - 1, f);
                if (n < cap - 1)
                    break;
            }
            if (!buf || ferror(f)) {
                snprintf(err, errlen, "FTI config %s: cannot read it", file);
            } else if (memchr(buf, '\0', n) || n > (1u << 24)) {
                snprintf(err, errlen, "FTI config %s: not a text configuration file", file);
            } else {
                buf[n] = '\0';
                len = (long long)n;
            }
            fclose(f);
        }
    }
    if (MPI_Bcast(&len, 1, MPI_LONG_LONG, 0, comm) != MPI_SUCCESS) {
        free(buf);
        snprintf(err, errlen, "FTI_Init: MPI_Bcast failed");
        return -1;
    }
    if (len < 0) {
        free(buf);
        MPI_Bcast(err, (int)errlen, MPI_CHAR, 0, comm);
        return -1;
    }
    if (rank != 0 && !(buf = malloc((size_t)len + 1)))
        len = 0; /* the broadcast still has to happen; reported below */
    if (MPI_Bcast(buf ? buf : err, buf ? (int)len : 0, MPI_CHAR, 0, comm) != MPI_SUCCESS || !buf) {
        free(buf);
        snprintf(err, errlen, "FTI_Init: out of memory or MPI_Bcast failed while reading %s", file);
        return -1;
    }
    buf[len] = '\0';
    *text = buf;
    return 0;
}

/* dst (n bytes) gets src, cut to fit (FTI's fields are FTI_BUFS long). */
static void copy_cut(char *dst, size_t n, const char *src)
{
    size_t len = strnlen(src, n - 1);
    memcpy(dst, src, len);
    dst[len] = '\0';
}

/* FTI_GetConfig: the file read and parsed as FTI_Init reads it (collective
 * over comm: rank 0 reads, all parse the same text). */
FTIT_allConfiguration FTI_GetConfig(const char *configFile, MPI_Comm comm)
{
    FTIT_allConfiguration a;
    memset(&a, 0, sizeof a);
    a.configuration.ioMode = -1;
    int mpi = 0, fin = 0;
    MPI_Initialized(&mpi);
    MPI_Finalized(&fin);
    if (!mpi || fin || comm == MPI_COMM_NULL) {
        fti_say(FTI_EROR, 1, "FTI_GetConfig: needs MPI and a communicator");
        return a;
    }
    char err[1024] = "", *text = NULL;
    fti_settings *st = calloc(1, sizeof *st);
    if (!st) {
        fti_say(FTI_EROR, 1, "FTI_GetConfig: out of memory");
        return a;
    }
    int bad = read_config(comm, configFile, &text, err, sizeof err) != 0 ||
              fti_config_parse(text, configFile, st, err, sizeof err) != 0;
    free(text);
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    if (bad) {
        if (rank == 0)
            fti_say(FTI_EROR, 1, "FTI_GetConfig: %s", err);
        free(st);
        return a;
    }
    FTIT_configuration *c = &a.configuration;
    copy_cut(c->cfgFile, sizeof c->cfgFile, configFile);
    c->ioMode = FTI_IO_POSIX + st->ckpt_io - 1;
    c->verbosity = st->verbosity;
    c->saveLastCkpt = st->keep_last_ckpt;
    c->keepL4Ckpt = st->keep_l4_ckpt;
    c->dcpEnabled = st->enable_dcp;
    copy_cut(c->localDir, sizeof c->localDir, st->ckpt_dir);
    copy_cut(c->glbalDir, sizeof c->glbalDir, st->glbl_dir);
    copy_cut(c->metadDir, sizeof c->metadDir, st->meta_dir);
    FTIT_topology *t = &a.topology;
    t->nbProc = size;
    t->myRank = rank;
    t->nodeSize = st->node_size;
    t->nbNodes = (size + st->node_size - 1) / st->node_size;
    t->nbHeads = st->head;
    t->nbApprocs = st->node_size;
    t->groupSize = st->group_size;
    t->nodeID = rank / st->node_size;
    for (int l = 1; l <= 4; l++) {
        a.checkpoints[l].ckptIntv = st->ckpt_min[l];
        a.checkpoints[l].isInline = l == 1 ? 1 : st->inline_l[l];
    }
    free(st);
    return a;
}

static void release(void)
{
    icp_drop();
    for (int i = 0; i < F.ntypes; i++)
        free(F.types[i].fields);
    free(F.types);
    free(F.vars);
    free(F.ids);
    free(F.crpm_text);
    int fin = 0;
    MPI_Finalized(&fin);
    if (F.have_comm && !fin)
        MPI_Comm_free(&F.comm);
    int own = F.own_world;
    memset(&F, 0, sizeof F);
    F.own_world = own;
}

/* The number of nodes, found as libcrpm finds them (lib/mpi/topology.c):
 * node_size consecutive ranks, or MPI's shared-memory nodes; *even = 1 when
 * they all hold the same number of ranks (level 3's groups need that; all
 * nodes rather than each group's is the simpler, stricter test).
 * Collective. */
static int count_nodes(int *nnodes, int *even)
{
    if (F.cfg.node_size_set) {
        *nnodes = (F.nranks + F.cfg.node_size - 1) / F.cfg.node_size;
        *even = F.nranks % F.cfg.node_size == 0;
        return 0;
    }
    MPI_Comm nc;
    int lr = 0, ls = 0;
    if (MPI_Comm_split_type(F.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &nc) != MPI_SUCCESS)
        return -1;
    MPI_Comm_rank(nc, &lr);
    MPI_Comm_size(nc, &ls);
    MPI_Comm_free(&nc);
    /* node count as a sum of first ranks; sizes as max of size and of -size */
    int first = lr == 0, mine[2] = {ls, -ls}, most[2];
    if (MPI_Allreduce(&first, nnodes, 1, MPI_INT, MPI_SUM, F.comm) != MPI_SUCCESS ||
        MPI_Allreduce(mine, most, 2, MPI_INT, MPI_MAX, F.comm) != MPI_SUCCESS)
        return -1;
    *even = most[0] == -most[1];
    return 0;
}

/* Seconds per configured minute: 60, or CRPM_FTI_MINUTE (tests and demos
 * shorten FTI's minute-based intervals without another config file). */
static int minute_seconds(double *out, char *err, size_t errlen)
{
    const char *v = getenv("CRPM_FTI_MINUTE");
    *out = 60.0;
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d > 0) || !isfinite(d)) {
        snprintf(err, errlen, "environment CRPM_FTI_MINUTE='%s': expected seconds > 0", v);
        return -1;
    }
    *out = d;
    return 0;
}

/* A second FTI_Init without FTI_Finalize: FTI's restart in the same process
 * (the program starts over from its newest checkpoint without a crash).  The
 * libcrpm session goes on: the configuration must make the same libcrpm
 * configuration; the variables stay protected; FTI_Status() is 1 when a
 * checkpoint exists (taken or found in this process), and FTI_Recover reads
 * the newest.  Collective over the first FTI_Init's communicator. */
static int reinit(const char *configFile)
{
    char err[1024] = "", *text = NULL, *again = NULL;
    fti_settings *st = calloc(1, sizeof *st);
    int bad = !st || read_config(F.comm, configFile, &text, err, sizeof err) != 0 ||
              fti_config_parse(text, configFile, st, err, sizeof err) != 0;
    free(text);
    if (!bad && !(again = fti_config_crpm_text(st, F.l3)))
        snprintf(err, sizeof err, "FTI_Init: out of memory");
    int same = again && strcmp(again, F.crpm_text) == 0, all_same = 0;
    free(again);
    if (MPI_Allreduce(&same, &all_same, 1, MPI_INT, MPI_MIN, F.comm) != MPI_SUCCESS)
        all_same = 0;
    if (!all_same) {
        if (F.rank == 0)
            fti_say(FTI_EROR, 1, "FTI_Init: FTI is already initialised %s%s", err[0] ? "and " : "with another "
                "configuration (FTI_Finalize first to change it)", err);
        free(st);
        return FTI_NSCS;
    }
    if (st->verbosity != F.cfg.verbosity)
        F.cfg.verbosity = st->verbosity;
    free(st);
    icp_drop();
    F.pending = have_checkpoint();
    F.t0 = MPI_Wtime();
    memset(F.ticks, 0, sizeof F.ticks);
    fti_say(FTI_INFO, 0, "FTI_Init again without FTI_Finalize: restart in the same process, %s",
            F.pending ? "a checkpoint is available (FTI_Status() = 1)" : "no checkpoint yet");
    return FTI_SCES;
}

int FTI_Init(const char *configFile, MPI_Comm globalComm)
{
    int mpi = 0, fin = 0;
    MPI_Initialized(&mpi);
    MPI_Finalized(&fin);
    if (!mpi || fin) {
        fti_say(FTI_EROR, 1, "FTI_Init: MPI is not initialised");
        return FTI_NSCS;
    }
    if (globalComm == MPI_COMM_NULL) {
        fti_say(FTI_EROR, 1, "FTI_Init: the communicator is MPI_COMM_NULL");
        return FTI_NSCS;
    }
    if (F.init)
        return reinit(configFile);
    /* FTI sets FTI_COMM_WORLD before anything can fail: a program whose
     * FTI_Init was refused still uses it.  The given communicator until a
     * duplicate replaces it below. */
    if (F.own_world)
        MPI_Comm_free(&FTI_COMM_WORLD);
    F.own_world = 0;
    FTI_COMM_WORLD = globalComm;
    release();
    if (MPI_Comm_dup(globalComm, &F.comm) != MPI_SUCCESS) {
        fti_say(FTI_EROR, 1, "FTI_Init: MPI_Comm_dup failed");
        return FTI_NSCS;
    }
    F.have_comm = 1;
    MPI_Comm_set_errhandler(F.comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(F.comm, &F.rank);
    MPI_Comm_size(F.comm, &F.nranks);

    /* Every rank parses the same text, so every rank reaches the same verdict
     * and rank 0 alone explains it. */
    char err[1024] = "", *text = NULL;
    int bad = read_config(F.comm, configFile, &text, err, sizeof err) != 0 ||
              fti_config_parse(text, configFile, &F.cfg, err, sizeof err) != 0 ||
              minute_seconds(&F.minute, err, sizeof err) != 0;
    free(text);
    if (bad) {
        if (F.rank == 0)
            fti_say(FTI_EROR, 1, "%s", err);
        release();
        return FTI_NSCS;
    }
    if (count_nodes(&F.nnodes, &F.nodes_even) != 0) {
        fti_say(FTI_EROR, 1, "FTI_Init: finding the nodes (MPI_Comm_split_type) failed");
        release();
        return FTI_NSCS;
    }
    /* libcrpm's group_size accepts 2 .. 255 */
    int g = F.cfg.group_size;
    F.l3 = g >= 2 && g <= 255 && F.nnodes >= g && F.nnodes % g == 0 && F.nodes_even;
    char *crpm_text = fti_config_crpm_text(&F.cfg, F.l3);
    int oom = !crpm_text, any_oom = 1; /* agreed, so that no rank waits in crpm_init alone */
    MPI_Allreduce(&oom, &any_oom, 1, MPI_INT, MPI_MAX, F.comm);
    if (any_oom) {
        fti_say(FTI_EROR, 1, "FTI_Init: out of memory%s", oom ? "" : " on another rank");
        free(crpm_text);
        release();
        return FTI_NSCS;
    }
    /* staging's directory (enable_staging = 1), agreed before libcrpm opens anything */
    const char *stage_base = F.cfg.ckpt_dir[0] ? F.cfg.ckpt_dir : getenv("CRPM_CKPT_DIR");
    int sok = fti_stage_init(stage_base ? stage_base : ".", F.rank, F.cfg.enable_staging) == FTI_SCES, all_sok = 0;
    if (MPI_Allreduce(&sok, &all_sok, 1, MPI_INT, MPI_MIN, F.comm) != MPI_SUCCESS || !all_sok) {
        fti_say(FTI_EROR, 1, "FTI_Init: staging could not be set up%s", sok ? " on another rank" : "");
        fti_stage_finalize();
        free(crpm_text);
        release();
        return FTI_NSCS;
    }
    char origin[FTI_CFG_PATH_MAX + 64];
    snprintf(origin, sizeof origin, "%s (FTI configuration)", configFile);
    int rc = crpm_init_text(crpm_text, origin, globalComm);
    F.crpm_text = crpm_text;
    if (!crpm_ok(rc, "FTI_Init")) {
        fti_stage_finalize();
        release();
        return rc == CRPM_ERR_CONFIG || rc == CRPM_ERR_INVAL ? FTI_NSCS : FTI_NREC;
    }
    if (MPI_Comm_dup(globalComm, &FTI_COMM_WORLD) != MPI_SUCCESS) {
        FTI_COMM_WORLD = globalComm;
        fti_say(FTI_EROR, 1, "FTI_Init: MPI_Comm_dup failed");
        fti_stage_finalize();
        crpm_finalize();
        release();
        return FTI_NSCS;
    }
    F.own_world = 1;
    F.init = 1;
    F.pending = crpm_status() > 0;
    F.t0 = MPI_Wtime();

    if (F.cfg.head)
        fti_say(FTI_WARN, 0, "head = 1: libcrpm runs without head processes; all %d ranks run the application and "
            "FTI_COMM_WORLD holds them all", F.nranks);
    /* FTI's own keys (a standard FTI file has dozens) are a notice, not a
     * warning: the file is FTI's and stays valid for FTI */
    if (F.cfg.ignored[0])
        fti_say(FTI_INFO, 0, "%s: keys with no meaning in libcrpm, ignored: %s%s", configFile, F.cfg.ignored,
            F.cfg.restart_keys ? " (a restart is decided from the checkpoints found; the file is never rewritten)"
                               : "");
    fti_say(FTI_INFO, 0, "FTI on libcrpm: %d ranks, %s", F.nranks,
        F.pending ? "a checkpoint is available (FTI_Status() = 1)" : "fresh start");
    return FTI_SCES;
}

/* keep_last_ckpt = 1 with glbl_dir: FTI moves the last checkpoint to the
 * global directory at finalize, because node-local storage does not outlive
 * a job.  Here the newest checkpoint, unless it is level 4 already, is read
 * back into buffers of its own (the variables may have changed since) and
 * written at level 4; libcrpm's finalize then keeps that level-4 copy alone
 * (lib/api.c).  When some variable cannot be read back (protected after the
 * last checkpoint, say), every rank keeps its node-local checkpoint as
 * before, and says so.  Collective.  *bufs: the buffers, freed by the caller
 * after crpm_finalize. */
static void keep_in_global(void ***bufs)
{
    *bufs = NULL;
    if (!F.cfg.keep_last_ckpt || !F.cfg.glbl_dir[0] || !have_checkpoint() || F.nvars == 0)
        return;
    if (F.last_cl == CRPM_L4 || (F.last_cl == 0 && crpm_status() == CRPM_STATUS_L4))
        return; /* the newest checkpoint is in glbl_dir already */
    void **buf = calloc((size_t)F.nvars, sizeof *buf);
    int ok = buf != NULL, all_ok = 0;
    for (int i = 0; ok && i < F.nvars; i++) {
        var_rec *v = &F.vars[i];
        crpm_type_t ct;
        int64_t bytes = 0;
        ok = type_of(v->type, &ct) == 0 && crpm_stored_size(v->id, &bytes) == CRPM_SUCCESS && bytes % ct.size == 0 &&
             (buf[i] = malloc(bytes ? (size_t)bytes : 1)) != NULL &&
             crpm_protect(v->id, buf[i], bytes / ct.size, ct) == CRPM_SUCCESS && crpm_recover_var(v->id) == CRPM_SUCCESS;
    }
    if (MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, F.comm) != MPI_SUCCESS)
        all_ok = 0;
    if (!all_ok)
        fti_say(FTI_WARN, 0, "FTI_Finalize: keep_last_ckpt = 1: the last checkpoint could not be read back on every "
                "rank%s%s; it stays node-local", ok ? "" : ": ", ok ? "" : crpm_last_error());
    else if (!crpm_ok(crpm_checkpoint(F.last_id, CRPM_L4), "FTI_Finalize (keep_last_ckpt: the last checkpoint to "
                                                            "glbl_dir)"))
        fti_say(FTI_WARN, 0, "FTI_Finalize: keep_last_ckpt = 1: the last checkpoint stays node-local");
    else
        fti_say(FTI_INFO, 0, "FTI_Finalize: keep_last_ckpt = 1: the last checkpoint is written to %s",
                F.cfg.glbl_dir);
    *bufs = buf;
}

int FTI_Finalize(void)
{
    if (!F.init)
        return not_init("FTI_Finalize");
    fti_stage_finalize(); /* the queued files are moved first */
    int keep = F.cfg.keep_last_ckpt, nbufs = F.nvars;
    void **bufs;
    keep_in_global(&bufs);
    int rc = crpm_finalize();
    for (int i = 0; bufs && i < nbufs; i++)
        free(bufs[i]);
    free(bufs);
    if (rc >= 0)
        fti_say(FTI_INFO, 0, "FTI_Finalize: the checkpoints are %s",
                keep ? "kept (keep_last_ckpt = 1)" : "removed");
    release();
    fti_global_reset();
    return crpm_ok(rc, "FTI_Finalize") ? FTI_SCES : FTI_NSCS;
}
