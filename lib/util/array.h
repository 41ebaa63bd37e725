/* The one description of a protected array, shared by every layer and level. */
#ifndef CRPM_UTIL_ARRAY_H
#define CRPM_UTIL_ARRAY_H
#include <stdint.h>
#include "memkind.h"

struct crpm_array {
    int32_t id;
    int32_t type_code;      /* enum crpm_type_code */
    uint64_t elem_size;     /* bytes per element */
    uint64_t count;         /* elements */
    void *ptr;              /* where its bytes are (for its kind); NULL where only the saved shape is described */
    const char *name;       /* optional label kept by level 4; may be NULL */
    const crpm_mem_kind *kind; /* where its bytes live (memkind.h); NULL: host memory */
};

static inline uint64_t crpm_array_bytes(const crpm_array *a) { return a->elem_size * a->count; }

#endif
