// Key-value workloads on std::unordered_map and std::map (8-byte keys and
// values, keys Zipf 0.99) with checkpoints every --interval-ms, one variant
// per process (bench/heap/run.py runs them side by side):
//
//   plain     std containers, std::allocator, no persistence (the baseline)
//   tracked   the containers in libcrpm's heap, change_tracking = pagemap
//   compare   the same, change_tracking = compare
//   instrumented  the same, change_tracking = instrumented (bench_map_instr:
//             this file compiled by clang-14 with the libcrpm pass plugin;
//             bench_map_clang: without it, its plain baseline);
//             instrumented-verify checks at each checkpoint that every change
//             was marked (slow: every block compared besides)
//   fullcopy  the same heap written whole at every checkpoint (method = full:
//             a new file, write(), fsync, as FTI's level 1)
//   pmemobj   a hash map on PMDK libpmemobj, every update a transaction
//             (undo log), no checkpoints (unordered_map workloads only)
//
//   bench_map --variant V --structure umap|map [--keys N] [--seconds S]
//             [--interval-ms T] [--workloads LIST] [--dir D] [--warmup S]
//             [--lower-bound]
//
// After populating --keys keys and --warmup seconds of the balanced
// workload (unreported: every segment that changes gets its second NVM copy,
// a one-time cost), each workload runs --seconds of CPU time:
// read-only (100% get), read-heavy (5% update), balanced (50% update),
// insert (new uniform keys).  Times are the CPU time of the thread that
// runs the workload and the checkpoints, kernel time included (the machine
// may be shared; MPI's helper threads are left out): the interval too.  One JSON object per workload
// on stdout.  --lower-bound also keeps a copy of the heap and counts, at
// every checkpoint, the 256-byte blocks that changed since the previous one
// and since the one before (Oracle; slower: its throughput is not
// comparable).
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <unistd.h>
#include <mpi.h>
#include "crpm.h"
#include "crpm/allocator.hpp"
#ifdef CRPM_BENCH_PMEMOBJ
#include <libpmemobj.h>
#endif

