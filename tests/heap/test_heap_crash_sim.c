/* Crash at every drain of checkpoints of a persistent heap (lib/heap saved by
 * the engine as the library saves it: one array of the heap's extent, grown
 * as the heap grows).  The workload keeps pointer structures in the heap --
 * a chained hash table whose nodes carry payloads of changing size, and a
 * binary search tree whose nodes are inserted, deleted and rotated -- plus
 * large and huge blocks that come and go.  At every drain of every
 * checkpoint, crash images (nothing in flight landed, everything landed,
 * random subsets with 8-byte tearing; persist_sim.c) are opened: each must
 * recover exactly the heap of epoch k or k-1, byte for byte, and the
 * previous epoch too when the container offers it.  For one image of each
 * checkpoint the recovered bytes are also adopted as a heap
 * (crpm_heap_attach) and checked: every allocator invariant and both
 * structures walked, their sizes as the workload counted.
 *
 *   test_heap_crash_sim DIR MIN_IMAGES [track]                                */
#include <sys/mman.h>
#include <unistd.h>
#include "check.h"
#include "engine.h"
#include "error.h"
#include "heap.h"
#include "persist_sim.h"
#include "sim_image.h"

#define MAXE 40
#define HEAP_ID INT32_MIN
#define NBUCKET 128
#define RESERVE ((uint64_t)64 << 20)

typedef struct hnode { /* hash-table entry */
    struct hnode *next;
    uint64_t key;
    uint32_t len;
    char *payload; /* its own block, resized by realloc */
} hnode;

typedef struct tnode { /* search-tree node */
    struct tnode *l, *r;
    uint64_t key;
    char pad[24];
} tnode;

typedef struct top {
    hnode **bucket;  /* NBUCKET pointers, one block */
    tnode *tree;
    uint64_t nh, nt; /* entries of each */
    char *big[4];    /* large and huge blocks */
    size_t bigsz[4];
} top;

static struct {
    char *mem;
    crpm_heap *h;
    top *t;
} H;

static char *refs[MAXE + 1];
static uint64_t ref_len[MAXE + 1], ref_nh[MAXE + 1], ref_nt[MAXE + 1];
static uint64_t lo_epoch, hi_epoch, images, failures, rng_img, deep_checks;
static int mid_checkpoint, deep_due, track;
static char img_path[512], *img, *rd;

static int grow(void *arg, void *base, uint64_t bytes)
{
    (void)arg;
    return mprotect(base, bytes, PROT_READ | PROT_WRITE) ? crpm_error(CRPM_ERR_NOMEM, "mprotect") : 0;
}

static void *xmalloc(size_t n)
{
    void *p = crpm_heap_alloc(H.h, n);
    REQUIRE(p, "heap alloc %zu: %s", n, crpm_last_error());
    return p;
}

/* ---- the workload ------------------------------------------------------------ */

static tnode *tree_insert(tnode *n, tnode *x)
{
    if (!n)
        return x;
    if (x->key < n->key)
        n->l = tree_insert(n->l, x);
    else
        n->r = tree_insert(n->r, x);
    return n;
}

/* Removes key (if present), freeing its node; *gone counts it. */
static tnode *tree_delete(tnode *n, uint64_t key, int *gone)
{
    if (!n)
        return NULL;
    if (key < n->key) {
        n->l = tree_delete(n->l, key, gone);
        return n;
    }
    if (key > n->key) {
        n->r = tree_delete(n->r, key, gone);
        return n;
    }
    tnode *keep;
    if (!n->l || !n->r) {
        keep = n->l ? n->l : n->r;
    } else { /* the successor takes n's place: pointers rewired, not copied */
        tnode **pp = &n->r, *s = n->r;
        while (s->l) {
            pp = &s->l;
            s = s->l;
        }
        *pp = s->r;
        s->l = n->l;
        s->r = n->r;
        keep = s;
    }
    crpm_heap_free(H.h, n);
    (*gone)++;
    return keep;
}

static tnode *rotate(tnode *n, int right)
{
    if (!n)
        return n;
    tnode *c = right ? n->l : n->r;
    if (!c)
        return n;
    if (right) {
        n->l = c->r;
        c->r = n;
    } else {
        n->r = c->l;
        c->l = n;
    }
    return c;
}

/* Payload sizes of a few size classes only: every class in use holds a
 * 64-KiB slab, and the images must stay small. */
