"""Symmetric rotationally invariant estimator (RIE) of a Wishart signal in GOE noise.

Shared by the AIM family (spec aim.md §2.2, the "prior step" of its state evolution and the denoiser of
GAMP-RIE) and the extensive-width quadratic network (spec rie_bsr_quadratic.md §B2-B3). Imports
numpy/scipy only, never a family.

Model (spec aim.md §2.2). The observation is Y = S + sqrt(delta) Z with
* Z a GOE matrix: off-diagonal variance 1/d, diagonal 2/d, spectrum the semicircle on [-2, 2];
* S = scale * W W^T / r with W a d x r matrix of i.i.d. N(0, 1) entries and rho = r / d. The spectrum of
  W W^T / r is Marchenko-Pastur with aspect ratio 1/rho (mean 1, variance 1/rho, an atom of mass 1 - rho
  at 0 when rho < 1), so the spectrum of S has mean `scale` and variance scale^2 / rho.

The two conventions in use are two values of `scale`:
* AIM (aim.md §1.1): S = W W^T / sqrt(r d) is scale = sqrt(rho) (the default). Its spectrum has mean
  sqrt(rho) and second moment 1 + rho; the notebook normalisation of the quadratic network
  (rie_bsr_quadratic.md §B2, "F_RIE(Delta', kappa)") is the same object with rho = kappa.
* Quadratic network in S' units (rie_bsr_quadratic.md §B2, S' = W*^T W* / m, "mmse_RIE(t)"): scale = 1,
  rho = kappa. The two are related by mmse_{scale}(delta) = scale^2 * mmse_1(delta / scale^2).

Formulas (derived here, checked against the spec's own forms in tests/core/test_rie.py):
* Stieltjes transform g(z) = integral mu(t) / (z - t) dt of the law of Y. With p := scale / rho and
  m := scale (1/rho - 1), the signal's inverse Stieltjes transform is z_S(g) = 1/g + scale / (1 - p g)
  (the R-transform of scaled Marchenko-Pastur), and the free convolution with the semicircle of
  variance delta adds delta g: z(g) = 1/g + scale / (1 - p g) + delta g. Clearing denominators gives the
  cubic
      p delta g^3 - (p z + delta) g^2 + (z + m) g - 1 = 0,
  which for scale = sqrt(rho), a = 1/rho is the spec's sqrt(a) Delta g^3 - (sqrt(a) z + Delta) g^2
  + (z + sqrt(a) - 1/sqrt(a)) g - 1 = 0 (aim.md §2.2), and for scale = 1 the spec's EW cubic divided by
  kappa (rie_bsr_quadratic.md §B2).
* Support edges: real zeros (in z) of the cubic's discriminant, a quartic. 2 real zeros give one bulk,
  4 give two (rho < 1 at small delta: the broadened atom at 0 separates from the MP bulk).
* Density mu(x) = Im g(x - i0) / pi: at real x the cubic has real coefficients, so inside the support it
  has one complex-conjugate pair and the density is |Im| / pi of the pair, with no epsilon regulariser.
* MMSE (aim.md §2.2, Bun-Allez-Bouchaud-Potters / Maillard et al.):
      mmse(delta) = delta - (4 pi^2 / 3) delta^2 integral mu^3 dx.
* Denoiser (aim.md §2.2, rie_bsr_quadratic.md §B3): eigenvalue map lambda -> lambda - 2 delta Re g(lambda).

Branches (aim.md §6.1 pitfall 1). For Im z < 0 exactly one root of the cubic has Im g > 0 (it is so for
large |z|, and a root cannot cross the real axis while Im z != 0, because z(g) is real for real g); that is
the physical one, and conj-symmetry gives Im z > 0. On the real axis outside the support all three roots
are real; the physical one is the unique root where z(g) is decreasing, dz/dg < 0, since
g'(x) = -integral mu / (x - t)^2 < 0 there (the two others sit on increasing branches of z(g): near the pole
g = 1/p and near g ~ z / delta). The argmax-Im rule of the authors' code picks an arbitrary real root there.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.interpolate import PchipInterpolator

from seqphase.core.errors import ParameterError

FOUR_PI2_OVER_3 = 4.0 * math.pi**2 / 3.0


# ----------------------------------------------------------------------------------------------------
# Batched polynomial roots
# ----------------------------------------------------------------------------------------------------


def cubic_roots(a3, a2, a1, a0, newton_steps=2):
    """All three roots of a3 g^3 + a2 g^2 + a1 g + a0 = 0, batched (complex output, shape (..., 3)).

    Closed form, made stable for roots of very different sizes (at small delta one root is ~ z / delta
    while the physical pair is O(1)):
    1. Cardano on the depressed cubic t^3 + P t + Q, with the square-root sign that maximises |u^3| (no
       cancellation in the cube root); keep only the root of largest modulus, which Cardano gets to
       relative precision.
    2. Deflate it from the low-degree end (c0 = -a0 / g, c1 = (c0 - a1) / g): forward deflation by the
       largest root is stable, where Vieta's sum would cancel.
    3. Solve the remaining quadratic a3 g^2 + c1 g + c0 with the cancellation-free pair q, c0 / q.
    4. `newton_steps` guarded Newton steps on the original cubic (a step is kept only where it lowers
       |P|, so a near-double root at a support edge is never thrown off).
    Coefficients may be complex (the Stieltjes transform off the real axis); a3 must be nonzero.
    """
    a3, a2, a1, a0 = np.broadcast_arrays(*(np.asarray(c, dtype=complex) for c in (a3, a2, a1, a0)))
    b, c, d = a2 / a3, a1 / a3, a0 / a3
    shift = b / 3.0
    P = c - b * shift
    Q = (2.0 * shift * shift - c) * shift + d
    root = np.sqrt(Q * Q / 4.0 + P**3 / 27.0)
    u3_plus, u3_minus = -Q / 2.0 + root, -Q / 2.0 - root
    u3 = np.where(np.abs(u3_plus) >= np.abs(u3_minus), u3_plus, u3_minus)
    u = u3 ** (1.0 / 3.0)
    uk = u[..., None] * np.exp(2j * np.pi / 3.0) ** np.arange(3)
    safe = np.where(uk == 0, 1.0, uk)
    candidates = np.where(uk == 0, 0.0, uk - P[..., None] / (3.0 * safe)) - shift[..., None]
    big = np.take_along_axis(candidates, np.argmax(np.abs(candidates), axis=-1)[..., None], axis=-1)[..., 0]
    safe_big = np.where(big == 0, 1.0, big)
    c0 = np.where(big == 0, c, -d / safe_big)  # big == 0 only for the triple root g = 0 (d = c = 0)
    c1 = np.where(big == 0, b, (c0 - c) / safe_big)
    disc = np.sqrt(c1 * c1 - 4.0 * c0)
    disc = np.where((np.conj(c1) * disc).real >= 0, disc, -disc)
    q = -(c1 + disc) / 2.0
    safe_q = np.where(q == 0, 1.0, q)
    g = np.stack([big, q, np.where(q == 0, 0.0, c0 / safe_q)], axis=-1)

    def residual(x):
        return ((x + b[..., None]) * x + c[..., None]) * x + d[..., None]

    value = residual(g)
    for _ in range(newton_steps):
        slope = (3.0 * g + 2.0 * b[..., None]) * g + c[..., None]
        trial = g - value / np.where(slope == 0, 1.0, slope)
        trial_value = residual(trial)
        better = (slope != 0) & (np.abs(trial_value) < np.abs(value))
        g = np.where(better, trial, g)
        value = np.where(better, trial_value, value)
    return g


def _poly_mul(a, b):
    """Product of polynomials given as coefficient arrays (..., k) in increasing degree (batched)."""
    out = np.zeros(np.broadcast_shapes(a.shape[:-1], b.shape[:-1]) + (a.shape[-1] + b.shape[-1] - 1,))
    for i in range(a.shape[-1]):
        out[..., i:i + b.shape[-1]] += a[..., i:i + 1] * b
    return out


def _pad(a, k):
    """Zero-pad a coefficient array (..., j) to (..., k) (higher degrees)."""
    return np.concatenate([a, np.zeros(a.shape[:-1] + (k - a.shape[-1],))], axis=-1)


# ----------------------------------------------------------------------------------------------------
# Quadrature on one bulk
# ----------------------------------------------------------------------------------------------------


@lru_cache(maxsize=8)
def bulk_rule(levels: int, nodes_per_panel: int):
    """Nodes u in (0, 1) and weights of a composite Gauss-Legendre rule graded toward both ends.

    A bulk [e0, e1] is mapped by x = e0 + (e1 - e0)(1 - cos(pi u)) / 2 (aim.md §6.1): the map turns the
    square-root edges (mu^3 ~ (x - e)^{3/2}) into smooth integrands in u. The panels halve toward each end
    (breakpoints 2^-k and 1 - 2^-k, k = 1..levels) because the integrand also has structure on scales far
    below the bulk width next to an edge: at rho = 1 the hard edge of Marchenko-Pastur (mu ~ x^{-1/2})
    is smoothed over a width ~ delta^{2/3}, and near the merge of two bulks (pitfall 2) the density has a
    cusp next to the edges. Read-only arrays.
    """
    inner = 2.0 ** -np.arange(levels, 0, -1)
    breaks = np.concatenate([[0.0], inner, 1.0 - inner[::-1], [1.0]])
    breaks = np.unique(breaks)
    x, w = np.polynomial.legendre.leggauss(nodes_per_panel)
    lo, hi = breaks[:-1, None], breaks[1:, None]
    u = (lo + (hi - lo) * (x + 1.0) / 2.0).ravel()
    weights = ((hi - lo) / 2.0 * w).ravel()
    u.setflags(write=False)
    weights.setflags(write=False)
    return u, weights




# ----------------------------------------------------------------------------------------------------
# The RIE
# ----------------------------------------------------------------------------------------------------


def _check_delta(delta, allow_zero=True):
    delta = np.asarray(delta, dtype=float)
    bad = ~(delta >= 0) if allow_zero else ~(delta > 0)
    if np.any(bad):
        value = delta[bad].ravel()[0]
        need = ">= 0" if allow_zero else "> 0"
        raise ParameterError("delta", f"the noise variance must be {need}, got {value}",
                             fix=f"pass delta {need}")
    return delta


class SymmetricRIE:
    """RIE of S = scale * W W^T / (rho d) (Marchenko-Pastur, aspect 1/rho) from Y = S + sqrt(delta) Z.

    `rho` = r / d > 0 (rank ratio; kappa of the quadratic network). `scale` defaults to sqrt(rho), the
    AIM normalisation S = W W^T / sqrt(r d) (aim.md §1.1); pass scale=1 for the quadratic network in S'
    units (rie_bsr_quadratic.md §B2). See the module docstring for the formulas and branch choices.
    """

    #: |Im g| / |g| below which the roots at a real point count as real (outside the support); relative
    #: to the root itself, since the third root (~ z / delta) can be larger by many orders
    REAL_ROOT_TOL = 1e-10
    #: two bulks closer than this (relative to the spectrum's scale) are reported as one (pitfall 2)
    MERGE_GAP = 1e-9
    #: quartic zeros with |Im| below this (relative) count as real; a real pair closer than this is a
    #: near-merge handled as one cut bulk (companion eigenvalues of a near-double zero are only good to
    #: ~ sqrt(machine eps) ~ 1e-8)
    CLOSE_PAIR = 1e-7
    #: quadrature: panels halving toward each edge, and Gauss-Legendre nodes per panel
    LEVELS = 12
    NODES_PER_PANEL = 12
    #: below / above these noise levels mmse uses its asymptotic branches (pitfall 3)
    DELTA_SMALL = 1e-8
    DELTA_LARGE = 1e5
    #: deltas per quadrature batch (bounds memory: batch * 2 bulks * nodes complex roots)
    BATCH = 256

    def __init__(self, rho, scale=None):
        try:
            rho = float(rho)
        except (TypeError, ValueError):
            raise ParameterError("rho", f"must be a number, got {rho!r}") from None
        if not (rho > 0 and math.isfinite(rho)):
            raise ParameterError("rho", f"the rank ratio r/d must be > 0 and finite, got {rho}",
                                 fix="pass rho > 0")
        aim = scale is None
        if aim:
            scale = math.sqrt(rho)
        scale = float(scale)
        if not (scale > 0 and math.isfinite(scale)):
            raise ParameterError("scale", f"must be > 0 and finite, got {scale}")
        self.rho = rho
        self.scale = scale
        self.p = scale / rho  # cubic coefficients, module docstring
        self.m = scale * (1.0 / rho - 1.0)
        #: first two moments of the signal spectrum (Tr S / d, Tr S^2 / d)
        self.signal_mean = scale
        self.signal_second_moment = 1.0 + rho if aim else scale**2 * (1.0 + 1.0 / rho)
        #: variance of the signal spectrum = mmse at infinite noise (exactly 1 for AIM: Q0 - rho, §2.2)
        self.signal_variance = 1.0 if aim else scale**2 / rho
        #: mmse / delta as delta -> 0: the tangent-space dimension per d^2 (aim.md §2.2)
        self.small_noise_slope = 2.0 * rho - rho**2 if rho < 1.0 else 1.0

    def __repr__(self):
        return f"SymmetricRIE(rho={self.rho!r}, scale={self.scale!r})"

    # -- cubic ---------------------------------------------------------------------------------------

    def _roots(self, z, delta):
        """The three roots g of the cubic at (z, delta), broadcast; shape (..., 3)."""
        z = np.asarray(z)
        delta = np.asarray(delta, dtype=float)
        return cubic_roots(self.p * delta, -(self.p * z + delta), z + self.m, -1.0 + 0.0 * z)

    def _dz_dg(self, g, z, delta):
        """dz/dg along the root g(z) of the cubic: -P_g / P_z (implicit differentiation)."""
        p_g = (3.0 * self.p * delta * g - 2.0 * (self.p * z + delta)) * g + (z + self.m)
        p_z = g * (1.0 - self.p * g)
        return -p_g / p_z

    def _real_axis(self, x, delta):
        """g(x - i0) at real x (complex, shape of x and delta broadcast), physical branch everywhere."""
        x, delta = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(delta, dtype=float))
        xb, db = x[..., None], delta[..., None]
        roots = self._roots(x, delta)
        # inside the support: the root with the largest Im (Im g(x - i0) = pi mu > 0)
        g_inside = np.take_along_axis(roots, np.argmax(roots.imag, axis=-1)[..., None], axis=-1)[..., 0]
        inside = g_inside.imag > self.REAL_ROOT_TOL * np.abs(g_inside)
        # outside: the unique real root on a decreasing branch of z(g)
        slope = self._dz_dg(roots.real, xb, db)
        pick = np.argmin(slope, axis=-1)
        g_outside = np.take_along_axis(roots.real, pick[..., None], axis=-1)[..., 0]
        return np.where(inside, g_inside, g_outside + 0j)

    def stieltjes(self, z, delta):
        """Stieltjes transform g(z) = integral mu(t) / (z - t) dt of the law of Y (physical branch).

        `z` complex array (any shape, batched); `delta` > 0 broadcasts against it. On the real axis the
        value is the limit from below, g(x - i0) = P.V. integral + i pi mu(x), and outside the support the
        real analytic continuation (module docstring, "Branches").
        """
        delta = _check_delta(delta, allow_zero=False)
        z = np.asarray(z, dtype=complex)
        z, delta = np.broadcast_arrays(z, delta)
        on_axis = z.imag == 0
        out = np.empty(z.shape, dtype=complex)
        if np.any(on_axis):
            out[on_axis] = self._real_axis(z.real[on_axis], delta[on_axis])
        off = ~on_axis
        if np.any(off):
            lower = np.where(z[off].imag < 0, z[off], np.conj(z[off]))
            roots = self._roots(lower, delta[off])
            g = np.take_along_axis(roots, np.argmax(roots.imag, axis=-1)[..., None], axis=-1)[..., 0]
            out[off] = np.where(z[off].imag < 0, g, np.conj(g))
        return out

    def density(self, x, delta):
        """Spectral density mu(x) of Y (free convolution of the signal law with the semicircle)."""
        delta = _check_delta(delta, allow_zero=False)
        x = np.asarray(x, dtype=float)
        roots = self._roots(x, delta)
        g = np.take_along_axis(roots, np.argmax(roots.imag, axis=-1)[..., None], axis=-1)[..., 0]
        # three real roots (outside the support) carry rounding-level Im parts: zero them
        real = g.imag <= self.REAL_ROOT_TOL * np.abs(g)
        return np.where(real, 0.0, g.imag) / math.pi

    # -- support -------------------------------------------------------------------------------------

    def _quartic(self, delta):
        """Coefficients (increasing degree in z, shape (N, 5)) of the discriminant of the cubic in g.

        Cubic A g^3 + B g^2 + C g + D with A = p delta, B = -delta - p z, C = m + z, D = -1; its
        discriminant 18ABCD - 4B^3 D + B^2 C^2 - 4 A C^3 - 27 A^2 D^2 is a quartic in z whose real zeros
        contain the support edges (aim.md §2.2 gives its coefficients for scale = sqrt(rho)).
        """
        delta = np.asarray(delta, dtype=float)[:, None]
        one = np.ones_like(delta)
        A = self.p * delta
        B = np.concatenate([-delta, -self.p * one], axis=1)
        C = np.concatenate([self.m * one, one], axis=1)
        BC = _poly_mul(B, C)
        terms = (
            -18.0 * A * _pad(BC, 5)
            + 4.0 * _pad(_poly_mul(_poly_mul(B, B), B), 5)
            + _poly_mul(BC, BC)
            - 4.0 * A * _pad(_poly_mul(_poly_mul(C, C), C), 5)
        )
        terms[:, 0] -= 27.0 * A[:, 0] ** 2
        return terms

    def _support(self, delta):
        """Support of the density for each delta (1-D array): quadrature pieces lo, hi (N, 2), two_bulks (N,).

        Candidate edges are the real zeros of the quartic (companion eigenvalues, then Newton-polished);
        consecutive candidates bound a bulk where the density at their midpoint is positive, which
        discards any real zero that is not an edge. Two bulks closer than MERGE_GAP are merged
        (pitfall 2: the 2 <-> 4 edge transition).

        A single bulk is cut in two at the real part of the quartic's complex zero pair when it falls
        inside: these are the branch points that have just left the real axis after two bulks merged,
        and the density has a narrow dip of width ~ |Im| there, which the graded rule then resolves
        from both sides. A real pair of zeros closer than CLOSE_PAIR (a gap or a dip too narrow for
        companion eigenvalues to tell apart) is cut the same way. With two bulks the pieces are the
        bulks; a single uncut bulk leaves the second piece empty ([hi, hi], zero weight). `two_bulks`
        says whether the edges form two bulks separated by more than MERGE_GAP.
        """
        delta = np.asarray(delta, dtype=float)
        n = len(delta)
        coef = self._quartic(delta)
        companion = np.zeros((n, 4, 4))
        companion[:, 1:, :3] = np.eye(3)
        companion[:, :, 3] = -coef[:, :4] / coef[:, 4:5]
        zeros = np.linalg.eigvals(companion)
        spread = self.scale * (1.0 + 1.0 / math.sqrt(self.rho)) ** 2 + 4.0 * np.sqrt(delta)
        real = np.abs(zeros.imag) < self.CLOSE_PAIR * spread[:, None]
        edges = np.where(real, zeros.real, np.nan)
        slope_coef = coef[:, 1:] * np.arange(1, 5)
        for _ in range(3):  # Newton on the quartic: simple zeros to machine precision
            value = sum(coef[:, k:k + 1] * edges**k for k in range(5))
            slope = sum(slope_coef[:, k:k + 1] * edges**k for k in range(4))
            step = value / np.where(slope == 0, 1.0, slope)
            edges = edges - np.where(slope == 0, 0.0, np.clip(step, -1e-3 * spread[:, None], 1e-3 * spread[:, None]))
        edges = np.sort(edges, axis=1)  # NaN last
        mids = (edges[:, :-1] + edges[:, 1:]) / 2.0
        known = np.isfinite(mids)
        inside = np.zeros(mids.shape, dtype=bool)
        if np.any(known):
            rows = np.broadcast_to(delta[:, None], mids.shape)
            inside[known] = self.density(mids[known], rows[known]) > 0
        if not np.all(np.any(inside, axis=1)):
            bad = delta[~np.any(inside, axis=1)][0]
            raise ArithmeticError(f"no bulk found for {self!r} at delta={bad}")
        rows = np.arange(n)
        first = np.argmax(inside, axis=1)
        last = 2 - np.argmax(inside[:, ::-1], axis=1)
        bottom, top = edges[rows, first], edges[rows, last + 1]
        gap_pattern = inside[:, 0] & ~inside[:, 1] & inside[:, 2]
        gap = edges[:, 2] - edges[:, 1]
        close = gap < self.CLOSE_PAIR * spread  # NaN (2 real zeros) -> False
        two_bulks = gap_pattern & ~close
        # a single bulk is cut at a close real pair (a tiny gap or a just-merged dip), or at the real
        # part of a complex zero pair that falls inside it
        pair = np.where(~real & (zeros.imag > 0), zeros.real, -np.inf)
        pair = np.max(np.where((pair > bottom[:, None]) & (pair < top[:, None]), pair, -np.inf), axis=1)
        cut = np.where(close, (edges[:, 1] + edges[:, 2]) / 2.0, pair)
        has_cut = ~two_bulks & np.isfinite(cut)
        lo = np.stack([bottom, np.where(two_bulks, edges[:, 2], np.where(has_cut, cut, top))], axis=1)
        hi = np.stack([np.where(two_bulks, edges[:, 1], np.where(has_cut, cut, top)), top], axis=1)
        # edges are reported as two bulks down to the MERGE_GAP of pitfall 2
        return lo, hi, gap_pattern & (gap > self.MERGE_GAP * spread)

    def pieces(self, delta):
        """The quadrature pieces of the support at one noise level: ascending (lo, hi) pairs. They are the
        bulks, with a bulk cut where the density has a narrow dip (just after two bulks merge), so an
        integral of a function of the density over the support is accurate piece by piece (`edges` gives
        the bulks only)."""
        lo, hi, _ = self._support(np.array([float(_check_delta(delta, allow_zero=False))]))
        return tuple(sorted((float(a), float(b)) for a, b in zip(lo[0], hi[0]) if b > a))

    def edges(self, delta):
        """Sorted support edges at one noise level delta > 0: 2 (one bulk) or 4 (two bulks)."""
        delta = float(_check_delta(delta, allow_zero=False))
        lo, hi, two_bulks = self._support(np.array([delta]))
        if two_bulks[0]:
            return np.array([lo[0, 0], hi[0, 0], lo[0, 1], hi[0, 1]])
        return np.array([lo[0, 0], hi[0, 1]])

    # -- mmse ----------------------------------------------------------------------------------------

    def cubed_density_integral(self, delta):
        """integral mu_delta(x)^3 dx for a 1-D array of delta > 0 (graded cosine-mapped quadrature)."""
        delta = np.asarray(delta, dtype=float)
        u, w = bulk_rule(self.LEVELS, self.NODES_PER_PANEL)
        cos_map = (1.0 - np.cos(np.pi * u)) / 2.0
        jacobian = w * np.pi * np.sin(np.pi * u) / 2.0
        out = np.empty(delta.shape)
        for start in range(0, len(delta), self.BATCH):
            block = delta[start:start + self.BATCH]
            lo, hi, _ = self._support(block)
            width = (hi - lo)[..., None]  # (N, 2, 1); 0 for an absent second bulk
            x = lo[..., None] + width * cos_map
            mu = self.density(x, block[:, None, None])
            out[start:start + self.BATCH] = np.sum(width * jacobian * mu**3, axis=(1, 2))
        return out

    def mmse(self, delta):
        """Denoising MMSE lim E||S_hat - S||_F^2 / d at noise variance delta >= 0 (vectorised).

        mmse = delta - (4 pi^2 / 3) delta^2 integral mu^3 (aim.md §2.2). mmse(0) = 0 and
        mmse(inf) = scale^2 / rho (the variance of the signal spectrum; 1 for AIM).

        Asymptotic branches (pitfall 3): below DELTA_SMALL the leading term small_noise_slope * delta
        (relative error ~ delta for rho != 1, ~ 1.3 delta^{2/3} at rho = 1, where the hard edge of
        Marchenko-Pastur makes the correction non-analytic); above DELTA_LARGE max(1, v) `large_noise_mmse` (v = scale^2 / rho, the
        signal variance: the series is one in v / delta).
        The quadrature itself was checked against a 4x finer rule to ~1e-11 relative over
        [1e-8, 1e4] for rho from 0.01 to 1e4.
        """
        delta = _check_delta(delta)
        shape = delta.shape
        flat = delta.ravel()
        out = np.empty(flat.shape)
        zero, inf = flat == 0, np.isinf(flat)
        out[zero] = 0.0
        out[inf] = self.signal_variance
        small = (flat < self.DELTA_SMALL) & ~zero
        # the large-noise series expands in (spread of the signal spectrum)^2 / delta ~ v / delta: the switch
        # scales with v (v = 1 in the AIM normalisation; at scale 1 and rho = kappa << 1 a fixed switch put
        # it where the series is still wrong, e.g. alpha(t) jumped x2.9 at kappa = 1e-3)
        large = (flat > self.DELTA_LARGE * max(1.0, self.signal_variance)) & ~inf
        out[small] = self.small_noise_slope * flat[small]
        out[large] = self.large_noise_mmse(flat[large])
        direct = ~(zero | inf | small | large)
        d = flat[direct]
        out[direct] = d - FOUR_PI2_OVER_3 * d**2 * self.cubed_density_integral(d)
        return out.reshape(shape)

    def large_noise_mmse(self, delta):
        """mmse ~ v - v^2 / delta + (v^3 - k3^2) / delta^2 + O(delta^-3) as delta -> infinity.

        v = scale^2 / rho and k3 = scale^3 / rho^2 are the second and third free cumulants of the signal
        law (those of Marchenko-Pastur with ratio 1/rho are rho^{1-n}). The first two terms are the mmse
        of the best linear estimator; the third (ours, checked against the quadrature to ~1e-11 over
        delta in [1e3, 1e5] in tests/core/test_rie.py) vanishes for a semicircle prior, whose mmse is
        v delta / (v + delta). Used beyond DELTA_LARGE, where the quadrature's two O(delta) terms cancel
        down to O(1) (pitfall 3): its rounding error grows like 1e-16 delta, the series error like
        delta^-3.
        """
        delta = np.asarray(delta, dtype=float)
        v = self.signal_variance
        k3 = self.scale**3 / self.rho**2
        return v - v * v / delta + (v**3 - k3 * k3) / delta**2

    # -- denoiser ------------------------------------------------------------------------------------

    def denoise_eigenvalues(self, lam, delta):
        """RIE eigenvalue map lambda -> lambda - 2 delta Re g(lambda) (aim.md §2.2), any real lambda.

        Eigenvalues of a finite-d Y outside the limiting support use the real analytic continuation of
        g (pitfall 1). delta = 0 returns lambda unchanged (no noise, nothing to shrink).
        """
        delta = float(_check_delta(delta))
        lam = np.asarray(lam, dtype=float)
        if delta == 0.0:
            return lam.copy()
        return lam - 2.0 * delta * self._real_axis(lam, delta).real

    def denoise(self, Y, delta):
        """RIE estimate of S from a symmetric matrix Y = S + sqrt(delta) Z: eigh, then the eigenvalue map."""
        values, vectors = np.linalg.eigh(np.asarray(Y, dtype=float))
        shrunk = self.denoise_eigenvalues(values, delta)
        return (vectors * shrunk) @ vectors.T


# ----------------------------------------------------------------------------------------------------
# MMSE table
# ----------------------------------------------------------------------------------------------------

#: noise grid of every table: log-spaced, 200 points per decade over [1e-8, 1e4] (aim.md §6.1)
TABLE_DELTA_MIN, TABLE_DELTA_MAX, TABLE_POINTS = 1e-8, 1e4, 2401


class MMSETable:
    """mmse(delta) of one SymmetricRIE tabulated once and interpolated (aim.md §6.1 "Precompute").

    The table holds the exact `SymmetricRIE.mmse` on TABLE_POINTS log-spaced noise levels and a PCHIP
    interpolant of log mmse against log delta. PCHIP preserves the monotonicity of the data, so the
    interpolated mmse is increasing in delta, like the exact one (so alpha(delta) = mmse / (k delta)
    stays monotone between nodes for the parametric SE curves), and its inverse `delta_of_mmse` is a
    second PCHIP on the swapped columns. Outside the grid both fall back to the exact function
    (with its asymptotic branches). Deterministic: no randomness, no adaptivity.
    """

    def __init__(self, rie: SymmetricRIE, points: int = TABLE_POINTS):
        self.rie = rie
        self.delta = np.logspace(math.log10(TABLE_DELTA_MIN), math.log10(TABLE_DELTA_MAX), points)
        self.values = rie.mmse(self.delta)
        if np.any(np.diff(self.values) <= 0):
            raise ArithmeticError(f"mmse table of {rie!r} is not increasing")
        log_delta, log_mmse = np.log(self.delta), np.log(self.values)
        self._forward = PchipInterpolator(log_delta, log_mmse, extrapolate=False)
        self._inverse = PchipInterpolator(log_mmse, log_delta, extrapolate=False)
        self.delta.setflags(write=False)
        self.values.setflags(write=False)

    def __repr__(self):
        return f"MMSETable({self.rie!r}, points={len(self.delta)})"

    def mmse(self, delta):
        """Interpolated mmse at noise variance delta >= 0 (any shape)."""
        delta = _check_delta(delta)
        out = np.empty(delta.shape)
        inside = (delta >= self.delta[0]) & (delta <= self.delta[-1])
        out[inside] = np.exp(self._forward(np.log(delta[inside])))
        if np.any(~inside):
            out[~inside] = self.rie.mmse(delta[~inside])
        return out

    def delta_of_mmse(self, mmse):
        """Noise variance at which the mmse equals `mmse` (inverse of `mmse`; 0 <= mmse < variance)."""
        m = np.asarray(mmse, dtype=float)
        v = self.rie.signal_variance
        if np.any(~((m >= 0) & (m <= v))):
            raise ParameterError("mmse", f"must lie in [0, {v}] (the signal variance), got "
                                 f"{m[~((m >= 0) & (m <= v))].ravel()[0]}")
        out = np.empty(m.shape)
        inside = (m >= self.values[0]) & (m <= self.values[-1])
        log_m = np.log(m[inside])
        log_delta = self._inverse(log_m)
        for _ in range(2):  # Newton on the forward interpolant: the exact inverse of `mmse`
            slope = self._forward(log_delta, 1)
            step = (log_m - self._forward(log_delta)) / slope
            log_delta = np.clip(log_delta + np.where(np.isfinite(step), step, 0.0),
                                math.log(self.delta[0]), math.log(self.delta[-1]))
        out[inside] = np.exp(log_delta)
        below = (m < self.values[0])
        out[below] = m[below] / self.rie.small_noise_slope  # mmse = slope * delta there
        above = m > self.values[-1]
        if np.any(above):  # invert the large-noise series v - v^2 / delta + c / delta^2 for 1 / delta
            v2, c = v * v, v**3 - (self.rie.scale**3 / self.rie.rho**2) ** 2
            gap = v - m[above]
            inv = np.where(c == 0, gap / v2, (v2 - np.sqrt(np.maximum(v2 * v2 - 4.0 * c * gap, 0.0)))
                           / (2.0 * c if c != 0 else 1.0))
            out[above] = np.where(gap > 0, 1.0 / np.where(inv > 0, inv, np.inf), np.inf)
        out[m == v] = np.inf
        return out


@lru_cache(maxsize=32)
def _cached_table(rho: float, scale: float | None) -> MMSETable:
    return MMSETable(SymmetricRIE(rho, scale))


def mmse_table(rho, scale=None) -> MMSETable:
    """The MMSE table of SymmetricRIE(rho, scale), built once per process (lru_cache).

    A worker that runs an alpha sweep at fixed rho builds it on its first point and only interpolates
    afterwards. Arguments are validated before the cache so bad input never gets cached.
    """
    rie = SymmetricRIE(rho, scale)
    return _cached_table(rie.rho, None if scale is None else rie.scale)
