// HPCCG proxy application: unpreconditioned conjugate gradient on a 27-point
// stencil, with optional libcrpm checkpoint/restart.
//
// Output (rank 0, stdout).  Result lines are stable and comparable across
// runs and restarts; lines starting with "Timing:" hold measurements and
// "crpm:" lines report checkpoint activity, so tests can ignore both.
#include <mpi.h>

#include <crpm.h>

#include <cstdarg>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app_omp.hpp"
#include "crpm_app.hpp"
#include "problem.hpp"

namespace {

struct Options {
    int nx = 0, ny = 0, nz = 0;
    crpm_app::Options ckpt;  // --crpm, --ckpt-every, --ckpt-level
    int max_iter = 150;
    double iter_delay_ms = 0.0;
};

void usage(const char *prog) {
    std::fprintf(stderr,
                 "usage: %s nx ny nz [options]\n"
                 "  each rank solves an nx*ny*nz block; ranks are stacked in z\n",
                 prog);
    crpm_app::usage(stderr, "iterations", true);
    std::fprintf(stderr,
                 "  --max-iter N       iteration limit (default 150, i.e. 149 iterations)\n"
                 "  --iter-delay-ms X  sleep X ms per iteration (stretches runs for crash tests)\n");
}

bool parse_int(const char *s, int min, int &out) {
    char *end = nullptr;
    long v = std::strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < min || v > 1000000000L) return false;
    out = int(v);
    return true;
}

// Returns false (after printing why on rank 0) if the command line is bad.
bool parse_args(int argc, char **argv, Options &o, bool talk) {
    int npos = 0;
    int *dims[3] = {&o.nx, &o.ny, &o.nz};
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        bool has_val = i + 1 < argc;
        bool ok = true;
        const crpm_app::Arg c = crpm_app::parseArg(a, has_val ? argv[i + 1] : nullptr, o.ckpt, true);
        if (c != crpm_app::Arg::NotMine) {
            ok = c == crpm_app::Arg::Ok;
            ++i;
        } else if (a == "--max-iter" && has_val) {
            ok = parse_int(argv[++i], 1, o.max_iter);
        } else if (a == "--iter-delay-ms" && has_val) {
            char *end = nullptr;
            o.iter_delay_ms = std::strtod(argv[++i], &end);
            ok = *end == '\0' && o.iter_delay_ms >= 0 && o.iter_delay_ms < 1e6;
        } else if (a == "-h" || a == "--help") {
            ok = false;
        } else if (a.size() > 0 && a[0] != '-' && npos < 3) {
            ok = parse_int(argv[i], 1, *dims[npos++]);
        } else {
            ok = false;
        }
        if (!ok) {
            if (talk) {
                std::fprintf(stderr, "hpccg: bad argument '%s'\n", argv[i]);
                usage(argv[0]);
            }
            return false;
        }
    }
    if (npos != 3) {
        if (talk) usage(argv[0]);
        return false;
    }
    return true;
}

