/* On-media format of a libcrpm container (version 3; version 2 is read and
 * written too, without packing).
 *
 *   [0, 4096)          superblock (immutable after creation) and, at
 *                      COMMIT_OFF, the 8-byte commit word
 *   slot_offset[0/1]   two metadata slots; epoch e is described by slot e % 2
 *   data_offset        pool of physical segments, allocated on demand; each
 *                      takes seg_stride bytes: segment_size bytes of data, then
 *                      its CRC table (one CRC32C, ISA-L crc32_iscsi, per
 *                      crc_chunk bytes of the data, seeded with
 *                      ~(lo32(nonce) ^ hi32(nonce) ^ phys * 0x9E3779B1 ^
 *                      chunk * 0x85EBCA77); a segment's last chunk covers
 *                      only the bytes its region has there, a pack's last
 *                      chunk only the pack's length)
 *
 * crc_chunk = max(block_size, 1 KiB) (at most segment_size): with small blocks
 * a CRC per block would make the tables large, and ISA-L's CRC32C runs at
 * ~9 GB/s on 256-B pieces but ~35 GB/s on 1-KiB ones (measured here); a
 * changed block costs the CRC of its whole chunk, read from DRAM where it is
 * cached.  A checkpoint
 * writes a copy's CRCs together with its data, into the copy that does not
 * hold the committed state, under the same fence; the committed copy and its
 * table are never written, so they always agree unless the media is damaged.
 *
 * Packing (version 3).  An array of at most min(segment_size / 8, 64 KiB)
 * bytes does not get segments of its own: it lies at an 8-byte aligned
 * offset of a pack, a segment shared with other small arrays, with the same
 * two copies and CRC table as any segment (its last chunk ends at the pack's
 * length).  The slot records each pack (its copies and length) and, for each
 * packed array, its pack and offset.  A checkpoint gathers a pack's arrays
 * into one buffer (gaps zero) and writes it like a segment: only the blocks
 * that differ, into the copy that does not hold the committed state; an
 * array keeps its place while it fits, so unchanged arrays cost nothing, and
 * a pack left mostly empty is laid out afresh.  Thousands of scalars thus take
 * one segment and one slot entry each, not two segments each.
 *
 * Version 3 added packing (crpm_slot_packs, the pack fields of
 * crpm_slot_region).  Version 2 added the CRC tables, crc_chunk, seg_stride and
 * run_id.  Version-2 containers are read and keep being written as version 2
 * (no packing: its slots have no room for it); version-1 files are refused
 * (CRPM_ERR_VERSION).
 *
 * A layout record (struct crpm_layout_rec, at CRPM_LAYOUT_OFF in the header
 * page, immutable like the superblock) says what the file is (a rank's
 * container or a level-3 parity container) and the job layout it was made
 * under: node_size, its rank's node, the number of nodes, group_size and
 * l3_parity.  Restart compares it with the configuration before anything
 * else.  It sits apart from the superblock, with its own magic and CRC, so
 * files without it (made before it existed: zeros there) still open and
 * older libraries ignore it.  A partner copy mirrors its owner's record.
 *
 * The commit word is the single atomic commit point: epoch (32 bits), an
 * "in progress" flag (a checkpoint has started overwriting the copies that
 * epoch-1 needs) and a 31-bit check.  Everything is little-endian, as the
 * platforms libpmem supports. */
#ifndef CRPM_FORMAT_H
#define CRPM_FORMAT_H
#include <stdint.h>
#include "fsutil.h" /* CRPM_JOB_MAX */

#define CRPM_MAGIC "CRPMCONT"
#define CRPM_SLOT_MAGIC "CRPMSLOT"
#define CRPM_FORMAT_VERSION 3u
#define CRPM_FORMAT_OLDEST 2u         /* the oldest version read (and written) */
#define CRPM_CRC_MIN_CHUNK 1024u
#define CRPM_RUN_ID_LEN 16
#define CRPM_HDR_SIZE 4096u
#define CRPM_COMMIT_OFF 2048u
#define CRPM_DEFAULT_SEGMENT (2u << 20)
#define CRPM_DEFAULT_BLOCK 256u
#define CRPM_DEFAULT_SLOT (8u << 20)  /* at most, for the segment table */
#define CRPM_SLOT_ARRAYS (1u << 17)   /* arrays a default slot has room for */
#define CRPM_NO_PHYS UINT32_MAX
#define CRPM_NO_PACK UINT32_MAX       /* crpm_slot_region.pack of an array with its own segments */
#define CRPM_PACK_ALIGN 8u            /* packed arrays start at multiples of this */

