// CoMD proxy application (Lennard-Jones copper) with optional libcrpm
// checkpoint/restart.
//
// Without --crpm the program makes no library call.  With it, the complete
// dynamic state (owned-cell positions, momenta, ids, species, cell counts,
// step and initial energy) is protected; forces are recomputed after a
// restart, which reproduces them bitwise, so a restarted run prints exactly
// what an uninterrupted run prints.
#include "md.hpp"
#include "crpm_app.hpp"

#include <crpm.h>
#include <mpi.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

struct Options {
    MdParams md;
    int steps = 100;
    int printRate = 10;
    crpm_app::Options ckpt;  // --crpm, --ckpt-every
};

// Saved with the atoms; the parameters guard against restarting with a
// different problem, which would otherwise silently mix two runs.
struct CkptHeader {
    long long step;
    long long atomsInitial;
    double eInitial;
    long long geometry[8];  // nx ny nz px py pz capacity owned-cells
    double physics[4];      // lattice constant, dt, temperature, displacement
    unsigned long long seed;
};

int g_rank = 0;

void usage(FILE *out)
{
    std::fprintf(out,
        "usage: comd [options]\n"
        "  -x, --nx N          unit cells in x (default 20); -y/--ny, -z/--nz likewise\n"
        "  -i, --xproc N       ranks in x (default 1); -j/--yproc, -k/--zproc likewise\n"
        "  -N, --nSteps N      time steps (default 100)\n"
        "  -n, --printRate N   steps between energy lines (default 10)\n"
        "  -D, --dt DT         time step in fs (default 1)\n"
        "  -T, --temp T        initial temperature in K (default 600)\n"
        "  -l, --lat A         lattice constant in Angstrom (default 3.615)\n"
        "  -r, --delta D       random initial displacement, lattice constants (default 0)\n"
        "  -s, --seed S        random seed of velocities and displacements (default 1234)\n"
        "  --crpm FILE         enable libcrpm checkpointing with this config\n"
        "  --ckpt-every N      checkpoint every N steps (default 10; 0 = never)\n"
        "  --ckpt-level L      1 (node-local, default), 2 (plus partner copy), 3 (plus group parity)\n"
        "                      or 4 (global HDF5)\n"
        "  -h, --help          this text\n");
}

bool parseInt(const char *s, int lo, int *out)
{
    char *end;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > 1000000000L)
        return false;
    *out = static_cast<int>(v);
    return true;
}

bool parseDouble(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = std::strtod(s, &end);
    if (errno || end == s || *end || !std::isfinite(v))
        return false;
    *out = v;
    return true;
}

// Returns 0 to run, 1 for --help, -1 on a bad command line (message printed).
int parseArgs(int argc, char **argv, Options *o)
{
    for (int a = 1; a < argc; ++a) {
        std::string k = argv[a];
        if (k == "-h" || k == "--help")
            return 1;
        if (a + 1 >= argc) {
            if (g_rank == 0)
                std::fprintf(stderr, "comd: option %s needs a value\n", k.c_str());
            return -1;
        }
        const char *v = argv[++a];
        bool ok = true;
        unsigned long long seed;
        char *end;
        if (k == "-x" || k == "--nx") ok = parseInt(v, 1, &o->md.nx);
        else if (k == "-y" || k == "--ny") ok = parseInt(v, 1, &o->md.ny);
        else if (k == "-z" || k == "--nz") ok = parseInt(v, 1, &o->md.nz);
        else if (k == "-i" || k == "--xproc") ok = parseInt(v, 1, &o->md.px);
        else if (k == "-j" || k == "--yproc") ok = parseInt(v, 1, &o->md.py);
        else if (k == "-k" || k == "--zproc") ok = parseInt(v, 1, &o->md.pz);
        else if (k == "-N" || k == "--nSteps") ok = parseInt(v, 0, &o->steps);
        else if (k == "-n" || k == "--printRate") ok = parseInt(v, 1, &o->printRate);
        else if (k == "-D" || k == "--dt") ok = parseDouble(v, &o->md.dt) && o->md.dt > 0;
        else if (k == "-T" || k == "--temp") ok = parseDouble(v, &o->md.temp) && o->md.temp >= 0;
        else if (k == "-l" || k == "--lat") ok = parseDouble(v, &o->md.lat) && o->md.lat > 0;
        else if (k == "-r" || k == "--delta")
            ok = parseDouble(v, &o->md.delta) && o->md.delta >= 0 && o->md.delta < 0.5;
        else if (k == "-s" || k == "--seed") {
            errno = 0;
            seed = std::strtoull(v, &end, 10);
            ok = !errno && end != v && !*end;
            o->md.seed = seed;
        } else if (crpm_app::Arg c = crpm_app::parseArg(k, v, o->ckpt, true); c != crpm_app::Arg::NotMine)
            ok = c == crpm_app::Arg::Ok;
        else {
            if (g_rank == 0)
                std::fprintf(stderr, "comd: unknown option %s\n", k.c_str());
            return -1;
        }
        if (!ok) {
            if (g_rank == 0)
                std::fprintf(stderr, "comd: bad value '%s' for %s\n", v, k.c_str());
            return -1;
        }
    }
    return 0;
}

