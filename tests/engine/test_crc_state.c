/* After a CRC the upper halves of the AVX registers must be clean: ISA-L's
 * assembly leaves them in use, and the application's SSE code then runs up
 * to 3x slower on some CPUs.  XGETBV(1) (XINUSE) tells whether that state is
 * in use, without timing anything. */
#include <cpuid.h>
#include <isa-l/crc.h>
#include <stdio.h>
#include "check.h"
#include "crc32c.h"

static int xinuse_supported(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(0xD, 1, &a, &b, &c, &d))
        return 0;
    return (a >> 2) & 1;
}

static int upper_in_use(void)
{
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
    return (lo >> 2) & 1; /* bit 2: the upper halves of the YMM registers */
}

int main(void)
{
    if (!xinuse_supported())
        check_skip("XGETBV with ECX = 1 is not available on this CPU");
    unsigned char buf[4096];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 7);
    volatile uint32_t raw = crc32_iscsi(buf, sizeof buf, 0);
    int dirty_after_isal = upper_in_use();
    uint32_t mine = crpm_crc32c(buf, sizeof buf, 0);
    CHECK(mine == raw, "crpm_crc32c %08x differs from ISA-L %08x", mine, (unsigned)raw);
    CHECK(!upper_in_use(), "AVX upper state still in use after crpm_crc32c");
    printf("ISA-L leaves the AVX upper state %s; crpm_crc32c leaves it clean\n",
           dirty_after_isal ? "in use" : "clean on this CPU");
    return check_summary("crc_state");
}
