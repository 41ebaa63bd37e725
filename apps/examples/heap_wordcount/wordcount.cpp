// Word counts over a sliding window, with the whole state in libcrpm's
// persistent heap (docs/heap.md): an std::unordered_map from word to count
// (the words in the window) and an std::map from position to word (the window
// itself, a red-black tree), both with crpm::allocator, found after a restart
// through root 0.  Each rank reads its own deterministic stream of words
// (skewed: a few words are frequent, many are rare, some longer than the
// short-string buffer); each iteration reads --batch words, counts them,
// and forgets the words that leave a window of --window.
//
//   crpm-heap-wordcount [--iters N] [--batch N] [--window N] [--print-every N]
//                       [--crpm cfg.ini [--ckpt-every N [--ckpt-level L]]]
//
// With --ckpt-every N it checkpoints every N iterations at level L (1 by
// default); without it, it calls crpm_snapshot() every iteration and the
// configuration's intervals decide.  After a restart, every rank replays its
// stream from the start into plain std containers and checks that the
// recovered heap holds exactly that state (exit status 3 if not), so a
// restart is verified, not only finished.  Everything printed is computed
// in a fixed order: a restarted run prints what a failure-free run prints.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <mpi.h>
#include "crpm.h"
#include "crpm/allocator.hpp"

