"""Exact posterior of the 3-layer, T = 2 tied-attention channel (spec smi.md §1.3, §2.2, §6.1), compiled with numba.

Model: h = B z3 with B(z1, z2) = A(A(z1) z2) A(z1), A(x) = c I + softmax(x x^T) (skip c on both non-final
layers), y = softmax(h h^T). Given the label u (h = +-u, `link.u_from_ratios`), the cavity means omega
(3 layers x 2 tokens) and the layer covariance V (3 x 3, shared by the tokens), the posterior lives on the
two sheets z3 = B^{-1}(sigma u), sigma = +-1, over (z1, z2) in R^4 with weight N(Z; omega, V) / det B.

Coordinates. We integrate over (z1, h2) with h2 = A(z1) z2 (linear in z2 at fixed z1, dz2 = dh2 / det A(z1)).
Then B = A(h2) A(z1) and the weight is

    p_sigma(z1, h2) = exp(-1/2 sum_t (Z_t - omega_t)^T V^-1 (Z_t - omega_t)) / (det A(z1)^2 det A(h2)),
    z2 = A(z1)^-1 h2,   z3 = sigma A(z1)^-1 A(h2)^-1 u.

Where the mass sits. For a broad cavity (Q ~ 0) the posterior is spread over the prior. When the
conditional variance of layer 3 is small (Q33 -> 1 late in the SE), the mass concentrates near the
2-D surfaces z3(z1, h2) = E[z3 | rest] of R^4: thin in h2 where softmax(h2 h2^T) is not saturated, but
spread into plateaus where it saturates (z3 is then nearly constant over a large region of h2), and the
projection of the surface onto z1 has point singularities where h2 crosses the diagonal h2_0 = h2_1 (the
map h2 -> softmax(h2 h2^T) folds the diagonal to a point; the z1 marginal of the posterior has an
integrable ~1/r spike there). A midpoint grid over z1 with a Laplace / Gauss-Hermite inner over z2 was
measured 5-30% off in the inner integrals on such samples, and an adaptive inner grid (the 2-layer design)
costs ~50 ms per sample (docs/validation/smi.md), so the 4-D integral is done by importance sampling:

* outer: z1 ~ N(omega1, V11) per token (the cavity marginal), every point with its mirror image
  2 omega1 - z1;
* inner: h2 | z1 ~ lam_P q_P + lam_D q_D + lam_S q_S (balance heuristic; every component is sampled at every
  outer point, in antithetic pairs reflected through the component's centre):
    q_P: the cavity conditional of z2 | z1 pushed to h2 (covers broad posteriors and the plateaus),
    q_S: z3 ~ N(mu3|1, v3|1) (the cavity conditional of the sharp layer) mapped through the exact inversion:
         at fixed z1, S(h2) w = sigma u - c w with w = A(z1) z3 is linear in S00, S11, whose logits a, b give
         h2 = +-(-a, b) / sqrt(a + b); both sigma, both branches (covers the thin part of the sheets, with
         density N(z3) |det dz3/dh2|, |det dz3/dh2| = D^2 S00(1-S00) S11(1-S11) 2 (h2_0-h2_1)^2 / (det A(z1) det A(h2)),
         D = w0 - w1),
    q_D: a Gaussian band around the diagonal, e = h2_0 - h2_1 ~ N(0, s_e^2) (s_e = band * v3|1^(1/4)) and
         t = (h2_0 + h2_1)/2 from the cavity conditional given e (covers the fold, where q_S vanishes).
Each candidate h2 is evaluated on both sheets sigma = +-1 (one solve). The weights are bounded,
p / q <= p / (lam_P q1 q_P) ~ N(z3; m3, v3) / lam_P, and the points are a fixed scrambled Sobol set, so the
map (u, omega, V) -> posterior is deterministic and smooth in omega. The mirror pairs make the posterior
mean of a layer exactly omega_l when that layer's cavity is centred and decoupled (omega_l = 0, V diagonal),
the symmetry of the exact posterior (g is even in each layer, spec §5.4): a layer that has not been learned
gets no Monte Carlo floor from the sampler (only the SE's own off-diagonal noise in V breaks the symmetry;
Q11 stays at 1e-8 - 1e-7 below its threshold, measured).

Outputs per sample: log Z (the integral of exp(-1/2 ...) / det B over (z1, z2), i.e. without the Gaussian
normalisation, the y -> h Jacobian and the delta normalisation: the same convention as
`posterior.posterior_2layer`), the posterior mean of vec(Z) (index layer * 2 + token, 6 entries), its
second moments (6 x 6) and the effective sample size of the weights (a diagnostic).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from seqphase.core.smi.posterior import amat

LOG2PI = math.log(2.0 * math.pi)


def sobol_normals(n, seed):
    """(2^ceil(log2 n), 4) standard normals from a scrambled Sobol sequence (the fixed points of the rule)."""
    from scipy.stats import norm as _norm  # ~1 s to import: only where the 3-layer points are made
    from scipy.stats import qmc as _qmc

    m = int(np.ceil(np.log2(max(n, 2))))
    x = _qmc.Sobol(4, scramble=True, seed=np.random.default_rng(seed)).random_base2(m)
    return np.ascontiguousarray(_norm.ppf(np.clip(x, 1e-16, 1.0 - 1e-16)))


@njit(cache=True, inline="always")
def _quad(P, a0, b0, y0, a1, b1, y1, om):
    """sum over the two tokens of (Z_t - omega_t)^T P (Z_t - omega_t)."""
    d0 = a0 - om[0, 0]
    d1 = b0 - om[1, 0]
    d2 = y0 - om[2, 0]
    q = (P[0, 0] * d0 * d0 + P[1, 1] * d1 * d1 + P[2, 2] * d2 * d2
         + 2.0 * (P[0, 1] * d0 * d1 + P[0, 2] * d0 * d2 + P[1, 2] * d1 * d2))
    d0 = a1 - om[0, 1]
    d1 = b1 - om[1, 1]
    d2 = y1 - om[2, 1]
    q += (P[0, 0] * d0 * d0 + P[1, 1] * d1 * d1 + P[2, 2] * d2 * d2
          + 2.0 * (P[0, 1] * d0 * d1 + P[0, 2] * d0 * d2 + P[1, 2] * d1 * d2))
    return q


@njit(cache=True, inline="always")
def _lse3(x, y, z):
    m = max(x, max(y, z))
    if m == -np.inf:
        return m
    return m + math.log(math.exp(x - m) + math.exp(y - m) + math.exp(z - m))


@njit(cache=True)
def _add(acc, lw, a0, a1, b0, b1, y0, y1):
    """acc = [log scale, S0, S1 (6), S2 (21, upper triangle), sum of squared weights]: streaming sums of
    exp(lw) (1, Z, Z Z^T) relative to exp(acc[0])."""
    if lw == -np.inf:
        return
    if lw > acc[0]:
        f = math.exp(acc[0] - lw) if acc[0] > -np.inf else 0.0
        for k in range(1, 29):
            acc[k] *= f
        acc[29] *= f * f
        acc[0] = lw
        w = 1.0
    else:
        w = math.exp(lw - acc[0])
    acc[29] += w * w
    acc[1] += w
    z = (a0, a1, b0, b1, y0, y1)
    m = 8
    for i in range(6):
        wi = w * z[i]
        acc[2 + i] += wi
        for j in range(i, 6):
            acc[m] += wi * z[j]
            m += 1


@njit(cache=True)
def _candidate(acc, fac, h0, h1, a0, a1, p00, p01, p10, p11, dA1, lbase1, u0, u1, om, P, c,
               m20, m21, m30, m31, iv2, cP, iv3, cS, s_e, mt, me, kte, st, cD, lcD, lcP, lcS):
    """Evaluate one inner point h2 on both sheets and add fac * p_sigma / (q1 q) to acc (lbase1 = -2 log det
    A(z1) - log q1(z1); cP, cD, cS: the mixture weights times the normalisations)."""
    q00, q01, q10, q11 = amat(h0, h1, c)
    dA2 = q00 * q11 - q01 * q10
    t0 = (q11 * u0 - q01 * u1) / dA2  # w = A(h2)^-1 u (sheet sigma = +)
    t1 = (q00 * u1 - q10 * u0) / dA2
    y0 = (p11 * t0 - p01 * t1) / dA1  # z3 on the + sheet
    y1 = (p00 * t1 - p10 * t0) / dA1
    b0 = (p11 * h0 - p01 * h1) / dA1  # z2
    b1 = (p00 * h1 - p10 * h0) / dA1
    # mixture density of h2 given z1, in the linear domain (each term <= its normalisation)
    eP = -0.5 * ((b0 - m20) ** 2 + (b1 - m21) ** 2) * iv2
    e = h0 - h1
    t = 0.5 * (h0 + h1)
    zt = (t - mt - kte * (e - me)) / st
    eD = -0.5 * (e / s_e) ** 2 - 0.5 * zt * zt
    s00 = q00 - c
    s11 = q11 - c
    D = t0 - t1
    jac = D * D * s00 * (1.0 - s00) * s11 * (1.0 - s11) * 2.0 * e * e / (dA1 * dA2)
    ep = -0.5 * ((y0 - m30) ** 2 + (y1 - m31) ** 2) * iv3
    em = -0.5 * ((y0 + m30) ** 2 + (y1 + m31) ** 2) * iv3
    q = cP * math.exp(eP) + cD * math.exp(eD) + cS * jac * (math.exp(ep) + math.exp(em))
    if q > 1e-250:
        lq = math.log(q * dA2)
    else:  # far from every component: the same sum in the log domain
        mx = max(ep, em)
        lS = (lcS + math.log(jac) + mx + math.log(math.exp(ep - mx) + math.exp(em - mx))) if jac > 0.0 else -np.inf
        lq = _lse3(lcP + eP, lcD + eD, lS) + math.log(dA2)
    lf = math.log(fac) + lbase1 - lq
    _add(acc, lf - 0.5 * _quad(P, a0, b0, y0, a1, b1, y1, om), a0, a1, b0, b1, y0, y1)
    _add(acc, lf - 0.5 * _quad(P, a0, b0, -y0, a1, b1, -y1, om), a0, a1, b0, b1, -y0, -y1)


@njit(cache=True)
def _one_sample(acc, u0, u1, om, P, c, X, sd1, k2, v2, k3, v3, s_e, lamP, lamD, lamS):
    M = X.shape[0]
    sd2 = math.sqrt(v2)
    sd3 = math.sqrt(v3)
    iv2 = 1.0 / v2
    iv3 = 1.0 / v3
    lsd1 = math.log(sd1)
    cS = lamS * 0.25 / (2.0 * math.pi * v3)
    lcS = math.log(cS)
    for n in range(M):
        x0 = X[n, 0]
        x1 = X[n, 1]
        x2 = X[n, 2]
        x3 = X[n, 3]
        lq1 = -0.5 * (x0 * x0 + x1 * x1) - LOG2PI - 2.0 * lsd1
        for mirror in range(2):
            g1 = 1.0 if mirror == 0 else -1.0
            a0 = om[0, 0] + g1 * sd1 * x0
            a1 = om[0, 1] + g1 * sd1 * x1
            p00, p01, p10, p11 = amat(a0, a1, c)
            dA1 = p00 * p11 - p01 * p10
            ldA1 = math.log(dA1)
            cP = lamP / (2.0 * math.pi * v2 * dA1)
            lcP = math.log(cP)
            lbase1 = -2.0 * ldA1 - lq1
            m20 = om[1, 0] + k2 * (a0 - om[0, 0])
            m21 = om[1, 1] + k2 * (a1 - om[0, 1])
            m30 = om[2, 0] + k3 * (a0 - om[0, 0])
            m31 = om[2, 1] + k3 * (a1 - om[0, 1])
            # cavity of h2 = A1 z2 in (t, e) = ((h0 + h1)/2, h0 - h1): mean and t | e
            hm0 = p00 * m20 + p01 * m21
            hm1 = p10 * m20 + p11 * m21
            mt = 0.5 * (hm0 + hm1)
            me = hm0 - hm1
            C00 = v2 * (p00 * p00 + p01 * p01)
            C01 = v2 * (p00 * p10 + p01 * p11)
            C11 = v2 * (p10 * p10 + p11 * p11)
            Ctt = 0.25 * (C00 + 2.0 * C01 + C11)
            Cte = 0.5 * (C00 - C11)
            Cee = C00 - 2.0 * C01 + C11
            kte = Cte / Cee
            st = math.sqrt(max(Ctt - Cte * Cte / Cee, 1e-300))
            cD = lamD / (2.0 * math.pi * s_e * st)
            lcD = math.log(cD)
            for anti in range(2):
                g = 1.0 if anti == 0 else -1.0
                # P: cavity z2 | z1
                b0 = m20 + g * sd2 * x2
                b1 = m21 + g * sd2 * x3
                _candidate(acc, 0.5 * lamP, p00 * b0 + p01 * b1, p10 * b0 + p11 * b1, a0, a1, p00, p01, p10, p11,
                           dA1, lbase1, u0, u1, om, P, c, m20, m21, m30, m31, iv2, cP, iv3, cS, s_e, mt, me,
                           kte, st, cD, lcD, lcP, lcS)
                # D: band around the diagonal of h2
                e = g * s_e * x2
                t = mt + kte * (e - me) + g * st * x3
                _candidate(acc, 0.5 * lamD, t + 0.5 * e, t - 0.5 * e, a0, a1, p00, p01, p10, p11,
                           dA1, lbase1, u0, u1, om, P, c, m20, m21, m30, m31, iv2, cP, iv3, cS, s_e, mt, me,
                           kte, st, cD, lcD, lcP, lcS)
                # S: z3 from its cavity conditional, mapped through the inversion (both sheets, both branches)
                y0 = m30 + g * sd3 * x2
                y1 = m31 + g * sd3 * x3
                w0 = p00 * y0 + p01 * y1
                w1 = p10 * y0 + p11 * y1
                D = w0 - w1
                if D == 0.0:
                    continue
                for s in range(2):
                    sg = 1.0 if s == 0 else -1.0
                    s00 = (sg * u0 - c * w0 - w1) / D
                    s11 = (sg * u1 - c * w1 - w0) / (-D)
                    if not (0.0 < s00 < 1.0 and 0.0 < s11 < 1.0):
                        continue
                    la = math.log(s00) - math.log1p(-s00)
                    lb = math.log(s11) - math.log1p(-s11)
                    if not la + lb > 0.0:
                        continue
                    sr = math.sqrt(la + lb)
                    for br in range(2):
                        gb = 1.0 if br == 0 else -1.0
                        _candidate(acc, 0.125 * lamS, -gb * la / sr, gb * lb / sr, a0, a1, p00, p01, p10, p11,
                                   dA1, lbase1, u0, u1, om, P, c, m20, m21, m30, m31, iv2, cP, iv3, cS, s_e,
                                   mt, me, kte, st, cD, lcD, lcP, lcS)


@njit(cache=True)
def posterior_3layer(u, om, V, c, X, lamP, lamD, lamS, band):
    """log Z (N,), mean (N, 6), second moments (N, 6, 6), effective sample size (N,) of the 3-layer posterior.

    u (N, 2) labels, om (N, 3, 2) cavity means, V (3, 3) cavity covariance, X (M, 4) standard normals (the
    points of the rule), lam* the mixture weights, band the diagonal band width in units of v3|1^(1/4)."""
    N = u.shape[0]
    P = np.linalg.inv(V)
    sd1 = math.sqrt(V[0, 0])
    k2 = V[1, 0] / V[0, 0]
    v2 = V[1, 1] - V[1, 0] * V[1, 0] / V[0, 0]
    k3 = V[2, 0] / V[0, 0]
    v3 = V[2, 2] - V[2, 0] * V[2, 0] / V[0, 0]
    s_e = band * v3 ** 0.25
    tot = math.log(lamP + lamD + lamS)
    lP = math.log(lamP) - tot
    lD = math.log(lamD) - tot
    lS = math.log(lamS) - tot
    logZ = np.empty(N)
    mean = np.empty((N, 6))
    second = np.empty((N, 6, 6))
    ess = np.empty(N)
    acc = np.empty(30)
    M = X.shape[0]
    for k in range(N):
        acc[:] = 0.0
        acc[0] = -np.inf
        _one_sample(acc, u[k, 0], u[k, 1], om[k], P, c, X, sd1, k2, v2, k3, v3, s_e,
                    math.exp(lP), math.exp(lD), math.exp(lS))
        logZ[k] = acc[0] + math.log(acc[1]) - math.log(2.0 * M)
        for i in range(6):
            mean[k, i] = acc[2 + i] / acc[1]
        m = 8
        for i in range(6):
            for j in range(i, 6):
                second[k, i, j] = acc[m] / acc[1]
                second[k, j, i] = second[k, i, j]
                m += 1
        ess[k] = acc[1] * acc[1] / acc[29]
    return logZ, mean, second, ess
