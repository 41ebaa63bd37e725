// HPCCG proxy: distributed 27-point-stencil matrix and the CG kernels.
//
// Each rank owns an nx*ny*nz block of grid points; ranks are stacked in z, so
// the global grid is nx*ny*(nz*nranks).  Vectors that are multiplied by the
// matrix live in an "extended" layout: one halo plane below the owned rows,
// the owned rows, one halo plane above.
#ifndef HPCCG_PROBLEM_HPP
#define HPCCG_PROBLEM_HPP

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace hpccg {

struct Timers {
    double ddot = 0, waxpby = 0, spmv = 0, halo = 0;
};

class Problem {
public:
    // Builds this rank's rows and the right-hand side.  Throws
    // std::runtime_error when the block is too large for 32-bit columns.
    Problem(int nx, int ny, int nz, MPI_Comm comm);

    int nx() const { return nx_; }
    int ny() const { return ny_; }
    int nz() const { return nz_; }
    int rank() const { return rank_; }
    int nranks() const { return nranks_; }
    int64_t nrow() const { return nrow_; }            // owned rows
    int64_t plane() const { return plane_; }          // nx*ny, halo depth
    int64_t ext_size() const { return nrow_ + 2 * plane_; }
    int64_t local_nnz() const { return row_ptr_.back(); }
    const std::vector<double> &b() const { return b_; }

    // y = A*x.  x is extended (ext_size() entries); its halo planes are
    // refreshed from the z-neighbours first.  y has nrow() entries.
    void spmv(double *xext, double *y, Timers &t) const;

    // Global dot product: local sum in row order, then one MPI_Allreduce, so
    // the result is reproducible for a fixed rank count.
    double ddot(const double *x, const double *y, Timers &t) const;

    // w = alpha*x + beta*y over the owned rows (w may alias x or y).
    void waxpby(double alpha, const double *x, double beta, const double *y,
                double *w, Timers &t) const;

    // max_i |x_i - 1| over all ranks.
    double max_error_from_one(const double *x) const;

    MPI_Comm comm() const { return comm_; }

private:
    void exchange_halo(double *xext) const;

    int nx_, ny_, nz_;
    int rank_ = 0, nranks_ = 1;
    int64_t plane_, nrow_;
    MPI_Comm comm_;
    std::vector<int64_t> row_ptr_;
    std::vector<int32_t> cols_;  // indices into the extended vector
    std::vector<double> vals_;
    std::vector<double> b_;
};

}  // namespace hpccg

#endif