struct crpm_super {
    char magic[8];
    uint32_t version;
    uint32_t super_size;      /* sizeof(struct crpm_super) */
    uint64_t segment_size;
    uint64_t block_size;
    uint64_t slot_offset[2];
    uint64_t slot_size;
    uint64_t data_offset;
    uint64_t nonce;           /* random; binds slots and commit word to this file */
    uint64_t created_ns;
    int32_t rank;
    int32_t nranks;
    char job_name[CRPM_JOB_MAX];
    uint64_t crc_chunk;       /* bytes of data per CRC32C */
    uint64_t seg_stride;      /* bytes per physical segment: data + CRC table */
    uint8_t run_id[CRPM_RUN_ID_LEN]; /* random at the job's first init; equal on all ranks */
    uint32_t reserved;
    uint32_t crc;             /* CRC32C of the above with crc = 0 */
};

#define CRPM_LAYOUT_MAGIC "CRPMLAYT"
#define CRPM_LAYOUT_OFF 1024u
enum crpm_file_role { CRPM_ROLE_RANK = 1, CRPM_ROLE_PARITY = 2 };

struct crpm_layout_rec {
    char magic[8];
    uint32_t size;            /* sizeof(struct crpm_layout_rec) */
    uint32_t role;            /* enum crpm_file_role */
    int32_t node_size;        /* as configured; 0: MPI's shared-memory nodes */
    int32_t node;             /* node of the superblock's rank */
    int32_t nnodes;
    int32_t group_size;       /* level 3 as configured */
    int32_t l3_parity;
    uint32_t crc;             /* CRC32C of the above with crc = 0 */
};

_Static_assert(sizeof(struct crpm_super) <= CRPM_LAYOUT_OFF, "superblock overlaps the layout record");
_Static_assert(CRPM_LAYOUT_OFF + sizeof(struct crpm_layout_rec) <= CRPM_COMMIT_OFF,
               "layout record overlaps the commit word");

struct crpm_slot_hdr {
    char magic[8];
    uint64_t nonce;
    uint64_t epoch;
    uint64_t user_id;         /* application's checkpoint id */
    uint64_t timestamp_ns;
    uint64_t nphys;           /* physical segments the file must hold */
    uint64_t body_size;
    uint32_t nregions;
    uint32_t crc;             /* CRC32C of header (crc = 0) and body */
};

/* body (version 3): a crpm_slot_packs and its npacks crpm_slot_pack, then per
 * region a crpm_slot_region followed by its nsegs crpm_slot_seg.
 * body (version 2): per region a crpm_slot_region_v2 and its segments. */
struct crpm_slot_packs {
    uint32_t npacks;
    uint32_t reserved;        /* the levels the run used (crpm_container_levels); 0 before */
};

/* A pack: a segment shared by small arrays (state as crpm_slot_seg, always
 * 1 or 2); len: bytes in use, what its CRC table covers. */
struct crpm_slot_pack {
    uint32_t phys[2];
    uint32_t state;
    uint32_t len;
};

struct crpm_slot_region {
    int32_t id;
    int32_t type_code;
    uint64_t elem_size;
    uint64_t count;
    uint64_t nsegs;           /* its own segments; 0 when packed */
    uint32_t pack;            /* its pack, or CRPM_NO_PACK */
    uint32_t reserved;
    uint64_t pack_off;        /* packed: its bytes are [pack_off, pack_off + bytes) of the pack */
};

struct crpm_slot_region_v2 {
    int32_t id;
    int32_t type_code;
    uint64_t elem_size;
    uint64_t count;
    uint64_t nsegs;
};

/* state: 0 = no data, 1 = copy phys[0] holds the epoch, 2 = phys[1] does */
struct crpm_slot_seg {
    uint32_t phys[2];
    uint32_t state;
};

#endif