static uint32_t pay_len(uint64_t *s, int kinds)
{
    static const uint32_t base[] = {17, 90, 380, 1400};
    uint32_t k = (uint32_t)rnd_below(s, (uint64_t)kinds);
    return base[k] + (uint32_t)rnd_below(s, k ? 20 : 10);
}

static void hash_op(uint64_t *s)
{
    top *t = H.t;
    uint64_t key = rnd_below(s, 600), b = key % NBUCKET, op = rnd_below(s, 10);
    hnode **pp = &t->bucket[b];
    while (*pp && (*pp)->key != key)
        pp = &(*pp)->next;
    if (!*pp) {
        hnode *n = xmalloc(sizeof *n);
        n->key = key;
        n->len = pay_len(s, 3);
        n->payload = xmalloc(n->len);
        fill_random(s, n->payload, n->len);
        n->next = t->bucket[b];
        t->bucket[b] = n;
        t->nh++;
    } else if (op < 4) { /* delete */
        hnode *n = *pp;
        *pp = n->next;
        crpm_heap_free(H.h, n->payload);
        crpm_heap_free(H.h, n);
        t->nh--;
    } else if (op < 7) { /* payload changes size */
        hnode *n = *pp;
        uint32_t len = pay_len(s, op == 6 ? 4 : 3);
        char *p = crpm_heap_realloc(H.h, n->payload, len);
        REQUIRE(p, "realloc: %s", crpm_last_error());
        if (len > n->len)
            fill_random(s, p + n->len, len - n->len);
        n->payload = p;
        n->len = len;
    } else if (op < 9) { /* a few bytes of the payload */
        (*pp)->payload[rnd_below(s, (*pp)->len)] ^= 0x11;
    } else { /* move to the front of its chain */
        hnode *n = *pp;
        *pp = n->next;
        n->next = t->bucket[b];
        t->bucket[b] = n;
    }
}

static void tree_op(uint64_t *s)
{
    top *t = H.t;
    uint64_t op = rnd_below(s, 10);
    if (op < 5) {
        tnode *x = xmalloc(sizeof *x);
        x->l = x->r = NULL;
        x->key = rnd(s);
        memset(x->pad, (int)op, sizeof x->pad);
        t->tree = tree_insert(t->tree, x);
        t->nt++;
    } else if (op < 8 && t->tree) { /* delete a key near the root's */
        int gone = 0;
        uint64_t key = rnd_below(s, 2) && t->tree->l ? t->tree->l->key : t->tree->key;
        t->tree = tree_delete(t->tree, key, &gone);
        t->nt -= (uint64_t)gone;
    } else { /* rotations at the root and below */
        t->tree = rotate(t->tree, (int)(op & 1));
        if (t->tree)
            t->tree->r = rotate(t->tree->r, (int)rnd_below(s, 2));
    }
}

static void big_op(uint64_t *s)
{
    top *t = H.t;
    int k = (int)rnd_below(s, 3);
    if (t->big[k]) {
        crpm_heap_free(H.h, t->big[k]);
        t->big[k] = NULL;
        return;
    }
    /* large (pages), or in slot 0 now and then huge (whole arenas of 256 KiB) */
    t->bigsz[k] = k || rnd_below(s, 4) ? 17000 + rnd_below(s, 30000) : 262000 + rnd_below(s, 20000);
    t->big[k] = xmalloc(t->bigsz[k]);
    fill_random(s, t->big[k], rnd_below(s, 2) ? t->bigsz[k] : 4096);
}

/* ---- checks --------------------------------------------------------------------- */

/* A recovered copy at `copy` (the heap was at H.mem): allocator invariants
 * and both structures, pointers translated. */
