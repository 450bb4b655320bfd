"""Exact posterior of the 2-layer, T = 2 tied-attention channel (spec smi.md §2.2), compiled with numba.

Given the label u (h = +-u, see `link.invert_t2`), the cavity means omega (2 layers x 2 tokens) and the
layer covariance V (shared by the tokens), the posterior over z = [z1; z2] is supported on the two
sheets z2 = A(z1)^{-1}(s u), s = +-1, with A(z1) = c I + softmax(z1 z1^T) (invertible for c > 0):

    w_s(z1) = exp(-1/2 sum_t (Z_t - omega_t)^T V^{-1} (Z_t - omega_t)) / |det A(z1)|.

The remaining integral over z1 in R^2 is done by an adaptive midpoint grid that follows the posterior
(a numba loop per sample: the adaptivity differs from sample to sample, which a numpy batch cannot
express without evaluating the finest grid everywhere):

1. level 0: G x G grid on the box omega1 +- R sqrt(V11) (the z1 marginal of the cavity prior, R = 6.5:
   the prior factor at the edge is e^-21), both sheets. For small skips (c <~ 0.3) det A(z1) ~ (1 + c)
   (c + e^2/4) nearly vanishes on a strip of width ~ 2 sqrt(c) around the diagonal e = z1_0 - z1_1 = 0,
   where the sheets move fast; a uniform grid misses it (g off by 12% at c = 0.1 and 42% at c = 0.01 with
   G = 40, docs/validation/smi.md). There the grid axes are (m, t), m = (z1_0 + z1_1)/2 and e = e(t) graded
   geometrically from cells of sqrt(c)/4 on the strip to the plain step far from it (`strip_map`,
   `_emap`), G x (G + ~30-45) cells;
2. if the grid resolves the posterior, done: on the plain grid when the effective number of cells
   (sum w)^2 / sum w^2 is >= `neff` (30); in strip coordinates when it is >= `neff` (30) AND the local
   error estimate of `_roughness_axes` (each cell's weight times the midpoint rule's error on a Gaussian of
   the curvature that the log-weight's second differences show there) is <= `tol` (1e-4) of the total
   weight (until commit b1eb086: 300 effective cells, which almost no level-0 grid reached at small
   skips, so almost every sample was zoomed 2-4 times; CHANGELOG.md, smi gamp
   version 3);
3. otherwise the mass sits in narrow peaks (small V22 late in the SE: z2 nearly known pins S(z1), hence
   z1 up to its sign, so there are at most two peaks, +-z1*). The cells holding mass (weight > 1e-13 of
   the peak) are split by the half-plane z1 . z1_argmax >= 0 into at most two boxes (merged if they
   overlap), each grown by one grid step, and each box is re-gridded and shrunk again until resolved;
   a box that does not shrink (a curved ridge) gets a finer grid instead (up to 4 G per axis). In strip
   coordinates a grid that fails the error estimate is refined per axis instead (`_next_sizes`: the axis
   whose own estimate fails gets half the step, t up to 16 G cells).

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
ROUGH_CUT = 1e-12  # `_roughness_axes` skips cells lighter than this fraction of the peak
RHO_MAX = 0.5  # strip coordinates only for rho < RHO_MAX (`_emap` needs rho < 1/2); else the plain grid


@njit(cache=True, inline="always")
def amat(x0, x1, c):
    """Entries (a00, a01, a10, a11) of A(x) = c I + softmax(x x^T) for x = (x0, x1) (also used by the
    3-layer posterior)."""
    return _entries(1.0 / (1.0 + math.exp(-x0 * (x0 - x1))), 1.0 / (1.0 + math.exp(-x1 * (x1 - x0))), c)


@njit(cache=True, inline="always")
def _entries(s00, s11, c):
    """Entries of A = c I + the softmax whose rows are (s00, 1 - s00) and (1 - s11, s11)."""
    return s00 + c, 1.0 - s00, 1.0 - s11, s11 + c


@njit(cache=True, inline="always")
def _sheet(s00, s11, c, u0, u1):
    """det A and A^{-1} u for the softmax entries s00, s11 of A(z1) (`_entries`): z2 on the sheet s = +1."""
    a00, a01, a10, a11 = _entries(s00, s11, c)
    det = a00 * a11 - a01 * a10
    return det, (a11 * u0 - a01 * u1) / det, (a00 * u1 - a10 * u0) / det


@njit(cache=True, inline="always")
def _emap(t, rho, B):
    """Strip coordinate e(t) and de/dt: de/dt = rho cosh(t/B) / (1 - rho + rho cosh(t/B)) is rho at t = 0
    and grows geometrically (x e^(h/B) per cell of width h) to 1, so the midpoint rule in t has cells
    rho h wide on the singular strip e ~ 0 and h wide far from it; the closed form
    e = t - (1 - rho) B (2 / k) atanh(k tanh(t / 2B)), k = sqrt(1 - 2 rho), needs rho < 1/2."""
    k = math.sqrt(1.0 - 2.0 * rho)
    e = t - (1.0 - rho) * B * (2.0 / k) * math.atanh(k * math.tanh(0.5 * t / B))
    de = rho / (rho + (1.0 - rho) / math.cosh(min(abs(t) / B, 700.0)))
    return e, de


@njit(cache=True)
def _tmap(e, rho, B):
    """Inverse of `_emap` (monotone, odd) by Newton steps safeguarded by bisection. Returns the t whose
    residual met the tolerance (until commit b1eb086 the loop moved t once more before stopping: after an
    exact hit, f = 0, to the bisection midpoint, so the strip box's lower end in e could land anywhere
    between the target and the centre: e.g. -2.70 for a target of -6.0, mass lost beyond it)."""
    lo = -abs(e) - 2.0 * B * math.log(4.0 / rho) - 1.0
    hi = -lo
    t = e
    for _ in range(200):
        f, d = _emap(t, rho, B)
        f -= e
        if abs(f) < 1e-13 * (1.0 + abs(e)) or hi - lo < 1e-14:
            break
        if f > 0:
            hi = t
        else:
            lo = t
        step = t - f / d
        t = step if lo < step < hi else 0.5 * (lo + hi)
    return t


#: the fast path of `_fill` takes exps of products of grid coordinates up to this size: their factors stay
#: normal doubles (exp(-708) is the smallest), so no product of two of them is 0 * inf
EXP_SAFE = 700.0
#: rows between exact restarts of `_fill`'s running products (each multiplication adds <= 1 ulp: the
#: sigmoids stay within ~4e-15 relative of their direct exps)
RESTART_ROWS = 32


@njit(cache=True)
def _fill(buf, zb, xb, lo0, lo1, h0, h1, na, nb, u0, u1, om, P, c, rho, B):
    """log-weights of both sheets on the na x nb midpoint grid of a box; returns the max. Grid axes are
    (z1_0, z1_1) when rho >= RHO_MAX, else (m, t) with z1 = (m + e(t)/2, m - e(t)/2) (`_emap`; the Jacobian
    de/dt enters the weight). The cell's z1 goes to xb, its z2 on the sheet s = +1 to zb.

    The softmax entries s00 = 1 / (1 + X), s11 = 1 / (1 + Y) of A(z1) need X = exp(-x0 (x0 - x1)) and
    Y = exp(-x1 (x1 - x0)), two exps a cell (the largest cost of the posterior). Both are a column factor
    times a running product along the rows: on the plain grid (row a = x0, column x1)
    X = exp(-a^2) E, Y = exp(-x1^2) E with E = exp(a x1); in strip coordinates (column e)
    X = exp(-e^2/2) / F, Y = exp(-e^2/2) F with F = exp(a e). E and F grow by exp(h0 x1), exp(h0 e) per row
    (restarted exactly every RESTART_ROWS rows), so a cell costs two multiplications instead of two exps
    (the whole posterior ~25% faster, `python benchmarks/smi_se_speed.py posterior`). A box whose products
    could leave the normal range (|exponent| > EXP_SAFE, coordinates beyond ~26) takes the direct exps."""
    strip = rho < RHO_MAX
    # the second axis' coordinate (z1_1, or e(t)) and log Jacobian depend on the column only: computed
    # once per column, not per cell (halves the cost of a strip-coordinate grid)
    col = np.empty(nb)
    ljac = np.zeros(nb)
    cmax = 0.0
    for j in range(nb):
        b = lo1 + (j + 0.5) * h1
        if strip:
            e, de = _emap(b, rho, B)
            col[j] = e
            ljac[j] = math.log(de)
        else:
            col[j] = b
        cmax = max(cmax, abs(col[j]))
    amax = max(abs(lo0 + 0.5 * h0), abs(lo0 + (na - 0.5) * h0))
    if strip:
        fast = amax * cmax <= EXP_SAFE and 0.5 * cmax * cmax <= EXP_SAFE
    else:
        fast = amax * cmax <= EXP_SAFE and cmax * cmax <= EXP_SAFE and amax * amax <= EXP_SAFE
    factor = np.empty(nb)  # exp(-x1^2) (plain) or exp(-e^2/2) (strip)
    run = np.empty(nb)  # E = exp(a x1) (plain) or F = exp(a e) (strip) at the current row a
    ratio = np.empty(nb)  # its growth per row
    if fast:
        for j in range(nb):
            v = col[j]
            factor[j] = math.exp(-0.5 * v * v) if strip else math.exp(-v * v)
            ratio[j] = math.exp(h0 * v)
    best = -np.inf
    for i in range(na):
        a = lo0 + (i + 0.5) * h0
        if fast and i % RESTART_ROWS == 0:
            for j in range(nb):
                run[j] = math.exp(a * col[j])
        row = math.exp(-a * a) if fast and not strip else 0.0
        for j in range(nb):
            if strip:
                x0 = a + 0.5 * col[j]
                x1 = a - 0.5 * col[j]
            else:
                x0 = a
                x1 = col[j]
            xb[i, j, 0] = x0
            xb[i, j, 1] = x1
            if fast:
                g = run[j]
                run[j] = g * ratio[j]
                X = factor[j] / g if strip else row * g
                Y = factor[j] * g
            else:
                X = math.exp(-x0 * (x0 - x1))
                Y = math.exp(-x1 * (x1 - x0))
            det, a0, a1 = _sheet(1.0 / (1.0 + X), 1.0 / (1.0 + Y), c, u0, u1)
            zb[i, j, 0] = a0  # z2 on sheet s = +1 (the other sheet is its negative)
            zb[i, j, 1] = a1
            ld = math.log(abs(det)) - ljac[j]
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
                if lw > best:
                    best = lw
    return best


@njit(cache=True)
def _roughness_axes(buf, na, nb, top, axes):
    """A local estimate of the midpoint rule's error on the log-weights in buf (read before `_weigh`
    overwrites them), in units of the peak weight: at a cell where the log-weight's second difference
    (the largest of the two axes' and the mixed one, in grid units) is k, the weight looks locally like a
    Gaussian of sd 1/sqrt(k) cells, on which the midpoint rule errs by ~2 exp(-2 pi^2 / k) (relative: 5e-9
    at k = 1, 1.4e-2 at k = 4); the estimate sums these errors times the cells' weights over the interior
    cells with weight >= ROUGH_CUT of the peak, both sheets. Compared with the total weight by the caller.
    `axes` receives the same sum per direction: axis 0's, axis 1's and the mixed second difference's
    terms, each with its own k (which axis a refinement must make finer, `_refine`)."""
    lcut = top + math.log(ROUGH_CUT)
    bad = 0.0
    axes[0] = 0.0
    axes[1] = 0.0
    axes[2] = 0.0
    for s in range(2):
        for i in range(1, na - 1):
            for j in range(1, nb - 1):
                lw = buf[i, j, s]
                if not lw >= lcut:
                    continue
                k0 = abs(buf[i + 1, j, s] - 2.0 * lw + buf[i - 1, j, s])
                k1 = abs(buf[i, j + 1, s] - 2.0 * lw + buf[i, j - 1, s])
                km = 0.25 * abs(buf[i + 1, j + 1, s] - buf[i + 1, j - 1, s] - buf[i - 1, j + 1, s]
                                + buf[i - 1, j - 1, s])
                k = max(k0, k1, km)
                if not k < 1e300:
                    axes[0] = np.inf
                    axes[1] = np.inf
                    return np.inf
                if k > 0.5:  # below: an error < 1e-17 of the cell's weight
                    bad += 2.0 * math.exp(lw - top - 2.0 * math.pi * math.pi / k)
                    if k0 > 0.5:
                        axes[0] += 2.0 * math.exp(lw - top - 2.0 * math.pi * math.pi / k0)
                    if k1 > 0.5:
                        axes[1] += 2.0 * math.exp(lw - top - 2.0 * math.pi * math.pi / k1)
                    if km > 0.5:
                        axes[2] += 2.0 * math.exp(lw - top - 2.0 * math.pi * math.pi / km)
    return bad


@njit(cache=True)
def _next_sizes(na, nb, shrink0, shrink1, axes, tot, tol, n0, cap0, cap1):
    """Cells per axis of the next strip-coordinate grid after one that failed on roughness: each axis keeps
    its step on the shrunk box (n x the box's shrink), an axis whose own error estimate (with the mixed
    term's) exceeds half the tolerance gets half the step (one of the two always does: the total sums, per
    cell, the largest of the three terms), and no axis has fewer than n0 cells. At c <= 0.01 the mass lies
    along the whole strip (the box does not shrink) and the strip axis t is the rough one in 93-99% of the
    failures (measured, docs/validation/smi.md): the isotropic rule's 80 x 80 and 160 x 160 grids refined m for
    nothing and stopped t at 160 cells."""
    m0 = int(math.ceil(na * shrink0))  # the same step on the shrunk box
    m1 = int(math.ceil(nb * shrink1))
    if axes[0] + axes[2] > 0.5 * tol * tot:
        m0 *= 2
    if axes[1] + axes[2] > 0.5 * tol * tot:
        m1 *= 2
    return min(max(m0, n0), cap0), min(max(m1, n0), cap1)


@njit(cache=True)
def _weigh(buf, na, nb, top, floor):
    """Turn the log-weights into weights relative to the peak, in place (each exp is taken once and
    reused by `_accumulate` and `_mass_box`); returns the effective number of cells (sum w)^2 / sum w^2
    and the total weight sum w. A cell whose log-weight lies more than -floor below the peak's weighs 0."""
    s1 = 0.0
    s2 = 0.0
    for i in range(na):
        for j in range(nb):
            # at floor = -708 (1e-307 of the peak, `Resolution.weight_floor`'s default) such a weight cannot
            # move s1 (>= 1, the peak's) or s2, and `_accumulate` and `_mass_box` skip it, so every output is
            # the same to the bit; the exp of such an argument (a subnormal or 0) takes libm's slow path:
            # skipping it makes the posterior ~20% faster where V22 ~ 1e-2 (the SE above alpha_1; `python
            # benchmarks/smi_se_speed.py posterior`). A higher floor (the onset's -50: 2e-22 of the peak)
            # skips the exps of cells that cannot count at any tolerance the grid is asked for
            x0 = buf[i, j, 0] - top
            x1 = buf[i, j, 1] - top
            w0 = 0.0 if x0 <= floor else math.exp(x0)  # (a NaN still goes to exp)
            w1 = 0.0 if x1 <= floor else math.exp(x1)
            buf[i, j, 0] = w0
            buf[i, j, 1] = w1
            w = w0 + w1
            s1 += w
            s2 += w * w
    return (s1 * s1 / s2 if s2 > 0 else 0.0), s1


@njit(cache=True)
def _accumulate(acc, buf, zb, xb, h0, h1, na, nb, top):
    """Add the grid's moments to acc = [log scale, S0, S1(4), S2(16)] (streaming log-sum-exp); buf holds
    the weights relative to exp(top) (`_weigh`). The two sheets share z1 and have opposite z2, so each cell
    is one term with weights w0 + w1 (z1 z1, z2 z2) and w0 - w1 (z2, z1 z2), and only the 10 distinct
    second moments are summed (the whole posterior ~20% faster at c >= 0.5, measured)."""
    s0 = 0.0
    s1 = np.zeros(4)
    s2 = np.zeros(16)
    for i in range(na):
        for j in range(nb):
            w0 = buf[i, j, 0]
            w1 = buf[i, j, 1]
            w = w0 + w1
            if w < 1e-300:
                continue
            x0 = xb[i, j, 0]
            x1 = xb[i, j, 1]
            # both sheets share z1: its moments take the summed weight; z2 flips sign between the sheets
            a0 = zb[i, j, 0]
            a1 = zb[i, j, 1]
            wd = w0 - w1
            s0 += w
            wx0 = w * x0
            wx1 = w * x1
            s1[0] += wx0
            s1[1] += wx1
            s1[2] += wd * a0
            s1[3] += wd * a1
            s2[0] += wx0 * x0
            s2[1] += wx0 * x1
            s2[5] += wx1 * x1
            s2[2] += wd * x0 * a0
            s2[3] += wd * x0 * a1
            s2[6] += wd * x1 * a0
            s2[7] += wd * x1 * a1
            s2[10] += w * a0 * a0
            s2[11] += w * a0 * a1
            s2[15] += w * a1 * a1
    s2[4] = s2[1]
    s2[8] = s2[2]
    s2[9] = s2[6]
    s2[12] = s2[3]
    s2[13] = s2[7]
    s2[14] = s2[11]
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
def _mass_box(buf, xb, lo0, lo1, h0, h1, na, nb, side0, side1, which):
    """Bounding box in grid coordinates (grown by 1.5 steps) of the cells holding mass (relative weight in
    buf >= MASS_CUT), restricted to one half-plane of z1 (which = +1 / -1 of z1 . side; 0: all).
    Returns (found, lo0, hi0, lo1, hi1)."""
    found = False
    a0 = np.inf
    b0 = -np.inf
    a1 = np.inf
    b1 = -np.inf
    for i in range(na):
        g0 = lo0 + (i + 0.5) * h0
        for j in range(nb):
            g1 = lo1 + (j + 0.5) * h1
            if max(buf[i, j, 0], buf[i, j, 1]) < MASS_CUT:
                continue
            if which != 0:
                dot = xb[i, j, 0] * side0 + xb[i, j, 1] * side1
                if (which > 0 and dot < 0) or (which < 0 and dot >= 0):
                    continue
            found = True
            a0 = min(a0, g0 - 1.5 * h0)
            b0 = max(b0, g0 + 1.5 * h0)
            a1 = min(a1, g1 - 1.5 * h1)
            b1 = max(b1, g1 + 1.5 * h1)
    return found, a0, b0, a1, b1


@njit(cache=True)
def _refine(acc, buf, zb, xb, axes, box, u0, u1, om, P, c, rho, B, n0, na, nb, neff, tol, max_level, floor):
    """Re-grid `box` (na x nb cells first) until the grid resolves its mass (the acceptance of level 0), or
    max_level grids (`axes`: scratch for the per-axis error estimates). A grid short of effective cells is re-gridded on its mass box with the same cells,
    both axes doubled (up to 4 n0) when the box does not shrink (a ridge); the plain grid (tol = 0) has
    only this rule. In strip coordinates (tol > 0) a grid that fails the error estimate is refined per axis
    by the axes' own estimates (`_next_sizes`; up to 4 n0 cells in m and 16 n0 in t; until gamp version 4
    / SE version 6 / threshold version 8 / onset version 3 both axes were doubled there too)."""
    lo0, hi0, lo1, hi1 = box[0], box[1], box[2], box[3]
    # never past the buffers (`posterior_2layer` sizes them for the chart: a plain grid has 4 n0 columns, so a
    # caller passing tol > 0 there refines within them instead of writing beyond them)
    cap0 = min(4 * n0, buf.shape[0])
    cap1 = min(16 * n0 if tol > 0.0 else 4 * n0, buf.shape[1])
    for level in range(max_level):
        h0 = (hi0 - lo0) / na
        h1 = (hi1 - lo1) / nb
        top = _fill(buf, zb, xb, lo0, lo1, h0, h1, na, nb, u0, u1, om, P, c, rho, B)
        bad = _roughness_axes(buf, na, nb, top, axes) if tol > 0.0 else 0.0
        ne, tot = _weigh(buf, na, nb, top, floor)
        if (ne >= neff and bad <= tol * tot) or level == max_level - 1:
            _accumulate(acc, buf, zb, xb, h0, h1, na, nb, top)
            return
        found, a0, b0, a1, b1 = _mass_box(buf, xb, lo0, lo1, h0, h1, na, nb, 0.0, 0.0, 0)
        if tol > 0.0 and bad > tol * tot:
            na, nb = _next_sizes(na, nb, (b0 - a0) / (hi0 - lo0), (b1 - a1) / (hi1 - lo1), axes, tot, tol, n0,
                                 cap0, cap1)
        elif (b0 - a0) * (b1 - a1) > 0.25 * (hi0 - lo0) * (hi1 - lo1):
            # a ridge the box cannot shrink around: refine the grid instead
            na = max(na, min(2 * na, cap0))
            nb = max(nb, min(2 * nb, cap0))
        lo0, hi0, lo1, hi1 = a0, b0, a1, b1


@njit(cache=True)
def _zoom(acc, buf, zb, xb, axes, scratch, box, lo0, hi0, lo1, hi1, u0, u1, om, P, c, rho, B, n0, nb, h, h1, tot,
          rough, neff, tol, max_level, floor):
    """`_refine` one mass box [lo0, hi0] x [lo1, hi1] of the level-0 grid (n0 x nb cells of h x h1). In strip
    coordinates a level 0 that failed the error estimate (`rough`, its per-axis estimates in `axes`, left
    as they are: `_refine` works in `scratch`) starts the box at least as fine as level 0, per axis
    (`_next_sizes`); otherwise at n0 x n0 cells."""
    box[0], box[1], box[2], box[3] = lo0, hi0, lo1, hi1
    na, nb1 = n0, n0
    if rough:
        na, nb1 = _next_sizes(n0, nb, (hi0 - lo0) / (n0 * h), (hi1 - lo1) / (nb * h1), axes, tot, tol, n0,
                              buf.shape[0], buf.shape[1])
    _refine(acc, buf, zb, xb, scratch, box, u0, u1, om, P, c, rho, B, n0, na, nb1, neff, tol, max_level, floor)


def strip_map(c, sd1, n0):
    """(rho, B) of the strip coordinates for skip c at level-0 step h = 2 BOX_SIGMAS sd1 / n0: near the
    diagonal z1_0 = z1_1 det A(z1) ~ (1 + c)(c + e^2/4) (e = z1_0 - z1_1), a strip of width ~ 2 sqrt(c) where
    the sheets z2 = A^-1(+-u) move fast; the midpoint rule needs cells of ~ sqrt(c)/4 there (measured:
    c = 0.1 needs 160 cells per axis and c = 0.01 320 on a uniform grid). rho = sqrt(c) / (4 h) is the
    cell width there relative to h, B = 4 h the grading length; rho >= RHO_MAX (c >~ 0.4 at V11 = 1): no
    mapping, the plain (z1_0, z1_1) grid."""
    h = 2.0 * BOX_SIGMAS * sd1 / n0
    rho = math.sqrt(c) / (4.0 * h)
    return (rho, 4.0 * h) if rho < RHO_MAX else (1.0, 4.0 * h)


@njit(cache=True)
def posterior_2layer(u, om, P, sd1, c, n0, neff, tol, max_level, rho, B, floor=-708.0, t_step=1.0):
    """log Z (N,), mean (N, 4), second moments (N, 4, 4) of the 2-layer T = 2 posterior; (rho, B) from
    `strip_map` (rho >= RHO_MAX: plain grid). `floor`: log of the relative weight below which a cell counts 0
    (`_weigh`); `t_step`: the level-0 cell of the strip axis t in units of the m cell (the error estimate
    and the refinement answer for the accuracy either way; `Resolution`)."""
    N = u.shape[0]
    n_max = 4 * n0
    # strip coordinates refine t alone up to 16 n0 cells (`_refine`)
    n_t = 16 * n0 if rho < RHO_MAX else n_max
    buf = np.empty((n_max, n_t, 2))
    zb = np.empty((n_max, n_t, 2))
    xb = np.empty((n_max, n_t, 2))
    axes = np.empty(3)  # level 0's per-axis error estimates
    scratch = np.empty(3)  # the zoom's
    logZ = np.empty(N)
    mean = np.empty((N, 4))
    second = np.empty((N, 4, 4))
    acc = np.empty(22)
    box = np.empty(4)
    h = 2.0 * BOX_SIGMAS * sd1 / n0
    for k in range(N):
        u0 = u[k, 0]
        u1 = u[k, 1]
        o = om[k]
        acc[:] = 0.0
        acc[0] = -np.inf
        if rho < RHO_MAX:
            # (m, t) box: m = mean of the two z1 tokens (cavity sd sd1 / sqrt 2, the box keeps +-R sd1), e =
            # their difference (sd sqrt(2) sd1) mapped to t; nb cells of ~h in t
            lo0 = 0.5 * (o[0, 0] + o[0, 1]) - BOX_SIGMAS * sd1
            e_mid = o[0, 0] - o[0, 1]
            lo1 = _tmap(e_mid - BOX_SIGMAS * math.sqrt(2.0) * sd1, rho, B)
            hi1 = _tmap(e_mid + BOX_SIGMAS * math.sqrt(2.0) * sd1, rho, B)
            nb = min(n_max, int(math.ceil((hi1 - lo1) / (t_step * h))))
            h1 = (hi1 - lo1) / nb
        else:
            lo0 = o[0, 0] - BOX_SIGMAS * sd1
            lo1 = o[0, 1] - BOX_SIGMAS * sd1
            nb = n0
            h1 = h
        top = _fill(buf, zb, xb, lo0, lo1, h, h1, n0, nb, u0, u1, o, P, c, rho, B)
        bad = _roughness_axes(buf, n0, nb, top, axes) if tol > 0.0 else 0.0
        ne, tot = _weigh(buf, n0, nb, top, floor)
        if ne >= neff and bad <= tol * tot:
            _accumulate(acc, buf, zb, xb, h, h1, n0, nb, top)
        else:
            # the peak cell and its half-plane; the mirror peak -z1* (if any) lies in the other one
            best = -np.inf
            p0 = 0.0
            p1 = 0.0
            for i in range(n0):
                for j in range(nb):
                    m = max(buf[i, j, 0], buf[i, j, 1])
                    if m > best:
                        best = m
                        p0 = xb[i, j, 0]
                        p1 = xb[i, j, 1]
            fa, a0, b0, a1, b1 = _mass_box(buf, xb, lo0, lo1, h, h1, n0, nb, p0, p1, 1)
            fb, c0, d0, c1, d1 = _mass_box(buf, xb, lo0, lo1, h, h1, n0, nb, p0, p1, -1)
            overlap = fb and not (b0 <= c0 or d0 <= a0 or b1 <= c1 or d1 <= a1)
            if overlap:
                a0, b0, a1, b1 = min(a0, c0), max(b0, d0), min(a1, c1), max(b1, d1)
            rough = tol > 0.0 and bad > tol * tot
            _zoom(acc, buf, zb, xb, axes, scratch, box, a0, b0, a1, b1, u0, u1, o, P, c, rho, B, n0, nb, h, h1,
                  tot, rough, neff, tol, max_level, floor)
            if fb and not overlap:
                _zoom(acc, buf, zb, xb, axes, scratch, box, c0, d0, c1, d1, u0, u1, o, P, c, rho, B, n0, nb, h, h1,
                      tot, rough, neff, tol, max_level, floor)
        logZ[k] = acc[0] + math.log(acc[1])
        for a in range(4):
            mean[k, a] = acc[2 + a] / acc[1]
            for b in range(4):
                second[k, a, b] = acc[6 + 4 * a + b] / acc[1]
    return logZ, mean, second
