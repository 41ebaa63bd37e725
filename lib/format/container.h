/* Container format layer: open, validate, commit and inspect one rank's
 * container file (on-media layout in format.h).  The engine (engine.h)
 * checkpoints and recovers through it; tools read containers through it. */
#ifndef CRPM_CONTAINER_H
#define CRPM_CONTAINER_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include "crpm_types.h"
#include "array.h"
#include "idindex.h"
#include "error.h"
#include "persist.h"
#include "format.h"

typedef struct crpm_container crpm_container;

/* The layout record of a file (format.h, struct crpm_layout_rec). */
typedef struct crpm_layout {
    int role;                  /* enum crpm_file_role */
    int node_size, node, nnodes;
    int group_size, l3_parity;
} crpm_layout;

/* crpm_open_opts.change_tracking */
enum crpm_track_mode {
    CRPM_TRACK_COMPARE = 0,      /* every block */
    CRPM_TRACK_PAGEMAP = 1,      /* pages the kernel saw written (engine/track.h) */
    CRPM_TRACK_INSTR = 2,        /* blocks marked by code compiled with the pass (engine/marks.h) */
    CRPM_TRACK_INSTR_VERIFY = 3, /* the same, every block also compared: an unmarked change fails */
};

typedef struct crpm_open_opts {
    const char *path;
    uint64_t segment_size;     /* power of two; 0 = default 2 MiB (checked on open if nonzero) */
    uint64_t block_size;       /* power of two; 0 = default 256 B */
    const char *job_name;      /* identity: written on create, checked on open if non-NULL */
    int32_t rank, nranks;      /* identity: checked on open when nranks > 0 */
    int persistence;           /* enum crpm_persistence */
    const crpm_backend *backend; /* overrides persistence (tests: &crpm_backend_sim) */
    int create;                /* 1: create if missing; 0: must exist */
    uint64_t slot_size;        /* bytes per metadata slot on create; 0 = room for 64 GiB */
    int change_tracking;       /* CRPM_TRACK_*: which blocks a checkpoint compares */
    int read_only;             /* 1: tools: map O_RDONLY/PROT_READ (backend and create ignored) and
                                * take a consistent view of the committed epoch although a live job
                                * may be checkpointing into the file (see crpm_container_snapshot) */
    const uint8_t *run_id;     /* CRPM_RUN_ID_LEN bytes: written on create (NULL: random),
                                  checked on open when non-NULL (CRPM_ERR_IDENTITY) */
    int no_checksums;          /* benchmark baseline: create without data CRCs (CRPM_TEST_HOOKS builds only,
                                * else CRPM_ERR_NOTSUP) */
    int huge_pages;            /* 1: recovery asks for transparent huge pages on the arrays it fills */
    const crpm_layout *layout; /* written on create (NULL: none) */
} crpm_open_opts;

/* Hook points for tests (process-kill injection). */
enum crpm_hook_point { CRPM_HOOK_BEFORE_DATA = 1, CRPM_HOOK_AFTER_DATA, CRPM_HOOK_AFTER_COMMIT };
typedef void (*crpm_hook_fn)(void *arg, int point, uint64_t epoch);

/* Opens (or creates) the container file without the engine's change
 * tracking; crpm_container_open (engine.h) is the full open. */
int crpm_format_open(const crpm_open_opts *o, crpm_container **out, int *created);
void crpm_format_close(crpm_container *c);

uint64_t crpm_container_epoch(const crpm_container *c);      /* 0 = nothing committed */
int crpm_container_prev_available(const crpm_container *c);  /* epoch-1 is recoverable */
uint64_t crpm_container_user_id(const crpm_container *c);    /* application's checkpoint id */
/* The levels (bit n: checkpoint level n) whose checkpoints the run wrote up
 * to the committed epoch, recorded in its metadata so that a restart knows
 * what redundancy the job had even when every file of a level was lost (0
 * in containers of format version 2).  note adds levels to the next
 * checkpoint's record. */
uint32_t crpm_container_levels(const crpm_container *c);
void crpm_container_note_levels(crpm_container *c, uint32_t levels);
/* Durably make epoch-1 the committed epoch. */
int crpm_container_rollback(crpm_container *c);
/* A container just made (committed epoch 1, under a temporary name) takes
 * the job's epoch: its committed state is rewritten as `epoch`. */
int crpm_container_renumber(crpm_container *c, uint64_t epoch);
/* The user id the slot of epoch-1 records (prev_available only). */
int crpm_container_prev_user_id(crpm_container *c, uint64_t *user_id);

/* Saved regions of the committed epoch (for inspection, export, level 4);
 * the descriptor's ptr and name are NULL. */
