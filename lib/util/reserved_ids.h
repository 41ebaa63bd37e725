/* Array ids the library keeps for regions of its own.  Applications may use
 * any int as an array id except the reserved range below: crpm_protect
 * refuses those ids (CRPM_ERR_INVAL), so a region the library adds to every
 * container can never collide with an application's array.
 *
 *   [CRPM_RESERVED_ID_MIN, CRPM_RESERVED_ID_MAX]   the whole reserved range
 *   CRPM_ID_HEAP      the persistent heap's used extent (lib/heap, lib/api_heap.c),
 *                    the minimum itself: sub-range + 0x0000 .. + 0x00ff is the heap's
 *   CRPM_ID_GLAYOUT   the global layout (datasets, subsets, replicated
 *                    arrays) of a rank, lib/mpi/reshape.h; sub-range
 *                    CRPM_RESERVED_ID_MIN + 0x1000 .. + 0x10ff is reshape's
 *
 * A module that needs a reserved id takes a sub-range of its own here
 * (0x0100..0x0fff and 0x1100..0xffff above the minimum are free). */
#ifndef CRPM_UTIL_RESERVED_IDS_H
#define CRPM_UTIL_RESERVED_IDS_H
#include <stdint.h>

#define CRPM_RESERVED_ID_MIN INT32_MIN
#define CRPM_RESERVED_ID_MAX (INT32_MIN + 0xffff)

#define CRPM_ID_HEAP CRPM_RESERVED_ID_MIN
#define CRPM_ID_GLAYOUT (CRPM_RESERVED_ID_MIN + 0x1000)

static inline int crpm_id_reserved(int32_t id) { return id >= CRPM_RESERVED_ID_MIN && id <= CRPM_RESERVED_ID_MAX; }

#endif