namespace {

template <class T>
using A = crpm::allocator<T>;
using String = std::basic_string<char, std::char_traits<char>, A<char>>;

struct StringHash { // the same hash (FNV-1a) for both string types
    template <class S>
    size_t operator()(const S &s) const
    {
        uint64_t h = 0xcbf29ce484222325ULL;
        for (char c : s)
            h = (h ^ (unsigned char)c) * 0x100000001b3ULL;
        return (size_t)h;
    }
};

using Counts = std::unordered_map<String, long, StringHash, std::equal_to<String>, A<std::pair<const String, long>>>;
using Window = std::map<long, String, std::less<long>, A<std::pair<const long, String>>>;
using PlainCounts = std::unordered_map<std::string, long, StringHash>;
using PlainWindow = std::map<long, std::string>;

struct State {
    long iter = 0;                        // iterations done
    long pos = 0;                         // words read
    uint64_t digest = 0xcbf29ce484222325ULL; // of every iteration's summary
    Counts counts;
    Window window;
};

int rank, nranks;
long batch = 2000, window_len = 20000;

uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

uint64_t fnv(uint64_t h, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ULL;
    return h;
}

// Word `pos` of this rank's stream: ranks are log-uniform over 1..2^17, so a
// few words are frequent and most are rare; one in seven is long.
template <class S>
S word(long pos)
{
    uint64_t x = mix(((uint64_t)rank << 40) ^ (uint64_t)pos);
    uint64_t r = (uint64_t)1 << (x % 17);
    r += (x >> 8) % r;
    char buf[64];
    int n = snprintf(buf, sizeof buf, "w%" PRIx64, r);
    if (r % 7 == 0)
        n += snprintf(buf + n, sizeof buf - (size_t)n, "-and-a-longer-tail-%" PRIu64, r % 1000);
    return S(buf, (size_t)n);
}

// One iteration on any pair of containers (the heap's, or the replay's).
template <class C, class W, class S>
uint64_t step(C &counts, W &window, long &pos, uint64_t digest)
{
    for (long i = 0; i < batch; i++, pos++) {
        S w = word<S>(pos);
        counts[w]++;
        window.emplace(pos, w);
        if ((long)window.size() > window_len) {
            auto old = window.begin();
            auto it = counts.find(old->second);
            if (--it->second == 0)
                counts.erase(it);
            window.erase(old);
        }
    }
    auto probe = counts.find(word<S>(pos - 1));
    digest = fnv(digest, counts.size());
    digest = fnv(digest, window.size());
    return fnv(digest, probe == counts.end() ? 0 : (uint64_t)probe->second);
}

void fail(const char *what, int rc)
{
    std::fprintf(stderr, "wordcount rank %d: %s: %s: %s\n", rank, what, crpm_strerror(rc), crpm_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

// Replays this rank's stream up to the recovered iteration and compares.
bool verify(const State &s, long iters_done)
{
    PlainCounts counts;
    PlainWindow window;
    long pos = 0;
    uint64_t digest = 0xcbf29ce484222325ULL;
    for (long i = 0; i < iters_done; i++)
        digest = step<PlainCounts, PlainWindow, std::string>(counts, window, pos, digest);
    bool ok = s.iter == iters_done && s.pos == pos && s.digest == digest && s.counts.size() == counts.size() &&
              s.window.size() == window.size();
    for (auto it = counts.begin(); ok && it != counts.end(); ++it) {
        auto f = s.counts.find(String(it->first.data(), it->first.size()));
        ok = f != s.counts.end() && f->second == it->second;
    }
    auto a = window.begin();
    for (auto b = s.window.begin(); ok && b != s.window.end(); ++a, ++b)
        ok = a->first == b->first && a->second.size() == b->second.size() &&
             std::memcmp(a->second.data(), b->second.data(), a->second.size()) == 0;
    return ok;
}

// Root 0 after a recovery, checked against a replay on every rank.
State *recovered(int status)
{
    State *s = crpm::root<State>(0);
    long it = s ? s->iter : -1, lo = 0, hi = 0;
    MPI_Allreduce(&it, &lo, 1, MPI_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&it, &hi, 1, MPI_LONG, MPI_MAX, MPI_COMM_WORLD);
    int ok = s && lo == hi && verify(*s, it), all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (!all) {
        std::fprintf(stderr, "wordcount rank %d: the recovered heap (iteration %ld) is not the state a replay of "
                     "the stream gives\n", rank, it);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (rank == 0)
        std::printf("wordcount: restarted from iteration %ld (level %d), verified against a replay\n", it,
                    status == CRPM_STATUS_L4 ? 4 : status == CRPM_STATUS_L3 ? 3 : status == CRPM_STATUS_L2 ? 2 : 1);
    std::fflush(stdout);
    return s;
}

long arg(int argc, char **argv, int &i)
{
    if (i + 1 >= argc) {
        std::fprintf(stderr, "wordcount: %s needs a value\n", argv[i]);
        std::exit(2);
    }
    char *end;
    long v = std::strtol(argv[++i], &end, 10);
    if (*end || v < 0) {
        std::fprintf(stderr, "wordcount: bad value '%s' for %s\n", argv[i], argv[i - 1]);
        std::exit(2);
    }
    return v;
}

} // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long iters = 200, print_every = 20, ckpt_every = 0, level = CRPM_L1;
    const char *cfg = nullptr;
    for (int i = 1; i < argc; i++) {
        if (!std::strcmp(argv[i], "--iters"))
            iters = arg(argc, argv, i);
        else if (!std::strcmp(argv[i], "--batch"))
            batch = arg(argc, argv, i);
        else if (!std::strcmp(argv[i], "--window"))
            window_len = arg(argc, argv, i);
        else if (!std::strcmp(argv[i], "--print-every"))
            print_every = arg(argc, argv, i);
        else if (!std::strcmp(argv[i], "--ckpt-every"))
            ckpt_every = arg(argc, argv, i);
        else if (!std::strcmp(argv[i], "--ckpt-level"))
            level = arg(argc, argv, i);
        else if (!std::strcmp(argv[i], "--crpm") && i + 1 < argc)
            cfg = argv[++i];
        else {
            if (rank == 0)
                std::fprintf(stderr, "usage: crpm-heap-wordcount [--iters N] [--batch N] [--window N] "
                             "[--print-every N] [--crpm cfg.ini [--ckpt-every N [--ckpt-level L]]]\n");
            MPI_Finalize();
            return 2;
        }
    }
    if (print_every < 1)
        print_every = 1;
    if (!cfg) { // no checkpoints: the same computation in plain containers
        PlainCounts counts;
        PlainWindow window;
        long it = 0, pos = 0;
        uint64_t digest = 0xcbf29ce484222325ULL;
        while (it < iters) {
            digest = step<PlainCounts, PlainWindow, std::string>(counts, window, pos, digest);
            if (++it % print_every == 0) {
                uint64_t d[2] = {digest, counts.size()}, all[2];
                MPI_Reduce(d, all, 2, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
                if (rank == 0)
                    std::printf("iter %ld digest %016" PRIx64 " distinct %" PRIu64 "\n", it, all[0], all[1]);
            }
        }
        uint64_t d = digest, all = 0;
        MPI_Reduce(&d, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
        if (rank == 0)
            std::printf("result %016" PRIx64 " after %ld iterations of %ld words on %d ranks\n", all, iters, batch,
                        nranks);
        MPI_Finalize();
        return 0;
    }

    int rc = crpm_init(cfg, MPI_COMM_WORLD);
    if (rc)
        fail("crpm_init", rc);
    int st = crpm_status();
    State *s = nullptr;
    if (st > 0 && ckpt_every > 0) {
        if ((rc = crpm_recover()))
            fail("crpm_recover", rc);
        s = recovered(st);
    } else {
        s = crpm::make<State>();
        crpm_set_root(0, s);
    }
    for (;;) {
        if (ckpt_every == 0) {
            int r = crpm_snapshot();
            if (r < 0)
                fail("crpm_snapshot", r);
            if (r == CRPM_SNAP_RECOVERED)
                s = recovered(crpm_status());
        }
        if (s->iter >= iters)
            break;
        s->digest = step<Counts, Window, String>(s->counts, s->window, s->pos, s->digest);
        s->iter++;
        if (s->iter % print_every == 0) {
            uint64_t d[2] = {s->digest, s->counts.size()}, all[2];
            MPI_Reduce(d, all, 2, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
            if (rank == 0)
                std::printf("iter %ld digest %016" PRIx64 " distinct %" PRIu64 "\n", s->iter, all[0], all[1]);
            std::fflush(stdout);
        }
        if (ckpt_every > 0 && s->iter % ckpt_every == 0 && (rc = crpm_checkpoint((int)s->iter, (int)level)))
            fail("crpm_checkpoint", rc);
    }
    uint64_t d = s->digest, all = 0;
    MPI_Reduce(&d, &all, 1, MPI_UINT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
    if (rank == 0)
        std::printf("result %016" PRIx64 " after %ld iterations of %ld words on %d ranks\n", all, iters, batch, nranks);
    std::fflush(stdout);
    crpm_stats_t tot;
    crpm_get_stats(nullptr, &tot);
    if (rank == 0)
        std::printf("wordcount: heap %.1f MiB in use; rank 0 took %llu checkpoints in this run, %.1f MiB written\n",
                    (double)crpm_heap_used() / 1048576.0, (unsigned long long)tot.checkpoints,
                    (double)tot.bytes_written / 1048576.0);
    if ((rc = crpm_finalize()))
        fail("crpm_finalize", rc);
    MPI_Finalize();
    return 0;
}
