/* The runtime of instrumented change tracking (include/crpm_instrument.h).
 *
 * Marks live in a shadow map, one byte for each 256-byte granule of the
 * address space (CRPM_INSTR_GRANULE_SHIFT), reserved once (address space
 * only: a shadow page is committed when a mark first touches it, 1 MiB of
 * program memory per page).  Code compiled with the pass marks the granules
 * its stores touched when they lie in the box, the one word bounding every
 * range of checkpointed memory; the engine takes the marks of its regions
 * at each checkpoint (track_instr.c).  The table of ranges below only
 * decides the box.
 *
 * A mark is a plain byte store after the program's store (release order),
 * so any number of threads mark without locked instructions and without
 * losing one another's marks; the engine takes a mark with an atomic
 * exchange, so a mark is either taken (and the store it follows is visible)
 * or left for the next checkpoint.  A mark whose byte is already set is
 * skipped (no store, no cache line moving between threads), which is safe
 * because the engine, after taking the marks, forces a memory barrier on
 * every thread of the process (membarrier(2)) before it reads the data: a
 * store whose mark saw a byte the engine then took is visible to the
 * engine's reads.  Without membarrier (or without the address space for the
 * shadow) there is no instrumented tracking: crpm_marks_add says why. */
#ifndef CRPM_UTIL_MARKS_H
#define CRPM_UTIL_MARKS_H
#include <stdint.h>

#define CRPM_MARKS_RANGES 4096

/* [base, base+len) is checkpointed memory: stores into it mark from now on.
 * Returns a handle (>= 0), or -1 with *why set (a static string). */
int crpm_marks_add(uintptr_t base, uint64_t len, const char **why);
void crpm_marks_remove(int h);
/* Takes (clears) the marks of the granules covering [base, base+len): bit
 * k of gbits for granule (base >> CRPM_INSTR_GRANULE_SHIFT) + k; gbits
 * holds that many bits, zeroed by the caller. */
void crpm_marks_take(uintptr_t base, uint64_t len, uint64_t *gbits);
/* After the takes of a checkpoint, before its data is read. */
void crpm_marks_fence(void);
/* Modules of the program compiled with the pass loaded so far (their
 * constructors call crpm_instr_module). */
int crpm_marks_modules(void);
/* The persistent heap's allocator (lib/heap) was compiled with the pass, so
 * its own stores mark: it says so when it makes or attaches a heap.  Until
 * then (and in builds without the plugin) the engine compares the heap. */
void crpm_marks_set_heap_instrumented(void);
int crpm_marks_heap_instrumented(void);

#endif
