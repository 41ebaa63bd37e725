/* The persistent heap in the library's life cycle (api_heap.c): api.c
 * reserves it at init, saves it with every checkpoint as one array, and
 * restores it at recovery.  The public calls (crpm_malloc ...) are in
 * api_heap.c too. */
#ifndef CRPM_API_HEAP_H
#define CRPM_API_HEAP_H
#include <stdint.h>
#include "array.h"
#include "config.h"
#include "heap.h" /* CRPM_HEAP_ARRAY_ID, the id it is saved under (crpm_protect refuses it) */

/* THE seam between the heap and the checkpoint levels: the heap as the one
 * array they save (reserved id, bytes, its fixed address, `count` = the
 * bytes in use, 0 before the heap exists).  0 when no heap is configured. */
int crpm_heap_array(crpm_array *a);

/* crpm_init, before its agreement: reserves heap_size bytes at heap_base
 * (nothing with heap_size = 0). */
int crpm_heapctx_open(const crpm_config *cfg, const char *config_name);
/* finalize: the heap and its address range go. */
void crpm_heapctx_close(void);
/* Before a recovery: the checkpoint's heap spans saved_bytes (0: it has
 * none); that much of the range is made usable (contents to be read in). */
int crpm_heapctx_prepare(uint64_t saved_bytes);
/* After the read (rc its result): the restored heap is adopted (checked,
 * at its address), or with saved_bytes 0 the heap is empty again. */
int crpm_heapctx_recovered(int rc);

#endif
