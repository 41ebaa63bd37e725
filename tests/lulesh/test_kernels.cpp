// LULESH element kernels and mesh setup, checked against independent facts:
// affine images of the unit cube, additivity of the trilinear volume under
// subdivision, finite differences of the volume, and mass bookkeeping.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "check.h"
#include "lulesh.hpp"

using lulesh::Index;
using lulesh::Real;

namespace {

// Reference signs of the corners (0 or 1 per axis).
const int cx[8] = {0, 1, 1, 0, 0, 1, 1, 0};
const int cy[8] = {0, 0, 1, 1, 0, 0, 1, 1};
const int cz[8] = {0, 0, 0, 0, 1, 1, 1, 1};

struct Hex {
    Real x[8], y[8], z[8];
};

// Point of the trilinear map of h at reference coordinates in [0,1]^3.
void trilinear(const Hex &h, Real s, Real t, Real u, Real &px, Real &py, Real &pz) {
    px = py = pz = 0.0;
    for (int a = 0; a < 8; ++a) {
        const Real w = (cx[a] ? s : 1 - s) * (cy[a] ? t : 1 - t) * (cz[a] ? u : 1 - u);
        px += w * h.x[a];
        py += w * h.y[a];
        pz += w * h.z[a];
    }
}

Hex randomHex(std::mt19937_64 &rng, double amp) {
    std::uniform_real_distribution<double> d(-amp, amp);
    Hex h;
    for (int a = 0; a < 8; ++a) {
        h.x[a] = cx[a] + d(rng);
        h.y[a] = cy[a] + d(rng);
        h.z[a] = cz[a] + d(rng);
    }
    return h;
}

void testAffineVolumes(std::mt19937_64 &rng) {
    Hex cube;
    for (int a = 0; a < 8; ++a) {
        cube.x[a] = cx[a];
        cube.y[a] = cy[a];
        cube.z[a] = cz[a];
    }
    const Real v1 = lulesh::elemVolume(cube.x, cube.y, cube.z);
    CHECK(v1 == 1.0, "unit cube volume: got %.17g", v1);

    std::uniform_real_distribution<double> d(-1.0, 1.0);
    for (int trial = 0; trial < 20; ++trial) {
        double A[3][3], t[3];
        for (auto &r : A)
            for (double &c : r) c = d(rng);
        for (int i = 0; i < 3; ++i) A[i][i] += 2.0;  // keep it well away from singular
        for (double &c : t) c = 10 * d(rng);
        const double det = A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) -
                           A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
                           A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
        Hex h;
        for (int a = 0; a < 8; ++a) {
            const double p[3] = {double(cx[a]), double(cy[a]), double(cz[a])};
            h.x[a] = A[0][0] * p[0] + A[0][1] * p[1] + A[0][2] * p[2] + t[0];
            h.y[a] = A[1][0] * p[0] + A[1][1] * p[1] + A[1][2] * p[2] + t[1];
            h.z[a] = A[2][0] * p[0] + A[2][1] * p[1] + A[2][2] * p[2] + t[2];
        }
        const Real v = lulesh::elemVolume(h.x, h.y, h.z);
        CHECK_CLOSE(v, std::fabs(det), 1e-12, "affine hexahedron volume = |det A|");
    }
}

// The eight octants of a trilinear hexahedron are trilinear themselves and
// fill it exactly, so their volumes must add up to the parent's.
void testSubdivision(std::mt19937_64 &rng) {
    for (int trial = 0; trial < 20; ++trial) {
        const Hex h = randomHex(rng, 0.3);
        const Real whole = lulesh::elemVolume(h.x, h.y, h.z);
        Real sum = 0.0;
        for (int o = 0; o < 8; ++o) {
            Hex sub;
            for (int a = 0; a < 8; ++a)
                trilinear(h, 0.5 * (cx[o] + cx[a]), 0.5 * (cy[o] + cy[a]), 0.5 * (cz[o] + cz[a]), sub.x[a],
                          sub.y[a], sub.z[a]);
            sum += lulesh::elemVolume(sub.x, sub.y, sub.z);
        }
        CHECK_CLOSE(sum, whole, 1e-12, "octant volumes add up");
    }
}

