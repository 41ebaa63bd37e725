/* Level 3's units as a restart on another number of ranks reads them
 * (lib/mpi/reshape_l3.c rebuilds an old rank's container lost with its node
 * from its group's surviving containers and parity, moving the units over
 * MPI and decoding them with l3_code.h).  The image a container is coded as
 * is level 3's own (l3_internal.h); these calls keep it there. */
#ifndef CRPM_LEVELS_L3_RESHAPE_H
#define CRPM_LEVELS_L3_RESHAPE_H
#include <stdint.h>
#include "container.h"

/* The unit level 3 codes containers of this geometry in. */
uint64_t crpm_l3_unit_size(uint64_t segment_size, uint64_t block_size);

/* A container (the epoch it shows, opened read-only) as the units of its
 * image, or a parity container as the rows of the codewords it holds. */
typedef struct crpm_l3_source crpm_l3_source;
int crpm_l3_source_data(crpm_container *c, uint64_t unit, crpm_l3_source **out);
int crpm_l3_source_parity(crpm_container *pc, uint64_t unit, crpm_l3_source **out);
/* Rows of a codeword it has data for: image units / k, rounded up
 * (containers), or the longest parity row count (parity). */
uint64_t crpm_l3_source_rows(const crpm_l3_source *s, int k);
/* Unit u into dst (unit bytes; zeros past the unit's defined bytes): data,
 * image unit u (`codeword` unused); parity, row u of `codeword`.  Every byte
 * is checked against its CRC first: CRPM_ERR_CORRUPT names the file. */
int crpm_l3_source_read(crpm_l3_source *s, int codeword, uint64_t u, unsigned char *dst);
void crpm_l3_source_free(crpm_l3_source *s);

/* A decoded image's first `have` units: *units gets the units the whole
 * image has once its meta area is among them (0 before).  CRPM_ERR_CORRUPT
 * when it is no image or would exceed `bound` units. */
int crpm_l3_image_units(const unsigned char *img, uint64_t have, uint64_t unit, uint64_t bound, uint64_t *units);
/* A whole decoded image's regions (ptr into img) and user id; free(*regs). */
int crpm_l3_image_regions(unsigned char *img, uint64_t unit, crpm_array **regs, int *n, uint64_t *user_id);

#endif
