/* CRC32C of the containers (ISA-L's crc32_iscsi), the one way the library
 * computes it. */
#ifndef CRPM_UTIL_CRC32C_H
#define CRPM_UTIL_CRC32C_H
#include <stddef.h>
#include <stdint.h>

/* CRC32C of n bytes, chained from seed. */
uint32_t crpm_crc32c(const void *p, size_t n, uint32_t seed);

/* CRC-64 (ISA-L crc64_ecma_refl): piece fingerprints for level-2 transfers,
 * where a 32-bit check would be too weak to skip sending a piece. */
uint64_t crpm_crc64(const void *p, size_t n, uint64_t seed);

#endif