// Flushed at once so that lines survive a SIGKILL of the job.
void say(int rank, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void say(int rank, const char *fmt, ...) {
    if (rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    std::vfprintf(stdout, fmt, ap);
    va_end(ap);
    std::fflush(stdout);
}

// Checkpointed solver state: everything later iterations depend on.  The
// matrix and b are regenerated from the command line on restart.
enum ProtectId { ID_ITER = 0, ID_SCALARS = 1, ID_X = 2, ID_R = 3, ID_P = 4 };

int run(const Options &o) {
    int rank = 0, nranks = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    const double t_setup = MPI_Wtime();
    hpccg::Problem prob(o.nx, o.ny, o.nz, MPI_COMM_WORLD);
    const int64_t n = prob.nrow();
    const int64_t off = prob.plane();
    int64_t gnnz = 0, lnnz = prob.local_nnz();
    MPI_Allreduce(&lnnz, &gnnz, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);

    say(rank, "HPCCG: local grid %d x %d x %d, %d rank(s) stacked in z, global grid %d x %d x %lld\n",
        o.nx, o.ny, o.nz, nranks, o.nx, o.ny, (long long)o.nz * nranks);
    say(rank, "HPCCG: %lld rows, %lld nonzeros, max_iter %d, tolerance 0\n",
        (long long)n * nranks, (long long)gnnz, o.max_iter);
#ifdef _OPENMP
    say(rank, "HPCCG: %d OpenMP thread(s) per rank\n", app_omp::threads());
#endif

    std::vector<double> x(size_t(n), 0.0), r(size_t(n), 0.0), ap(size_t(n), 0.0);
    std::vector<double> pext(size_t(prob.ext_size()), 0.0);
    double *p = pext.data() + off;  // owned rows of p
    const double *b = prob.b().data();
    hpccg::Timers tm;

    // Start-up is done on every launch, so the initial residual line is the
    // same in a restarted run; recovery then overwrites the state.
    prob.waxpby(1.0, x.data(), 0.0, x.data(), p, tm);
    prob.spmv(pext.data(), ap.data(), tm);
    prob.waxpby(1.0, b, -1.0, ap.data(), r.data(), tm);
    // scalars[0] = rtrans (r.r at the top of the saved iteration).
    double scalars[1] = {prob.ddot(r.data(), r.data(), tm)};
    double &rtrans = scalars[0];
    double normr = std::sqrt(rtrans);
    say(rank, "Initial Residual = %.6g\n", normr);
    const double t_setup_done = MPI_Wtime();

    int saved_iter = 0;  // iteration completed at the last checkpoint
    int first = 1;
    // Any library failure is fatal for the whole job (exit code 2).
    crpm_app::Checkpointer ck("hpccg", o.ckpt, 2);
    const bool crpm = ck.enabled();
    if (crpm) {
        ck.init(MPI_COMM_WORLD);
        ck.protect(ID_ITER, &saved_iter, 1, CRPM_INT, "crpm_protect(iter)");
        ck.protect(ID_SCALARS, scalars, 1, CRPM_DOUBLE, "crpm_protect(rtrans)");
        ck.protect(ID_X, x.data(), n, CRPM_DOUBLE, "crpm_protect(x)");
        ck.protect(ID_R, r.data(), n, CRPM_DOUBLE, "crpm_protect(r)");
        ck.protect(ID_P, p, n, CRPM_DOUBLE, "crpm_protect(p)");
        const int st = ck.recoverIfAny();
        if (st > 0) {
            if (saved_iter < 1 || saved_iter >= o.max_iter) {
                std::fprintf(stderr, "hpccg: checkpoint holds iteration %d, outside 1..%d\n",
                             saved_iter, o.max_iter - 1);
                MPI_Abort(MPI_COMM_WORLD, 3);
            }
            first = saved_iter + 1;
            normr = std::sqrt(rtrans);  // exactly what the saved iteration computed
            say(rank, "crpm: recovered %s checkpoint of iteration %d\n",
                st == CRPM_STATUS_L4   ? "level-4"
                : st == CRPM_STATUS_L2 ? "level-1 (containers rebuilt from level-2 partner copies)"
                : st == CRPM_STATUS_L3 ? "level-1 (containers rebuilt from level-3 parity)"
                                       : "level-1",
                saved_iter);
        }
    }

    const int print_freq = o.max_iter / 10 > 0 ? o.max_iter / 10 : 1;
    const double tolerance = 0.0;
    const auto delay = std::chrono::duration<double, std::milli>(o.iter_delay_ms);
    int niters = first - 1;
    const double t_solve = MPI_Wtime();
    for (int k = first; k < o.max_iter && normr > tolerance; k++) {
        if (k == 1) {
            prob.waxpby(1.0, r.data(), 0.0, r.data(), p, tm);
        } else {
            const double oldrtrans = rtrans;
            rtrans = prob.ddot(r.data(), r.data(), tm);
            const double beta = rtrans / oldrtrans;
            prob.waxpby(1.0, r.data(), beta, p, p, tm);
        }
        // Residual of the current r, reported before this iteration updates it.
        normr = std::sqrt(rtrans);
        if (k % print_freq == 0 || k + 1 == o.max_iter)
            say(rank, "Iteration = %d   Residual = %.6g\n", k, normr);

        prob.spmv(pext.data(), ap.data(), tm);
        const double alpha = rtrans / prob.ddot(p, ap.data(), tm);
        prob.waxpby(1.0, x.data(), alpha, p, x.data(), tm);
        prob.waxpby(1.0, r.data(), -alpha, ap.data(), r.data(), tm);
        niters = k;

        if (o.iter_delay_ms > 0) std::this_thread::sleep_for(delay);
        if (ck.due(k)) {
            saved_iter = k;
            ck.checkpoint(k);
        }
    }
    const double t_end = MPI_Wtime();

    const double err = prob.max_error_from_one(x.data());
    // Full-precision digest: restarts must reproduce the run bit for bit,
    // which the 6-digit figures alone would not show.
    double dsum = 0.0, rr = 0.0;
    {
        hpccg::Timers scratch;
        std::vector<double> dev(x), ones(x.size(), 1.0);
        for (double &d : dev) d -= 1.0;
        dsum = prob.ddot(dev.data(), ones.data(), scratch);
        rr = prob.ddot(r.data(), r.data(), scratch);
    }
    say(rank, "Iterations = %d\n", niters);
    say(rank, "Final Residual = %.6g\n", normr);
    say(rank, "Max error |x - 1| = %.6g\n", err);
    say(rank, "Final digest: residual %.17g, sum(x - 1) %.17g, r.r %.17g\n", normr, dsum, rr);

    // Timing: slowest rank.  Flops: 2 per matrix nonzero, 2 per dot product
    // entry, 3 per waxpby entry; 2 ddots, 3 waxpbys and 1 spmv an iteration.
    const int ran = niters - (first - 1);
    double loc[7] = {t_setup_done - t_setup, t_end - t_solve, tm.ddot, tm.waxpby, tm.spmv,
                     tm.halo, ck.seconds()};
    double mx[7];
    MPI_Reduce(loc, mx, 7, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    const double grows = double(n) * nranks;
    const double flops = ran * (2.0 * double(gnnz) + 2 * 2.0 * grows + 3 * 3.0 * grows);
    say(rank, "Timing: setup %.6f s, solve %.6f s for %d iteration(s) this run, %.6g s per iteration\n",
        mx[0], mx[1], ran, ran > 0 ? mx[1] / ran : 0.0);
    say(rank, "Timing: ddot %.6f s, waxpby %.6f s, sparsemv %.6f s (halo exchange %.6f s)\n",
        mx[2], mx[3], mx[4], mx[5]);
    say(rank, "Timing: %.2f MFLOPS (solve loop, checkpoints included)\n",
        mx[1] > 0 ? flops / mx[1] * 1e-6 : 0.0);
    if (crpm) {
        const crpm_stats_t total = ck.totals();
        const int nckpt = ck.count();
        say(rank, "Timing: %d checkpoint(s), %.6f s (slowest rank), %.6g s each; rank 0 wrote %llu bytes\n",
            nckpt, mx[6], nckpt > 0 ? mx[6] / nckpt : 0.0, (unsigned long long)total.bytes_written);
        ck.finalize();
    }
    return 0;
}

}  // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    Options o;
    if (!parse_args(argc, argv, o, rank == 0)) {
        MPI_Finalize();
        return 1;
    }
    int rc = 0;
    try {
        rc = run(o);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "hpccg[%d]: %s\n", rank, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return rc;
}
