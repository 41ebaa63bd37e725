/* The runtime of instrumented change tracking (include/crpm_instrument.h):
 * a process-wide table of the ranges of checkpointed memory, each with a
 * map of marked blocks (a byte a block) that code compiled with the pass
 * fills, and the engine empties at each checkpoint (track_instr.c).
 *
 * A mark is a plain byte store after the program's store (release order),
 * so any number of threads mark without locked instructions and without
 * losing one another's marks; the engine takes a mark with an atomic
 * exchange, so a mark is either taken (and the store it follows is visible)
 * or left for the next checkpoint.  A mark whose byte is already set is
 * skipped (no store: no cache line bouncing between threads), which is safe
 * because the engine, after taking the marks, forces a memory barrier on
 * every thread of the process (membarrier(2)) before it reads the data: a
 * store whose mark saw a byte the engine then took is visible to the
 * engine's reads.  Without membarrier every mark stores its byte.
 *
 * The table is read without a lock (a sequence counter; bitmaps are never
 * unmapped, only reused), so a mark racing with a range's removal may set a
 * stray byte in a map reused for another range: more blocks compared,
 * never fewer. */
#ifndef CRPM_ENGINE_MARKS_H
#define CRPM_ENGINE_MARKS_H
#include <stdint.h>

#define CRPM_MARKS_SLOTS 1024

/* Starts marking [base, base+len) in blocks of 1 << shift bytes, counted
 * from base.  Returns the range's handle (>= 0), or -1 with *why set (a
 * static string): table full, out of memory.  Costs a byte of address space
 * a block (touched as blocks are marked).  Ranges may overlap: a store
 * marks every range it touches. */
int crpm_marks_add(uintptr_t base, uint64_t len, unsigned shift, const char **why);
void crpm_marks_remove(int h);
/* ORs the range's marked blocks [0, nbits) into dst and clears them. */
void crpm_marks_take(int h, uint64_t *dst, uint64_t nbits);
/* After the takes of a checkpoint, before its data is read. */
void crpm_marks_fence(void);
/* The persistent heap's allocator (lib/heap) was compiled with the pass, so
 * its own stores mark: it says so when it makes or attaches a heap.  Until
 * then (and in builds without the plugin) the engine compares the heap. */
void crpm_marks_set_heap_instrumented(void);
int crpm_marks_heap_instrumented(void);

#endif
