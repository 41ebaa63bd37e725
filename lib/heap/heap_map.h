/* The heap's address range in this process: reserved at a fixed address
 * (virtual only: no access, nothing committed), then made usable as the heap
 * grows; the kernel commits memory page by page as it is first touched. */
#ifndef CRPM_HEAP_MAP_H
#define CRPM_HEAP_MAP_H
#include <stdint.h>

/* Reserves [base, base + size) exactly, never replacing a mapping
 * (MAP_FIXED_NOREPLACE).  When the range is taken: CRPM_ERR_NOMEM with a
 * message naming the range, what holds it (/proc/self/maps) and `keys`, the
 * configuration keys that move it. */
int crpm_heap_reserve(uint64_t base, uint64_t size, const char *keys, void **out);
/* [base, base + bytes) readable and writable (a crpm_heap_grow_fn's work). */
int crpm_heap_commit(void *base, uint64_t bytes);
/* Back to reserved: no access, memory returned, contents gone. */
int crpm_heap_decommit(void *base, uint64_t size);
void crpm_heap_unreserve(void *base, uint64_t size);

#endif
