/* Declared writes (crpm_container_declare_writes / crpm_container_written):
 * a checkpoint compares only the reported blocks plus those where the two
 * copies may differ, so its cost follows the change, not the array; a new
 * pointer, a resize or a reopened container compares everything once; the
 * recovered data is exact throughout. */
#include <unistd.h>
#include "check.h"
#include "engine.h"

enum { N = 8 << 20, BLK = 256 };

static crpm_stats_t ck(crpm_container *c, uint64_t id)
{
    crpm_stats_t st;
    REQUIRE(crpm_container_checkpoint(c, id, &st) == 0, "checkpoint %llu: %s", (unsigned long long)id,
            crpm_last_error());
    return st;
}

/* The committed epoch read back into the protected array a equals what a
 * held (ref is scratch); recovery leaves the two copies as they were. */
static void check_recovers(crpm_container *c, char *a, char *ref, uint64_t n, const char *what)
{
    memcpy(ref, a, n);
    memset(a, 0, n);
    REQUIRE(crpm_container_recover(c) == 0, "recover (%s): %s", what, crpm_last_error());
    REQUIRE(memcmp(a, ref, n) == 0, "recovered data differs (%s)", what);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char path[512];
    snprintf(path, sizeof path, "%s/declared-%d.crpm", dir, (int)getpid());
    unlink(path);
    crpm_open_opts o = {.path = path, .segment_size = 1 << 20, .block_size = BLK, .create = 1};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    char *a = malloc(N), *b = malloc(N);
    uint64_t s = 5;
    fill_random(&s, a, N);
    REQUIRE(crpm_container_declare_writes(c, 1) < 0, "declaring an unprotected id must fail");
    REQUIRE(crpm_container_protect(c, 1, a, N, CRPM_TC_BYTE, 1) == 0, "protect: %s", crpm_last_error());
    REQUIRE(crpm_container_declare_writes(c, 1) == 0, "declare: %s", crpm_last_error());
    uint64_t id = 1;
    crpm_stats_t st = ck(c, id++);
    REQUIRE(st.bytes_written == N, "first checkpoint writes all: %llu", (unsigned long long)st.bytes_written);
    fill_random(&s, a, N); /* a dense epoch, reported: the second copy is made */
    crpm_container_written(c, 1, 0, N);
    st = ck(c, id++);
    REQUIRE(st.bytes_written == N, "the second copy is written whole: %llu", (unsigned long long)st.bytes_written);

    /* sparse reported writes: only those blocks (and the other copy's stale ones) are compared */
    for (int e = 0; e < 6; e++) {
        for (int i = 0; i < 20; i++) { /* spread: every segment gets some */
            uint64_t at = (uint64_t)i * (N / 20) + rnd_below(&s, N / 20 - 100);
            fill_random(&s, a + at, 100);
            crpm_container_written(c, 1, at, 100);
        }
        st = ck(c, id++);
        /* the first sparse epoch writes into the copy the dense one left stale everywhere */
        REQUIRE(e == 0 || st.bytes_compared <= 2 * 40 * 2 * BLK, "epoch %d compared %llu bytes for 40 reported blocks", e,
                (unsigned long long)st.bytes_compared);
        REQUIRE(st.bytes_written > 0 && (e == 0 || st.bytes_written <= 2 * 40 * 2 * BLK), "epoch %d wrote %llu bytes", e,
                (unsigned long long)st.bytes_written);
        check_recovers(c, a, b, N, "sparse");
    }

    /* nothing reported: nothing compared, nothing written */
    st = ck(c, id++);
    REQUIRE(st.bytes_compared == 0 && st.bytes_written == 0, "an epoch without reports compared %llu bytes",
            (unsigned long long)st.bytes_compared);

    /* a reported write that restores the committed value: compared, nothing written */
    a[12345] ^= 1;
    crpm_container_written(c, 1, 12345, 1);
    ck(c, id++);
    a[12345] ^= 1;
    crpm_container_written(c, 1, 12345, 1);
    st = ck(c, id++);
    REQUIRE(st.bytes_written <= BLK, "revert wrote %llu bytes", (unsigned long long)st.bytes_written);
    check_recovers(c, a, b, N, "revert");

    /* out-of-range reports are clipped, not written past the array */
    crpm_container_written(c, 1, N - 10, 1000);
    crpm_container_written(c, 1, N + 10, 1000);
    crpm_container_written(c, 2, 0, 10); /* no such array */
    ck(c, id++);

    /* another buffer: every block compared once, whatever was reported */
    char *a2 = malloc(N);
    memcpy(a2, a, N);
    a2[777] ^= 0x33; /* unreported: the new pointer makes the engine compare all */
    REQUIRE(crpm_container_protect(c, 1, a2, N, CRPM_TC_BYTE, 1) == 0, "re-protect: %s", crpm_last_error());
    st = ck(c, id++);
    REQUIRE(st.bytes_compared >= N, "a new pointer compared only %llu bytes", (unsigned long long)st.bytes_compared);
    check_recovers(c, a2, b, N, "new pointer");
    st = ck(c, id++);
    REQUIRE(st.bytes_compared < N, "the epoch after a new pointer compared %llu bytes",
            (unsigned long long)st.bytes_compared);

    /* reopened: the declaration is gone with the process; declaring again compares all once */
    REQUIRE(crpm_container_close(c) == 0, "close");
    o.create = 0;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "reopen: %s", crpm_last_error());
    REQUIRE(crpm_container_protect(c, 1, a2, N, CRPM_TC_BYTE, 1) == 0, "protect: %s", crpm_last_error());
    check_recovers(c, a2, b, N, "reopened");
    REQUIRE(crpm_container_protect(c, 1, a2, N, CRPM_TC_BYTE, 1) == 0, "protect: %s", crpm_last_error());
    REQUIRE(crpm_container_declare_writes(c, 1) == 0, "declare: %s", crpm_last_error());
    a2[N - 1] ^= 0x44; /* written before any report could be made */
    st = ck(c, id++);
    REQUIRE(st.bytes_compared >= N, "first checkpoint after declaring compared only %llu bytes",
            (unsigned long long)st.bytes_compared);
    check_recovers(c, a2, b, N, "declared after reopen");

    /* rollback keeps the declaration but forgets what the copies hold: compare all once */
    a2[5] ^= 0x11;
    crpm_container_written(c, 1, 5, 1);
    ck(c, id++);
    REQUIRE(crpm_container_rollback(c) == 0, "rollback: %s", crpm_last_error());
    a2[5] ^= 0x11; /* back to the rolled-back epoch's value, which the engine must find */
    a2[6] ^= 0x22; /* unreported, but the rollback made every block suspect */
    st = ck(c, id++);
    REQUIRE(st.bytes_compared >= N, "after a rollback compared only %llu bytes", (unsigned long long)st.bytes_compared);
    check_recovers(c, a2, b, N, "after rollback");

    crpm_container_close(c);
    unlink(path);
    free(a);
    free(a2);
    free(b);
    printf("declared writes: ok\n");
    return 0;
}
