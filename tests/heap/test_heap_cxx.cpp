// crpm::allocator with the standard containers, crpm::make / destroy, and a
// checkpoint/recover round trip of all of them (MPI, any number of ranks):
// std::unordered_map, std::map, std::vector, std::deque, std::basic_string,
// nested (a map of vectors of strings), compared with the same structures
// built with std::allocator.
//
//   test_heap_cxx DIR
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>
#include <mpi.h>
#include "check.h"
#include "crpm.h"
#include "crpm/allocator.hpp"

template <class T> using A = crpm::allocator<T>;
using String = std::basic_string<char, std::char_traits<char>, A<char>>;
using HMap = std::unordered_map<long, long, std::hash<long>, std::equal_to<long>, A<std::pair<const long, long>>>;
using TMap = std::map<long, std::vector<String, A<String>>, std::less<long>,
                      A<std::pair<const long, std::vector<String, A<String>>>>>;
using Deque = std::deque<double, A<double>>;

struct alignas(64) Cell {
    double v[8];
};

struct State { // everything in the heap, found from root 0
    HMap hmap;
    TMap tmap;
    Deque dq;
    std::vector<Cell, A<Cell>> cells;
    String name;
    long steps = 0;
};

// The same operations on the state and on a plain reference.
struct Ref {
    std::unordered_map<long, long> hmap;
    std::map<long, std::vector<std::string>> tmap;
    std::deque<double> dq;
    std::vector<double> cells;
    std::string name;
};

static void work(State &s, Ref &r, uint64_t seed, int n)
{
    for (int i = 0; i < n; i++) {
        uint64_t k = rnd_below(&seed, 5000), op = rnd_below(&seed, 10);
        if (op < 4) {
            s.hmap[(long)k] = (long)i;
            r.hmap[(long)k] = i;
        } else if (op < 6) {
            s.hmap.erase((long)k);
            r.hmap.erase((long)k);
        } else if (op < 8) {
            char buf[64];
            snprintf(buf, sizeof buf, "value %d with a string longer than the short-string buffer", i);
            s.tmap[(long)(k % 300)].push_back(String(buf));
            r.tmap[(long)(k % 300)].push_back(buf);
        } else if (op < 9) {
            s.dq.push_back((double)i);
            r.dq.push_back(i);
            if (s.dq.size() > 3000) {
                s.dq.pop_front();
                r.dq.pop_front();
            }
        } else {
            Cell c;
            for (int j = 0; j < 8; j++)
                c.v[j] = i + j;
            s.cells.push_back(c);
            r.cells.push_back(i);
        }
    }
    s.name += "x";
    r.name += "x";
    s.steps++;
}

static int same(const State &s, const Ref &r)
{
    if (s.hmap.size() != r.hmap.size() || s.tmap.size() != r.tmap.size() || s.dq.size() != r.dq.size() ||
        s.cells.size() != r.cells.size() || std::string(s.name.c_str()) != r.name)
        return 0;
    for (const auto &kv : r.hmap) {
        auto it = s.hmap.find(kv.first);
        if (it == s.hmap.end() || it->second != kv.second)
            return 0;
    }
    for (const auto &kv : r.tmap) {
        auto it = s.tmap.find(kv.first);
        if (it == s.tmap.end() || it->second.size() != kv.second.size())
            return 0;
        for (size_t j = 0; j < kv.second.size(); j++)
            if (std::string(it->second[j].c_str()) != kv.second[j])
                return 0;
    }
    for (size_t j = 0; j < r.dq.size(); j++)
        if (s.dq[j] != r.dq[j])
            return 0;
    for (size_t j = 0; j < r.cells.size(); j++)
        if (s.cells[j].v[3] != r.cells[j] + 3 || ((uintptr_t)&s.cells[j] & 63))
            return 0;
    return 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    check_set_rank(rank);
    check_set_note(crpm_last_error);
    REQUIRE(argc > 1, "usage: test_heap_cxx DIR");
    static_assert(std::allocator_traits<A<int>>::is_always_equal::value, "stateless");
    static_assert(std::is_same<std::allocator_traits<A<int>>::rebind_alloc<long>, A<long>>::value, "rebind");
    char cfg[2048];
    snprintf(cfg, sizeof cfg, "[basic]\nckpt_dir = %s/cxx-np%d\njob_name = heap-cxx\nkeep_last_ckpt = 1\n"
             "verbosity = 0\nheap_size = 256M\n", argv[1], n);

    REQUIRE(crpm_init_text(cfg, "cxx", MPI_COMM_WORLD) == 0, "init: %s", crpm_last_error());
    CHECK(crpm::make<int>(3) != nullptr, "make<int>");
    State *s = crpm::make<State>();
    Ref r;
    CHECK(crpm_set_root(0, s) == 0, "root");
    for (int step = 0; step < 3; step++)
        work(*s, r, 100 + (uint64_t)step + 1000 * (uint64_t)rank, 20000);
    CHECK(same(*s, r), "built state differs from the reference");
    CHECK(crpm_checkpoint(1, CRPM_L1) == 0, "checkpoint: %s", crpm_last_error());
    Ref saved = r;
    size_t used = crpm_heap_used();
    work(*s, r, 7, 5000); // lost: after the checkpoint
    CHECK(crpm_finalize() == 0, "finalize");

    REQUIRE(crpm_init_text(cfg, "cxx", MPI_COMM_WORLD) == 0, "re-init: %s", crpm_last_error());
    CHECK(crpm_status() == CRPM_STATUS_L1, "status %d", crpm_status());
    CHECK(crpm_recover() == 0, "recover: %s", crpm_last_error());
    State *t = crpm::root<State>(0);
    CHECK(t == s && crpm_heap_used() == used, "root %p (was %p), used %zu (was %zu)", (void *)t, (void *)s,
          crpm_heap_used(), used);
    if (t == s) {
        CHECK(same(*t, saved), "recovered state differs from the saved one");
        work(*t, saved, 11, 20000); // the containers and the allocator go on
        CHECK(same(*t, saved), "state after recovery differs");
        crpm::destroy(t);
        crpm_set_root(0, nullptr);
        CHECK(crpm_heap_used() == 16, "%zu bytes left (the int of make<int>)", crpm_heap_used());
    }
    bool threw = false;
    try {
        std::vector<char, A<char>> huge;
        huge.reserve((size_t)1 << 30); // more than heap_size
    } catch (const std::bad_alloc &) {
        threw = strstr(crpm_last_error(), "heap") != nullptr;
    }
    CHECK(threw, "no bad_alloc beyond heap_size: %s", crpm_last_error());
    crpm_finalize();
    int rc = check_summary("heap_cxx");
    MPI_Finalize();
    return rc;
}