static int deep_check(char *copy, uint64_t len, uint64_t nh, uint64_t nt, char *why, size_t whylen)
{
    crpm_heap *h;
    if (crpm_heap_attach(&h, copy, len, RESERVE, 0, NULL, NULL) != 0 || crpm_heap_check(h, NULL) != 0) {
        snprintf(why, whylen, "heap: %s", crpm_last_error());
        return -1;
    }
    intptr_t d = copy - H.mem;
#define AT(p) ((void *)((char *)(p) + d))
    const top *t = AT(crpm_heap_get_root(h, 0));
    uint64_t cnt = 0;
    for (int b = 0; b < NBUCKET; b++)
        for (const hnode *n = ((hnode **)AT(t->bucket))[b]; n && cnt <= nh; n = ((const hnode *)AT(n))->next, cnt++)
            if (((const hnode *)AT(n))->key % NBUCKET != (uint64_t)b ||
                crpm_heap_usable(h, AT(((const hnode *)AT(n))->payload)) < ((const hnode *)AT(n))->len) {
                snprintf(why, whylen, "hash entry in bucket %d broken", b);
                crpm_heap_close(h);
                return -1;
            }
    /* in-order walk with an explicit stack: keys ascending */
    const tnode *stack[4096];
    int sp = 0;
    uint64_t tc = 0, last = 0;
    int first = 1, ok = 1;
    const tnode *n = t->tree;
    while ((n || sp) && ok && tc <= nt) {
        while (n && sp < 4096) {
            stack[sp++] = AT(n);
            n = ((const tnode *)AT(n))->l;
        }
        if (sp == 4096) {
            ok = 0;
            break;
        }
        const tnode *x = stack[--sp];
        ok = first || x->key >= last;
        first = 0;
        last = x->key;
        tc++;
        n = x->r;
    }
#undef AT
    crpm_heap_close(h);
    if (cnt != nh || tc != nt || !ok) {
        snprintf(why, whylen, "structures: %llu hash entries (want %llu), %llu tree nodes (want %llu)%s",
                 (unsigned long long)cnt, (unsigned long long)nh, (unsigned long long)tc, (unsigned long long)nt,
                 ok ? "" : ", tree out of order");
        return -1;
    }
    deep_checks++;
    return 0;
}

/* The committed heap equals epoch e's exactly. */
static int matches(crpm_container *c, uint64_t e, int deep, char *why, size_t whylen)
{
    if (crpm_container_nregions(c) != 1) {
        snprintf(why, whylen, "%d regions", crpm_container_nregions(c));
        return -1;
    }
    crpm_array a;
    crpm_container_region(c, 0, &a);
    if (a.id != HEAP_ID || crpm_array_bytes(&a) != ref_len[e]) {
        snprintf(why, whylen, "region %d of %llu bytes, want %llu", a.id, (unsigned long long)crpm_array_bytes(&a),
                 (unsigned long long)ref_len[e]);
        return -1;
    }
    int rc = crpm_container_read_region(c, 0, rd);
    if (rc || memcmp(rd, refs[e], ref_len[e]) != 0) {
        snprintf(why, whylen, "heap bytes differ (rc %d)", rc);
        return -1;
    }
    return deep ? deep_check(rd, ref_len[e], ref_nh[e], ref_nt[e], why, whylen) : 0;
}

static void verify_image(const char *buf, size_t n, uint64_t lo, uint64_t hi, const char *what)
{
    static sim_image_file f;
    if (!f.path[0])
        sim_image_init(&f, img_path);
    sim_image_write(&f, buf, n);
    images++;
    crpm_open_opts o = {.path = img_path, .persistence = CRPM_PERSIST_MSYNC};
    crpm_container *c;
    char why[256] = "";
    if (crpm_container_open(&o, &c, NULL) != 0) {
        fprintf(stderr, "FAIL (%s, epochs %llu..%llu): open: %s\n", what, (unsigned long long)lo,
                (unsigned long long)hi, crpm_last_error());
        failures++;
        return;
    }
    uint64_t e = crpm_container_epoch(c);
    int deep = deep_due;
    deep_due = 0;
    if (e < lo || e > hi || (e > 0 && matches(c, e, deep, why, sizeof why))) {
        fprintf(stderr, "FAIL (%s): recovered epoch %llu, allowed %llu..%llu: %s\n", what, (unsigned long long)e,
                (unsigned long long)lo, (unsigned long long)hi, why);
        failures++;
    } else if (e > 1 && crpm_container_prev_available(c)) {
        if (crpm_container_rollback(c) || crpm_container_epoch(c) != e - 1 || matches(c, e - 1, 0, why, sizeof why)) {
            fprintf(stderr, "FAIL (%s): rollback from %llu: %s %s\n", what, (unsigned long long)e, why,
                    crpm_last_error());
            failures++;
        }
    }
    crpm_container_close(c);
}

static void on_drain(void *arg, crpm_media *m)
{
    (void)arg;
    if (!mid_checkpoint)
        return;
    static const int modes[] = {CRPM_SIM_NONE_LANDED, CRPM_SIM_ALL_LANDED, CRPM_SIM_RANDOM, CRPM_SIM_RANDOM};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        crpm_sim_crash_image(m, modes[i], &rng_img, img);
        deep_due = i == 2;
        verify_image(img, m->size, lo_epoch, hi_epoch, "crash at drain");
    }
}

