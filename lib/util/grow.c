/* Growable arrays (grow.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "grow.h"

int crpm_grow_to(void *pv, size_t *cap, size_t need, size_t elem, size_t first)
{
    if (elem == 0 || need > SIZE_MAX / elem)
        return -1;
    size_t c = *cap > first ? *cap : first ? first : 1;
    while (c < need)
        c = c > SIZE_MAX / 2 ? need : 2 * c;
    if (c > SIZE_MAX / elem)
        c = need; /* doubling would overflow; exactly need still fits */
    void *p;
    memcpy(&p, pv, sizeof p); /* pv points at a T *, which has void *'s representation */
    void *np = realloc(p, c * elem);
    if (!np)
        return -1;
    memcpy(pv, &np, sizeof np);
    *cap = c;
    return 0;
}
