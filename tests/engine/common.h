/* Helpers shared by the engine test programs. */
#ifndef CRPM_TEST_COMMON_H
#define CRPM_TEST_COMMON_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond, ...)                                                                                   \
    do {                                                                                                   \
        if (!(cond)) {                                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                      \
            fprintf(stderr, __VA_ARGS__);                                                                  \
            fprintf(stderr, "\n");                                                                         \
            exit(1);                                                                                       \
        }                                                                                                  \
    } while (0)

static inline uint64_t rnd(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rnd_below(uint64_t *s, uint64_t n) { return n ? rnd(s) % n : 0; }

static inline void fill_random(uint64_t *s, char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (char)rnd(s);
}
#endif
