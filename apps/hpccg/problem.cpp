#include "problem.hpp"

#include "app_omp.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace hpccg {

Problem::Problem(int nx, int ny, int nz, MPI_Comm comm)
    : nx_(nx), ny_(ny), nz_(nz), comm_(comm) {
    MPI_Comm_rank(comm, &rank_);
    MPI_Comm_size(comm, &nranks_);
    if (nx < 1 || ny < 1 || nz < 1)
        throw std::runtime_error("grid dimensions must be positive");
    plane_ = int64_t(nx) * ny;
    nrow_ = plane_ * nz;
    if (nrow_ + 2 * plane_ > std::numeric_limits<int32_t>::max())
        throw std::runtime_error("local block too large (extended vector exceeds 2^31 entries)");

    const int64_t gz0 = int64_t(rank_) * nz;  // first global z plane of this rank
    const int64_t gnz = int64_t(nranks_) * nz;
    row_ptr_.assign(size_t(nrow_) + 1, 0);
    cols_.reserve(size_t(nrow_) * 27);
    vals_.reserve(size_t(nrow_) * 27);
    b_.resize(size_t(nrow_));

    int64_t row = 0;
    for (int iz = 0; iz < nz; iz++) {
        for (int iy = 0; iy < ny; iy++) {
            for (int ix = 0; ix < nx; ix++, row++) {
                int64_t nnz_row = 0;
                // sz, sy, sx ascending = ascending global column: this fixes
                // the summation order of each row in spmv().
                for (int sz = -1; sz <= 1; sz++) {
                    const int64_t gz = gz0 + iz + sz;
                    if (gz < 0 || gz >= gnz) continue;
                    for (int sy = -1; sy <= 1; sy++) {
                        const int y = iy + sy;
                        if (y < 0 || y >= ny) continue;
                        for (int sx = -1; sx <= 1; sx++) {
                            const int x = ix + sx;
                            if (x < 0 || x >= nx) continue;
                            const bool diag = (sx == 0 && sy == 0 && sz == 0);
                            const int64_t col = plane_ + int64_t(iz + sz) * plane_ + int64_t(y) * nx + x;
                            cols_.push_back(int32_t(col));
                            vals_.push_back(diag ? 27.0 : -1.0);
                            nnz_row++;
                        }
                    }
                }
                row_ptr_[size_t(row) + 1] = row_ptr_[size_t(row)] + nnz_row;
                // Row sum of A: the exact solution is the all-ones vector.
                b_[size_t(row)] = 27.0 - double(nnz_row - 1);
            }
        }
    }
}

void Problem::exchange_halo(double *xext) const {
    const int below = rank_ > 0 ? rank_ - 1 : MPI_PROC_NULL;
    const int above = rank_ + 1 < nranks_ ? rank_ + 1 : MPI_PROC_NULL;
    double *own = xext + plane_;
    const int n = int(plane_);
    // Lowest owned plane goes down and fills the upper halo from above, then
    // the reverse; MPI_PROC_NULL makes the domain ends no-ops.
    MPI_Sendrecv(own, n, MPI_DOUBLE, below, 1, own + nrow_, n, MPI_DOUBLE, above, 1, comm_,
                 MPI_STATUS_IGNORE);
    MPI_Sendrecv(own + nrow_ - plane_, n, MPI_DOUBLE, above, 2, xext, n, MPI_DOUBLE, below, 2,
                 comm_, MPI_STATUS_IGNORE);
}

void Problem::spmv(double *xext, double *y, Timers &t) const {
    double t0 = MPI_Wtime();
    exchange_halo(xext);
    double t1 = MPI_Wtime();
    const int64_t *rp = row_ptr_.data();
    const int32_t *ci = cols_.data();
    const double *v = vals_.data();
    APP_OMP_FOR
    for (int64_t i = 0; i < nrow_; i++) {
        double sum = 0.0;
        for (int64_t j = rp[i]; j < rp[i + 1]; j++) sum += v[j] * xext[ci[j]];
        y[i] = sum;
    }
    double t2 = MPI_Wtime();
    t.halo += t1 - t0;
    t.spmv += t2 - t0;
}

double Problem::ddot(const double *x, const double *y, Timers &t) const {
    double t0 = MPI_Wtime();
    double local = 0.0;
#ifdef _OPENMP
    // Each thread sums its static block in order and the partial sums are
    // added in thread order: the same result on every run with the same
    // number of threads (a reduction clause adds them in arrival order), and
    // the serial result with one thread.
    std::vector<double> part(size_t(omp_get_max_threads()), 0.0);
#pragma omp parallel
    {
        const int nt = omp_get_num_threads(), me = omp_get_thread_num();
        const int64_t lo = nrow_ * me / nt, hi = nrow_ * (me + 1) / nt;
        double s = 0.0;
        for (int64_t i = lo; i < hi; i++) s += x[i] * y[i];
        part[size_t(me)] = s;
    }
    for (double s : part) local += s;
#else
    for (int64_t i = 0; i < nrow_; i++) local += x[i] * y[i];
#endif
    double global = 0.0;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, comm_);
    t.ddot += MPI_Wtime() - t0;
    return global;
}

void Problem::waxpby(double alpha, const double *x, double beta, const double *y, double *w,
                     Timers &t) const {
    double t0 = MPI_Wtime();
    APP_OMP_FOR
    for (int64_t i = 0; i < nrow_; i++) w[i] = alpha * x[i] + beta * y[i];
    t.waxpby += MPI_Wtime() - t0;
}

double Problem::max_error_from_one(const double *x) const {
    double local = 0.0;
    APP_OMP_FOR_MAX(local)
    for (int64_t i = 0; i < nrow_; i++) local = std::fmax(local, std::fabs(x[i] - 1.0));
    double global = 0.0;
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_MAX, comm_);
    return global;
}

}  // namespace hpccg
