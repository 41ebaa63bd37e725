// Halo communication with up to 26 neighbouring ranks (faces, edges, corners).
//
// Ranks share the nodes on their common block boundaries.  Three operations:
//  - sbn:    every sharer sends its partial nodal sums (forces, masses) for all
//            shared nodes and adds what it receives, so all copies hold the total;
//  - posvel: the copy on the rank with the highest block position in every
//            dimension is authoritative; it overwrites the others, which keeps
//            the duplicated nodes bitwise identical despite summation order;
//  - monoq:  velocity gradients of the element layer next to each face go to
//            the face neighbour's ghost slots for the monotonic Q limiter.
// Received data is always applied in a fixed channel order, never in arrival
// order, so that runs and restarts are reproducible bit for bit.
#include "lulesh.hpp"

namespace lulesh {
namespace {

int dirIndex(int dx, int dy, int dz) { return (dz + 1) * 9 + (dy + 1) * 3 + (dx + 1); }

struct Range {
    Index lo, hi;
};

// Nodes of the box r[0] x r[1] x r[2], in ascending node index (both
// sharers of a box enumerate it in the same global order).
std::vector<Index> nodeBox(const Domain &d, const Range r[3]) {
    std::vector<Index> out;
    const Index en = d.edgeNodes;
    for (Index k = r[2].lo; k <= r[2].hi; ++k)
        for (Index j = r[1].lo; j <= r[1].hi; ++j)
            for (Index i = r[0].lo; i <= r[0].hi; ++i) out.push_back(k * en * en + j * en + i);
    return out;
}

}  // namespace

void setupHalo(Domain &d) {
    Halo &h = d.halo;
    const Index n = d.nx;
    const int pos[3] = {d.col, d.row, d.plane};
    bool hasUpper[3];
    for (int a = 0; a < 3; ++a) hasUpper[a] = pos[a] < d.tp - 1;
    Real *gradient[3] = {d.delv_xi.data(), d.delv_eta.data(), d.delv_zeta.data()};
    const std::vector<Index> *across[NFACE] = {&d.lxim, &d.lxip, &d.letam, &d.letap, &d.lzetam, &d.lzetap};

    for (int dz = -1; dz <= 1; ++dz)
        for (int dy = -1; dy <= 1; ++dy)
            for (int dx = -1; dx <= 1; ++dx) {
                const int dir = dirIndex(dx, dy, dz);
                const int c[3] = {dx, dy, dz};
                h.nbr[dir] = -1;
                if (dx == 0 && dy == 0 && dz == 0) continue;
                bool inside = true;
                for (int a = 0; a < 3; ++a) inside = inside && pos[a] + c[a] >= 0 && pos[a] + c[a] < d.tp;
                if (!inside) continue;
                const int nb = ((pos[2] + dz) * d.tp + (pos[1] + dy)) * d.tp + (pos[0] + dx);
                h.nbr[dir] = nb;

                Range r[3];
                Channel sum;
                sum.nbr = nb;
                sum.dir = dir;
                for (int a = 0; a < 3; ++a) r[a] = c[a] < 0 ? Range{0, 0} : c[a] > 0 ? Range{n, n} : Range{0, n};
                sum.send = nodeBox(d, r);
                sum.recv = sum.send;
                h.sbn.push_back(std::move(sum));

                // A node is authoritative here unless it lies on a boundary
                // shared with an upper neighbour; only lower neighbours
                // receive from this rank and only upper ones send to it.
                bool lower = true, upper = true;
                for (int a = 0; a < 3; ++a) {
                    lower = lower && c[a] <= 0;
                    upper = upper && c[a] >= 0;
                }
                if (lower || upper) {
                    Channel pv;
                    pv.nbr = nb;
                    pv.dir = dir;
                    for (int a = 0; a < 3; ++a)
                        r[a] = c[a] < 0   ? Range{0, 0}
                               : c[a] > 0 ? Range{n, n}
                                          : Range{0, hasUpper[a] ? n - 1 : n};
                    (lower ? pv.send : pv.recv) = nodeBox(d, r);
                    h.posvel.push_back(std::move(pv));
                }

                // Faces: the ghost slot of each boundary element is its
                // neighbour across that face.
                const int nonzero = (dx != 0) + (dy != 0) + (dz != 0);
                if (nonzero == 1) {
                    const int a = dx != 0 ? 0 : dy != 0 ? 1 : 2;
                    const int face = 2 * a + (c[a] > 0 ? 1 : 0);
                    const Index layer = c[a] < 0 ? 0 : n - 1;
                    Channel mq;
                    mq.nbr = nb;
                    mq.dir = dir;
                    mq.field[0] = gradient[a];
                    mq.nfield = 1;
                    for (Index outer = 0; outer < n; ++outer)
                        for (Index inner = 0; inner < n; ++inner) {
                            Index i, j, k;
                            if (a == 0) { i = layer; j = inner; k = outer; }
                            else if (a == 1) { i = inner; j = layer; k = outer; }
                            else { i = inner; j = outer; k = layer; }
                            const Index el = (k * n + j) * n + i;
                            mq.send.push_back(el);
                            mq.recv.push_back((*across[face])[el]);
                        }
                    h.monoq.push_back(std::move(mq));
                }
            }
}

void exchange(Domain &d, std::vector<Channel> &ch, Real *const *fields, int nfield, bool add,
              int tag) {
    Halo &h = d.halo;
    std::size_t ns = 0, nr = 0;
    for (const Channel &c : ch) {
        const int nf = fields ? nfield : c.nfield;
        ns += c.send.size() * nf;
        nr += c.recv.size() * nf;
    }
    if (h.sbuf.size() < ns) h.sbuf.resize(ns);
    if (h.rbuf.size() < nr) h.rbuf.resize(nr);
    h.req.clear();

    std::size_t off = 0;
    for (const Channel &c : ch) {
        const int nf = fields ? nfield : c.nfield;
        const std::size_t cnt = c.recv.size() * nf;
        if (cnt == 0) continue;
        h.req.emplace_back();
        MPI_Irecv(h.rbuf.data() + off, int(cnt), MPI_DOUBLE, c.nbr, tag, d.comm, &h.req.back());
        off += cnt;
    }
    off = 0;
    for (const Channel &c : ch) {
        const int nf = fields ? nfield : c.nfield;
        Real *const *fl = fields ? fields : c.field;
        if (c.send.empty()) continue;
        const std::size_t start = off;
        for (int f = 0; f < nf; ++f)
            for (Index idx : c.send) h.sbuf[off++] = fl[f][idx];
        h.req.emplace_back();
        MPI_Isend(h.sbuf.data() + start, int(off - start), MPI_DOUBLE, c.nbr, tag, d.comm,
                  &h.req.back());
    }
    MPI_Waitall(int(h.req.size()), h.req.data(), MPI_STATUSES_IGNORE);

    off = 0;
    for (const Channel &c : ch) {
        const int nf = fields ? nfield : c.nfield;
        Real *const *fl = fields ? fields : c.field;
        for (int f = 0; f < nf; ++f) {
            Real *dst = fl[f];
            if (add)
                for (Index idx : c.recv) dst[idx] += h.rbuf[off++];
            else
                for (Index idx : c.recv) dst[idx] = h.rbuf[off++];
        }
    }
}

}  // namespace lulesh