int crpm_container_nregions(const crpm_container *c);
int crpm_container_region(const crpm_container *c, int idx, crpm_array *out);
/* Copies saved region idx (committed epoch) into dst (its bytes), checking
 * every chunk's CRC32C as it goes: CRPM_ERR_CORRUPT names the array id and
 * byte offset of the first bad chunk, and dst then holds partial data.  On a
 * read-only container: from the snapshot if one was taken, otherwise from the
 * file, failing (CRPM_ERR_IO, "changed while it was read") rather than
 * returning bytes of another epoch when a live job committed meanwhile. */
int crpm_container_read_region(const crpm_container *c, int idx, void *dst);
/* Read-only containers: takes the committed epoch's metadata and arrays
 * into memory as one consistent view (the commit word and the committed
 * slot's header are read before and after copying; when a live job
 * committed in between, the view is taken again, a bounded number of times
 * with short sleeps, then CRPM_ERR_IO "kept changing").  The container then
 * describes that view and read_region copies from memory. */
int crpm_container_snapshot(crpm_container *c);
/* A reader of an older committed epoch (the asynchronous levels' drain,
 * mpi/background.h): *view describes epoch `epoch` of c from its slot
 * (epoch % 2) and reads its regions like c's committed ones.  Valid while
 * the copies and slot of that epoch stand, i.e. until checkpoint epoch+2
 * starts, and while c's mapping does not move (see before_remap).  Only
 * read ops and crpm_container_view_free on it. */
int crpm_container_epoch_view(crpm_container *c, uint64_t epoch, crpm_container **view);
void crpm_container_view_free(crpm_container *view);
/* Called before the file's mapping moves (the pool grows): a reader of an
 * epoch view on another thread must be done first.  NULL: none. */
void crpm_container_set_remap_hook(crpm_container *c, void (*fn)(void *arg), void *arg);

/* Prints superblock, geometry, epochs, regions and checksum verdicts of a
 * container file; returns CRPM_SUCCESS or the code of the first failed check.
 * With verify, also checks the CRC of every data chunk of the committed epoch. */
int crpm_inspect_file(const char *path, FILE *out);
int crpm_inspect_file_verify(const char *path, FILE *out, int verify);
/* Checks the CRC32C of every data chunk of the committed epoch; reports each
 * bad chunk (array id, byte offset) to out (may be NULL) and returns
 * CRPM_ERR_CORRUPT naming the first, or CRPM_SUCCESS. */
int crpm_container_verify(const crpm_container *c, FILE *out);
/* Restart: checks the data CRCs of the committed epoch and, when epoch-1
 * is recoverable, of that epoch too (segments both share are read once).
 * *cur_bad / *prev_bad tell which fails; msg gets the first damage found
 * (the committed epoch's first).  Returns an error only when it could not
 * check (out of memory). */
int crpm_container_verify_epochs(crpm_container *c, int *cur_bad, int *prev_bad, char *msg, size_t msgn);
/* The run identity stored at creation (CRPM_RUN_ID_LEN bytes). */
void crpm_container_run_id(const crpm_container *c, uint8_t out[CRPM_RUN_ID_LEN]);
/* Its layout record: 1 (and *out), 0 when it has none, CRPM_ERR_CORRUPT
 * when the record's checksum fails. */
int crpm_container_layout(const crpm_container *c, crpm_layout *out);
/* What restart needs to know of a checkpoint file before opening it, read
 * from its header page alone (no mapping, no metadata slot). */
typedef struct crpm_header_facts {
    char job[CRPM_JOB_MAX];
    int32_t rank, nranks;
    uint64_t epoch;            /* committed (0: none) */
    int in_progress;
    int has_layout;            /* 1: layout holds its record; 0: none; -1: record damaged */
    crpm_layout layout;
} crpm_header_facts;
/* CRPM_SUCCESS, or the error that opening the file would give for its
 * superblock or commit word (a file that is no container of this format). */
int crpm_header_read(const char *path, crpm_header_facts *out);

void crpm_container_set_hook(crpm_container *c, crpm_hook_fn fn, void *arg);
crpm_media *crpm_container_media(crpm_container *c);
uint64_t crpm_container_segment_size(const crpm_container *c);
uint64_t crpm_container_block_size(const crpm_container *c);
/* Identity stored at creation: job name (NUL-terminated into job[len]),
 * rank and number of ranks. */
void crpm_container_identity(const crpm_container *c, char *job, size_t len, int32_t *rank, int32_t *nranks);

/* ---- level-2 partner copies (replica.c) -------------------------------------
 * A partner copy is a byte-identical mirror of another rank's container file,
 * kept up to date by replaying the owner's stores (the write log, persist.h)
 * under the owner's protocol: the commit word marks "in progress" before
 * anything the previous epoch needs is overwritten, and flips to the new
 * epoch only after the data is durable.  Opened like any container (the
 * identity is the owner's). */
