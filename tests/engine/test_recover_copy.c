/* Recovery's verified copy (crpm_copy_saved): exact data for arrays that end
 * inside a chunk, a piece and a segment; a flipped byte in any chunk of a
 * copy piece (not only its first) reported at that chunk's offset; and
 * huge_pages = 1 advising the array huge (VmFlags "hg") while 0 leaves the
 * application's mapping alone. */
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"

#define SEG (2u << 20)
#define HP (2u << 20)

/* 1 when the mapping holding p carries the huge-page advice. */
static int advised_huge(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    REQUIRE(f, "smaps");
    char line[512];
    int in = 0, hg = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line */
            in = (uintptr_t)p >= lo && (uintptr_t)p < hi;
            continue;
        }
        if (in && strncmp(line, "VmFlags:", 8) == 0) {
            hg = strstr(line, " hg") != NULL;
            break;
        }
    }
    fclose(f);
    REQUIRE(hg >= 0, "no VmFlags for %p", p);
    return hg;
}

/* A fresh 2-MiB-aligned anonymous array of n bytes, never touched. */
static char *fresh(size_t n)
{
    char *m = mmap(NULL, n + HP, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED, "mmap");
    return (char *)(((uintptr_t)m + HP - 1) & ~(uintptr_t)(HP - 1));
}

static int recover_into(const char *path, int huge, char *dst, size_t n, const char *want_err)
{
    crpm_open_opts o = {.path = path, .huge_pages = huge};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open: %s", crpm_last_error());
    REQUIRE(crpm_container_protect(c, 3, dst, n, CRPM_TC_BYTE, 1) == 0, "protect");
    int rc = crpm_container_recover(c);
    if (want_err)
        CHECK(rc == CRPM_ERR_CORRUPT && strstr(crpm_last_error(), want_err), "want an error naming '%s', got %d: %s",
              want_err, rc, crpm_last_error());
    else
        CHECK(rc == 0, "recover: %s", crpm_last_error());
    crpm_container_close(c);
    return rc;
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char path[512];
    snprintf(path, sizeof path, "%s/recover-copy-%d.crpm", dir, (int)getpid());
    unlink(path);
    /* three and a half segments, ending 100 B into a chunk */
    size_t n = 3 * SEG + SEG / 2 + 4096 + 1024 + 100;
    char *a = malloc(n);
    uint64_t s = 11;
    fill_random(&s, a, n);
    crpm_open_opts o = {.path = path, .create = 1};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "create: %s", crpm_last_error());
    REQUIRE(crpm_container_protect(c, 3, a, n, CRPM_TC_BYTE, 1) == 0, "protect");
    REQUIRE(crpm_container_checkpoint(c, 1, NULL) == 0, "checkpoint: %s", crpm_last_error());
    uint64_t ch = c->sb.crc_chunk;
    REQUIRE(ch && ch < 4096, "chunks smaller than a copy piece (chunk %llu)", (unsigned long long)ch);
    crpm_container_close(c);

    char *b = fresh(n), *d = fresh(n);
    recover_into(path, 1, b, n, NULL);
    CHECK(memcmp(a, b, n) == 0, "huge_pages = 1: recovered data differ");
    CHECK(advised_huge(b + HP), "huge_pages = 1: the array is not advised huge");
    recover_into(path, 0, d, n, NULL);
    CHECK(memcmp(a, d, n) == 0, "huge_pages = 0: recovered data differ");
    CHECK(!advised_huge(d + HP), "huge_pages = 0: the array was advised huge");

    /* flip one byte in the third chunk of a piece of segment 2, and one in
     * the short last chunk, each in its own copy of the container */
    uint64_t where[2] = {2 * SEG + 4096 * 5 + 2 * ch + 17, n - 3};
    for (int k = 0; k < 2; k++) {
        REQUIRE(crpm_container_open(&(crpm_open_opts){.path = path}, &c, NULL) == 0, "open");
        crpm_region *r = &c->regions[0];
        const crpm_seg *sg = &r->segs[where[k] / SEG];
        off_t off = (off_t)(crpm_seg_addr(c, sg->phys[sg->state - 1]) - c->media.base) + (off_t)(where[k] % SEG);
        crpm_container_close(c);
        check_flip(path, off, 0x40);
        char want[64];
        snprintf(want, sizeof want, "array id 3, byte offset %llu (",
                 (unsigned long long)(where[k] / ch * ch));
        memset(d, 0, n);
        recover_into(path, k, d, n, want);
        check_flip(path, off, 0x40);
    }
    recover_into(path, 1, d, n, NULL);
    CHECK(memcmp(a, d, n) == 0, "restored container: recovered data differ");
    unlink(path);
    free(a);
    return check_summary("recover_copy");
}
