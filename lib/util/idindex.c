/* Id index (idindex.h). */
#include <stdlib.h>
#include <string.h>
#include "idindex.h"

static int32_t id_at(crpm_idrecs r, int pos)
{
    int32_t id;
    memcpy(&id, (const char *)r.base + (size_t)pos * r.stride + r.id_off, sizeof id);
    return id;
}

static uint32_t hash(int32_t id, uint32_t mask) { return ((uint32_t)id * 2654435761u) >> 7 & mask; }

static void put(crpm_idindex *x, crpm_idrecs r, int pos)
{
    uint32_t mask = x->cap - 1, h = hash(id_at(r, pos), mask);
    while (x->slot[h] >= 0)
        h = (h + 1) & mask;
    x->slot[h] = pos;
}

int crpm_idindex_sync(crpm_idindex *x, crpm_idrecs r, int n, int extra)
{
    uint64_t want = (uint64_t)n + (uint64_t)extra;
    if (x->slot && x->n == n && want * 2 <= x->cap)
        return 0;
    uint32_t cap = 64;
    while ((uint64_t)cap < want * 4)
        cap *= 2;
    if (cap != x->cap || !x->slot) {
        int32_t *s = realloc(x->slot, cap * sizeof *s);
        if (!s)
            return -1;
        x->slot = s;
        x->cap = cap;
    }
    memset(x->slot, 0xff, x->cap * sizeof *x->slot);
    for (int i = 0; i < n; i++)
        put(x, r, i);
    x->n = n;
    return 0;
}

int crpm_idindex_find(const crpm_idindex *x, crpm_idrecs r, int32_t id)
{
    uint32_t mask = x->cap - 1;
    for (uint32_t h = hash(id, mask); x->slot[h] >= 0; h = (h + 1) & mask)
        if (id_at(r, x->slot[h]) == id)
            return x->slot[h];
    return -1;
}

void crpm_idindex_append(crpm_idindex *x, crpm_idrecs r, int n)
{
    if (x->slot && x->n == n && ((uint64_t)n + 1) * 2 <= x->cap) {
        put(x, r, n);
        x->n = n + 1;
    } else {
        x->n = -1;
    }
}

void crpm_idindex_free(crpm_idindex *x)
{
    free(x->slot);
    x->slot = NULL;
    x->cap = 0;
    x->n = -1;
}
