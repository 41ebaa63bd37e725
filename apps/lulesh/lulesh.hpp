// LULESH 2.0 proxy application: explicit Lagrangian shock hydrodynamics of
// the Sedov blast problem on a hexahedral mesh (LLNL-TR-490254 and
// LLNL-TR-641973), with optional libcrpm checkpoint/restart.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

namespace lulesh {

using Real = double;
using Index = std::int32_t;

// Element faces, in the order of the boundary-condition fields and ghost blocks.
enum Face { XI_M = 0, XI_P, ETA_M, ETA_P, ZETA_M, ZETA_P, NFACE };

// Boundary kind of one element face; elemBC packs 3 bits per face.
enum BcKind { BC_INTERIOR = 0, BC_SYMM = 1, BC_FREE = 2, BC_COMM = 4 };
inline int bcKind(int mask, int face) { return (mask >> (3 * face)) & 7; }

struct Options {
    int size = 30;              // -s: elements per edge of each rank's block
    int iterations = 9999999;   // -i
    int regions = 11;           // -r
    int balance = 1;            // -b
    int cost = 1;               // -c
    bool progress = false;      // -p
    bool quiet = false;         // -q
    double cycleDelayMs = 0.0;  // --cycle-delay-ms: stretches runs for crash tests
};

// Constants of the Sedov problem and of the numerical scheme.
struct Constants {
    Real e_cut = 1.0e-7, p_cut = 1.0e-7, q_cut = 1.0e-7, v_cut = 1.0e-10, u_cut = 1.0e-7;
    Real hgcoef = 3.0;              // Flanagan-Belytschko hourglass coefficient
    Real ss4o3 = 4.0 / 3.0;
    Real qstop = 1.0e12;            // abort above this artificial viscosity
    Real monoq_max_slope = 1.0, monoq_limiter_mult = 2.0;
    Real qlc_monoq = 0.5, qqc_monoq = 2.0 / 3.0, qqc = 2.0;
    Real eosvmax = 1.0e9, eosvmin = 1.0e-9;
    Real pmin = 0.0, emin = -1.0e15;
    Real dvovmax = 0.1;             // maximum relative volume change per cycle
    Real refdens = 1.0;
    Real dtfixed = -1.0e-6;         // negative: variable time step
    Real deltatimemultlb = 1.1, deltatimemultub = 1.2;
    Real stoptime = 1.0e-2, dtmax = 1.0e-2;
};

// One neighbour's part of a halo operation: values at `send` go to rank
// `nbr`, values it sends land at `recv` (summed or copied).
struct Channel {
    int nbr = -1;
    int dir = 0;                 // direction index of nbr, 0..26
    std::vector<Index> send, recv;
    Real *field[3] = {nullptr, nullptr, nullptr};
    int nfield = 0;
};

struct Halo {
    int nbr[27];                      // rank in direction (dx,dy,dz), -1 if none
    std::vector<Channel> sbn;         // nodal sums over all 26 neighbours
    std::vector<Channel> posvel;      // authoritative copies of shared nodes
    std::vector<Channel> monoq;       // velocity gradients across faces
    std::vector<Real> sbuf, rbuf;
    std::vector<MPI_Request> req;
};

struct Domain {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0, nranks = 1, tp = 1;      // tp ranks per dimension
    int col = 0, row = 0, plane = 0;       // this rank's block position
    Index nx = 0, edgeNodes = 0, numElem = 0, numNode = 0;
    Constants k;

    // Nodal quantities (kinematics).
    std::vector<Real> x, y, z, xd, yd, zd, xdd, ydd, zdd, fx, fy, fz, nodalMass;
    std::vector<Index> symmX, symmY, symmZ;      // nodes on the symmetry planes
    std::vector<Index> nodeElemStart, nodeElemCorner;  // node -> element corners

    // Element connectivity.
    std::vector<Index> nodelist;                 // 8 nodes per element
    std::vector<Index> lxim, lxip, letam, letap, lzetam, lzetap;
    std::vector<int> elemBC;

    // Element quantities (thermodynamics).
    std::vector<Real> e, p, q, ql, qq, v, volo, delv, vdov, arealg, ss, elemMass, vnew;
    std::vector<Real> delv_xi, delv_eta, delv_zeta;   // numElem + face ghosts
    std::vector<Real> delx_xi, delx_eta, delx_zeta;

    // Regions: element lists and how many times their EOS is evaluated.
    std::vector<std::vector<Index>> regElems;
    std::vector<int> regRep;

    // Time stepping.
    Real time = 0.0, deltatime = 0.0, dtcourant = 1.0e20, dthydro = 1.0e20;
    int cycle = 0;

    // Scratch space reused every cycle.
    std::vector<Real> fxElem, fyElem, fzElem, sigma, determ;
    std::vector<Real> eosScratch;

    Halo halo;
};

// Fatal errors of the physics (negative volume, runaway q).
[[noreturn]] void fatal(const Domain &d, int code, const char *what);

// domain.cpp
void buildDomain(Domain &d, const Options &o, MPI_Comm comm, int tp);

// comm.cpp
void setupHalo(Domain &d);
// Runs one halo operation.  fields == nullptr uses each channel's own
// fields; add: sum received values into the local ones, else overwrite.
void exchange(Domain &d, std::vector<Channel> &ch, Real *const *fields, int nfield,
              bool add, int tag);

// hydro.cpp
Real elemVolume(const Real x[8], const Real y[8], const Real z[8]);
void volumeDerivative(const Real x[8], const Real y[8], const Real z[8],
                      Real dvdx[8], Real dvdy[8], Real dvdz[8]);
void timeIncrement(Domain &d);
void lagrangeLeapFrog(Domain &d);

}  // namespace lulesh