static void run(uint64_t seed, uint64_t seg, uint64_t blk, const char *dir)
{
    uint64_t s = seed;
    char path[600];
    snprintf(path, sizeof path, "%s/heap-sim-%d.crpm", dir, (int)getpid());
    unlink(path);
    /* a fresh range, as crpm_init reserves it */
    REQUIRE(mmap(H.mem, RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == H.mem,
            "mmap");
    REQUIRE(crpm_heap_create(&H.h, H.mem, RESERVE, 18, grow, NULL) == 0, "create: %s", crpm_last_error());
    H.t = xmalloc(sizeof *H.t);
    memset(H.t, 0, sizeof *H.t);
    H.t->bucket = xmalloc(NBUCKET * sizeof *H.t->bucket);
    memset(H.t->bucket, 0, NBUCKET * sizeof *H.t->bucket);
    crpm_heap_set_root(H.h, 0, H.t);
    crpm_sim_set_callback(on_drain, NULL);
    crpm_open_opts o = {.path = path, .segment_size = seg, .block_size = blk, .job_name = "heapsim", .nranks = 1,
                        .backend = &crpm_backend_sim, .create = 1, .slot_size = 65536, .change_tracking = track};
    crpm_container *c;
    REQUIRE(crpm_container_open(&o, &c, NULL) == 0, "open: %s", crpm_last_error());
    if (track && strcmp(crpm_container_tracking(c), "pagemap") != 0)
        check_skip("change tracking not available: %s", crpm_container_tracking(c));
    for (int k = 1; k <= MAXE; k++) {
        int ops = 10 + (int)rnd_below(&s, k % 7 == 0 ? 1500 : 150);
        for (int i = 0; i < ops; i++) {
            uint64_t w = rnd_below(&s, 100);
            if (w < 60)
                hash_op(&s);
            else if (w < 99)
                tree_op(&s);
            else
                big_op(&s);
        }
        uint64_t ext = crpm_heap_extent(H.h);
        REQUIRE(crpm_container_protect(c, HEAP_ID, H.mem, ext, CRPM_TC_BYTE, 1) == 0, "protect: %s",
                crpm_last_error());
        free(refs[k]);
        refs[k] = malloc(ext);
        memcpy(refs[k], H.mem, ext);
        ref_len[k] = ext;
        ref_nh[k] = H.t->nh;
        ref_nt[k] = H.t->nt;
        lo_epoch = (uint64_t)k - 1;
        hi_epoch = (uint64_t)k;
        mid_checkpoint = 1;
        int rc = crpm_container_checkpoint(c, (uint64_t)k, NULL);
        mid_checkpoint = 0;
        REQUIRE(rc == 0, "checkpoint %d: %s", k, crpm_last_error());
        crpm_media *m = crpm_container_media(c);
        memcpy(img, crpm_sim_media(m), m->size);
        deep_due = 1;
        verify_image(img, m->size, (uint64_t)k, (uint64_t)k, "media after checkpoint");
        REQUIRE(crpm_heap_check(H.h, NULL) == 0, "live heap: %s", crpm_last_error());
        if (failures)
            break;
    }
    crpm_container_close(c);
    crpm_sim_set_callback(NULL, NULL);
    crpm_heap_close(H.h);
    unlink(path);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    uint64_t min_images = argc > 2 ? strtoull(argv[2], NULL, 10) : 20000;
    track = argc > 3 && strcmp(argv[3], "track") == 0;
    check_set_note(crpm_last_error);
    H.mem = mmap(NULL, RESERVE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    REQUIRE(H.mem != MAP_FAILED, "mmap");
    img = malloc(256u << 20);
    rd = aligned_alloc(4096, RESERVE);
    REQUIRE(img && rd, "out of memory");
    snprintf(img_path, sizeof img_path, "%s/heap-sim-img-%d.crpm", dir, (int)getpid());
    rng_img = 4242;
    static const struct { uint64_t seg, blk; } geo[] = {{65536, 256}, {16384, 256}, {262144, 4096}, {8192, 64}};
    int runs = 0;
    while ((images < min_images || runs < 4) && !failures) {
        run(1000 + (uint64_t)runs, geo[runs % 4].seg, geo[runs % 4].blk, dir);
        runs++;
    }
    unlink(img_path);
    printf("heap crash images checked: %llu in %d workloads%s (%llu adopted as heaps and walked), failures: %llu\n",
           (unsigned long long)images, runs, track ? " (change tracking)" : "", (unsigned long long)deep_checks,
           (unsigned long long)failures);
    return failures ? 1 : 0;
}
