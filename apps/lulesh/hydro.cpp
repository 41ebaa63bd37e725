// One Lagrange leapfrog cycle of the Sedov problem: nodal phase (forces,
// accelerations, velocities, positions) then element phase (kinematics,
// monotonic artificial viscosity, EOS, volumes) and the time constraints.
//
// Hexahedron corner numbering: in reference coordinates (xi, eta, zeta) in
// {-1,+1}^3, corner 0 = (-,-,-), 1 = (+,-,-), 2 = (+,+,-), 3 = (-,+,-), and
// corners 4-7 repeat 0-3 at zeta = +1.
#include <cmath>
#include <cstdio>

#include "app_omp.hpp"
#include "lulesh.hpp"

namespace lulesh {
namespace {

inline void gatherCoords(const Domain &d, Index el, Real x[8], Real y[8], Real z[8]) {
    const Index *c = &d.nodelist[8 * std::size_t(el)];
    for (int a = 0; a < 8; ++a) {
        x[a] = d.x[c[a]];
        y[a] = d.y[c[a]];
        z[a] = d.z[c[a]];
    }
}

inline void gatherVelocities(const Domain &d, Index el, Real x[8], Real y[8], Real z[8]) {
    const Index *c = &d.nodelist[8 * std::size_t(el)];
    for (int a = 0; a < 8; ++a) {
        x[a] = d.xd[c[a]];
        y[a] = d.yd[c[a]];
        z[a] = d.zd[c[a]];
    }
}

// a . (b x c)
inline Real tripleProduct(Real ax, Real ay, Real az, Real bx, Real by, Real bz, Real cx, Real cy,
                          Real cz) {
    return ax * (by * cz - cy * bz) + ay * (cx * bz - bx * cz) + az * (bx * cy - cx * by);
}

// Jacobian at the element centre.  b receives the cofactor form of the
// shape-function gradients times the Jacobian determinant (b[.][a+4] are
// the negated gradients of the opposite corners); returns 8 det(J), the
// one-point estimate of the volume.
Real shapeDerivatives(const Real x[8], const Real y[8], const Real z[8], Real b[3][8]) {
    // d/dxi, d/deta, d/dzeta of the trilinear map; 1/8 of sums over corners
    // weighted with the corner's reference signs.
    auto dxi = [](const Real *s) {
        return Real(0.125) * ((s[6] - s[0]) + (s[5] - s[3]) - (s[7] - s[1]) - (s[4] - s[2]));
    };
    auto deta = [](const Real *s) {
        return Real(0.125) * ((s[6] - s[0]) - (s[5] - s[3]) + (s[7] - s[1]) - (s[4] - s[2]));
    };
    auto dzeta = [](const Real *s) {
        return Real(0.125) * ((s[6] - s[0]) + (s[5] - s[3]) + (s[7] - s[1]) + (s[4] - s[2]));
    };
    const Real jxx = dxi(x), jxe = deta(x), jxz = dzeta(x);
    const Real jyx = dxi(y), jye = deta(y), jyz = dzeta(y);
    const Real jzx = dxi(z), jze = deta(z), jzz = dzeta(z);

    // Cofactors of J.
    const Real cxx = (jye * jzz) - (jze * jyz);
    const Real cxe = -(jyx * jzz) + (jzx * jyz);
    const Real cxz = (jyx * jze) - (jzx * jye);
    const Real cyx = -(jxe * jzz) + (jze * jxz);
    const Real cye = (jxx * jzz) - (jzx * jxz);
    const Real cyz = -(jxx * jze) + (jzx * jxe);
    const Real czx = (jxe * jyz) - (jye * jxz);
    const Real cze = -(jxx * jyz) + (jyx * jxz);
    const Real czz = (jxx * jye) - (jyx * jxe);

    const Real cof[3][3] = {{cxx, cxe, cxz}, {cyx, cye, cyz}, {czx, cze, czz}};
    for (int r = 0; r < 3; ++r) {
        const Real cx = cof[r][0], ce = cof[r][1], cz = cof[r][2];
        b[r][0] = -cx - ce - cz;
        b[r][1] = cx - ce - cz;
        b[r][2] = cx + ce - cz;
        b[r][3] = -cx + ce - cz;
        b[r][4] = -b[r][2];
        b[r][5] = -b[r][3];
        b[r][6] = -b[r][0];
        b[r][7] = -b[r][1];
    }
    return Real(8.) * (jxe * cxe + jye * cye + jze * cze);
}

// Adds a quarter of the area vector of the quadrilateral face (a,b,c,d)
// to each of its corners.
inline void addFaceNormal(Real n[3][8], const Real x[8], const Real y[8], const Real z[8], int a,
                          int b, int c, int e) {
    const Real b0x = Real(0.5) * (x[e] + x[c] - x[b] - x[a]);
    const Real b0y = Real(0.5) * (y[e] + y[c] - y[b] - y[a]);
    const Real b0z = Real(0.5) * (z[e] + z[c] - z[b] - z[a]);
    const Real b1x = Real(0.5) * (x[c] + x[b] - x[e] - x[a]);
    const Real b1y = Real(0.5) * (y[c] + y[b] - y[e] - y[a]);
    const Real b1z = Real(0.5) * (z[c] + z[b] - z[e] - z[a]);
    const Real ax = Real(0.25) * (b0y * b1z - b0z * b1y);
    const Real ay = Real(0.25) * (b0z * b1x - b0x * b1z);
    const Real az = Real(0.25) * (b0x * b1y - b0y * b1x);
    for (int k : {a, b, c, e}) {
        n[0][k] += ax;
        n[1][k] += ay;
        n[2][k] += az;
    }
}

// Outward area vectors attributed to each corner (the gradient of the
// volume under the one-point rule).
void nodeNormals(Real n[3][8], const Real x[8], const Real y[8], const Real z[8]) {
    for (int r = 0; r < 3; ++r)
        for (int a = 0; a < 8; ++a) n[r][a] = 0.0;
    addFaceNormal(n, x, y, z, 0, 1, 2, 3);
    addFaceNormal(n, x, y, z, 0, 4, 5, 1);
    addFaceNormal(n, x, y, z, 1, 5, 6, 2);
    addFaceNormal(n, x, y, z, 2, 6, 7, 3);
    addFaceNormal(n, x, y, z, 3, 7, 4, 0);
    addFaceNormal(n, x, y, z, 4, 7, 6, 5);
}

// Squared area of a quadrilateral face times 16 (|d1 x d2|^2 with the
// diagonal combinations f = d1 - d2, g = d1 + d2).
inline Real faceArea16(const Real x[8], const Real y[8], const Real z[8], int a, int b, int c,
                       int e) {
    const Real fx = (x[c] - x[a]) - (x[e] - x[b]);
    const Real fy = (y[c] - y[a]) - (y[e] - y[b]);
    const Real fz = (z[c] - z[a]) - (z[e] - z[b]);
    const Real gx = (x[c] - x[a]) + (x[e] - x[b]);
    const Real gy = (y[c] - y[a]) + (y[e] - y[b]);
    const Real gz = (z[c] - z[a]) + (z[e] - z[b]);
    const Real fg = fx * gx + fy * gy + fz * gz;
    return (fx * fx + fy * fy + fz * fz) * (gx * gx + gy * gy + gz * gz) - fg * fg;
}

// Volume over the largest face area: the length scale of the Courant limit.
Real characteristicLength(const Real x[8], const Real y[8], const Real z[8], Real volume) {
    static const int faces[6][4] = {{0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1, 5, 4},
                                    {1, 2, 6, 5}, {2, 3, 7, 6}, {3, 0, 4, 7}};
    Real largest = 0.0;
    for (const auto &f : faces) {
        const Real a = faceArea16(x, y, z, f[0], f[1], f[2], f[3]);
        if (a > largest) largest = a;
    }
    return Real(4.0) * volume / std::sqrt(largest);
}

// Derivative of the hexahedron volume with respect to one corner, given the
// other three corners of its zeta face (o1, o2, o3, going round from it) and
// the corners across zeta from itself, from o1 and from o3 (t0, t1, t3).
inline void cornerVolumeGradient(const Real x[8], const Real y[8], const Real z[8], int o1, int o2,
                                 int o3, int t0, int t1, int t3, Real &gx, Real &gy, Real &gz) {
    const Real x0 = x[o1], x1 = x[o2], x2 = x[o3], x3 = x[t0], x4 = x[t1], x5 = x[t3];
    const Real y0 = y[o1], y1 = y[o2], y2 = y[o3], y3 = y[t0], y4 = y[t1], y5 = y[t3];
    const Real z0 = z[o1], z1 = z[o2], z2 = z[o3], z3 = z[t0], z4 = z[t1], z5 = z[t3];
    const Real twelfth = Real(1.0) / Real(12.0);
    gx = (y1 + y2) * (z0 + z1) - (y0 + y1) * (z1 + z2) + (y0 + y4) * (z3 + z4) -
         (y3 + y4) * (z0 + z4) - (y2 + y5) * (z3 + z5) + (y3 + y5) * (z2 + z5);
    gy = -(x1 + x2) * (z0 + z1) + (x0 + x1) * (z1 + z2) - (x0 + x4) * (z3 + z4) +
         (x3 + x4) * (z0 + z4) + (x2 + x5) * (z3 + z5) - (x3 + x5) * (z2 + z5);
    gz = -(y1 + y2) * (x0 + x1) + (y0 + y1) * (x1 + x2) - (y0 + y4) * (x3 + x4) +
         (y3 + y4) * (x0 + x4) + (y2 + y5) * (x3 + x5) - (y3 + y5) * (x2 + x5);
    gx *= twelfth;
    gy *= twelfth;
    gz *= twelfth;
}

// Hourglass base vectors of the 8-node hexahedron: the products
// eta*zeta, xi*zeta, xi*eta and xi*eta*zeta of the corners' reference signs.
struct HourglassModes {
    Real g[4][8];
    HourglassModes() {
        static const int sx[8] = {-1, 1, 1, -1, -1, 1, 1, -1};
        static const int sy[8] = {-1, -1, 1, 1, -1, -1, 1, 1};
        static const int sz[8] = {-1, -1, -1, -1, 1, 1, 1, 1};
        for (int a = 0; a < 8; ++a) {
            g[0][a] = Real(sy[a] * sz[a]);
            g[1][a] = Real(sx[a] * sz[a]);
            g[2][a] = Real(sx[a] * sy[a]);
            g[3][a] = Real(sx[a] * sy[a] * sz[a]);
        }
    }
};
const HourglassModes kModes;

// ---- nodal phase ---------------------------------------------------------

// Sums each node's element-corner forces in a fixed order (the node's corner
// list), replacing or adding to its force: the same order on every layout.
static void sumCornerForces(Domain &d, bool add) {
    APP_OMP_FOR
    for (Index nd = 0; nd < d.numNode; ++nd) {
        Real sx = add ? d.fx[nd] : 0.0, sy = add ? d.fy[nd] : 0.0, sz = add ? d.fz[nd] : 0.0;
        for (Index c = d.nodeElemStart[nd]; c < d.nodeElemStart[nd + 1]; ++c) {
            const Index corner = d.nodeElemCorner[c];
            sx += d.fxElem[corner];
            sy += d.fyElem[corner];
            sz += d.fzElem[corner];
        }
        d.fx[nd] = sx;
        d.fy[nd] = sy;
        d.fz[nd] = sz;
    }
}

// Stress (-p-q, isotropic) integrated to corner forces; determ gets the
// one-point volume for the sanity check.
void integrateStress(Domain &d) {
    const Index ne = d.numElem;
    APP_OMP_FOR
    for (Index el = 0; el < ne; ++el) {
        Real x[8], y[8], z[8], b[3][8];
        gatherCoords(d, el, x, y, z);
        d.determ[el] = shapeDerivatives(x, y, z, b);
        nodeNormals(b, x, y, z);
        const Real s = d.sigma[el];
        Real *fx = &d.fxElem[8 * std::size_t(el)];
        Real *fy = &d.fyElem[8 * std::size_t(el)];
        Real *fz = &d.fzElem[8 * std::size_t(el)];
        for (int a = 0; a < 8; ++a) {
            fx[a] = -(s * b[0][a]);
            fy[a] = -(s * b[1][a]);
            fz[a] = -(s * b[2][a]);
        }
    }
    sumCornerForces(d, false);
}

// Flanagan-Belytschko hourglass control: the hourglass modes are made
// orthogonal to the linear velocity field with the volume gradient, and the
// nodal velocities' projection on them is resisted with a force scaled by
// sound speed, mass and element size.
void hourglassControl(Domain &d) {
    const Index ne = d.numElem;
    const Real hgcoef = d.k.hgcoef;
    APP_OMP_FOR
    for (Index el = 0; el < ne; ++el) {
        if (d.v[el] <= Real(0.0)) fatal(d, 2, "negative relative volume in hourglass control");
        if (hgcoef <= Real(0.0)) continue;
        Real x[8], y[8], z[8], dvdx[8], dvdy[8], dvdz[8];
        gatherCoords(d, el, x, y, z);
        volumeDerivative(x, y, z, dvdx, dvdy, dvdz);
        const Real volume = d.volo[el] * d.v[el];

        const Real volinv = Real(1.0) / volume;
        Real gam[8][4];
        for (int m = 0; m < 4; ++m) {
            const Real *g = kModes.g[m];
            Real hx = x[0] * g[0], hy = y[0] * g[0], hz = z[0] * g[0];
            for (int a = 1; a < 8; ++a) {
                hx += x[a] * g[a];
                hy += y[a] * g[a];
                hz += z[a] * g[a];
            }
            for (int a = 0; a < 8; ++a)
                gam[a][m] = g[a] - volinv * (dvdx[a] * hx + dvdy[a] * hy + dvdz[a] * hz);
        }
        Real xd[8], yd[8], zd[8];
        gatherVelocities(d, el, xd, yd, zd);
        const Real coefficient =
            -hgcoef * Real(0.01) * d.ss[el] * d.elemMass[el] / std::cbrt(volume);

        Real *fe[3] = {&d.fxElem[8 * std::size_t(el)], &d.fyElem[8 * std::size_t(el)],
                       &d.fzElem[8 * std::size_t(el)]};
        const Real *vel[3] = {xd, yd, zd};
        for (int r = 0; r < 3; ++r) {
            Real h[4];
            for (int m = 0; m < 4; ++m) {
                Real s = gam[0][m] * vel[r][0];
                for (int a = 1; a < 8; ++a) s += gam[a][m] * vel[r][a];
                h[m] = s;
            }
            for (int a = 0; a < 8; ++a)
                fe[r][a] = coefficient *
                           (gam[a][0] * h[0] + gam[a][1] * h[1] + gam[a][2] * h[2] + gam[a][3] * h[3]);
        }
    }
    if (hgcoef <= Real(0.0)) return;
    sumCornerForces(d, true);
}

void calcForceForNodes(Domain &d) {
    APP_OMP_FOR
    for (Index el = 0; el < d.numElem; ++el) d.sigma[el] = -d.p[el] - d.q[el];
    integrateStress(d);
    for (Index el = 0; el < d.numElem; ++el)
        if (d.determ[el] <= Real(0.0)) fatal(d, 2, "negative element volume in stress integration");
    hourglassControl(d);
    Real *f[3] = {d.fx.data(), d.fy.data(), d.fz.data()};
    exchange(d, d.halo.sbn, f, 3, true, 101);
}

void lagrangeNodal(Domain &d) {
    const Real dt = d.deltatime, ucut = d.k.u_cut;
    calcForceForNodes(d);
    APP_OMP_FOR
    for (Index nd = 0; nd < d.numNode; ++nd) {
        d.xdd[nd] = d.fx[nd] / d.nodalMass[nd];
        d.ydd[nd] = d.fy[nd] / d.nodalMass[nd];
        d.zdd[nd] = d.fz[nd] / d.nodalMass[nd];
    }
    for (Index nd : d.symmX) d.xdd[nd] = 0.0;
    for (Index nd : d.symmY) d.ydd[nd] = 0.0;
    for (Index nd : d.symmZ) d.zdd[nd] = 0.0;
    APP_OMP_FOR
    for (Index nd = 0; nd < d.numNode; ++nd) {
        Real u = d.xd[nd] + d.xdd[nd] * dt;
        Real v = d.yd[nd] + d.ydd[nd] * dt;
        Real w = d.zd[nd] + d.zdd[nd] * dt;
        d.xd[nd] = std::fabs(u) < ucut ? Real(0.0) : u;
        d.yd[nd] = std::fabs(v) < ucut ? Real(0.0) : v;
        d.zd[nd] = std::fabs(w) < ucut ? Real(0.0) : w;
    }
    APP_OMP_FOR
    for (Index nd = 0; nd < d.numNode; ++nd) {
        d.x[nd] += d.xd[nd] * dt;
        d.y[nd] += d.yd[nd] * dt;
        d.z[nd] += d.zd[nd] * dt;
    }
    Real *f[6] = {d.x.data(), d.y.data(), d.z.data(), d.xd.data(), d.yd.data(), d.zd.data()};
    exchange(d, d.halo.posvel, f, 6, false, 102);
}

// ---- element phase -------------------------------------------------------

// New relative volume, volume change, length scale and the volumetric strain
// rate, the latter from the velocity gradient at the half-step geometry.
void calcKinematics(Domain &d) {
    const Real dt2 = Real(0.5) * d.deltatime;
    APP_OMP_FOR
    for (Index el = 0; el < d.numElem; ++el) {
        Real x[8], y[8], z[8], xd[8], yd[8], zd[8], b[3][8];
        gatherCoords(d, el, x, y, z);
        const Real volume = elemVolume(x, y, z);
        const Real relv = volume / d.volo[el];
        d.vnew[el] = relv;
        d.delv[el] = relv - d.v[el];
        d.arealg[el] = characteristicLength(x, y, z, volume);

        gatherVelocities(d, el, xd, yd, zd);
        for (int a = 0; a < 8; ++a) {
            x[a] -= dt2 * xd[a];
            y[a] -= dt2 * yd[a];
            z[a] -= dt2 * zd[a];
        }
        const Real detJ = shapeDerivatives(x, y, z, b);
        const Real inv = Real(1.0) / detJ;
        // Diagonal of the velocity gradient; b[a+4] = -b[opposite of a].
        const Real dxx = inv * (b[0][0] * (xd[0] - xd[6]) + b[0][1] * (xd[1] - xd[7]) +
                                b[0][2] * (xd[2] - xd[4]) + b[0][3] * (xd[3] - xd[5]));
        const Real dyy = inv * (b[1][0] * (yd[0] - yd[6]) + b[1][1] * (yd[1] - yd[7]) +
                                b[1][2] * (yd[2] - yd[4]) + b[1][3] * (yd[3] - yd[5]));
        const Real dzz = inv * (b[2][0] * (zd[0] - zd[6]) + b[2][1] * (zd[1] - zd[7]) +
                                b[2][2] * (zd[2] - zd[4]) + b[2][3] * (zd[3] - zd[5]));
        d.vdov[el] = dxx + dyy + dzz;
        if (relv <= Real(0.0)) fatal(d, 2, "negative relative volume in kinematics");
    }
}

// Velocity differences and element widths along the three logical
// directions, for the monotonic limiter.
void monotonicQGradients(Domain &d) {
    const Real ptiny = 1.e-36;
    APP_OMP_FOR
    for (Index el = 0; el < d.numElem; ++el) {
        Real x[8], y[8], z[8], u[8], v[8], w[8];
        gatherCoords(d, el, x, y, z);
        gatherVelocities(d, el, u, v, w);
        const Real vol = d.volo[el] * d.vnew[el];
        const Real norm = Real(1.0) / (vol + ptiny);

        // Centre-to-centre vectors between opposite faces.
        auto across_eta = [](const Real *s) {
            return Real(-0.25) * ((s[0] + s[1] + s[5] + s[4]) - (s[3] + s[2] + s[6] + s[7]));
        };
        auto across_xi = [](const Real *s) {
            return Real(0.25) * ((s[1] + s[2] + s[6] + s[5]) - (s[0] + s[3] + s[7] + s[4]));
        };
        auto across_zeta = [](const Real *s) {
            return Real(0.25) * ((s[4] + s[5] + s[6] + s[7]) - (s[0] + s[1] + s[2] + s[3]));
        };
        const Real dxj = across_eta(x), dyj = across_eta(y), dzj = across_eta(z);
        const Real dxi = across_xi(x), dyi = across_xi(y), dzi = across_xi(z);
        const Real dxk = across_zeta(x), dyk = across_zeta(y), dzk = across_zeta(z);

        // zeta: area vector of the mid-surface (i x j)
        Real ax = dyi * dzj - dzi * dyj;
        Real ay = dzi * dxj - dxi * dzj;
        Real az = dxi * dyj - dyi * dxj;
        d.delx_zeta[el] = vol / std::sqrt(ax * ax + ay * ay + az * az + ptiny);
        ax *= norm;
        ay *= norm;
        az *= norm;
        d.delv_zeta[el] = ax * across_zeta(u) + ay * across_zeta(v) + az * across_zeta(w);

        // xi: j x k
        ax = dyj * dzk - dzj * dyk;
        ay = dzj * dxk - dxj * dzk;
        az = dxj * dyk - dyj * dxk;
        d.delx_xi[el] = vol / std::sqrt(ax * ax + ay * ay + az * az + ptiny);
        ax *= norm;
        ay *= norm;
        az *= norm;
        d.delv_xi[el] = ax * across_xi(u) + ay * across_xi(v) + az * across_xi(w);

        // eta: k x i
        ax = dyk * dzi - dzk * dyi;
        ay = dzk * dxi - dxk * dzi;
        az = dxk * dyi - dyk * dxi;
        d.delx_eta[el] = vol / std::sqrt(ax * ax + ay * ay + az * az + ptiny);
        ax *= norm;
        ay *= norm;
        az *= norm;
        d.delv_eta[el] = ax * across_eta(u) + ay * across_eta(v) + az * across_eta(w);
    }
}

// Limiter phi for one direction from the neighbours' gradients.
inline Real limiter(const Domain &d, const std::vector<Real> &grad, int bc, int faceM, int faceP,
                    Index el, Index nm, Index np) {
    const Real ptiny = 1.e-36;
    const Real norm = Real(1.) / (grad[el] + ptiny);
    Real dm, dp;
    switch (bcKind(bc, faceM)) {
    case BC_SYMM: dm = grad[el]; break;
    case BC_FREE: dm = Real(0.0); break;
    default: dm = grad[nm]; break;  // interior or ghost
    }
    switch (bcKind(bc, faceP)) {
    case BC_SYMM: dp = grad[el]; break;
    case BC_FREE: dp = Real(0.0); break;
    default: dp = grad[np]; break;
    }
    dm = dm * norm;
    dp = dp * norm;
    Real phi = Real(.5) * (dm + dp);
    dm *= d.k.monoq_limiter_mult;
    dp *= d.k.monoq_limiter_mult;
    if (dm < phi) phi = dm;
    if (dp < phi) phi = dp;
    if (phi < Real(0.)) phi = Real(0.);
    if (phi > d.k.monoq_max_slope) phi = d.k.monoq_max_slope;
    return phi;
}

// Monotonic Q: linear and quadratic terms, only in compression, reduced
// where the velocity field is smooth (phi close to 1).
void monotonicQRegion(Domain &d, const std::vector<Index> &elems) {
    const Real qlc = d.k.qlc_monoq, qqc = d.k.qqc_monoq;
    const Index n = Index(elems.size());
    APP_OMP_FOR
    for (Index i = 0; i < n; ++i) {
        const Index el = elems[std::size_t(i)];
        const int bc = d.elemBC[el];
        const Real phixi = limiter(d, d.delv_xi, bc, XI_M, XI_P, el, d.lxim[el], d.lxip[el]);
        const Real phieta = limiter(d, d.delv_eta, bc, ETA_M, ETA_P, el, d.letam[el], d.letap[el]);
        const Real phizeta =
            limiter(d, d.delv_zeta, bc, ZETA_M, ZETA_P, el, d.lzetam[el], d.lzetap[el]);
        Real qlin, qquad;
        if (d.vdov[el] > Real(0.)) {
            qlin = Real(0.);
            qquad = Real(0.);
        } else {
            Real dvx = d.delv_xi[el] * d.delx_xi[el];
            Real dve = d.delv_eta[el] * d.delx_eta[el];
            Real dvz = d.delv_zeta[el] * d.delx_zeta[el];
            if (dvx > Real(0.)) dvx = Real(0.);
            if (dve > Real(0.)) dve = Real(0.);
            if (dvz > Real(0.)) dvz = Real(0.);
            const Real rho = d.elemMass[el] / (d.volo[el] * d.vnew[el]);
            qlin = -qlc * rho *
                   (dvx * (Real(1.) - phixi) + dve * (Real(1.) - phieta) + dvz * (Real(1.) - phizeta));
            qquad = qqc * rho *
                    (dvx * dvx * (Real(1.) - phixi * phixi) + dve * dve * (Real(1.) - phieta * phieta) +
                     dvz * dvz * (Real(1.) - phizeta * phizeta));
        }
        d.qq[el] = qquad;
        d.ql[el] = qlin;
    }
}

void calcQ(Domain &d) {
    monotonicQGradients(d);
    exchange(d, d.halo.monoq, nullptr, 0, false, 104);
    for (const auto &r : d.regElems)
        if (!r.empty()) monotonicQRegion(d, r);
    for (Index el = 0; el < d.numElem; ++el)
        if (d.q[el] > d.k.qstop) fatal(d, 3, "artificial viscosity above qstop");
}

// Gamma-law gas, gamma - 1 = 2/3: p = (2/3)(1 + compression) e.
void pressure(const Domain &d, Index len, const Index *elems, const Real *e, const Real *comp,
              Real *pOut, Real *bvc, Real *pbvc) {
    const Real c1s = Real(2.0) / Real(3.0);
    APP_OMP_FOR
    for (Index i = 0; i < len; ++i) {
        bvc[i] = c1s * (comp[i] + Real(1.));
        pbvc[i] = c1s;
    }
    APP_OMP_FOR
    for (Index i = 0; i < len; ++i) {
        Real pn = bvc[i] * e[i];
        if (std::fabs(pn) < d.k.p_cut) pn = Real(0.0);
        if (d.vnew[elems[i]] >= d.k.eosvmax) pn = Real(0.0);
        if (pn < d.k.pmin) pn = d.k.pmin;
        pOut[i] = pn;
    }
}

inline Real soundSpeedSq(Real pbvc, Real e, Real vol, Real bvc, Real p, Real rho0) {
    return (pbvc * e + vol * vol * bvc * p) / rho0;
}

inline Real qFromSound(Real ssc2, Real ql, Real qq) {
    const Real ssc = ssc2 <= Real(.1111111e-36) ? Real(.3333333e-18) : std::sqrt(ssc2);
    return ssc * ql + qq;
}

// Energy update: a half-step predictor for pressure and q, a corrector
// (trapezoidal in p+q), then a Simpson-like correction with the new pressure.
void evalEOSRegion(Domain &d, const std::vector<Index> &elems, int rep) {
    const Index len = Index(elems.size());
    const Constants &k = d.k;
    const Real rho0 = k.refdens;
    Real *s = d.eosScratch.data();
    Real *e_old = s, *delvc = s + len, *p_old = s + 2 * len, *q_old = s + 3 * len;
    Real *comp = s + 4 * len, *compHalf = s + 5 * len, *qq_old = s + 6 * len, *ql_old = s + 7 * len;
    Real *p_new = s + 8 * len, *e_new = s + 9 * len, *q_new = s + 10 * len, *bvc = s + 11 * len;
    Real *pbvc = s + 12 * len, *pHalf = s + 13 * len;
    const Index *el = elems.data();

    // Repeating the identical evaluation models costlier materials.
    for (int r = 0; r < rep; ++r) {
        APP_OMP_FOR
        for (Index i = 0; i < len; ++i) {
            const Index j = el[i];
            e_old[i] = d.e[j];
            delvc[i] = d.delv[j];
            p_old[i] = d.p[j];
            q_old[i] = d.q[j];
            qq_old[i] = d.qq[j];
            ql_old[i] = d.ql[j];
        }
        APP_OMP_FOR
        for (Index i = 0; i < len; ++i) {
            const Real vn = d.vnew[el[i]];
            comp[i] = Real(1.) / vn - Real(1.);
            const Real vchalf = vn - delvc[i] * Real(.5);
            compHalf[i] = Real(1.) / vchalf - Real(1.);
        }
        if (k.eosvmin != Real(0.))
            APP_OMP_FOR
            for (Index i = 0; i < len; ++i)
                if (d.vnew[el[i]] <= k.eosvmin) compHalf[i] = comp[i];
        if (k.eosvmax != Real(0.))
            APP_OMP_FOR
            for (Index i = 0; i < len; ++i)
                if (d.vnew[el[i]] >= k.eosvmax) {
                    p_old[i] = Real(0.);
                    comp[i] = Real(0.);
                    compHalf[i] = Real(0.);
                }

        // No external work in this problem (work = 0).
        APP_OMP_FOR
        for (Index i = 0; i < len; ++i) {
            e_new[i] = e_old[i] - Real(0.5) * delvc[i] * (p_old[i] + q_old[i]);
            if (e_new[i] < k.emin) e_new[i] = k.emin;
        }
        pressure(d, len, el, e_new, compHalf, pHalf, bvc, pbvc);
        APP_OMP_FOR
        for (Index i = 0; i < len; ++i) {
            const Real vhalf = Real(1.) / (Real(1.) + compHalf[i]);
            if (delvc[i] > Real(0.)) {
                q_new[i] = Real(0.);
            } else {
                q_new[i] = qFromSound(soundSpeedSq(pbvc[i], e_new[i], vhalf, bvc[i], pHalf[i], rho0),
                                      ql_old[i], qq_old[i]);
            }
            e_new[i] = e_new[i] + Real(0.5) * delvc[i] *
                                      (Real(3.0) * (p_old[i] + q_old[i]) -
                                       Real(4.0) * (pHalf[i] + q_new[i]));
        }
        APP_OMP_FOR
        for (Index i = 0; i < len; ++i) {
            if (std::fabs(e_new[i]) < k.e_cut) e_new[i] = Real(0.);
            if (e_new[i] < k.emin) e_new[i] = k.emin;
        }
        pressure(d, len, el, e_new, comp, p_new, bvc, pbvc);
        const Real sixth = Real(1.0) / Real(6.0);
        APP_OMP_FOR
        for (Index i = 0; i < len; ++i) {
            Real q_tilde;
            if (delvc[i] > Real(0.)) {
                q_tilde = Real(0.);
            } else {
                q_tilde = qFromSound(
                    soundSpeedSq(pbvc[i], e_new[i], d.vnew[el[i]], bvc[i], p_new[i], rho0),
                    ql_old[i], qq_old[i]);
            }
            e_new[i] = e_new[i] - (Real(7.0) * (p_old[i] + q_old[i]) -
                                   Real(8.0) * (pHalf[i] + q_new[i]) + (p_new[i] + q_tilde)) *
                                      delvc[i] * sixth;
            if (std::fabs(e_new[i]) < k.e_cut) e_new[i] = Real(0.);
            if (e_new[i] < k.emin) e_new[i] = k.emin;
        }
        pressure(d, len, el, e_new, comp, p_new, bvc, pbvc);
        APP_OMP_FOR
        for (Index i = 0; i < len; ++i) {
            if (delvc[i] <= Real(0.)) {
                q_new[i] = qFromSound(
                    soundSpeedSq(pbvc[i], e_new[i], d.vnew[el[i]], bvc[i], p_new[i], rho0),
                    ql_old[i], qq_old[i]);
                if (std::fabs(q_new[i]) < k.q_cut) q_new[i] = Real(0.);
            }
        }
    }
    APP_OMP_FOR
    for (Index i = 0; i < len; ++i) {
        const Index j = el[i];
        d.p[j] = p_new[i];
        d.e[j] = e_new[i];
        d.q[j] = q_new[i];
    }
    APP_OMP_FOR
    for (Index i = 0; i < len; ++i) {
        const Index j = el[i];
        const Real ss2 = soundSpeedSq(pbvc[i], e_new[i], d.vnew[j], bvc[i], p_new[i], rho0);
        d.ss[j] = ss2 <= Real(.1111111e-36) ? Real(.3333333e-18) : std::sqrt(ss2);
    }
}

void applyMaterialProperties(Domain &d) {
    const Real vmin = d.k.eosvmin, vmax = d.k.eosvmax;
    APP_OMP_FOR
    for (Index el = 0; el < d.numElem; ++el) {
        if (vmin != Real(0.) && d.vnew[el] < vmin) d.vnew[el] = vmin;
        if (vmax != Real(0.) && d.vnew[el] > vmax) d.vnew[el] = vmax;
    }
    for (Index el = 0; el < d.numElem; ++el) {
        Real vc = d.v[el];
        if (vmin != Real(0.) && vc < vmin) vc = vmin;
        if (vmax != Real(0.) && vc > vmax) vc = vmax;
        if (vc <= Real(0.)) fatal(d, 2, "negative relative volume in EOS");
    }
    for (std::size_t r = 0; r < d.regElems.size(); ++r)
        if (!d.regElems[r].empty()) evalEOSRegion(d, d.regElems[r], d.regRep[r]);
}

void lagrangeElements(Domain &d) {
    calcKinematics(d);
    calcQ(d);
    applyMaterialProperties(d);
    APP_OMP_FOR
    for (Index el = 0; el < d.numElem; ++el) {
        Real v = d.vnew[el];
        if (std::fabs(v - Real(1.0)) < d.k.v_cut) v = Real(1.0);
        d.v[el] = v;
    }
}

// Courant limit (sound speed plus the quadratic q's signal speed in
// compression) and the relative volume change limit, over elements that move.
void timeConstraints(Domain &d) {
    const Real qqc2 = Real(64.0) * d.k.qqc * d.k.qqc;
    Real dtc = 1.0e20, dth = 1.0e20;
    for (const auto &reg : d.regElems) {
        const Index n = Index(reg.size());
        APP_OMP_FOR_MIN2(dtc, dth)
        for (Index i = 0; i < n; ++i) {
            const Index el = reg[std::size_t(i)];
            const Real vdov = d.vdov[el];
            if (vdov == Real(0.)) continue;
            Real dtf = d.ss[el] * d.ss[el];
            if (vdov < Real(0.)) dtf = dtf + qqc2 * d.arealg[el] * d.arealg[el] * vdov * vdov;
            dtf = d.arealg[el] / std::sqrt(dtf);
            if (dtf < dtc) dtc = dtf;
            const Real dtdvov = d.k.dvovmax / (std::fabs(vdov) + Real(1.e-20));
            if (dtdvov < dth) dth = dtdvov;
        }
    }
    d.dtcourant = dtc;
    d.dthydro = dth;
}

}  // namespace

Real elemVolume(const Real x[8], const Real y[8], const Real z[8]) {
    // Exact volume of the trilinear hexahedron as a sum of three triple
    // products of edge and diagonal differences.
    auto df = [](const Real *s, int a, int b) { return s[a] - s[b]; };
    const Real d61x = df(x, 6, 1), d61y = df(y, 6, 1), d61z = df(z, 6, 1);
    const Real d70x = df(x, 7, 0), d70y = df(y, 7, 0), d70z = df(z, 7, 0);
    const Real d63x = df(x, 6, 3), d63y = df(y, 6, 3), d63z = df(z, 6, 3);
    const Real d20x = df(x, 2, 0), d20y = df(y, 2, 0), d20z = df(z, 2, 0);
    const Real d50x = df(x, 5, 0), d50y = df(y, 5, 0), d50z = df(z, 5, 0);
    const Real d64x = df(x, 6, 4), d64y = df(y, 6, 4), d64z = df(z, 6, 4);
    const Real d31x = df(x, 3, 1), d31y = df(y, 3, 1), d31z = df(z, 3, 1);
    const Real d72x = df(x, 7, 2), d72y = df(y, 7, 2), d72z = df(z, 7, 2);
    const Real d43x = df(x, 4, 3), d43y = df(y, 4, 3), d43z = df(z, 4, 3);
    const Real d57x = df(x, 5, 7), d57y = df(y, 5, 7), d57z = df(z, 5, 7);
    const Real d14x = df(x, 1, 4), d14y = df(y, 1, 4), d14z = df(z, 1, 4);
    const Real d25x = df(x, 2, 5), d25y = df(y, 2, 5), d25z = df(z, 2, 5);
    Real vol = tripleProduct(d31x + d72x, d31y + d72y, d31z + d72z, d63x, d63y, d63z, d20x, d20y, d20z) +
               tripleProduct(d43x + d57x, d43y + d57y, d43z + d57z, d64x, d64y, d64z, d70x, d70y, d70z) +
               tripleProduct(d14x + d25x, d14y + d25y, d14z + d25z, d61x, d61y, d61z, d50x, d50y, d50z);
    return vol * (Real(1.0) / Real(12.0));
}

void volumeDerivative(const Real x[8], const Real y[8], const Real z[8], Real dvdx[8],
                      Real dvdy[8], Real dvdz[8]) {
    static const int arg[8][6] = {{1, 2, 3, 4, 5, 7}, {2, 3, 0, 5, 6, 4}, {3, 0, 1, 6, 7, 5},
                                  {0, 1, 2, 7, 4, 6}, {7, 6, 5, 0, 3, 1}, {4, 7, 6, 1, 0, 2},
                                  {5, 4, 7, 2, 1, 3}, {6, 5, 4, 3, 2, 0}};
    for (int a = 0; a < 8; ++a)
        cornerVolumeGradient(x, y, z, arg[a][0], arg[a][1], arg[a][2], arg[a][3], arg[a][4],
                             arg[a][5], dvdx[a], dvdy[a], dvdz[a]);
}

void timeIncrement(Domain &d) {
    Real targetdt = d.k.stoptime - d.time;
    if (d.k.dtfixed <= Real(0.0) && d.cycle != 0) {
        const Real olddt = d.deltatime;
        // Reduce both constraints before combining them: the combination
        // (hydro only when below half the Courant limit) is not a minimum,
        // so combining per rank first would make dt depend on how the mesh
        // is decomposed whenever the two limits sit on different ranks.
        const Real local[2] = {d.dtcourant, d.dthydro};
        Real global[2];
        MPI_Allreduce(local, global, 2, MPI_DOUBLE, MPI_MIN, d.comm);
        Real newdt = 1.0e20;
        if (global[0] < newdt) newdt = global[0] / Real(2.0);
        if (global[1] < newdt) newdt = global[1] * Real(2.0) / Real(3.0);
        // Damp growth: ignore small increases, cap large ones.
        const Real ratio = newdt / olddt;
        if (ratio >= Real(1.0)) {
            if (ratio < d.k.deltatimemultlb)
                newdt = olddt;
            else if (ratio > d.k.deltatimemultub)
                newdt = olddt * d.k.deltatimemultub;
        }
        if (newdt > d.k.dtmax) newdt = d.k.dtmax;
        d.deltatime = newdt;
    }
    // Avoid a tiny last step: split the remainder when it is under 4/3 dt.
    if (targetdt > d.deltatime && targetdt < (Real(4.0) * d.deltatime / Real(3.0)))
        targetdt = Real(2.0) * d.deltatime / Real(3.0);
    if (targetdt < d.deltatime) d.deltatime = targetdt;
    d.time += d.deltatime;
    ++d.cycle;
}

void lagrangeLeapFrog(Domain &d) {
    lagrangeNodal(d);
    lagrangeElements(d);
    timeConstraints(d);
}

}  // namespace lulesh
