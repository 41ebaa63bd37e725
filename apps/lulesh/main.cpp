// LULESH 2.0 driver: options, time loop, libcrpm checkpoint/restart, report.
//
// Output (rank 0, stdout).  The "Run completed" block holds the results that
// are equal across runs and restarts; "Elapsed time", "Grind time" and "FOM"
// are measurements and "crpm:" lines report checkpoint activity, so tests
// must ignore those.
#include <mpi.h>

#include <crpm.h>

#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "app_omp.hpp"
#include "crpm_app.hpp"
#include "lulesh.hpp"

namespace {

using lulesh::Domain;
using lulesh::Index;
using lulesh::Options;
using lulesh::Real;

void usage(const char *prog) {
    std::fprintf(stderr,
                 "usage: %s [options]\n"
                 "  -s N               elements per edge of each rank's block (default 30)\n"
                 "  -i N               stop after N cycles\n"
                 "  -r N               number of regions (default 11)\n"
                 "  -b N               region balance: region r has weight (r+1)^N (default 1)\n"
                 "  -c N               extra cost of the expensive regions (default 1)\n"
                 "  -p                 print progress every cycle\n"
                 "  -q                 quiet: print nothing but errors\n",
                 prog);
    crpm_app::usage(stderr, "cycles", true);
    std::fprintf(stderr,
                 "  --cycle-delay-ms X sleep X ms per cycle (stretches runs for crash tests)\n"
                 "The number of MPI ranks must be a perfect cube.\n");
}

bool parseInt(const char *s, long lo, long hi, int &out) {
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return false;
    out = int(v);
    return true;
}

// Returns 0 to run, 1 on a bad command line, 2 after -h.
int parseArgs(int argc, char **argv, Options &o, crpm_app::Options &ck, bool talk) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool hasVal = i + 1 < argc;
        bool ok = true;
        const crpm_app::Arg c = crpm_app::parseArg(a, hasVal ? argv[i + 1] : nullptr, ck, true);
        if (c != crpm_app::Arg::NotMine) {
            ok = c == crpm_app::Arg::Ok;
            ++i;
        } else if (a == "-h" || a == "--help") {
            if (talk) usage(argv[0]);
            return 2;
        } else if (a == "-p") {
            o.progress = true;
        } else if (a == "-q") {
            o.quiet = true;
        } else if (a == "-s" && hasVal) {
            ok = parseInt(argv[++i], 1, 1000, o.size);
        } else if (a == "-i" && hasVal) {
            ok = parseInt(argv[++i], 0, 2000000000L, o.iterations);
        } else if (a == "-r" && hasVal) {
            ok = parseInt(argv[++i], 1, 100000, o.regions);
        } else if (a == "-b" && hasVal) {
            ok = parseInt(argv[++i], 0, 64, o.balance);
        } else if (a == "-c" && hasVal) {
            ok = parseInt(argv[++i], 0, 100000, o.cost);
        } else if (a == "--cycle-delay-ms" && hasVal) {
            char *end = nullptr;
            o.cycleDelayMs = std::strtod(argv[++i], &end);
            ok = end != argv[i] && *end == '\0' && o.cycleDelayMs >= 0.0 && o.cycleDelayMs <= 60000.0;
        } else {
            if (talk) {
                std::fprintf(stderr, "%s: unknown option or missing value: %s\n", argv[0], a.c_str());
                usage(argv[0]);
            }
            return 1;
        }
        if (!ok) {
            if (talk) std::fprintf(stderr, "%s: bad value for %s: %s\n", argv[0], a.c_str(), argv[i]);
            return 1;
        }
    }
    return 0;
}

// Everything a restart needs to continue bit for bit.  Geometry-derived
// quantities (volo, masses, connectivity) are rebuilt identically at start;
// ql, qq, delv, vdov and arealg are recomputed before they are read.
void protectState(crpm_app::Checkpointer &ck, Domain &d) {
    const int64_t nn = d.numNode, ne = d.numElem;
    ck.protect(0, &d.cycle, 1, CRPM_INT, "crpm_protect(cycle)");
    ck.protect(1, &d.time, 1, CRPM_DOUBLE, "crpm_protect(time)");
    ck.protect(2, &d.deltatime, 1, CRPM_DOUBLE, "crpm_protect(deltatime)");
    ck.protect(3, &d.dtcourant, 1, CRPM_DOUBLE, "crpm_protect(dtcourant)");
    ck.protect(4, &d.dthydro, 1, CRPM_DOUBLE, "crpm_protect(dthydro)");
    std::vector<Real> *nodal[6] = {&d.x, &d.y, &d.z, &d.xd, &d.yd, &d.zd};
    for (int i = 0; i < 6; ++i)
        ck.protect(10 + i, nodal[i]->data(), nn, CRPM_DOUBLE, "crpm_protect(nodal)");
    std::vector<Real> *elem[5] = {&d.e, &d.p, &d.q, &d.v, &d.ss};
    for (int i = 0; i < 5; ++i)
        ck.protect(20 + i, elem[i]->data(), ne, CRPM_DOUBLE, "crpm_protect(element)");
}

