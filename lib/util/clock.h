/* Monotonic time for intervals and statistics. */
#ifndef CRPM_UTIL_CLOCK_H
#define CRPM_UTIL_CLOCK_H
#include <stdint.h>
#include <time.h>

static inline double crpm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif
