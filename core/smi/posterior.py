"""Exact posterior of the 2-layer, T = 2 tied-attention channel (spec smi.md §2.2), compiled with numba.

Given the label u (h = +-u, see `link.invert_t2`), the cavity means omega (2 layers x 2 tokens) and the
layer covariance V (shared by the tokens), the posterior over z = [z1; z2] is supported on the two
sheets z2 = A(z1)^{-1}(s u), s = +-1, with A(z1) = c I + softmax(z1 z1^T) (invertible for c > 0):

    w_s(z1) = exp(-1/2 sum_t (Z_t - omega_t)^T V^{-1} (Z_t - omega_t)) / |det A(z1)|.

The remaining integral over z1 in R^2 is done by an adaptive midpoint grid that follows the posterior
(a numba loop per sample: the adaptivity differs from sample to sample, which a numpy batch cannot
express without evaluating the finest grid everywhere):

1. level 0: G x G grid on the box omega1 +- R sqrt(V11) (the z1 marginal of the cavity prior, R = 6.5:
   the prior factor at the edge is e^-21), both sheets;
2. if the grid resolves the posterior (effective number of cells (sum w)^2 / sum w^2 >= `neff`), done;
3. otherwise the mass sits in narrow peaks (small V22 late in the SE: z2 nearly known pins S(z1), hence
   z1 up to its sign, so there are at most two peaks, +-z1*). The cells holding mass (weight > 1e-13 of
   the peak) are split by the half-plane z1 . z1_argmax >= 0 into at most two boxes (merged if they
   overlap), each grown by one grid step, and each box is re-gridded and shrunk again until resolved;
   a box that does not shrink (a curved ridge) gets a finer grid instead (up to 4 G per axis).

The midpoint rule converges geometrically on these smooth, box-contained integrands once the grid
step is below the peak width; the returned log Z omits the constant factors (Gaussian normalisation,
Jacobian of y -> h, the delta normalisation) that do not depend on z or omega.
Outputs per sample: log Z, the posterior mean of vec(Z) (index layer * 2 + token) and the second
moments E[vec Z vec Z^T] (4 x 4).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

BOX_SIGMAS = 6.5
MASS_CUT = 1e-13


@njit(cache=True, inline="always")
def _sheet(x0, x1, c, u0, u1):
    """det A(z1) and A(z1)^{-1} u for z1 = (x0, x1)."""
    s00 = 1.0 / (1.0 + math.exp(-x0 * (x0 - x1)))
    s11 = 1.0 / (1.0 + math.exp(-x1 * (x1 - x0)))
    det = (s00 + c) * (s11 + c) - (1.0 - s00) * (1.0 - s11)
    z0 = ((s11 + c) * u0 - (1.0 - s00) * u1) / det
    z1 = ((s00 + c) * u1 - (1.0 - s11) * u0) / det
    return det, z0, z1


@njit(cache=True)
def _fill(buf, zb, lo0, lo1, h0, h1, n, u0, u1, om, P, c):
    """log-weights of both sheets on the n x n midpoint grid of a box; returns the max."""
    best = -np.inf
    for i in range(n):
        x0 = lo0 + (i + 0.5) * h0
        for j in range(n):
            x1 = lo1 + (j + 0.5) * h1
            det, a0, a1 = _sheet(x0, x1, c, u0, u1)
            ld = math.log(abs(det))
            d10 = x0 - om[0, 0]
            d11 = x1 - om[0, 1]
            for s in range(2):
                sg = 1.0 if s == 0 else -1.0
                z20 = sg * a0
                z21 = sg * a1
                d20 = z20 - om[1, 0]
                d21 = z21 - om[1, 1]
                q = (P[0, 0] * (d10 * d10 + d11 * d11) + 2.0 * P[0, 1] * (d10 * d20 + d11 * d21)
                     + P[1, 1] * (d20 * d20 + d21 * d21))
                lw = -0.5 * q - ld
                buf[i, j, s] = lw
                zb[i, j, s, 0] = z20
                zb[i, j, s, 1] = z21
                if lw > best:
                    best = lw
    return best


@njit(cache=True)
def _weigh(buf, n, top):
    """Turn the log-weights into weights relative to the peak, in place (each exp is taken once and
    reused by `_accumulate` and `_mass_box`); returns the effective number of cells (sum w)^2 / sum w^2."""
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        for j in range(n):
            w0 = math.exp(buf[i, j, 0] - top)
            w1 = math.exp(buf[i, j, 1] - top)
            buf[i, j, 0] = w0
            buf[i, j, 1] = w1
            w = w0 + w1
            s1 += w
            s2 += w * w
    return s1 * s1 / s2 if s2 > 0 else 0.0


@njit(cache=True)
def _accumulate(acc, buf, zb, lo0, lo1, h0, h1, n, top):
    """Add the grid's moments to acc = [log scale, S0, S1(4), S2(16)] (streaming log-sum-exp); buf holds
    the weights relative to exp(top) (`_weigh`)."""
    s0 = 0.0
    s1 = np.zeros(4)
    s2 = np.zeros(16)
    v = np.zeros(4)
    for i in range(n):
        x0 = lo0 + (i + 0.5) * h0
        for j in range(n):
            x1 = lo1 + (j + 0.5) * h1
            for s in range(2):
                w = buf[i, j, s]
                if w < 1e-300:
                    continue
                v[0] = x0
                v[1] = x1
                v[2] = zb[i, j, s, 0]
                v[3] = zb[i, j, s, 1]
                s0 += w
                for a in range(4):
                    s1[a] += w * v[a]
                    for b in range(4):
                        s2[4 * a + b] += w * v[a] * v[b]
    scale = top + math.log(h0 * h1)
    if s0 <= 0.0:
        return
    if scale > acc[0]:
        f = math.exp(acc[0] - scale) if acc[0] > -np.inf else 0.0
        for k in range(1, 22):
            acc[k] *= f
        acc[0] = scale
        g = 1.0
    else:
        g = math.exp(scale - acc[0])
    acc[1] += g * s0
    for a in range(4):
        acc[2 + a] += g * s1[a]
    for k in range(16):
        acc[6 + k] += g * s2[k]


@njit(cache=True)
def _mass_box(buf, lo0, lo1, h0, h1, n, side0, side1, which):
    """Bounding box (grown by one step) of the cells holding mass (relative weight in buf >= MASS_CUT),
    restricted to one half-plane (which = +1 / -1 of z1 . side; 0: all). Returns (found, lo0, hi0, lo1,
    hi1)."""
    found = False
    a0 = np.inf
    b0 = -np.inf
    a1 = np.inf
    b1 = -np.inf
    for i in range(n):
        x0 = lo0 + (i + 0.5) * h0
        for j in range(n):
            x1 = lo1 + (j + 0.5) * h1
            if max(buf[i, j, 0], buf[i, j, 1]) < MASS_CUT:
                continue
            if which != 0:
                dot = x0 * side0 + x1 * side1
                if (which > 0 and dot < 0) or (which < 0 and dot >= 0):
                    continue
            found = True
            a0 = min(a0, x0 - 1.5 * h0)
            b0 = max(b0, x0 + 1.5 * h0)
            a1 = min(a1, x1 - 1.5 * h1)
            b1 = max(b1, x1 + 1.5 * h1)
    return found, a0, b0, a1, b1


@njit(cache=True)
def _refine(acc, buf, zb, box, u0, u1, om, P, c, n0, n_max, neff, max_level):
    lo0, hi0, lo1, hi1 = box[0], box[1], box[2], box[3]
    n = n0
    for level in range(max_level):
        h0 = (hi0 - lo0) / n
        h1 = (hi1 - lo1) / n
        top = _fill(buf, zb, lo0, lo1, h0, h1, n, u0, u1, om, P, c)
        if _weigh(buf, n, top) >= neff or level == max_level - 1:
            _accumulate(acc, buf, zb, lo0, lo1, h0, h1, n, top)
            return
        found, a0, b0, a1, b1 = _mass_box(buf, lo0, lo1, h0, h1, n, 0.0, 0.0, 0)
        if (b0 - a0) * (b1 - a1) > 0.25 * (hi0 - lo0) * (hi1 - lo1):
            n = min(2 * n, n_max)  # a ridge the box cannot shrink around: refine the grid instead
        lo0, hi0, lo1, hi1 = a0, b0, a1, b1


@njit(cache=True)
def posterior_2layer(u, om, P, sd1, c, n0, neff, max_level):
    """log Z (N,), mean (N, 4), second moments (N, 4, 4) of the 2-layer T = 2 posterior."""
    N = u.shape[0]
    n_max = 4 * n0
    buf = np.empty((n_max, n_max, 2))
    zb = np.empty((n_max, n_max, 2, 2))
    logZ = np.empty(N)
    mean = np.empty((N, 4))
    second = np.empty((N, 4, 4))
    acc = np.empty(22)
    box = np.empty(4)
    for k in range(N):
        u0 = u[k, 0]
        u1 = u[k, 1]
        o = om[k]
        acc[:] = 0.0
        acc[0] = -np.inf
        lo0 = o[0, 0] - BOX_SIGMAS * sd1
        lo1 = o[0, 1] - BOX_SIGMAS * sd1
        h = 2.0 * BOX_SIGMAS * sd1 / n0
        top = _fill(buf, zb, lo0, lo1, h, h, n0, u0, u1, o, P, c)
        if _weigh(buf, n0, top) >= neff:
            _accumulate(acc, buf, zb, lo0, lo1, h, h, n0, top)
        else:
            # the peak cell and its half-plane; the mirror peak -z1* (if any) lies in the other one
            best = -np.inf
            p0 = 0.0
            p1 = 0.0
            for i in range(n0):
                for j in range(n0):
                    m = max(buf[i, j, 0], buf[i, j, 1])
                    if m > best:
                        best = m
                        p0 = lo0 + (i + 0.5) * h
                        p1 = lo1 + (j + 0.5) * h
            fa, a0, b0, a1, b1 = _mass_box(buf, lo0, lo1, h, h, n0, p0, p1, 1)
            fb, c0, d0, c1, d1 = _mass_box(buf, lo0, lo1, h, h, n0, p0, p1, -1)
            overlap = fb and not (b0 <= c0 or d0 <= a0 or b1 <= c1 or d1 <= a1)
            if overlap:
                a0, b0, a1, b1 = min(a0, c0), max(b0, d0), min(a1, c1), max(b1, d1)
            box[0], box[1], box[2], box[3] = a0, b0, a1, b1
            _refine(acc, buf, zb, box, u0, u1, o, P, c, n0, n_max, neff, max_level)
            if fb and not overlap:
                box[0], box[1], box[2], box[3] = c0, d0, c1, d1
                _refine(acc, buf, zb, box, u0, u1, o, P, c, n0, n_max, neff, max_level)
        logZ[k] = acc[0] + math.log(acc[1])
        for a in range(4):
            mean[k, a] = acc[2 + a] / acc[1]
            for b in range(4):
                second[k, a, b] = acc[6 + 4 * a + b] / acc[1]
    return logZ, mean, second
