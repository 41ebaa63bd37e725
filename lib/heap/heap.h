/* Persistent-heap allocator over one contiguous region (docs/heap.md).
 *
 * Every byte of allocator state -- size classes, free lists, the large-block
 * map, the roots -- lives inside the region, and refers to the region by
 * offsets, so a region restored byte for byte is immediately usable: at the
 * address it was created at for the application's own pointers (roots, links
 * between blocks), at any address for inspection (crpm_heap_check).
 *
 * Layout.  The region is a sequence of arenas: 4 MiB of data pages (by
 * default) after their own header pages, which hold one 16-byte entry per
 * data page; arena 0's first data pages hold the global header
 * (crpm_heap_global, heap_int.h).  The data pages of an arena form spans:
 * free, a slab of one size class (16 pages), or a large block.  Allocations
 * above what an arena holds are huge blocks of whole arenas.
 *
 *   small  <= 16 KiB: 64 size classes (16-B steps to 128, then 8 per doubling),
 *          and 24, 40 and 56 bytes for blocks asked with 8-byte alignment
 *          (C++ nodes of 8-byte data), slabs of 64 KiB, no per-object header;
 *   large  whole pages inside an arena, found with segregated bins (good fit,
 *          O(1)), coalesced with free neighbours at once;
 *   huge   whole arenas, taken first-fit from a bitmap of free arenas.
 *
 * Fragmentation bound: a block of n bytes uses at most max(n + 15, n * 9/8)
 * bytes when small, n + 4095 when large (page rounding; powers of two up to
 * the arena's 4 MiB fill an arena exactly), and less than one arena beyond n
 * when huge (pages it never touches stay uncommitted).  Free
 * pages merge with free neighbours at once and empty slabs and arenas go back
 * at once (one empty slab per class is kept until crpm_heap_trim), so freeing
 * every block and trimming leaves every arena but the first free and able to
 * hold one block as large as all of them.
 *
 * Deterministic: the same sequence of calls on the same heap returns the same
 * addresses (no thread ids, time or randomisation).  Thread-safe: one lock
 * per heap, held for each call (outside the region, so a restored region is
 * never locked).  Errors set crpm_last_error() (util/error.h). */
#ifndef CRPM_HEAP_H
#define CRPM_HEAP_H

#include <stddef.h>
#include <stdint.h>
#include "reserved_ids.h"
#include <stdio.h>

#define CRPM_HEAP_ROOTS 64
#define CRPM_HEAP_PAGE 4096u
#define CRPM_HEAP_SMALL_MAX 16384u
#define CRPM_HEAP_ARENA_SHIFT 22       /* default arena: 4 MiB */
#define CRPM_HEAP_ARENA_SHIFT_MIN 18   /* 256 KiB (tests with small heaps) */
#define CRPM_HEAP_ARENA_SHIFT_MAX 23   /* 8 MiB */
#define CRPM_HEAP_MAX_BYTES ((uint64_t)1 << 40) /* 1 TiB: sizes the free-arena bitmap */
/* The array id the library saves the heap under (api_heap.h); tools find it
 * by this id in containers and level-4 files. */
#define CRPM_HEAP_ARRAY_ID CRPM_ID_HEAP

typedef struct crpm_heap crpm_heap;

/* Makes [base, base + bytes) readable and writable (bytes grows only). */
typedef int (*crpm_heap_grow_fn)(void *arg, void *base, uint64_t bytes);

/* The bytes one arena takes in the reserved range (its data pages and the
 * header pages that describe them); arena_shift 0: default.  A reserve
 * smaller than this holds no arena: every allocation would fail. */
uint64_t crpm_heap_arena_bytes(unsigned arena_shift);

/* Formats a new heap at mem (aligned to 4 KiB) able to grow to `reserve`
 * bytes (a multiple of the arena size, at most CRPM_HEAP_MAX_BYTES), first
 * making its first arena usable through grow.  `arena_shift` 0: default. */
int crpm_heap_create(crpm_heap **out, void *mem, uint64_t reserve, unsigned arena_shift, crpm_heap_grow_fn grow,
                     void *arg);
/* Adopts a heap region restored at mem of which `extent` bytes are usable:
 * checks the global header and that the heap fits reserve.  With
 * check_base, the heap must have been created at mem (its pointers are
 * absolute); tools reading a copy elsewhere pass 0 (and NULL grow: the heap
 * is then read-only in effect: allocation fails once the extent is full). */
int crpm_heap_attach(crpm_heap **out, void *mem, uint64_t extent, uint64_t reserve, int check_base,
                     crpm_heap_grow_fn grow, void *arg);
/* Frees the handle, not the region. */
void crpm_heap_close(crpm_heap *h);

void *crpm_heap_alloc(crpm_heap *h, size_t n);
/* align: a power of two up to 4096.  Blocks are at least 16-byte aligned,
 * except blocks of up to 56 bytes asked with align <= 8, which may be
 * 8-byte aligned (24, 40 and 56-byte classes: less waste for small nodes). */
void *crpm_heap_alloc_aligned(crpm_heap *h, size_t align, size_t n);
void *crpm_heap_calloc(crpm_heap *h, size_t n, size_t size);
/* realloc(p, 0) frees p and returns NULL; NULL with p untouched on failure. */
void *crpm_heap_realloc(crpm_heap *h, void *p, size_t n);
/* NULL is a no-op; CRPM_ERR_INVAL for a pointer that is not a live block. */
int crpm_heap_free(crpm_heap *h, void *p);
/* Bytes usable at p (0 for NULL or a pointer that is not a live block). */
size_t crpm_heap_usable(crpm_heap *h, const void *p);

int crpm_heap_set_root(crpm_heap *h, int idx, void *p);
void *crpm_heap_get_root(crpm_heap *h, int idx);

/* Releases the empty slabs kept for allocation (one per class at most). */
void crpm_heap_trim(crpm_heap *h);

/* Usable bytes of the live blocks. */
uint64_t crpm_heap_used_bytes(crpm_heap *h);
/* 1 when this allocator was compiled with the libcrpm pass plugin: its own
 * stores into the heap mark their blocks (change_tracking = instrumented). */
int crpm_heap_instrumented(void);
/* Bytes of the region in use (arenas taken, rounded up as it grows by
 * half): what must be saved and restored.  Grows only. */
uint64_t crpm_heap_extent(crpm_heap *h);
/* The global header's view of the heap, for tools. */
typedef struct crpm_heap_info {
    uint64_t base;         /* address it was created at */
    uint64_t extent;       /* bytes usable (the saved part) */
    uint64_t capacity;     /* most it may grow to */
    uint64_t used;         /* usable bytes of live blocks */
    uint64_t blocks;       /* live blocks */
    uint64_t arena_bytes;
    uint64_t arenas;       /* arenas taken or freed so far */
    uint64_t roots[CRPM_HEAP_ROOTS];
} crpm_heap_info;
void crpm_heap_get_info(crpm_heap *h, crpm_heap_info *out);

/* Walks the whole region and checks every invariant (spans, slabs, free
 * lists, bins, the free-arena bitmap, used-byte and block counts).
 * CRPM_SUCCESS or CRPM_ERR_CORRUPT naming the first broken one; out (may be
 * NULL) gets a summary. */
int crpm_heap_check(crpm_heap *h, FILE *out);

/* The lock of every call above, for callers that must see the heap still
 * (a checkpoint of the region). */
void crpm_heap_lock(crpm_heap *h);
void crpm_heap_unlock(crpm_heap *h);

#endif
