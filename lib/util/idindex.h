/* Index from int32 ids to positions in an array of records that each hold
 * their id at a fixed offset: protecting N arrays costs O(N), not O(N^2).
 * The index describes records [0, n); whenever the array changes otherwise
 * than by an append it is rebuilt (crpm_idindex_sync). */
#ifndef CRPM_UTIL_IDINDEX_H
#define CRPM_UTIL_IDINDEX_H
#include <stddef.h>
#include <stdint.h>

typedef struct crpm_idindex {
    int32_t *slot;      /* open addressing: record position, -1 = empty */
    uint32_t cap;       /* slots, a power of two */
    int n;              /* records described; -1 = rebuild */
} crpm_idindex;

/* The records an index looks at: base, record size, offset of the int32 id. */
typedef struct crpm_idrecs {
    const void *base;
    size_t stride, id_off;
} crpm_idrecs;

/* Makes the index describe records [0, n) with room for `extra` appends;
 * -1 when out of memory (callers then search linearly). */
int crpm_idindex_sync(crpm_idindex *x, crpm_idrecs r, int n, int extra);
/* Position of id among the described records, or -1. */
int crpm_idindex_find(const crpm_idindex *x, crpm_idrecs r, int32_t id);
/* Record n (just appended) joins an index that described [0, n). */
void crpm_idindex_append(crpm_idindex *x, crpm_idrecs r, int n);
static inline void crpm_idindex_invalidate(crpm_idindex *x) { x->n = -1; }
void crpm_idindex_free(crpm_idindex *x);

#endif
