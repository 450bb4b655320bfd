"""The 2-layer, T = 2 posterior integrated over z2 instead of z1: the chart for a narrow last-layer cavity
(small V22, the noiseless limit of the SE and GAMP with a small eps; docs/explanation/smi.md "Channel: the exact T = 2 posterior").

Why. The z1 chart of `posterior.py` weighs z1 by N(A(z1)^-1(+-u); omega2, V22): for V22 -> 0 that factor pins
S(z1) = softmax(z1 z1^T), and where S saturates (s00 or s11 near 0 or 1) the posterior in z1 is a long, thin,
curved ridge, not the two points +-z1* the zoom of `posterior.py` assumes. Measured at c = 1, V = diag(0.5,
1e-6): on 12 model draws 2 were off by O(1) of max |g| with the default grid (median 5e-4; 1e-2 on 16 draws), still
with a 160-point, 3000-effective-cell grid (a missed or clipped ridge), against two independent references.

The chart. Given z2 = w and the sheet h = s u (s = +-1), A(z1) w = h is linear in (s00, s11):

    s00 = (h0 - c w0 - w1) / (w0 - w1),   s11 = (h1 - c w1 - w0) / (w1 - w0),

feasible when both lie in (0, 1) and their logits a, b have a + b > 0 (a + b = (z1_0 - z1_1)^2); then z1 =
r (a, -b) / sqrt(a + b), r = +-1 (the two preimages of the softmax). Integrating the delta function over z1
at fixed z2 gives the weight

    N(Z; omega, V) / ((w0 - w1)^2 s00 (1 - s00) s11 (1 - s11) 2 (a + b))

on each of the 4 branches (s, r). Its narrow factor N(z2; omega2, V22) is now a coordinate factor: a grid on
omega2 +- R sqrt(V22) resolves it at level 0, and each branch is refined on its own (the bounding box of its
mass, zoomed, or a finer grid where the box does not shrink), accepted when its effective number of cells
reaches `neff`. The line z1_0 = z1_1 (s00 = s11 = 1/2) collapses to one point of this chart (an integrable
singularity): posteriors with mass there are left to the z1 chart, which the channel uses unless V22 is
small against V11 (`channels.AttentionChannel.posterior`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

BOX_SIGMAS = 6.5
MASS_CUT = 1e-13


@njit(cache=True)
def _fill_branch(buf, zb, lo0, lo1, h0, h1, n, u0, u1, om, P, c, s, r):
    """log-weights of branch (s, r) on the n x n midpoint grid of a z2 box (-inf where infeasible), the
    point vec Z of each cell to zb; returns the max."""
    best = -np.inf
    hu0 = s * u0
    hu1 = s * u1
    for i in range(n):
        w0 = lo0 + (i + 0.5) * h0
        for j in range(n):
            w1 = lo1 + (j + 0.5) * h1
            buf[i, j] = -np.inf
            dw = w0 - w1
            if dw == 0.0:
                continue
            s00 = (hu0 - c * w0 - w1) / dw
            s11 = (hu1 - c * w1 - w0) / (-dw)
            if not (0.0 < s00 < 1.0 and 0.0 < s11 < 1.0):
                continue
            a = math.log(s00) - math.log1p(-s00)
            b = math.log(s11) - math.log1p(-s11)
            e2 = a + b
            if not e2 > 0.0:
                continue
            e = math.sqrt(e2)
            x0 = r * a / e
            x1 = -r * b / e
            d10 = x0 - om[0, 0]
            d11 = x1 - om[0, 1]
            d20 = w0 - om[1, 0]
            d21 = w1 - om[1, 1]
            q = (P[0, 0] * (d10 * d10 + d11 * d11) + 2.0 * P[0, 1] * (d10 * d20 + d11 * d21)
                 + P[1, 1] * (d20 * d20 + d21 * d21))
            lw = -0.5 * q - (math.log(dw * dw) + math.log(s00 * (1.0 - s00) * s11 * (1.0 - s11)) + math.log(2.0 * e2))
            buf[i, j] = lw
            zb[i, j, 0] = x0
            zb[i, j, 1] = x1
            zb[i, j, 2] = w0
            zb[i, j, 3] = w1
            if lw > best:
                best = lw
    return best


@njit(cache=True)
def _weigh(buf, n, top):
    """Weights relative to exp(top), in place; returns the effective number of cells (sum w)^2 / sum w^2."""
    s1 = 0.0
    s2 = 0.0
    for i in range(n):
        for j in range(n):
            w = math.exp(buf[i, j] - top) if buf[i, j] > -np.inf else 0.0
            buf[i, j] = w
            s1 += w
            s2 += w * w
    return s1 * s1 / s2 if s2 > 0 else 0.0


@njit(cache=True)
def _moments(out, buf, zb, n):
    """Sums of the weights in buf (relative to the grid's peak, `_weigh`) and of their first and second
    moments of vec Z into out = [S0, S1(4), S2(16)] (S2 upper triangle)."""
    out[:] = 0.0
    for i in range(n):
        for j in range(n):
            w = buf[i, j]
            if w < 1e-300:
                continue
            out[0] += w
            for a in range(4):
                za = zb[i, j, a]
                out[1 + a] += w * za
                for b in range(a, 4):
                    out[5 + 4 * a + b] += w * za * zb[i, j, b]


@njit(cache=True)
def _mass_box(buf, lo0, lo1, h0, h1, n):
    """Bounding box (grown by 1.5 steps) of the cells with relative weight >= MASS_CUT."""
    a0 = np.inf
    b0 = -np.inf
    a1 = np.inf
    b1 = -np.inf
    for i in range(n):
        g0 = lo0 + (i + 0.5) * h0
        for j in range(n):
            if buf[i, j] < MASS_CUT:
                continue
            g1 = lo1 + (j + 0.5) * h1
            a0 = min(a0, g0 - 1.5 * h0)
            b0 = max(b0, g0 + 1.5 * h0)
            a1 = min(a1, g1 - 1.5 * h1)
            b1 = max(b1, g1 + 1.5 * h1)
    return a0, b0, a1, b1


@njit(cache=True)
def posterior_2layer_z2(u, om, P, sd2, c, n0, neff, max_level):
    """log Z (N,), mean (N, 4), second moments (N, 4, 4) of the 2-layer T = 2 posterior in the z2 chart
    (the same normalisation as `posterior.posterior_2layer`: log Z omits the same constants); NaN rows for
    samples with no feasible cell (`channels.AttentionChannel.posterior` redoes them in the z1 chart)."""
    N = u.shape[0]
    n_max = 4 * n0
    buf = np.empty((n_max, n_max))
    zb = np.empty((n_max, n_max, 4))
    logZ = np.empty(N)
    mean = np.empty((N, 4))
    second = np.empty((N, 4, 4))
    sums = np.zeros((4, 21))  # per branch: S0, S1(4), S2(16), relative to exp(scale[branch])
    scale = np.empty(4)
    for k in range(N):
        o = om[k]
        for branch in range(4):
            scale[branch] = -np.inf
            s = 1.0 if branch < 2 else -1.0
            r = 1.0 if branch % 2 == 0 else -1.0
            lo0 = o[1, 0] - BOX_SIGMAS * sd2
            hi0 = o[1, 0] + BOX_SIGMAS * sd2
            lo1 = o[1, 1] - BOX_SIGMAS * sd2
            hi1 = o[1, 1] + BOX_SIGMAS * sd2
            n = n0
            for level in range(max_level):
                h0 = (hi0 - lo0) / n
                h1 = (hi1 - lo1) / n
                top = _fill_branch(buf, zb, lo0, lo1, h0, h1, n, u[k, 0], u[k, 1], o, P, c, s, r)
                if top == -np.inf:
                    break  # no feasible cell: this branch has no mass in the box
                last = level == max_level - 1
                if _weigh(buf, n, top) >= neff or last:
                    _moments(sums[branch], buf, zb, n)
                    scale[branch] = top + math.log(h0 * h1)
                    break
                a0, b0, a1, b1 = _mass_box(buf, lo0, lo1, h0, h1, n)
                if (b0 - a0) * (b1 - a1) > 0.25 * (hi0 - lo0) * (hi1 - lo1):
                    n = min(2 * n, n_max)
                lo0, hi0, lo1, hi1 = a0, b0, a1, b1
        # the branches on one scale: exp(scale_b - max) weights their sums
        ref = scale.max()
        tot = np.zeros(21)
        for branch in range(4):
            if scale[branch] > -np.inf:
                tot += math.exp(scale[branch] - ref) * sums[branch]
        if not tot[0] > 0.0:
            # no feasible cell on any branch (the feasible set of z2 is thinner than the level-0 grid: z1
            # at the fold z1_0 = z1_1): NaN, the caller integrates this sample in the z1 chart
            logZ[k] = np.nan
            mean[k, :] = np.nan
            second[k, :, :] = np.nan
            continue
        logZ[k] = ref + math.log(tot[0])
        for a in range(4):
            mean[k, a] = tot[1 + a] / tot[0]
            for b in range(a, 4):
                second[k, a, b] = second[k, b, a] = tot[5 + 4 * a + b] / tot[0]
    return logZ, mean, second
