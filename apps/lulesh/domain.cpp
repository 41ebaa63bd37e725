// Mesh, connectivity, boundary conditions, regions and initial state of one
// rank's block of the Sedov problem.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "lulesh.hpp"

namespace lulesh {
namespace {

// splitmix64: region layouts must not depend on the C library's rand().
struct Rng {
    std::uint64_t s;
    std::uint64_t next() {
        std::uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
        return z ^ (z >> 31);
    }
    double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
    int range(int lo, int hi) { return lo + int(next() % std::uint64_t(hi - lo + 1)); }
};

// Regions only change the evaluation order and how often the (identical) EOS
// is repeated, never the results.  Region r is drawn with weight
// (r+1)^balance, rotated by rank so that ranks differ in their dominant
// region; consecutive elements go to one region in runs that are mostly short
// with a long tail, and a region is never drawn twice in a row.
void buildRegions(Domain &d, const Options &o) {
    const int nreg = o.regions;
    d.regElems.assign(nreg, {});
    d.regRep.assign(nreg, 1);
    std::vector<int> regionOf(d.numElem, 0);
    if (nreg > 1) {
        std::vector<double> cum(nreg);
        double total = 0.0;
        for (int r = 0; r < nreg; ++r) {
            total += std::pow(double(r + 1), double(o.balance));
            cum[r] = total;
        }
        Rng rng{0x5eed0000ULL + std::uint64_t(d.rank)};
        int last = -1;
        Index next = 0;
        while (next < d.numElem) {
            int reg;
            do {
                double u = rng.uniform() * total;
                int i = 0;
                while (i < nreg - 1 && u >= cum[i]) ++i;
                reg = (i + d.rank) % nreg;
            } while (reg == last);
            double u = rng.uniform();
            int len = u < 0.75 ? rng.range(1, 15) : u < 0.95 ? rng.range(16, 63)
                                                              : rng.range(64, 2048);
            for (; len > 0 && next < d.numElem; --len) regionOf[next++] = reg;
            last = reg;
        }
    }
    for (Index i = 0; i < d.numElem; ++i) d.regElems[regionOf[i]].push_back(i);
    // Load imbalance: the lower half of the regions is cheap, the top ~5%
    // (at least one region once there are five or more) is very expensive.
    for (int r = 0; r < nreg; ++r) {
        if (r < nreg / 2)
            d.regRep[r] = 1;
        else if (r < nreg - (nreg + 15) / 20)
            d.regRep[r] = 1 + o.cost;
        else
            d.regRep[r] = 10 * (1 + o.cost);
    }
}

void buildMesh(Domain &d) {
    const Index n = d.nx, en = d.edgeNodes;
    const Index meshEdge = Index(d.tp) * n;
    // Coordinates from the global node index (not by accumulation), so every
    // decomposition places each node at bitwise the same position.
    Index idx = 0;
    for (Index k = 0; k < en; ++k) {
        const Real tz = Real(1.125) * Real(d.plane * n + k) / Real(meshEdge);
        for (Index j = 0; j < en; ++j) {
            const Real ty = Real(1.125) * Real(d.row * n + j) / Real(meshEdge);
            for (Index i = 0; i < en; ++i, ++idx) {
                d.x[idx] = Real(1.125) * Real(d.col * n + i) / Real(meshEdge);
                d.y[idx] = ty;
                d.z[idx] = tz;
            }
        }
    }
    // Hexahedron corners: 0-3 counter-clockwise on the lower zeta face, 4-7 above them.
    idx = 0;
    for (Index k = 0; k < n; ++k)
        for (Index j = 0; j < n; ++j)
            for (Index i = 0; i < n; ++i, ++idx) {
                const Index n0 = k * en * en + j * en + i;
                Index *c = &d.nodelist[8 * idx];
                c[0] = n0;
                c[1] = n0 + 1;
                c[2] = n0 + en + 1;
                c[3] = n0 + en;
                c[4] = n0 + en * en;
                c[5] = n0 + en * en + 1;
                c[6] = n0 + en * en + en + 1;
                c[7] = n0 + en * en + en;
            }
    // Node -> element corners, in element order (fixes the force summation order).
    d.nodeElemStart.assign(d.numNode + 1, 0);
    for (Index c = 0; c < 8 * d.numElem; ++c) ++d.nodeElemStart[d.nodelist[c] + 1];
    for (Index i = 0; i < d.numNode; ++i) d.nodeElemStart[i + 1] += d.nodeElemStart[i];
    d.nodeElemCorner.resize(8 * d.numElem);
    std::vector<Index> fill(d.nodeElemStart.begin(), d.nodeElemStart.end() - 1);
    for (Index c = 0; c < 8 * d.numElem; ++c) d.nodeElemCorner[fill[d.nodelist[c]]++] = c;
}

// Face neighbours, boundary kinds and ghost slots.  Ghost blocks follow the
// local elements, one per face that borders another rank, in Face order; a
// ghost block is ordered (outer, inner) over the two in-face dimensions, the
// outer being the higher one, the same order the neighbour packs in.
void buildConnectivity(Domain &d) {
    const Index n = d.nx;
    const int pos[3] = {d.col, d.row, d.plane};
    int kind[NFACE];
    Index ghost[NFACE];
    Index next = d.numElem;
    for (int f = 0; f < NFACE; ++f) {
        const bool minus = (f % 2) == 0;
        const int p = pos[f / 2];
        if (minus)
            kind[f] = p == 0 ? BC_SYMM : BC_COMM;
        else
            kind[f] = p == d.tp - 1 ? BC_FREE : BC_COMM;
        ghost[f] = -1;
        if (kind[f] == BC_COMM) {
            ghost[f] = next;
            next += n * n;
        }
    }
    d.delv_xi.assign(next, 0.0);
    d.delv_eta.assign(next, 0.0);
    d.delv_zeta.assign(next, 0.0);

    Index idx = 0;
    for (Index k = 0; k < n; ++k)
        for (Index j = 0; j < n; ++j)
            for (Index i = 0; i < n; ++i, ++idx) {
                // Inside the block the neighbours are plain index offsets; on
                // its boundary a ghost slot (COMM) or the element itself.
                const bool edge[NFACE] = {i == 0, i == n - 1, j == 0, j == n - 1, k == 0, k == n - 1};
                const Index stride[NFACE] = {-1, 1, -n, n, -n * n, n * n};
                const Index slot[NFACE] = {k * n + j, k * n + j, k * n + i, k * n + i, j * n + i, j * n + i};
                Index nb[NFACE];
                int bc = 0;
                for (int f = 0; f < NFACE; ++f) {
                    if (!edge[f]) {
                        nb[f] = idx + stride[f];
                    } else {
                        bc |= kind[f] << (3 * f);
                        nb[f] = kind[f] == BC_COMM ? ghost[f] + slot[f] : idx;
                    }
                }
                d.lxim[idx] = nb[XI_M];
                d.lxip[idx] = nb[XI_P];
                d.letam[idx] = nb[ETA_M];
                d.letap[idx] = nb[ETA_P];
                d.lzetam[idx] = nb[ZETA_M];
                d.lzetap[idx] = nb[ZETA_P];
                d.elemBC[idx] = bc;
            }

    // Symmetry planes x=0, y=0, z=0 hold only on the ranks that touch them.
    const Index en = d.edgeNodes;
    for (Index a = 0; a < en; ++a)
        for (Index b = 0; b < en; ++b) {
            if (d.col == 0) d.symmX.push_back(a * en * en + b * en);
            if (d.row == 0) d.symmY.push_back(a * en * en + b);
            if (d.plane == 0) d.symmZ.push_back(a * en + b);
        }
}

}  // namespace

[[noreturn]] void fatal(const Domain &d, int code, const char *what) {
    std::fprintf(stderr, "lulesh: rank %d, cycle %d: %s\n", d.rank, d.cycle, what);
    MPI_Abort(d.comm, code);
    std::abort();  // MPI_Abort does not return; keeps [[noreturn]] honest
}

void buildDomain(Domain &d, const Options &o, MPI_Comm comm, int tp) {
    d.comm = comm;
    MPI_Comm_rank(comm, &d.rank);
    MPI_Comm_size(comm, &d.nranks);
    d.tp = tp;
    d.col = d.rank % tp;
    d.row = (d.rank / tp) % tp;
    d.plane = d.rank / (tp * tp);
    d.nx = o.size;
    d.edgeNodes = d.nx + 1;
    d.numElem = d.nx * d.nx * d.nx;
    d.numNode = d.edgeNodes * d.edgeNodes * d.edgeNodes;

    const Index nn = d.numNode, ne = d.numElem;
    for (auto *v : {&d.x, &d.y, &d.z, &d.xd, &d.yd, &d.zd, &d.xdd, &d.ydd, &d.zdd, &d.fx, &d.fy,
                    &d.fz, &d.nodalMass})
        v->assign(nn, 0.0);
    for (auto *v : {&d.e, &d.p, &d.q, &d.ql, &d.qq, &d.volo, &d.delv, &d.vdov, &d.arealg, &d.ss,
                    &d.elemMass, &d.vnew, &d.delx_xi, &d.delx_eta, &d.delx_zeta, &d.sigma,
                    &d.determ})
        v->assign(ne, 0.0);
    d.v.assign(ne, 1.0);
    for (auto *v : {&d.fxElem, &d.fyElem, &d.fzElem}) v->assign(8 * std::size_t(ne), 0.0);
    d.nodelist.assign(8 * std::size_t(ne), 0);
    for (auto *v : {&d.lxim, &d.lxip, &d.letam, &d.letap, &d.lzetam, &d.lzetap}) v->assign(ne, 0);
    d.elemBC.assign(ne, 0);

    buildMesh(d);
    buildConnectivity(d);
    buildRegions(d, o);
    std::size_t maxReg = 0;
    for (const auto &r : d.regElems) maxReg = std::max(maxReg, r.size());
    d.eosScratch.assign(16 * maxReg, 0.0);

    // Element mass is the initial volume at reference density 1; each node
    // carries an eighth of every element around it.
    for (Index i = 0; i < ne; ++i) {
        Real xl[8], yl[8], zl[8];
        for (int c = 0; c < 8; ++c) {
            const Index nd = d.nodelist[8 * i + c];
            xl[c] = d.x[nd];
            yl[c] = d.y[nd];
            zl[c] = d.z[nd];
        }
        const Real vol = elemVolume(xl, yl, zl);
        d.volo[i] = vol;
        d.elemMass[i] = vol;
        for (int c = 0; c < 8; ++c) d.nodalMass[d.nodelist[8 * i + c]] += vol / Real(8.0);
    }

    setupHalo(d);
    Real *mass[1] = {d.nodalMass.data()};
    exchange(d, d.halo.sbn, mass, 1, true, 100);

    // Sedov energy deposit in the origin element, scaled so that the blast
    // is the same for every global mesh resolution.
    const Real ebase = 3.948746e+7;
    const Real scale = Real(d.nx * tp) / Real(45.0);
    const Real einit = ebase * scale * scale * scale;
    if (d.rank == 0) d.e[0] = einit;

    // Initial time step from the analytic CFL estimate of the origin element;
    // every rank evaluates that element so that all start with the same dt.
    const Real h = Real(1.125) * Real(1) / Real(Index(tp) * d.nx);
    const Real ox[8] = {0, h, h, 0, 0, h, h, 0};
    const Real oy[8] = {0, 0, h, h, 0, 0, h, h};
    const Real oz[8] = {0, 0, 0, 0, h, h, h, h};
    d.deltatime = (Real(0.5) * std::cbrt(elemVolume(ox, oy, oz))) / std::sqrt(Real(2.0) * einit);
}

}  // namespace lulesh
