#include "exact_sum.hpp"

#include <cmath>
#include <limits>
#include <vector>

namespace {
constexpr double kTwo32 = 4294967296.0;
constexpr int64_t kLimbBase = INT64_C(1) << 32;
}  // namespace

void ExactSum::add(double v)
{
    if (v == 0.0)
        return;
    double a = std::fabs(v);
    if (!(a < 0x1p62)) {  // also catches NaN and inf
        word[kLimbs] += 1;
        return;
    }
    const int64_t sign = v < 0 ? -1 : 1;
    // t < 2^126 holds at most 53 significant bits, so peeling limbs off the
    // top with floor/subtract by powers of two is exact.
    double t = std::ldexp(a, kFracBits);
    for (int k = kLimbs - 1; k >= 0; --k) {
        double w = std::ldexp(1.0, 32 * k);
        double q = std::floor(t / w);
        word[k] += sign * static_cast<int64_t>(q);
        t -= q * w;
    }
    // Each add moves a limb by < 2^32 (top limb < 2^30): normalizing every
    // 2^20 adds keeps every limb far from int64 overflow.
    if (++pending_ >= (1u << 20))
        normalize();
}

void ExactSum::normalize()
{
    for (int k = 0; k < kLimbs - 1; ++k) {
        int64_t low = static_cast<int64_t>(static_cast<uint64_t>(word[k]) & 0xffffffffu);
        int64_t carry = (word[k] - low) / kLimbBase;  // exact floor division
        word[k] = low;
        word[k + 1] += carry;
    }
    pending_ = 0;
}

double ExactSum::value() const
{
    if (word[kLimbs] != 0)
        return std::numeric_limits<double>::quiet_NaN();
    ExactSum c = *this;
    c.normalize();
    long double v = static_cast<long double>(c.word[kLimbs - 1]);
    for (int k = kLimbs - 2; k >= 0; --k)
        v = v * kTwo32 + static_cast<long double>(c.word[k]);
    return static_cast<double>(std::ldexp(v, -kFracBits));
}

int exact_allreduce(ExactSum *sums, int n, MPI_Comm comm)
{
    std::vector<int64_t> buf(static_cast<size_t>(n) * ExactSum::kWords);
    for (int i = 0; i < n; ++i) {
        sums[i].normalize();
        for (int k = 0; k < ExactSum::kWords; ++k)
            buf[static_cast<size_t>(i) * ExactSum::kWords + k] = sums[i].word[k];
    }
    int rc = MPI_Allreduce(MPI_IN_PLACE, buf.data(), n * ExactSum::kWords, MPI_INT64_T,
                           MPI_SUM, comm);
    if (rc != MPI_SUCCESS)
        return rc;
    for (int i = 0; i < n; ++i) {
        for (int k = 0; k < ExactSum::kWords; ++k)
            sums[i].word[k] = buf[static_cast<size_t>(i) * ExactSum::kWords + k];
        sums[i].normalize();
    }
    return MPI_SUCCESS;
}