// The volume is linear in each single coordinate, so a central difference
// is exact up to rounding.
void testVolumeDerivative(std::mt19937_64 &rng) {
    for (int trial = 0; trial < 20; ++trial) {
        Hex h = randomHex(rng, 0.3);
        Real g[3][8];
        lulesh::volumeDerivative(h.x, h.y, h.z, g[0], g[1], g[2]);
        Real sum[3] = {0, 0, 0};
        for (int a = 0; a < 8; ++a)
            for (int c = 0; c < 3; ++c) {
                Real *coord = c == 0 ? h.x : c == 1 ? h.y : h.z;
                const Real keep = coord[a], step = 1e-3;
                coord[a] = keep + step;
                const Real vp = lulesh::elemVolume(h.x, h.y, h.z);
                coord[a] = keep - step;
                const Real vm = lulesh::elemVolume(h.x, h.y, h.z);
                coord[a] = keep;
                const Real fd = (vp - vm) / (2 * step);
                CHECK_CLOSE(g[c][a], fd, 1e-9, "volume derivative vs finite difference");
                sum[c] += g[c][a];
            }
        // Translating the element leaves its volume unchanged.
        for (double s : sum)
            CHECK(std::fabs(s) < 1e-13, "volume derivatives sum to zero: got %.17g", double(s));
    }
}

void testDomain(MPI_Comm comm) {
    lulesh::Options o;
    o.size = 4;
    lulesh::Domain d;
    lulesh::buildDomain(d, o, comm, 1);
    const Real edge = 1.125 / 4;
    Real vol = 0.0, mass = 0.0;
    for (Index el = 0; el < d.numElem; ++el) {
        CHECK_CLOSE(d.volo[el], edge * edge * edge, 1e-13, "initial element volume");
        vol += d.volo[el];
    }
    for (Real m : d.nodalMass) mass += m;
    const Real total = 1.125 * 1.125 * 1.125;
    CHECK_CLOSE(vol, total, 1e-13, "total volume");
    CHECK_CLOSE(mass, total, 1e-13, "total nodal mass");
    // Each node collects the corners of the elements around it: 8 inside,
    // 1 at a mesh corner.
    const Index en = d.edgeNodes;
    CHECK(d.nodeElemStart[1] - d.nodeElemStart[0] == 1, "corner node has one element: got %.17g",
          double(d.nodeElemStart[1] - d.nodeElemStart[0]));
    const Index mid = 2 * en * en + 2 * en + 2;
    CHECK(d.nodeElemStart[mid + 1] - d.nodeElemStart[mid] == 8, "interior node has eight elements: got %.17g",
          double(d.nodeElemStart[mid + 1] - d.nodeElemStart[mid]));
    // Sedov deposit scaled by (s/45)^3 for one rank.
    const Real einit = 3.948746e+7 * std::pow(4.0 / 45.0, 3);
    CHECK_CLOSE(d.e[0], einit, 1e-14, "origin energy");
    Real rest = 0.0;
    for (Index el = 1; el < d.numElem; ++el) rest += std::fabs(d.e[el]);
    CHECK(rest == 0.0, "energy only in the origin element: got %.17g", rest);
    // Symmetry planes hold a full face of nodes each; regions cover every element once.
    CHECK(Index(d.symmX.size()) == en * en, "x symmetry plane nodes: got %.17g", double(d.symmX.size()));
    std::vector<int> seen(d.numElem, 0);
    for (const auto &r : d.regElems)
        for (Index el : r) ++seen[el];
    int bad = 0;
    for (int s : seen) bad += s != 1;
    CHECK(bad == 0, "regions partition the elements: got %.17g", double(bad));
}

}  // namespace

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::mt19937_64 rng(12345);
    testAffineVolumes(rng);
    testSubdivision(rng);
    testVolumeDerivative(rng);
    if (size == 1) testDomain(MPI_COMM_WORLD);
    const int failures = check_failures();
    std::printf("%s: %d failure(s)\n", failures ? "FAILED" : "passed", failures);
    MPI_Finalize();
    return failures ? 1 : 0;
}
