#include "md.hpp"

#include "exact_sum.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

namespace {

// splitmix64 finalizer: a good 64-bit mixing function, used as a counter-based
// generator so an atom's velocity depends only on (seed, id).
uint64_t mix64(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Uniform in (0, 1), never 0 so log() below is finite.
double uniform(uint64_t seed, long long id, int k)
{
    uint64_t h = mix64(mix64(seed) ^ mix64(static_cast<uint64_t>(id) * 8 + static_cast<uint64_t>(k)));
    return (static_cast<double>(h >> 11) + 0.5) * 0x1p-53;
}

// Three standard normal numbers for atom `id` (Box-Muller).
void gaussian3(uint64_t seed, long long id, double g[3])
{
    const double twoPi = 6.283185307179586476925;
    double r1 = std::sqrt(-2.0 * std::log(uniform(seed, id, 0)));
    double a1 = twoPi * uniform(seed, id, 1);
    double r2 = std::sqrt(-2.0 * std::log(uniform(seed, id, 2)));
    double a2 = twoPi * uniform(seed, id, 3);
    g[0] = r1 * std::cos(a1);
    g[1] = r1 * std::sin(a1);
    g[2] = r2 * std::cos(a2);
}

const double kBasis[4][3] = {
    {0.25, 0.25, 0.25}, {0.25, 0.75, 0.75}, {0.75, 0.25, 0.75}, {0.75, 0.75, 0.25}};

}  // namespace

Md::Md(const MdParams &p, MPI_Comm comm) : prm_(p), comm_(comm)
{
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    const int n[3] = {p.nx, p.ny, p.nz};
    const int P[3] = {p.px, p.py, p.pz};
    const double rc = kCutoffSigmas * kSigma;
    std::ostringstream msg;
    if (p.nx < 1 || p.ny < 1 || p.nz < 1 || !(p.lat > 0) || !(p.dt > 0) || !(p.temp >= 0)) {
        err_ = "sizes, lattice constant and time step must be positive, temperature >= 0";
        return;
    }
    if (p.px < 1 || p.py < 1 || p.pz < 1 ||
        static_cast<long long>(p.px) * p.py * p.pz != size_) {
        msg << "rank layout " << p.px << "x" << p.py << "x" << p.pz << " does not match "
            << size_ << " MPI ranks";
        err_ = msg.str();
        return;
    }
    for (int d = 0; d < 3; ++d) {
        L_[d] = n[d] * p.lat;
        gc_[d] = static_cast<int>(std::floor(L_[d] / rc));
        // Two cells per dimension keep every pair within the cutoff unique
        // (periodic images are then at least 2 cutoffs apart).
        if (gc_[d] < 2) {
            msg << "box " << L_[d] << " A is shorter than two cutoffs (" << 2 * rc << " A)";
            err_ = msg.str();
            return;
        }
        if (P[d] > gc_[d]) {
            msg << P[d] << " ranks in dimension " << "xyz"[d] << " but only " << gc_[d]
                << " link cells";
            err_ = msg.str();
            return;
        }
        cs_[d] = L_[d] / gc_[d];
        invCs_[d] = gc_[d] / L_[d];
    }
    pc_[0] = rank_ % p.px;
    pc_[1] = (rank_ / p.px) % p.py;
    pc_[2] = rank_ / (p.px * p.py);
    for (int d = 0; d < 3; ++d) {
        lo_[d] = static_cast<int>(static_cast<long long>(gc_[d]) * pc_[d] / P[d]);
        int hi = static_cast<int>(static_cast<long long>(gc_[d]) * (pc_[d] + 1) / P[d]);
        nl_[d] = hi - lo_[d];
        ext_[d] = nl_[d] + 2;
        for (int s = 0; s < 2; ++s) {
            int c[3] = {pc_[0], pc_[1], pc_[2]};
            c[d] = (c[d] + (s == 0 ? -1 : 1) + P[d]) % P[d];
            nbr_[d][s] = c[0] + p.px * (c[1] + p.py * c[2]);
        }
    }

    nLocal_ = nl_[0] * nl_[1] * nl_[2];
    nTotal_ = ext_[0] * ext_[1] * ext_[2];
    cellIndex_.assign(nTotal_, -1);
    cellCoord_.assign(3 * static_cast<size_t>(nTotal_), 0);
    int next = 0;
    for (int pass = 0; pass < 2; ++pass) {  // owned cells first, then halo
        for (int z = -1; z <= nl_[2]; ++z)
            for (int y = -1; y <= nl_[1]; ++y)
                for (int x = -1; x <= nl_[0]; ++x) {
                    bool owned = x >= 0 && x < nl_[0] && y >= 0 && y < nl_[1] && z >= 0 &&
                                 z < nl_[2];
                    if (owned != (pass == 0))
                        continue;
                    int e = (x + 1) + ext_[0] * ((y + 1) + ext_[1] * (z + 1));
                    cellIndex_[e] = next;
                    cellCoord_[3 * next] = x;
                    cellCoord_[3 * next + 1] = y;
                    cellCoord_[3 * next + 2] = z;
                    ++next;
                }
    }
    neighbours_.resize(27 * static_cast<size_t>(nLocal_));
    for (int c = 0; c < nLocal_; ++c) {
        const int *cc = &cellCoord_[3 * c];
        int k = 0;
        for (int dz = -1; dz <= 1; ++dz)
            for (int dy = -1; dy <= 1; ++dy)
                for (int dx = -1; dx <= 1; ++dx)
                    neighbours_[27 * c + k++] = storageIndex(cc[0] + dx, cc[1] + dy, cc[2] + dz);
    }

    // Twice the mean occupancy plus slack: thermal motion and the lattice
    // aliasing against the cell grid stay far below that.
    double density = 4.0 / (p.lat * p.lat * p.lat);
    cap_ = static_cast<int>(std::ceil(2.0 * density * cs_[0] * cs_[1] * cs_[2])) + 16;

    size_t slots = static_cast<size_t>(nTotal_) * cap_;
    r_.assign(3 * slots, 0.0);
    p_.assign(3 * slots, 0.0);
    f_.assign(3 * slots, 0.0);
    u_.assign(slots, 0.0);
    gid_.assign(slots, -1);
    species_.assign(slots, 0);
    count_.assign(nTotal_, 0);

    mass_ = kMassAmu * kAmuToInternal;
    rc2_ = rc * rc;
    s6_ = std::pow(kSigma, 6);
    double rc6 = s6_ / (rc2_ * rc2_ * rc2_);
    eShift_ = rc6 * (rc6 - 1.0);
}

bool Md::fail(const std::string &msg)
{
    if (err_.empty())
        err_ = msg;
    return false;
}

bool Md::collectiveOk(bool ok)
{
    int flag = ok ? 1 : 0;
    MPI_Allreduce(MPI_IN_PLACE, &flag, 1, MPI_INT, MPI_LAND, comm_);
    if (!flag && err_.empty())
        err_ = "failed on another rank";
    return flag != 0;
}

bool Md::addAtom(int cell, const double *r, const double *p, long long gid, int species)
{
    int k = count_[cell];
    if (k >= cap_) {
        std::ostringstream msg;
        msg << "link cell overflow (capacity " << cap_ << " atoms)";
        return fail(msg.str());
    }
    size_t s = static_cast<size_t>(cell) * cap_ + k;
    std::memcpy(&r_[3 * s], r, 3 * sizeof(double));
    std::memcpy(&p_[3 * s], p, 3 * sizeof(double));
    gid_[s] = gid;
    species_[s] = species;
    count_[cell] = k + 1;
    return true;
}

void Md::removeAtom(int cell, int slot)
{
    int last = --count_[cell];
    if (slot == last)
        return;
    size_t s = static_cast<size_t>(cell) * cap_ + slot;
    size_t l = static_cast<size_t>(cell) * cap_ + last;
    std::memcpy(&r_[3 * s], &r_[3 * l], 3 * sizeof(double));
    std::memcpy(&p_[3 * s], &p_[3 * l], 3 * sizeof(double));
    gid_[s] = gid_[l];
    species_[s] = species_[l];
}

void Md::globalCellOf(const double *r, int g[3]) const
{
    // Clamped in floating point: r == L can follow a wrap by rounding, and a
    // non-finite r must not reach the int conversion.
    for (int d = 0; d < 3; ++d) {
        double c = std::floor(r[d] * invCs_[d]);
        g[d] = c >= 0.0 ? (c < gc_[d] ? static_cast<int>(c) : gc_[d] - 1) : 0;
    }
}

bool Md::ownsGlobal(const int g[3]) const
{
    for (int d = 0; d < 3; ++d)
        if (g[d] < lo_[d] || g[d] >= lo_[d] + nl_[d])
            return false;
    return true;
}

bool Md::placeLocal(const Migrant &m)
{
    int g[3];
    globalCellOf(m.r, g);
    int c = storageIndex(g[0] - lo_[0], g[1] - lo_[1], g[2] - lo_[2]);
    return addAtom(c, m.r, m.p, m.gid, m.species);
}

bool Md::initialize()
{
    double t0 = MPI_Wtime();
    std::fill(count_.begin(), count_.end(), 0);
    const int n[3] = {prm_.nx, prm_.ny, prm_.nz};
    // Every rank scans the whole lattice: simpler than bounding which unit
    // cells can reach the owned cells once displaced and wrapped, and cheap
    // next to a single force evaluation.
    bool ok = true;
    const double zero[3] = {0, 0, 0};
    for (int k = 0; k < n[2]; ++k)
        for (int j = 0; j < n[1]; ++j)
            for (int i = 0; i < n[0]; ++i)
                for (int b = 0; b < 4; ++b) {
                    const int u[3] = {i, j, k};
                    long long id = 4LL * (i + static_cast<long long>(n[0]) *
                                                  (j + static_cast<long long>(n[1]) * k)) + b;
                    double r[3];
                    for (int d = 0; d < 3; ++d) {
                        r[d] = (u[d] + kBasis[b][d]) * prm_.lat;
                        if (prm_.delta != 0.0) {
                            double x = 2.0 * uniform(prm_.seed, id, 4 + d) - 1.0;
                            r[d] += x * prm_.delta * prm_.lat;
                            r[d] = std::fmod(r[d], L_[d]);
                            if (r[d] < 0.0)
                                r[d] += L_[d];
                        }
                    }
                    int g[3];
                    globalCellOf(r, g);
                    if (!ownsGlobal(g))
                        continue;
                    int c = storageIndex(g[0] - lo_[0], g[1] - lo_[1], g[2] - lo_[2]);
                    ok = addAtom(c, r, zero, id, 0) && ok;
                }
    if (!collectiveOk(ok))
        return false;
    sortCells();

    // Velocities: Maxwell-Boltzmann per atom, then remove the centre-of-mass
    // momentum and rescale to exactly T.  Both sums are exact, so every
    // layout applies the same shift and factor.
    const double sd = std::sqrt(mass_ * kBoltzmann * prm_.temp);
    ExactSum mom[3];
    for (int c = 0; c < nLocal_; ++c)
        for (int k = 0; k < count_[c]; ++k) {
            size_t s = static_cast<size_t>(c) * cap_ + k;
            double g[3];
            gaussian3(prm_.seed, gid_[s], g);
            for (int d = 0; d < 3; ++d) {
                p_[3 * s + d] = sd * g[d];
                mom[d].add(p_[3 * s + d]);
            }
        }
    exact_allreduce(mom, 3, comm_);
    const double nAtoms = static_cast<double>(totalAtoms());
    double shift[3];
    for (int d = 0; d < 3; ++d)
        shift[d] = mom[d].value() / nAtoms;
    ExactSum ke;
    for (int c = 0; c < nLocal_; ++c)
        for (int k = 0; k < count_[c]; ++k) {
            double *pp = &p_[3 * (static_cast<size_t>(c) * cap_ + k)];
            for (int d = 0; d < 3; ++d)
                pp[d] -= shift[d];
            ke.add(0.5 * (pp[0] * pp[0] + pp[1] * pp[1] + pp[2] * pp[2]) / mass_);
        }
    exact_allreduce(&ke, 1, comm_);
    double keTotal = ke.value();
    if (keTotal > 0) {
        double tNow = keTotal / (1.5 * nAtoms * kBoltzmann);
        double scale = std::sqrt(prm_.temp / tNow);
        for (int c = 0; c < nLocal_; ++c)
            for (int k = 0; k < 3 * count_[c]; ++k)
                p_[3 * static_cast<size_t>(c) * cap_ + k] *= scale;
    }
    tRedistribute += MPI_Wtime() - t0;
    if (!haloExchange())
        return false;
    computeForces();
    return true;
}

bool Md::refresh()
{
    bool ok = true;
    for (int c = 0; c < nLocal_ && ok; ++c)
        if (count_[c] < 0 || count_[c] > cap_)
            ok = fail("restored cell counts are out of range");
    if (!collectiveOk(ok))
        return false;
    sortCells();
    if (!haloExchange())
        return false;
    computeForces();
    return true;
}

void Md::kick(double h)
{
    for (int c = 0; c < nLocal_; ++c) {
        size_t base = 3 * static_cast<size_t>(c) * cap_;
        for (int k = 0; k < 3 * count_[c]; ++k)
            p_[base + k] += h * f_[base + k];
    }
}

void Md::drift(double h)
{
    const double invMass = 1.0 / mass_;
    for (int c = 0; c < nLocal_; ++c) {
        size_t base = 3 * static_cast<size_t>(c) * cap_;
        for (int k = 0; k < 3 * count_[c]; ++k)
            r_[base + k] += h * p_[base + k] * invMass;
    }
}

bool Md::step()
{
    kick(0.5 * prm_.dt);
    drift(prm_.dt);
    if (!redistribute() || !haloExchange())
        return false;
    computeForces();
    kick(0.5 * prm_.dt);
    return true;
}

void Md::sortCells()
{
    // Insertion sort by id: cells hold a few dozen atoms and are almost
    // always sorted already.
    for (int c = 0; c < nLocal_; ++c) {
        size_t base = static_cast<size_t>(c) * cap_;
        for (int k = 1; k < count_[c]; ++k) {
            long long id = gid_[base + k];
            if (gid_[base + k - 1] <= id)
                continue;
            double r[3], p[3];
            std::memcpy(r, &r_[3 * (base + k)], sizeof r);
            std::memcpy(p, &p_[3 * (base + k)], sizeof p);
            int sp = species_[base + k];
            int j = k;
            while (j > 0 && gid_[base + j - 1] > id) {
                std::memcpy(&r_[3 * (base + j)], &r_[3 * (base + j - 1)], sizeof r);
                std::memcpy(&p_[3 * (base + j)], &p_[3 * (base + j - 1)], sizeof p);
                gid_[base + j] = gid_[base + j - 1];
                species_[base + j] = species_[base + j - 1];
                --j;
            }
            std::memcpy(&r_[3 * (base + j)], r, sizeof r);
            std::memcpy(&p_[3 * (base + j)], p, sizeof p);
            gid_[base + j] = id;
            species_[base + j] = sp;
        }
    }
}

bool Md::redistribute()
{
    double t0 = MPI_Wtime();
    bool ok = true;
    std::vector<Migrant> pending;
    for (int c = 0; c < nLocal_; ++c) {
        const int *cc = &cellCoord_[3 * c];
        // Downwards, so the atom swapped into a vacated slot was seen already.
        for (int k = count_[c] - 1; k >= 0; --k) {
            size_t s = static_cast<size_t>(c) * cap_ + k;
            double *r = &r_[3 * s];
            if (!std::isfinite(r[0]) || !std::isfinite(r[1]) || !std::isfinite(r[2])) {
                ok = fail("non-finite atom position (unstable: time step too long?)");
                continue;
            }
            for (int d = 0; d < 3; ++d) {
                if (r[d] < 0.0)
                    r[d] += L_[d];
                else if (r[d] >= L_[d])
                    r[d] -= L_[d];
            }
            int g[3];
            globalCellOf(r, g);
            if (g[0] == lo_[0] + cc[0] && g[1] == lo_[1] + cc[1] && g[2] == lo_[2] + cc[2])
                continue;
            Migrant m;
            std::memcpy(m.r, r, sizeof m.r);
            std::memcpy(m.p, &p_[3 * s], sizeof m.p);
            m.gid = gid_[s];
            m.species = species_[s];
            m.pad = 0;
            removeAtom(c, k);
            ++cellMoves;
            if (ownsGlobal(g))
                ok = placeLocal(m) && ok;
            else
                pending.push_back(m);
        }
    }

    // Six messages: leavers go along x first, then y, then z; an atom that
    // crossed an edge or corner is forwarded by the intermediate rank.
    const int P[3] = {prm_.px, prm_.py, prm_.pz};
    for (int d = 0; d < 3; ++d) {
        if (P[d] == 1)
            continue;
        std::vector<Migrant> out[2], keep;
        const int below = (lo_[d] - 1 + gc_[d]) % gc_[d];
        const int above = (lo_[d] + nl_[d]) % gc_[d];
        for (const Migrant &m : pending) {
            int g[3];
            globalCellOf(m.r, g);
            if (g[d] >= lo_[d] && g[d] < lo_[d] + nl_[d])
                keep.push_back(m);
            else if (g[d] == below)
                out[0].push_back(m);
            else if (g[d] == above)
                out[1].push_back(m);
            else
                ok = fail("an atom moved more than one link cell in one step");
        }
        for (int s = 0; s < 2; ++s) {
            int dest = nbr_[d][s], src = nbr_[d][1 - s];
            int nsend = static_cast<int>(out[s].size()), nrecv = 0;
            if (dest != rank_)
                rankMoves += nsend;
            MPI_Sendrecv(&nsend, 1, MPI_INT, dest, 10 + 2 * d + s, &nrecv, 1, MPI_INT, src,
                         10 + 2 * d + s, comm_, MPI_STATUS_IGNORE);
            std::vector<Migrant> in(nrecv);
            MPI_Sendrecv(out[s].data(), nsend * static_cast<int>(sizeof(Migrant)), MPI_BYTE, dest,
                         20 + 2 * d + s, in.data(), nrecv * static_cast<int>(sizeof(Migrant)),
                         MPI_BYTE, src, 20 + 2 * d + s, comm_, MPI_STATUS_IGNORE);
            for (const Migrant &m : in) {
                int g[3];
                globalCellOf(m.r, g);
                if (ownsGlobal(g))
                    ok = placeLocal(m) && ok;
                else
                    keep.push_back(m);
            }
        }
        pending.swap(keep);
    }
    if (!pending.empty())
        ok = fail("atoms left the domain and were lost");
    ok = collectiveOk(ok);
    if (ok)
        sortCells();
    tRedistribute += MPI_Wtime() - t0;
    return ok;
}

bool Md::haloExchange()
{
    double t0 = MPI_Wtime();
    for (int c = nLocal_; c < nTotal_; ++c)
        count_[c] = 0;
    std::vector<int> counts, rcounts;
    std::vector<double> sbuf, rbuf;
    for (int d = 0; d < 3; ++d) {
        // Layer extents in the other dimensions: halo included for the
        // dimensions already exchanged, so edges and corners propagate.
        int from[3], to[3];
        for (int e = 0; e < 3; ++e) {
            from[e] = e < d ? -1 : 0;
            to[e] = e < d ? nl_[e] : nl_[e] - 1;
        }
        const int P[3] = {prm_.px, prm_.py, prm_.pz};
        for (int s = 0; s < 2; ++s) {
            // s = 0: my lowest owned layer goes to the minus neighbour's upper
            // halo; s = 1: my highest owned layer to the plus neighbour's lower halo.
            double shift = 0.0;
            if (s == 0 && pc_[d] == 0)
                shift = L_[d];
            else if (s == 1 && pc_[d] == P[d] - 1)
                shift = -L_[d];
            int sendLayer = s == 0 ? 0 : nl_[d] - 1;
            int recvLayer = s == 0 ? nl_[d] : -1;
            counts.clear();
            sbuf.clear();
            int f[3] = {from[0], from[1], from[2]}, t[3] = {to[0], to[1], to[2]};
            f[d] = t[d] = sendLayer;
            for (int z = f[2]; z <= t[2]; ++z)
                for (int y = f[1]; y <= t[1]; ++y)
                    for (int x = f[0]; x <= t[0]; ++x) {
                        int c = storageIndex(x, y, z);
                        counts.push_back(count_[c]);
                        const double *r = &r_[3 * static_cast<size_t>(c) * cap_];
                        for (int k = 0; k < count_[c]; ++k) {
                            sbuf.push_back(r[3 * k]);
                            sbuf.push_back(r[3 * k + 1]);
                            sbuf.push_back(r[3 * k + 2]);
                            sbuf[sbuf.size() - 3 + d] += shift;
                        }
                    }
            int dest = nbr_[d][s], src = nbr_[d][1 - s];
            int ncell = static_cast<int>(counts.size());
            rcounts.assign(ncell, 0);
            MPI_Sendrecv(counts.data(), ncell, MPI_INT, dest, 30 + 2 * d + s, rcounts.data(),
                         ncell, MPI_INT, src, 30 + 2 * d + s, comm_, MPI_STATUS_IGNORE);
            long long nin = 0;
            for (int v : rcounts)
                nin += v;
            rbuf.resize(3 * static_cast<size_t>(nin));
            MPI_Sendrecv(sbuf.data(), static_cast<int>(sbuf.size()), MPI_DOUBLE, dest,
                         40 + 2 * d + s, rbuf.data(), static_cast<int>(rbuf.size()), MPI_DOUBLE,
                         src, 40 + 2 * d + s, comm_, MPI_STATUS_IGNORE);
            f[d] = t[d] = recvLayer;
            size_t pos = 0;
            int i = 0;
            for (int z = f[2]; z <= t[2]; ++z)
                for (int y = f[1]; y <= t[1]; ++y)
                    for (int x = f[0]; x <= t[0]; ++x) {
                        int c = storageIndex(x, y, z);
                        count_[c] = rcounts[i++];
                        std::memcpy(&r_[3 * static_cast<size_t>(c) * cap_], &rbuf[pos],
                                    3 * sizeof(double) * count_[c]);
                        pos += 3 * static_cast<size_t>(count_[c]);
                    }
        }
    }
    tHalo += MPI_Wtime() - t0;
    return true;
}

void Md::computeForces()
{
    double t0 = MPI_Wtime();
    const double rc2 = rc2_, s6 = s6_, eShift = eShift_;
    // A neighbour cell whose slab distance from atom i exceeds the cutoff
    // holds no partner; the margin (far above rounding) makes sure no pair
    // the distance test would accept is skipped, so results are unchanged.
    const double skip2 = rc2 + 1e-6;
    std::vector<int> selBuf(cap_);
    int *sel = selBuf.data();
    for (int c = 0; c < nLocal_; ++c) {
        const int *nb = &neighbours_[27 * static_cast<size_t>(c)];
        const int *cc = &cellCoord_[3 * static_cast<size_t>(c)];
        double cellLo[3], cellHi[3];
        for (int d = 0; d < 3; ++d) {
            cellLo[d] = (lo_[d] + cc[d]) * cs_[d];
            cellHi[d] = cellLo[d] + cs_[d];
        }
        const size_t base = static_cast<size_t>(c) * cap_;
        for (int i = 0; i < count_[c]; ++i) {
            const double xi = r_[3 * (base + i)], yi = r_[3 * (base + i) + 1],
                         zi = r_[3 * (base + i) + 2];
            // Squared distance to the slabs below (0), inside (1) and above (2).
            double sx[3], sy[3], sz[3];
            sx[0] = (xi - cellLo[0]) * (xi - cellLo[0]);
            sx[1] = 0.0;
            sx[2] = (cellHi[0] - xi) * (cellHi[0] - xi);
            sy[0] = (yi - cellLo[1]) * (yi - cellLo[1]);
            sy[1] = 0.0;
            sy[2] = (cellHi[1] - yi) * (cellHi[1] - yi);
            sz[0] = (zi - cellLo[2]) * (zi - cellLo[2]);
            sz[1] = 0.0;
            sz[2] = (cellHi[2] - zi) * (cellHi[2] - zi);
            double fx = 0, fy = 0, fz = 0, e = 0;
            for (int n = 0; n < 27; ++n) {
                if (sx[n % 3] + sy[(n / 3) % 3] + sz[n / 9] > skip2)
                    continue;
                const int jc = nb[n];
                const double *rj = &r_[3 * static_cast<size_t>(jc) * cap_];
                const int nj = count_[jc];
                // Branch-free selection of the partners first (most
                // candidates lie beyond the cutoff), then the pair terms in
                // increasing slot order.
                int nsel = 0;
                for (int j = 0; j < nj; ++j) {
                    double dx = xi - rj[3 * j], dy = yi - rj[3 * j + 1], dz = zi - rj[3 * j + 2];
                    double r2 = dx * dx + dy * dy + dz * dz;
                    sel[nsel] = j;
                    nsel += (r2 <= rc2) & !(jc == c && j == i);
                }
                for (int q = 0; q < nsel; ++q) {
                    const int j = sel[q];
                    double dx = xi - rj[3 * j], dy = yi - rj[3 * j + 1], dz = zi - rj[3 * j + 2];
                    double r2 = dx * dx + dy * dy + dz * dz;
                    double ir2 = 1.0 / r2;
                    double r6 = s6 * ir2 * ir2 * ir2;
                    e += r6 * (r6 - 1.0) - eShift;
                    double fr = ir2 * r6 * (2.0 * r6 - 1.0);
                    fx += fr * dx;
                    fy += fr * dy;
                    fz += fr * dz;
                }
            }
            // V = 4 eps (s^12/r^12 - s^6/r^6) - shift, half of each pair's
            // energy per atom; F = -dV/dr along (ri - rj).
            f_[3 * (base + i)] = 24.0 * kEpsilon * fx;
            f_[3 * (base + i) + 1] = 24.0 * kEpsilon * fy;
            f_[3 * (base + i) + 2] = 24.0 * kEpsilon * fz;
            u_[base + i] = 2.0 * kEpsilon * e;
        }
    }
    tForce += MPI_Wtime() - t0;
}

MdEnergies Md::energies()
{
    ExactSum sum[2];
    long long n = 0;
    for (int c = 0; c < nLocal_; ++c) {
        size_t base = static_cast<size_t>(c) * cap_;
        for (int k = 0; k < count_[c]; ++k) {
            const double *p = &p_[3 * (base + k)];
            sum[0].add(u_[base + k]);
            sum[1].add(0.5 * (p[0] * p[0] + p[1] * p[1] + p[2] * p[2]) / mass_);
        }
        n += count_[c];
    }
    exact_allreduce(sum, 2, comm_);
    MPI_Allreduce(MPI_IN_PLACE, &n, 1, MPI_LONG_LONG, MPI_SUM, comm_);
    MdEnergies out;
    out.pe = sum[0].value();
    out.ke = sum[1].value();
    out.atoms = n;
    return out;
}