namespace {

#if defined(__SANITIZE_ADDRESS__)
const uint64_t HEAP_BASE = 0x500000000000ULL;
#else
const uint64_t HEAP_BASE = 0x10000000000ULL;
#endif

double cpu_now()
{
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

struct Rng {
    uint64_t s;
    uint64_t next() { return s = mix(s); }
    double unit() { return (double)(next() >> 11) * (1.0 / 9007199254740992.0); }
};

// Zipf over ranks 0..n-1 (Gray et al., as YCSB draws it); rank r is key(r).
struct Zipf {
    double theta, zetan, alpha, eta;
    uint64_t n;
    Zipf(uint64_t n_, double th) : theta(th), n(n_)
    {
        double z2 = 1 + std::pow(0.5, th);
        zetan = 0;
        for (uint64_t i = 1; i <= n; i++)
            zetan += 1.0 / std::pow((double)i, th);
        alpha = 1.0 / (1.0 - th);
        eta = (1 - std::pow(2.0 / (double)n, 1 - th)) / (1 - z2 / zetan);
    }
    uint64_t draw(Rng &r) const
    {
        double u = r.unit(), uz = u * zetan;
        if (uz < 1)
            return 0;
        if (uz < 1 + std::pow(0.5, theta))
            return 1;
        uint64_t k = (uint64_t)((double)n * std::pow(eta * u - eta + 1, alpha));
        return k < n ? k : n - 1;
    }
};

uint64_t key_of(uint64_t rank) { return mix(rank ^ 0x5bd1e995ULL); }

// ---- the maps behind one interface -------------------------------------------------
template <class T>
using A = crpm::allocator<T>;
using HUmap = std::unordered_map<uint64_t, uint64_t, std::hash<uint64_t>, std::equal_to<uint64_t>,
                                 A<std::pair<const uint64_t, uint64_t>>>;
using HMap = std::map<uint64_t, uint64_t, std::less<uint64_t>, A<std::pair<const uint64_t, uint64_t>>>;

struct Store {
    virtual ~Store() {}
    virtual uint64_t get(uint64_t k) = 0;           // UINT64_MAX: absent
    virtual void update(uint64_t k, uint64_t v) = 0; // k present
    virtual void insert(uint64_t k, uint64_t v) = 0;
    virtual void populate(uint64_t n) { for (uint64_t i = 0; i < n; i++) insert(key_of(i), i); }
};

template <class M>
struct StdStore : Store {
    M *m;
    explicit StdStore(M *m_) : m(m_) {}
    uint64_t get(uint64_t k) override
    {
        auto it = m->find(k);
        return it == m->end() ? UINT64_MAX : it->second;
    }
    void update(uint64_t k, uint64_t v) override
    {
        auto it = m->find(k);
        if (it != m->end())
            it->second = v;
    }
    void insert(uint64_t k, uint64_t v) override { m->emplace(k, v); }
};

#ifdef CRPM_BENCH_PMEMOBJ
// A chained hash map in a libpmemobj pool: every insert and update is one
// failure-atomic transaction (undo log of the changed words).
struct PEntry {
    uint64_t key, value;
    PMEMoid next;
};
struct PRoot {
    uint64_t nbuckets;
    PMEMoid buckets; // nbuckets PMEMoids
};
struct PmemStore : Store {
    PMEMobjpool *pop = nullptr;
    PRoot *root = nullptr;
    PMEMoid *bucket = nullptr;
    PmemStore(const char *path, uint64_t keys)
    {
        uint64_t nb = 1;
        while (nb < keys * 2)
            nb <<= 1;
        size_t pool = (size_t)(keys * 3 / 2) * 96 + nb * sizeof(PMEMoid) + ((size_t)64 << 20);
        unlink(path);
        if (!(pop = pmemobj_create(path, "crpm-bench", pool, 0600))) {
            std::fprintf(stderr, "bench_map: pmemobj_create %s: %s\n", path, pmemobj_errormsg());
            std::exit(1);
        }
        PMEMoid r = pmemobj_root(pop, sizeof(PRoot));
        root = (PRoot *)pmemobj_direct(r);
        if (pmemobj_tx_begin(pop, nullptr, TX_PARAM_NONE) == 0) {
            pmemobj_tx_add_range(r, 0, sizeof(PRoot));
            root->nbuckets = nb;
            root->buckets = pmemobj_tx_zalloc(nb * sizeof(PMEMoid), 1);
            pmemobj_tx_commit();
        }
        if (pmemobj_tx_end() != 0 || OID_IS_NULL(root->buckets)) {
            std::fprintf(stderr, "bench_map: pmemobj bucket array: %s\n", pmemobj_errormsg());
            std::exit(1);
        }
        bucket = (PMEMoid *)pmemobj_direct(root->buckets);
    }
    ~PmemStore() override { pmemobj_close(pop); }
    PEntry *find(uint64_t k)
    {
        for (PMEMoid o = bucket[mix(k) & (root->nbuckets - 1)]; !OID_IS_NULL(o);) {
            PEntry *e = (PEntry *)pmemobj_direct(o);
            if (e->key == k)
                return e;
            o = e->next;
        }
        return nullptr;
    }
    uint64_t get(uint64_t k) override
    {
        PEntry *e = find(k);
        return e ? e->value : UINT64_MAX;
    }
    void update(uint64_t k, uint64_t v) override
    {
        PEntry *e = find(k);
        if (!e)
            return;
        if (pmemobj_tx_begin(pop, nullptr, TX_PARAM_NONE) == 0) {
            pmemobj_tx_add_range_direct(&e->value, sizeof e->value);
            e->value = v;
            pmemobj_tx_commit();
        }
        pmemobj_tx_end();
    }
    void add(uint64_t k, uint64_t v) // inside a transaction
    {
        uint64_t b = mix(k) & (root->nbuckets - 1);
        PMEMoid o = pmemobj_tx_alloc(sizeof(PEntry), 2);
        PEntry *e = (PEntry *)pmemobj_direct(o);
        e->key = k;
        e->value = v;
        e->next = bucket[b];
        pmemobj_tx_add_range_direct(&bucket[b], sizeof bucket[b]);
        bucket[b] = o;
    }
    void insert(uint64_t k, uint64_t v) override
    {
        if (pmemobj_tx_begin(pop, nullptr, TX_PARAM_NONE) == 0) {
            add(k, v);
            pmemobj_tx_commit();
        }
        pmemobj_tx_end();
    }
    void populate(uint64_t n) override // batches of 1000 per transaction: setup only
    {
        for (uint64_t i = 0; i < n;) {
            if (pmemobj_tx_begin(pop, nullptr, TX_PARAM_NONE) == 0) {
                for (uint64_t j = 0; j < 1000 && i < n; j++, i++)
                    add(key_of(i), i);
                pmemobj_tx_commit();
            }
            if (pmemobj_tx_end() != 0) {
                std::fprintf(stderr, "bench_map: pmemobj populate: %s\n", pmemobj_errormsg());
                std::exit(1);
            }
        }
    }
};
#endif

struct Opts {
    std::string variant = "plain", structure = "umap", workloads = "read-only,read-heavy,balanced,insert", dir;
    uint64_t keys = 4000000;
    double seconds = 2, interval_ms = 128, zipf = 0.99, warmup = 1.5;
    bool lower_bound = false;
};

bool on_heap(const Opts &o)
{
    return o.variant == "tracked" || o.variant == "compare" || o.variant.rfind("instrumented", 0) == 0 ||
           o.variant == "fullcopy";
}

// The bytes of 256-byte blocks that changed since the previous checkpoint
// (o1: what an oracle writing only changed blocks would write) and since the
// one before (o2: what the copy a two-copy failure-atomic scheme writes into
// lacks, as it holds that older state).  Copies of the heap kept for it.
struct Oracle {
    char *prev = nullptr, *prev2 = nullptr;
    uint64_t size = 0;
    ~Oracle()
    {
        std::free(prev);
        std::free(prev2);
    }
    void count(const char *base, uint64_t bytes, uint64_t &o1, uint64_t &o2)
    {
        if (bytes > size) { /* grown: the new part was zero */
            char *a = (char *)std::realloc(prev, bytes), *b = a ? (char *)std::realloc(prev2, bytes) : nullptr;
            if (!a || !b) {
                std::fprintf(stderr, "bench_map: out of memory for the lower-bound copies\n");
                std::exit(1);
            }
            std::memset(a + size, 0, bytes - size);
            std::memset(b + size, 0, bytes - size);
            prev = a;
            prev2 = b;
            size = bytes;
        }
        size_t nblk = (size_t)((bytes + 255) / 256); /* heap extents are whole pages */
        for (size_t i = 0; i < nblk; i++) {
            size_t off = i * 256;
            o1 += std::memcmp(base + off, prev + off, 256) != 0 ? 256 : 0;
            o2 += std::memcmp(base + off, prev2 + off, 256) != 0 ? 256 : 0;
        }
        std::swap(prev, prev2);
        std::memcpy(prev, base, bytes);
    }
};

struct Result {
    uint64_t ops = 0, ckpts = 0, bytes = 0, compared = 0, oracle = 0, oracle2 = 0;
    double secs = 0, ckpt_secs = 0, ckpt_max = 0;
};

Result run_workload(Store &s, const Opts &o, const std::string &w, const Zipf &z, uint64_t &next_key, Oracle *orc,
                    const char *heap_base)
{
    Result r;
    Rng rng{mix((uint64_t)w.size() * 7919 + 17)};
    int upd = w == "read-only" ? 0 : w == "read-heavy" ? 5 : w == "balanced" ? 50 : -1;
    bool ckpt = on_heap(o);
    uint64_t sink = 0;
    double t0 = cpu_now(), last = t0, iv = o.interval_ms / 1000.0;
    for (bool end = false; !end;) {
        for (int i = 0; i < 1024; i++) {
            if (upd < 0) {
                uint64_t k = key_of(next_key++);
                s.insert(k, k);
            } else {
                uint64_t k = key_of(z.draw(rng));
                if ((int)(rng.next() % 100) < upd)
                    s.update(k, rng.s);
                else
                    sink += s.get(k);
            }
        }
        r.ops += 1024;
        double now = cpu_now();
        end = now - t0 >= o.seconds;
        if (ckpt && (now - last >= iv || end)) { /* the phase ends with one: its writes are its own */
            int rc = crpm_checkpoint((int)(r.ckpts + 1), CRPM_L1);
            if (rc) {
                std::fprintf(stderr, "bench_map: checkpoint: %s\n", crpm_last_error());
                std::exit(1);
            }
            crpm_stats_t st;
            crpm_get_stats(&st, nullptr);
            r.ckpts++;
            r.bytes += st.bytes_written;
            r.compared += st.bytes_compared;
            r.ckpt_secs += st.seconds;
            r.ckpt_max = st.seconds > r.ckpt_max ? st.seconds : r.ckpt_max;
            if (orc)
                orc->count(heap_base, st.protected_bytes, r.oracle, r.oracle2);
            last = cpu_now();
        }
    }
    r.secs = cpu_now() - t0;
    if (sink == 42)
        std::printf("#\n");
    return r;
}

void usage()
{
    std::fprintf(stderr, "usage: bench_map --variant plain|tracked|compare|instrumented[-verify]|fullcopy|pmemobj --structure umap|map "
                 "[--keys N] [--seconds S] [--interval-ms T] [--workloads LIST] [--dir D] [--lower-bound]\n");
    std::exit(2);
}

} // namespace

int main(int argc, char **argv)
{
    Opts o;
    o.dir = "/dev/shm";
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        auto val = [&]() -> const char * { if (i + 1 >= argc) usage(); return argv[++i]; };
        if (a == "--variant") o.variant = val();
        else if (a == "--structure") o.structure = val();
        else if (a == "--keys") o.keys = std::strtoull(val(), nullptr, 10);
        else if (a == "--seconds") o.seconds = std::atof(val());
        else if (a == "--interval-ms") o.interval_ms = std::atof(val());
        else if (a == "--workloads") o.workloads = val();
        else if (a == "--zipf") o.zipf = std::atof(val());
        else if (a == "--dir") o.dir = val();
        else if (a == "--lower-bound") o.lower_bound = true;
        else if (a == "--warmup") o.warmup = std::atof(val());
        else usage();
    }
    MPI_Init(&argc, &argv);
    Store *s = nullptr;
    char cfg[2048], base[1024];
    std::snprintf(base, sizeof base, "%s/crpm-bench-map-%d", o.dir.c_str(), (int)getpid());
    if (on_heap(o)) {
        std::snprintf(cfg, sizeof cfg,
                      "[basic]\nckpt_dir = %s\njob_name = map\nheap_size = 16G\nverbosity = 0\n[advanced]\n"
                      "change_tracking = %s\nmethod = %s\npersistence = pmem\nheap_base = %#llx\n", base,
                      o.variant == "tracked" ? "pagemap" : o.variant.rfind("instrumented", 0) == 0 ? o.variant.c_str() : "compare", o.variant == "fullcopy" ? "full" : "differential", (unsigned long long)HEAP_BASE);
        if (crpm_init_text(cfg, "bench_map", MPI_COMM_WORLD)) {
            std::fprintf(stderr, "bench_map: crpm_init: %s\n", crpm_last_error());
            return 1;
        }
        if (o.structure == "umap")
            s = new StdStore<HUmap>(crpm::make<HUmap>());
        else
            s = new StdStore<HMap>(crpm::make<HMap>());
    } else if (o.variant == "plain") {
        if (o.structure == "umap")
            s = new StdStore<std::unordered_map<uint64_t, uint64_t>>(new std::unordered_map<uint64_t, uint64_t>);
        else
            s = new StdStore<std::map<uint64_t, uint64_t>>(new std::map<uint64_t, uint64_t>);
    } else if (o.variant == "pmemobj") {
#ifdef CRPM_BENCH_PMEMOBJ
        if (o.structure != "umap") {
            std::fprintf(stderr, "bench_map: pmemobj: hash map only\n");
            return 2;
        }
        std::string pool = std::string(base) + ".pool";
        s = new PmemStore(pool.c_str(), o.keys);
#else
        std::fprintf(stderr, "bench_map: built without libpmemobj\n");
        return 77;
#endif
    } else {
        usage();
    }
    double t0 = cpu_now();
    s->populate(o.keys);
    double tpop = cpu_now() - t0;
    Oracle orc, *porc = o.lower_bound && on_heap(o) ? &orc : nullptr;
    if (on_heap(o)) { // the populated state is the first checkpoint
        if (crpm_checkpoint(0, CRPM_L1)) {
            std::fprintf(stderr, "bench_map: checkpoint: %s\n", crpm_last_error());
            return 1;
        }
    }
    Zipf z(o.keys, o.zipf);
    uint64_t next_key = o.keys;
    const char *heap_base = (const char *)(uintptr_t)HEAP_BASE;
    if (o.warmup > 0 && o.variant != "pmemobj") { // every hot segment gets its second copy first
        Opts wo = o;
        wo.seconds = o.warmup;
        run_workload(*s, wo, "balanced", z, next_key, nullptr, heap_base);
    }
    if (porc) { // the state of the last two checkpoints
        crpm_stats_t st;
        crpm_get_stats(&st, nullptr);
        uint64_t a = 0, b = 0;
        porc->count(heap_base, st.protected_bytes, a, b);
        porc->count(heap_base, st.protected_bytes, a, b);
    }
    std::string rest = o.workloads;
    while (!rest.empty()) {
        size_t c = rest.find(',');
        std::string w = rest.substr(0, c);
        rest = c == std::string::npos ? "" : rest.substr(c + 1);
        Result r = run_workload(*s, o, w, z, next_key, porc, heap_base);
        std::printf("{\"variant\": \"%s\", \"structure\": \"%s\", \"workload\": \"%s\", \"keys\": %" PRIu64
                    ", \"interval_ms\": %g, \"populate_s\": %.3f, \"ops\": %" PRIu64 ", \"seconds\": %.4f, "
                    "\"mops\": %.4f, \"checkpoints\": %" PRIu64 ", \"ckpt_s_mean\": %.6f, \"ckpt_s_max\": %.6f, "
                    "\"bytes_per_ckpt\": %.1f, \"bytes_per_op\": %.3f, \"oracle_bytes_per_ckpt\": %.1f, "
                    "\"oracle2_bytes_per_ckpt\": %.1f, \"compared_per_ckpt\": %.1f, \"heap_used\": %zu}\n",
                    o.variant.c_str(), o.structure.c_str(), w.c_str(), o.keys, o.interval_ms, tpop, r.ops, r.secs,
                    (double)r.ops / r.secs / 1e6, r.ckpts, r.ckpts ? r.ckpt_secs / (double)r.ckpts : 0.0, r.ckpt_max,
                    r.ckpts ? (double)r.bytes / (double)r.ckpts : 0.0, (double)r.bytes / (double)r.ops,
                    porc && r.ckpts ? (double)r.oracle / (double)r.ckpts : -1.0,
                    porc && r.ckpts ? (double)r.oracle2 / (double)r.ckpts : -1.0,
                    r.ckpts ? (double)r.compared / (double)r.ckpts : 0.0, on_heap(o) ? crpm_heap_used() : 0);
        std::fflush(stdout);
    }
    delete s;
    if (on_heap(o))
        crpm_finalize();
    MPI_Finalize();
    // the checkpoints (and the libpmemobj pool) are this run's alone: gigabytes on /dev/shm otherwise
    std::error_code ec;
    std::filesystem::remove_all(base, ec);
    std::filesystem::remove(std::string(base) + ".pool", ec);
    return 0;
}
