// Lennard-Jones molecular dynamics on an FCC lattice with link cells and a
// 3-D domain decomposition (the physics of the CoMD proxy application).
//
// Determinism across rank layouts: the link-cell grid is global (each rank
// owns a block of whole cells), atoms inside a cell are kept sorted by global
// id and every atom's force and energy are accumulated by its owner over the
// 27 neighbour cells in a fixed order (no Newton's-third-law sharing).  Every
// per-atom quantity is thus bitwise independent of the layout, and global sums
// go through ExactSum.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

struct MdParams {
    int nx = 20, ny = 20, nz = 20;  // unit cells
    int px = 1, py = 1, pz = 1;     // ranks per dimension
    double lat = 3.615;             // lattice constant (Angstrom)
    double temp = 600.0;            // initial temperature (K)
    double dt = 1.0;                // time step (fs)
    double delta = 0.0;             // random initial displacement (lattice constants)
    uint64_t seed = 1234;           // seed of velocities and displacements
};

struct MdEnergies {
    double pe = 0, ke = 0;  // totals (eV)
    long long atoms = 0;
};

class Md {
public:
    // Physical constants and the copper LJ parameters.
    static constexpr double kBoltzmann = 8.6173324e-5;   // eV/K
    // amu -> eV fs^2/A^2 (about 103.6427), from the SI values of amu and eV.
    static constexpr double kAmuToInternal = 1.660538921e-27 / (1.602176565e-19 * 1e-30 / 1e-20);
    static constexpr double kMassAmu = 63.55;
    static constexpr double kSigma = 2.315;
    static constexpr double kEpsilon = 0.167;
    static constexpr double kCutoffSigmas = 2.5;

    // Checks the decomposition and sizes the arrays.  On a bad setup error()
    // is non-empty and nothing else may be called.
    Md(const MdParams &p, MPI_Comm comm);
    const std::string &error() const { return err_; }

    // Fresh start: lattice, random velocities with zero total momentum
    // scaled to exactly the requested temperature, and initial forces.
    // Collective; returns false (with error()) on failure.
    bool initialize();
    // After the owned-cell arrays were overwritten (restart): rebuild the
    // halo and the forces.  Collective.
    bool refresh();
    // One velocity-Verlet step.  Collective.
    bool step();
    // Global energies and atom count.  Collective.
    MdEnergies energies();

    // Owned-cell arrays.  Owned cells come first in storage, so the first
    // ownedSlots() entries (times 3 for vectors) are the complete state.
    int64_t ownedCells() const { return nLocal_; }
    int64_t ownedSlots() const { return static_cast<int64_t>(nLocal_) * cap_; }
    double *positions() { return r_.data(); }
    double *momenta() { return p_.data(); }
    long long *ids() { return gid_.data(); }
    int *species() { return species_.data(); }
    int *cellCounts() { return count_.data(); }

    long long totalAtoms() const { return 4LL * prm_.nx * prm_.ny * prm_.nz; }
    int globalCells(int d) const { return gc_[d]; }
    double cellSize(int d) const { return cs_[d]; }
    double boxLength(int d) const { return L_[d]; }
    int cellCapacity() const { return cap_; }
    double mass() const { return mass_; }

    // Wall-clock seconds spent in each phase on this rank.
    double tForce = 0, tRedistribute = 0, tHalo = 0;
    // Atoms that changed link cell, and atoms this rank sent to another rank.
    long long cellMoves = 0, rankMoves = 0;

private:
    struct Migrant {
        double r[3], p[3];
        long long gid;
        int species, pad;
    };

    int storageIndex(int x, int y, int z) const
    {
        return cellIndex_[(x + 1) + ext_[0] * ((y + 1) + ext_[1] * (z + 1))];
    }
    bool fail(const std::string &msg);
    bool collectiveOk(bool ok);
    bool addAtom(int cell, const double *r, const double *p, long long gid, int species);
    void removeAtom(int cell, int slot);
    void globalCellOf(const double *r, int g[3]) const;
    bool ownsGlobal(const int g[3]) const;
    bool placeLocal(const Migrant &m);
    bool redistribute();
    bool haloExchange();
    void computeForces();
    void sortCells();
    void kick(double h);
    void drift(double h);

    MdParams prm_;
    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    std::string err_;

    double L_[3], cs_[3], invCs_[3];
    int gc_[3];             // global cells per dimension
    int pc_[3];             // this rank's coordinates in the process grid
    int lo_[3], nl_[3];     // first owned global cell and owned count
    int ext_[3];            // nl + 2 (with halo)
    int nbr_[3][2];         // neighbour ranks: [d][0] minus, [d][1] plus
    int nLocal_ = 0, nTotal_ = 0, cap_ = 0;
    std::vector<int> cellIndex_;   // extended coords -> storage index
    std::vector<int> cellCoord_;   // storage index -> local coords (x,y,z)
    std::vector<int> neighbours_;  // 27 storage indices per owned cell

    double mass_ = 0, rc2_ = 0, s6_ = 0, eShift_ = 0;

    std::vector<double> r_, p_, f_, u_;
    std::vector<long long> gid_;
    std::vector<int> species_;
    std::vector<int> count_;
};