/* Before a stage: durable "in progress" and the owner's file size. */
int crpm_replica_begin(crpm_container *r, uint64_t size);
/* Makes the stored bytes durable, then commits `epoch` (as the owner did). */
int crpm_replica_commit(crpm_container *r, uint64_t epoch);
/* Whole-file transfers write the commit word last, apart from the data:
 * [CRPM_COMMIT_OFF, +8) is never part of a transferred range. */
#define CRPM_WORD_OFF CRPM_COMMIT_OFF
#define CRPM_WORD_LEN 8u
uint64_t crpm_media_word(const crpm_media *m);
/* Stores the commit word, durably (0 marks a file being rewritten: it does
 * not open as a container until a valid word is stored again). */
void crpm_media_set_word(crpm_media *m, uint64_t word);

/* ---- internals shared by container.c (format, commit) and the engine ---- */
typedef struct crpm_seg {
    uint32_t phys[2];
    uint32_t state;
} crpm_seg;

/* A pack: one segment shared by small arrays (format.h, version 3). */
typedef struct crpm_pack {
    crpm_seg seg;            /* its two copies */
    uint64_t len;            /* bytes in use (what its CRC table covers) */
} crpm_pack;

typedef struct crpm_region {
    /* as saved in the committed epoch (saved == 0: not in it) */
    int saved;
    int32_t id;
    int32_t type_code;
    uint64_t elem_size;
    uint64_t count;
    uint64_t nsegs;          /* its own segments (0 when packed) */
    crpm_seg *segs;
    uint32_t pack;           /* its pack in c->packs, or CRPM_NO_PACK */
    uint64_t pack_off;       /* packed: where its bytes start in the pack */
    /* as protected now (prot.elem_size == 0: not protected; prot.name is
     * NULL); becomes the saved description when the next checkpoint commits */
    crpm_array prot;
    /* The engine's state of the region (change tracking: engine/engine_int.h).
     * Opaque here: the format layer only carries it along when it reloads
     * the region table (crpm_load_slot). */
    struct crpm_eregion *eng;
} crpm_region;

struct crpm_container {
    crpm_media media;
    char *path;
    struct crpm_super sb;
    uint64_t epoch;          /* committed */
    int in_progress;         /* commit word's flag */
    int prev_ok;
    uint64_t user_id;
    uint32_t levels;         /* the committed epoch's record of the levels the run used (bit n: level n) */
    uint32_t levels_add;     /* levels the next checkpoint adds to it */
    uint64_t nphys;          /* segments the pool holds (file extent) */
    crpm_region *regions;
    int nregions, cap_regions;
    crpm_pack *packs;        /* the committed epoch's packs */
    uint32_t npacks;
    crpm_idindex rindex;     /* regions by id */
    uint8_t *used;           /* per physical segment: referenced or allocated */
    uint64_t used_cap;
    uint32_t *reserved;      /* per physical segment: bytes known to have storage */
    uint32_t *crc_len;       /* per physical segment: its CRC table is known to describe its
                                first crc_len bytes (0: unknown, rewrite the whole table) */
    uint64_t hint;           /* where the next free-segment search starts */
    uint64_t generation;     /* counts reloads of the committed state (open, rollback, renumber):
                                what the engine knew about the copies is then void */
    struct crpm_engine *eng; /* the engine's state (engine/engine_int.h); NULL when the container
                                was opened by the format layer alone (tools) */
    crpm_hook_fn hook;
    void *hook_arg;
    void (*before_remap)(void *arg); /* crpm_container_set_remap_hook */
    void *remap_arg;
    int read_only;            /* opened with opts.read_only */
    int huge_pages;           /* opts.huge_pages */
    unsigned char view_hdr[sizeof(struct crpm_slot_hdr)]; /* committed slot's header in the view */
    char *snap;               /* crpm_container_snapshot: the saved regions' bytes ... */
    uint64_t *snap_off;       /* ... region i at snap + snap_off[i] */
};

/* container.c */
uint64_t crpm_commit_word(uint64_t nonce, uint64_t epoch, int in_progress);
int crpm_write_commit(crpm_container *c, uint64_t epoch, int in_progress);
/* Where the regions' bytes lie in an epoch being written: per region its
 * segments (NULL: packed, or not protected) or its pack and offset, and the
 * packs. */
