/* CRC32C of the containers (ISA-L's crc32_iscsi), the one way the library
 * computes it. */
#ifndef CRPM_UTIL_CRC32C_H
#define CRPM_UTIL_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* CRC32C of n bytes, chained from seed. */
uint32_t crpm_crc32c(const void *p, size_t n, uint32_t seed);

#endif