void die(const std::string &msg)
{
    std::fprintf(stderr, "comd: rank %d: %s\n", g_rank, msg.c_str());
    MPI_Abort(MPI_COMM_WORLD, 1);
}

void printEnergies(long long step, double dt, const MdEnergies &e)
{
    if (g_rank != 0)
        return;
    double n = static_cast<double>(e.atoms);
    double temp = e.ke / n / (1.5 * Md::kBoltzmann);
    std::printf(" %6lld %10.2f %18.12f %18.12f %18.12f %12.4f %12lld\n", step, step * dt,
                (e.pe + e.ke) / n, e.pe / n, e.ke / n, temp, e.atoms);
    std::fflush(stdout);
}

void fillHeader(CkptHeader *h, const Options &o, const Md &md)
{
    h->geometry[0] = o.md.nx;
    h->geometry[1] = o.md.ny;
    h->geometry[2] = o.md.nz;
    h->geometry[3] = o.md.px;
    h->geometry[4] = o.md.py;
    h->geometry[5] = o.md.pz;
    h->geometry[6] = md.cellCapacity();
    h->geometry[7] = md.ownedCells();
    h->physics[0] = o.md.lat;
    h->physics[1] = o.md.dt;
    h->physics[2] = o.md.temp;
    h->physics[3] = o.md.delta;
    h->seed = o.md.seed;
}

}  // namespace

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    int nranks;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    Options opt;
    int pa = parseArgs(argc, argv, &opt);
    if (pa != 0) {
        if (g_rank == 0)
            usage(pa > 0 ? stdout : stderr);
        MPI_Finalize();
        return pa > 0 ? 0 : 2;
    }

    Md md(opt.md, MPI_COMM_WORLD);
    if (!md.error().empty()) {
        if (g_rank == 0)
            std::fprintf(stderr, "comd: %s\n", md.error().c_str());
        MPI_Finalize();
        return 2;
    }

    if (g_rank == 0) {
        std::printf("CoMD (crpm edition): Lennard-Jones molecular dynamics, FCC copper\n");
        std::printf("  Lattice: %d x %d x %d unit cells, a = %.4f A, %lld atoms\n", opt.md.nx,
                    opt.md.ny, opt.md.nz, opt.md.lat, md.totalAtoms());
        std::printf("  Box: %.4f x %.4f x %.4f A\n", md.boxLength(0), md.boxLength(1),
                    md.boxLength(2));
        std::printf("  Potential: LJ sigma %.4f A, epsilon %.4f eV, cutoff %.4f A, mass %.2f amu\n",
                    Md::kSigma, Md::kEpsilon, Md::kCutoffSigmas * Md::kSigma, Md::kMassAmu);
        std::printf("  Ranks: %d x %d x %d, link cells %d x %d x %d (%.4f x %.4f x %.4f A, "
                    "capacity %d)\n",
                    opt.md.px, opt.md.py, opt.md.pz, md.globalCells(0), md.globalCells(1),
                    md.globalCells(2), md.cellSize(0), md.cellSize(1), md.cellSize(2),
                    md.cellCapacity());
        std::printf("  Steps: %d, print rate %d, dt %.4f fs, T %.2f K, displacement %.4f, "
                    "seed %llu\n", opt.steps, opt.printRate, opt.md.dt, opt.md.temp,
                    opt.md.delta, static_cast<unsigned long long>(opt.md.seed));
        if (opt.ckpt.config)
            std::printf("  Checkpointing: libcrpm (%s), every %d steps\n", opt.ckpt.config,
                        opt.ckpt.every);
        else
            std::printf("  Checkpointing: off\n");
        std::fflush(stdout);
    }

    double tStart = MPI_Wtime();
    if (!md.initialize())
        die(md.error());
    MdEnergies e0 = md.energies();

    CkptHeader hdr{};
    fillHeader(&hdr, opt, md);
    hdr.step = 0;
    hdr.atomsInitial = e0.atoms;
    hdr.eInitial = (e0.pe + e0.ke) / static_cast<double>(e0.atoms);
    bool restarted = false;

    // Any library failure is fatal for the whole job.
    crpm_app::Checkpointer ck("comd", opt.ckpt);
    if (ck.enabled()) {
        ck.init(MPI_COMM_WORLD);
        crpm_type_t hdrType;
        ck.check(crpm_init_type(&hdrType, sizeof(CkptHeader)), "crpm_init_type");
        const int64_t slots = md.ownedSlots();
        ck.protect(0, &hdr, 1, hdrType, "crpm_protect(header)");
        ck.protect(1, md.positions(), 3 * slots, CRPM_DOUBLE, "crpm_protect(r)");
        ck.protect(2, md.momenta(), 3 * slots, CRPM_DOUBLE, "crpm_protect(p)");
        ck.protect(3, md.ids(), slots, CRPM_LLONG, "crpm_protect(id)");
        ck.protect(4, md.species(), slots, CRPM_INT, "crpm_protect(species)");
        ck.protect(5, md.cellCounts(), md.ownedCells(), CRPM_INT, "crpm_protect(counts)");
        if (ck.recoverIfAny() > 0) {
            CkptHeader want{};
            fillHeader(&want, opt, md);
            if (std::memcmp(want.geometry, hdr.geometry, sizeof want.geometry) != 0 ||
                std::memcmp(want.physics, hdr.physics, sizeof want.physics) != 0 ||
                want.seed != hdr.seed)
                die("the checkpoint was written for a different problem or rank layout");
            if (hdr.step > opt.steps)
                die("the checkpoint is at step " + std::to_string(hdr.step) +
                    ", beyond the requested " + std::to_string(opt.steps) + " steps");
            if (!md.refresh())
                die(md.error());
            restarted = true;
            if (g_rank == 0) {
                std::printf("crpm: restarted from the checkpoint of step %lld\n", hdr.step);
                std::fflush(stdout);
            }
        }
    }

    if (g_rank == 0) {
        std::printf("#  Loop   Time(fs)       Total Energy   Potential Energy     Kinetic Energy"
                    "  Temperature      # Atoms\n");
        std::fflush(stdout);
    }
    if (!restarted)
        printEnergies(0, opt.md.dt, e0);

    double tLoop = MPI_Wtime();
    long long first = hdr.step;
    for (long long s = hdr.step + 1; s <= opt.steps; ++s) {
        if (!md.step())
            die(md.error());
        if (s % opt.printRate == 0)
            printEnergies(s, opt.md.dt, md.energies());
        if (ck.due(s)) {
            hdr.step = s;
            ck.checkpoint(static_cast<int>(s));
        }
    }
    long long done = opt.steps > first ? opt.steps - first : 0;
    double tEnd = MPI_Wtime();

    MdEnergies ef = md.energies();
    const double eFinal = (ef.pe + ef.ke) / static_cast<double>(ef.atoms);
    const long long lost = hdr.atomsInitial - ef.atoms;
    if (g_rank == 0) {
        std::printf("\nSimulation Validation:\n");
        std::printf("  Initial energy  : %18.12f\n", hdr.eInitial);
        std::printf("  Final energy    : %18.12f\n", eFinal);
        std::printf("  eFinal/eInitial : %18.12f\n", eFinal / hdr.eInitial);
        std::printf("  Final temperature : %.6f K\n",
                    ef.ke / static_cast<double>(ef.atoms) / (1.5 * Md::kBoltzmann));
        if (lost == 0)
            std::printf("  Final atom count : %lld, no atoms lost\n", ef.atoms);
        else
            std::printf("  Final atom count : %lld, %lld atoms lost\n", ef.atoms, lost);
        std::fflush(stdout);
    }

    // Measurements: maxima over ranks, as the slowest rank sets the pace.
    double t[6] = {tEnd - tStart, tEnd - tLoop, md.tForce, md.tRedistribute, md.tHalo, ck.seconds()};
    MPI_Reduce(g_rank == 0 ? MPI_IN_PLACE : t, t, 6, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        double perAtom = done > 0 ? t[1] / static_cast<double>(done) /
                                        static_cast<double>(ef.atoms) * 1e6 : 0.0;
        std::printf("Timing: total %.3f s, loop %.3f s for %lld steps, %.3f ms/step, "
                    "%.4f us/atom/step\n", t[0], t[1], done,
                    done > 0 ? t[1] / static_cast<double>(done) * 1e3 : 0.0, perAtom);
        std::printf("Timing: force %.3f s, redistribute %.3f s, halo %.3f s, checkpoint %.3f s\n",
                    t[2], t[3], t[4], t[5]);
    }
    // Counted since this process started, so they depend on restarts and
    // on the layout: a notice, not a result.
    long long moves[2] = {md.cellMoves, md.rankMoves};
    MPI_Reduce(g_rank == 0 ? MPI_IN_PLACE : moves, moves, 2, MPI_LONG_LONG, MPI_SUM, 0,
               MPI_COMM_WORLD);
    if (g_rank == 0) {
        std::printf("Migration: %lld link-cell changes, %lld atoms sent to other ranks\n",
                    moves[0], moves[1]);
        std::fflush(stdout);
    }

    if (ck.enabled()) {
        const crpm_stats_t total = ck.totals();
        if (g_rank == 0) {
            std::printf("crpm: rank 0: %llu checkpoints, %llu bytes protected, %llu bytes written, "
                        "%.3f s\n",
                        static_cast<unsigned long long>(total.checkpoints),
                        static_cast<unsigned long long>(total.protected_bytes),
                        static_cast<unsigned long long>(total.bytes_written), total.seconds);
            std::fflush(stdout);
        }
        ck.finalize();
    }

    MPI_Finalize();
    bool bad = lost != 0 || !std::isfinite(eFinal);
    return bad ? 3 : 0;
}
