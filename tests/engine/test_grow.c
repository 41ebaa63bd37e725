/* lib/util/grow.h: the library's one growable-array helper.  Appends keep
 * every element, the capacity doubles from `first`, enough capacity is left
 * alone, and an impossible size fails without touching the array. */
#include <stdint.h>
#include "check.h"
#include "grow.h"

typedef struct rec {
    int32_t id;
    double x[3];
} rec;

int main(void)
{
    rec *v = NULL;
    size_t cap = 0, n = 0;
    size_t caps_seen[8], ncaps = 0;
    for (int32_t i = 0; i < 1000; i++) {
        size_t before = cap;
        REQUIRE(CRPM_GROW(v, cap, n + 1, 16) == 0, "append %d failed", (int)i);
        CHECK(cap >= n + 1, "capacity %zu for %zu elements", cap, n + 1);
        if (cap != before && ncaps < 8)
            caps_seen[ncaps++] = cap;
        v[n++] = (rec){i, {i * 0.5, -i, 1.0 / (i + 1)}};
    }
    int intact = 1;
    for (size_t i = 0; i < n; i++)
        intact &= v[i].id == (int32_t)i && v[i].x[0] == (double)i * 0.5 && v[i].x[1] == -(double)i;
    CHECK(intact, "elements changed while the array grew");
    /* 16, 32, ..., 1024: doubling, not one realloc per element */
    CHECK(ncaps == 7 && caps_seen[0] == 16 && caps_seen[6] == 1024, "capacities: %zu changes, first %zu, last %zu",
          ncaps, ncaps ? caps_seen[0] : 0, ncaps ? caps_seen[ncaps - 1] : 0);

    /* enough room: nothing moves */
    rec *same = v;
    CHECK(CRPM_GROW(v, cap, 10, 16) == 0 && v == same && cap == 1024, "a fitting request changed the array");
    /* a request beyond doubling takes the capacity straight there */
    CHECK(CRPM_GROW(v, cap, 5000, 16) == 0 && cap >= 5000 && cap < 2 * 5000, "large request: capacity %zu", cap);
    CHECK(v[999].id == 999, "elements lost by a large request");

    /* sizes that overflow size_t fail and leave array and capacity as they were */
    rec *keep = v;
    size_t keep_cap = cap;
    CHECK(CRPM_GROW(v, cap, SIZE_MAX / sizeof *v + 1, 16) == -1, "an overflowing element count was accepted");
    CHECK(CRPM_GROW(v, cap, SIZE_MAX, 16) == -1, "SIZE_MAX elements were accepted");
    CHECK(v == keep && cap == keep_cap && v[999].id == 999, "a failed request changed the array");
    free(v);

    /* bytes, starting from an explicit first capacity of 1 */
    char *b = NULL;
    size_t bcap = 0;
    CHECK(crpm_grow(&b, &bcap, 1, 1, 1) == 0 && bcap == 1, "first byte: capacity %zu", bcap);
    CHECK(crpm_grow(&b, &bcap, 3, 1, 1) == 0 && bcap == 4, "three bytes: capacity %zu", bcap);
    free(b);
    return check_summary("grow");
}