// FNV-1a over the bits of the whole restartable state, combined over ranks
// in rank order: equal digests mean a bitwise-equal final state, a far
// stronger restart check than the printed digits.  Collective.
unsigned long long stateDigest(const Domain &d) {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    auto mix = [&h](const void *p, std::size_t n) {
        const unsigned char *b = static_cast<const unsigned char *>(p);
        for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ULL;
    };
    mix(&d.cycle, sizeof d.cycle);
    for (const Real *s : {&d.time, &d.deltatime, &d.dtcourant, &d.dthydro}) mix(s, sizeof *s);
    for (const std::vector<Real> *v : {&d.x, &d.y, &d.z, &d.xd, &d.yd, &d.zd, &d.e, &d.p, &d.q,
                                       &d.v, &d.ss})
        mix(v->data(), v->size() * sizeof(Real));
    std::vector<std::uint64_t> all(d.rank == 0 ? d.nranks : 0);
    MPI_Gather(&h, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, d.comm);
    h = 0xcbf29ce484222325ULL;
    for (std::uint64_t r : all) mix(&r, sizeof r);
    return (unsigned long long)h;
}

void report(const Domain &d, unsigned long long digest, double elapsed, int cycles) {
    const Index nx = d.nx;
    std::printf("Run completed:\n");
    std::printf("   Problem size        =  %d\n", int(nx));
    std::printf("   MPI tasks           =  %d\n", d.nranks);
    std::printf("   Iteration count     =  %d\n", d.cycle);
    std::printf("   Final Origin Energy =  %12.6e\n", double(d.e[0]));

    // The blast is symmetric under x <-> y: compare plane 0 across its diagonal.
    Real maxAbs = 0.0, totalAbs = 0.0, maxRel = 0.0;
    for (Index j = 0; j < nx; ++j)
        for (Index k = j + 1; k < nx; ++k) {
            const Real diff = std::fabs(d.e[j * nx + k] - d.e[k * nx + j]);
            totalAbs += diff;
            if (maxAbs < diff) maxAbs = diff;
            const Real rel = diff / d.e[k * nx + j];
            if (maxRel < rel) maxRel = rel;
        }
    std::printf("   Testing Plane 0 of Energy Array on rank 0:\n");
    std::printf("        MaxAbsDiff   = %12.6e\n", double(maxAbs));
    std::printf("        TotalAbsDiff = %12.6e\n", double(totalAbs));
    std::printf("        MaxRelDiff   = %12.6e\n", double(maxRel));
    std::printf("   State digest        =  %016llx\n\n", digest);

    // Grind time: microseconds per element and cycle, per rank and overall;
    // FOM as in LULESH 2.0, 1000 / overall grind time.  Cycles run before a
    // restart are not in this run's time, so only this run's cycles count.
    const double perDom = cycles > 0 ? (elapsed * 1e6 / cycles) / (double(nx) * nx * nx) : 0.0;
    const double overall = perDom / d.nranks;
    std::printf("Elapsed time         = %10.2f (s)\n", elapsed);
    std::printf("Grind time (us/z/c)  = %10.8g (per dom)  (%10.8g overall)\n", perDom, overall);
    std::printf("FOM                  = %10.8g (z/s)\n\n", overall > 0 ? 1000.0 / overall : 0.0);
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0, nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    Options o;
    crpm_app::Options ckOpt;  // --crpm, --ckpt-every
    const int pr = parseArgs(argc, argv, o, ckOpt, rank == 0);
    if (pr != 0) {
        MPI_Finalize();
        return pr == 2 ? 0 : 1;
    }
    int tp = int(std::lround(std::cbrt(double(nranks))));
    if (tp * tp * tp != nranks) {
        if (rank == 0)
            std::fprintf(stderr, "lulesh: the number of MPI ranks must be a perfect cube (got %d)\n",
                         nranks);
        MPI_Finalize();
        return 1;
    }

    Domain d;
    lulesh::buildDomain(d, o, MPI_COMM_WORLD, tp);
    const bool talk = rank == 0 && !o.quiet;
    if (talk) {
        std::printf("Running problem size %d^3 per domain until completion\n", o.size);
        std::printf("Num processors: %d\n", nranks);
#ifdef _OPENMP
        std::printf("Num threads: %d\n", app_omp::threads());
#endif
        std::printf("Total number of elements: %lld\n\n",
                    (long long)nranks * o.size * o.size * o.size);
        std::fflush(stdout);
    }

    // Any library failure is fatal for the whole job.
    crpm_app::Checkpointer ck("lulesh", ckOpt);
    const bool crpm = ck.enabled();
    if (crpm) {
        ck.init(MPI_COMM_WORLD);
        protectState(ck, d);
        if (ck.recoverIfAny() > 0) {
            if (talk) {
                std::printf("crpm: restarted from cycle %d (time %.6e)\n", d.cycle, double(d.time));
                std::fflush(stdout);
            }
        }
    }

    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    const int firstCycle = d.cycle;
    while (d.time < d.k.stoptime && d.cycle < o.iterations) {
        lulesh::timeIncrement(d);
        lulesh::lagrangeLeapFrog(d);
        if (o.progress && talk) {
            std::printf("cycle = %d, time = %e, dt=%e\n", d.cycle, double(d.time),
                        double(d.deltatime));
            std::fflush(stdout);
        }
        if (ck.due(d.cycle)) ck.checkpoint(d.cycle);
        if (o.cycleDelayMs > 0.0)
            std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.cycleDelayMs));
    }
    double elapsed = MPI_Wtime() - start, maxElapsed = 0.0;
    MPI_Allreduce(&elapsed, &maxElapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    const unsigned long long digest = stateDigest(d);
    if (talk) report(d, digest, maxElapsed, d.cycle - firstCycle);
    if (crpm) {
        double tmax = 0.0, tckpt = ck.seconds();
        MPI_Allreduce(&tckpt, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        if (talk) {
            std::printf("crpm: %d checkpoints in this run, %.3f s\n", ck.count(), tmax);
            std::fflush(stdout);
        }
        ck.finalize();
    }
    MPI_Finalize();
    return 0;
}
