// Order-independent summation for global reductions.
//
// Each term is converted to a fixed-point number (64 fraction bits, 32-bit
// limbs held in int64) and added with integer arithmetic, which is
// associative.  A sum therefore has the same bits whatever the order of its
// terms, i.e. whatever the rank layout; a plain double reduction would not.
#pragma once

#include <mpi.h>

#include <cstdint>

class ExactSum {
public:
    static constexpr int kLimbs = 4;      // bits 2^-64 .. 2^64
    static constexpr int kFracBits = 64;
    static constexpr int kWords = kLimbs + 1;  // limbs + overflow counter

    // Adds v, truncated toward zero to a multiple of 2^-64.  |v| >= 2^62 or a
    // non-finite v marks the sum invalid (value() returns NaN).
    void add(double v);
    // Moves carries up so limbs 0..kLimbs-2 lie in [0, 2^32).
    void normalize();
    // The sum rounded to double (NaN if an invalid term was added).
    double value() const;

    int64_t word[kWords] = {0, 0, 0, 0, 0};

private:
    uint32_t pending_ = 0;  // adds since the last normalize
};

// In-place sum of n accumulators over every rank of comm.
int exact_allreduce(ExactSum *sums, int n, MPI_Comm comm);
