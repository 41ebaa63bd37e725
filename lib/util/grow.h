/* Growable arrays: the one way the library makes room for one more element
 * (an array pointer, a count kept by the caller, a capacity kept here). */
#ifndef CRPM_UTIL_GROW_H
#define CRPM_UTIL_GROW_H
#include <stddef.h>

/* Out of line: the capacity doubles, from at least `first`, until it holds
 * `need` elements of `elem` bytes. */
int crpm_grow_to(void *pv, size_t *cap, size_t need, size_t elem, size_t first);

/* Makes room for `need` elements in the array whose pointer is at pv (a
 * T **, NULL at first) and whose capacity is *cap.  Returns 0, or -1 when
 * memory or size_t runs out: the array and *cap are then unchanged and still
 * the caller's.  Sets no library error; the caller names what failed. */
static inline int crpm_grow(void *pv, size_t *cap, size_t need, size_t elem, size_t first)
{
    return need <= *cap ? 0 : crpm_grow_to(pv, cap, need, elem, first);
}

/* crpm_grow for an array variable `v` (a T *) and its size_t capacity. */
#define CRPM_GROW(v, cap, need, first) crpm_grow(&(v), &(cap), (need), sizeof *(v), (first))

#endif