typedef struct crpm_seg_plan {
    crpm_seg **segs;
    uint32_t *pack;          /* CRPM_NO_PACK: its own segments */
    uint64_t *pack_off;
    crpm_pack *packs;
    uint32_t npacks;
} crpm_seg_plan;
void crpm_seg_plan_free(crpm_seg_plan *l, int nregs);
/* Writes the slot of `epoch`: the protected regions (prot) laid out as lay says. */
int crpm_write_slot(crpm_container *c, uint64_t epoch, uint64_t user_id, uint64_t nphys,
                    const crpm_region *regs, int nregs, const crpm_seg_plan *lay);
int crpm_load_slot(crpm_container *c, uint64_t epoch);
int crpm_grow_pool(crpm_container *c, uint64_t min_nphys);
int crpm_reserve_seg(crpm_container *c, uint32_t phys, uint64_t len);
void crpm_mark_used(crpm_container *c);
char *crpm_seg_addr(crpm_container *c, uint32_t phys);
/* checksum.c: bytes per physical segment (data + CRC table; chunk 0 = no
 * CRCs), and the CRC chunk for a geometry. */
uint64_t crpm_crc_stride(uint64_t seg, uint64_t chunk);
uint64_t crpm_crc_chunk_for(uint64_t seg, uint64_t blk);
/* Stores (in the mapping, not yet flushed) the CRCs of chunks [c0, c1) of
 * physical segment phys, whose first len bytes will hold `data` (the
 * segment's bytes).  crpm_crc_flush then makes a range of entries durable at
 * the next drain of m (the container's media, or a worker's view of it):
 * one flush per segment, not one per run.  No-ops without
 * checksums. */
void crpm_crc_compute(crpm_container *c, uint32_t phys, const char *data, uint64_t len, uint64_t c0, uint64_t c1);
void crpm_crc_flush(crpm_container *c, crpm_media *m, uint32_t phys, uint64_t c0, uint64_t c1);
/* Checks the CRCs of the chunks of physical segment phys that cover its
 * bytes [off, off+len), whole chunks, of which the table covers the first
 * `covered` bytes (the region's bytes in the segment, or a pack's length).
 * -1 when all match (or the container has no checksums), else the segment
 * offset of the first bad chunk. */
int64_t crpm_crc_check(const crpm_container *c, uint32_t phys, uint64_t off, uint64_t len, uint64_t covered);
/* Only the committed copies' CRC tables are trusted (after open, rollback, a
 * failed checkpoint). */
void crpm_crc_trust_committed(crpm_container *c);
void crpm_free_regions(crpm_container *c);
/* Shared by container.c, slot.c and view.c. */
uint64_t crpm_fmt_now_ns(void);
uint32_t crpm_meta_crc(const void *p, size_t n, uint32_t seed);
uint64_t crpm_nsegs_for(uint64_t bytes, uint64_t seg);
void crpm_compute_prev(crpm_container *c);
/* Parses slot epoch % 2: its regions, packs (packs may be NULL: not
 * wanted), user id and pool size. */
int crpm_parse_slot(crpm_container *c, uint64_t epoch, crpm_region **out, int *nout, crpm_pack **packs,
                    uint32_t *npacks, uint64_t *user_id, uint64_t *nphys);
/* The committed copies of saved region r: *n entries; byte o of r lies in
 * entry o / segment_size, at offset *base + o % segment_size of the entry's
 * committed copy (a packed region: one entry, its pack's, *base its offset). */
const crpm_seg *crpm_region_segs(const crpm_container *c, const crpm_region *r, uint64_t *n, uint64_t *base);
/* Packing is possible (version 3 and later). */
static inline int crpm_can_pack(const crpm_container *c) { return c->sb.version >= 3; }
int crpm_view_load(crpm_container *c, int with_data);

/* Copies saved region r of the committed epoch into host memory dst,
 * checking every chunk's CRC on the way (CRPM_ERR_CORRUPT names the array
 * and the byte offset; what arrived so far stays). */
int crpm_copy_saved(crpm_container *c, const crpm_region *r, void *dst);
/* Bytes [off, off+len) of saved region r into dst, every CRC chunk they touch
 * checked (CRPM_ERR_CORRUPT names the array and offset). */
int crpm_copy_saved_range(crpm_container *c, const crpm_region *r, uint64_t off, uint64_t len, void *dst);
/* The same in parts (recovery split over workers): crpm_copy_saved_begin
 * first (advice for the whole array), then any parts in any order on any
 * threads: segments [k0, k1) of r (a packed region has one part, 0..1)
 * into `to`, host pages first touched by the part that fills them; arrays
 * not in host memory go through bounce, a segment of host memory. */
void crpm_copy_saved_begin(crpm_container *c, const crpm_region *r, const crpm_array *to);
int crpm_copy_saved_part(crpm_container *c, const crpm_region *r, const crpm_array *to, uint64_t k0, uint64_t k1,
                         char *bounce);
#endif
