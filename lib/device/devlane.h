/* Staging lanes: a stream with device and pinned host buffers, taken from a
 * per-device pool for one window of a checkpoint or one copy in or out, and
 * given back.  Internal to lib/device. */
#ifndef CRPM_DEVICE_DEVLANE_H
#define CRPM_DEVICE_DEVLANE_H
#include <stdint.h>
#include "devops.h"

typedef struct crpm_dlane {
    const crpm_devops *ops;
    int dev;
    crpm_dstream *s, *s2;    /* s2: the second stream of copies in and out (made when first needed) */
    uint64_t cap, words;     /* pack bytes, bitmap words the buffers hold */
    void *dpack, *hpack;     /* device pack and its pinned host side */
    uint64_t *dmeta, *hmeta; /* count and window bitmap (1 + words), device and pinned */
    uint64_t *dpos;          /* scan scratch (words) */
    struct crpm_dlane *next;
} crpm_dlane;

/* A lane of device dev with at least cap pack bytes and words bitmap words
 * (0: no bitmap; the device pack too is left out when !dpack_too).  The
 * caller made dev current (ops->use). */
int crpm_dlane_get(const crpm_devops *ops, int dev, uint64_t cap, uint64_t words, int dpack_too, crpm_dlane **out);
/* Back to the pool, or freed when its stream failed (broken). */
void crpm_dlane_put(crpm_dlane *l, int broken);

/* Copy out / copy in through pinned, double-buffered chunks. */
int crpm_dcopy_out(const crpm_devops *ops, int dev, void *dst, const void *src, uint64_t n);
int crpm_dcopy_in(const crpm_devops *ops, int dev, void *dst, const void *src, uint64_t n);

/* Arrays attached (the pool is emptied when the last goes). */
void crpm_dlane_hold(int delta);

#endif
