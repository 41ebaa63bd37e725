/* CRC32C (crc32c.h).  ISA-L's assembly returns with the upper halves of the
 * AVX registers in use; the application's SSE code that runs next then pays
 * a state-transition penalty on every instruction on some CPUs (measured on
 * this project's AMD EPYC VMs: the application's own loops 3x slower after a
 * single CRC).  vzeroupper after each call clears that state. */
#include <isa-l/crc.h>
#include <isa-l/crc64.h>
#include "crc32c.h"

static int have_avx = -1;

static inline void clear_upper(void)
{
#if defined(__x86_64__) || defined(__i386__)
    if (have_avx < 0)
        have_avx = __builtin_cpu_supports("avx") ? 1 : 0;
    if (have_avx)
        __asm__ volatile("vzeroupper" ::: "memory");
#endif
}

uint32_t crpm_crc32c(const void *p, size_t n, uint32_t seed)
{
    const unsigned char *b = p;
    while (n) {
        int k = n > (1u << 30) ? 1 << 30 : (int)n;
        seed = crc32_iscsi((unsigned char *)b, k, seed);
        b += k;
        n -= (size_t)k;
    }
    clear_upper();
    return seed;
}

uint64_t crpm_crc64(const void *p, size_t n, uint64_t seed)
{
    const unsigned char *b = p;
    while (n) {
        uint64_t k = n > (1u << 30) ? 1u << 30 : n;
        seed = crc64_ecma_refl(seed, b, k);
        b += k;
        n -= k;
    }
    clear_upper();
    return seed;
}
