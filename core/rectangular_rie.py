"""Rectangular rotationally invariant estimator (RIE) of a low-rank product matrix in Gaussian noise.

Shared by the bilinear sequence regression family (spec rie_bsr_quadratic.md §A2-A3: the denoising step of
its scalar equation and the denoiser of GAMP-RIE). The symmetric counterpart is core/rie.py, with the same
interface. Imports numpy/scipy and core/rie.py's quadrature rule only, never a family.

Model (spec §A2). Y = S + sqrt(zeta) Z, a d x L matrix, with Z i.i.d. N(0, 1) and S = U V^T / sqrt(r),
U (d x r) and V (L x r) i.i.d. N(0, 1): each entry of S has unit variance. beta = L / d, rho = r / d, zeta is
the noise variance per entry in these plain units. The laws below are those of the normalised matrix
Y / (d L)^{1/4}, whose squared singular values have mean (1 + zeta) sqrt(beta).

Aspect reduction (spec §8.1). Transposing Y swaps d and L and leaves every per-entry quantity unchanged, so
(beta, rho) and (1 / beta, rho / beta) describe the same problem (r / L = rho / beta); internally
`aspect` = max(beta, 1 / beta) >= 1 and `rank` = r / min(d, L). mmse(zeta; beta, rho) =
mmse(zeta; 1 / beta, rho / beta) exactly (tests/core/test_rectangular_rie.py checks it).

Formulas (spec §A2; the quartic rewritten here, see below):
* mu_zeta: the symmetrised singular-value density of Y / (d L)^{1/4} (the min(d, L) singular values
  mirrored to +-s, total mass 1). G(z) = integral mu(t) / (z - t) dt, mu(x) = Im G(x - i0) / pi.
* G solves the quartic Q(G, z) = 0, with w = z^2, s = sqrt(aspect), b = aspect - 1, rho = rank:
      Q = zeta w G^4 + z (2 zeta b - s w) G^3 + (zeta b^2 + w K) G^2 + z s (b M + rho s w) G - rho s^2 w,
      K = 2 s - s^3 - rho s (1 + zeta),   M = 1 - rho (1 + zeta).
  It is s^2 z^2 / rho^2 times the spec's quartic sum_k a_k u^k in u = G / z (coefficients a0..a4, from the
  authors' `stieltjes`), written in G (simplified with sympy): unlike the u-form it stays regular at z = 0,
  where the spec's polynomial degenerates (all four u-roots blow up like 1 / z when aspect = 1, because the
  density is positive at 0). For aspect = 1 it reads zeta G^4 - z G^3 + (1 - rho (1 + zeta)) G^2
  + rho z G - rho = 0 after dividing by w.
* Edges: real zeros of the discriminant of Q in G. Up to the factor s^4 z^8 it is a quintic in
  W = sqrt(aspect) x^2 (the spec's "degree 5 in x^2", `pdf_edges`), whose coefficients `_quintic` holds
  (sympy, grouped by powers of rho). aspect = 1 makes W = 0 a double zero: the bulk touching x = 0.
* MMSE (spec (A.2)):  mmse(zeta) = zeta - zeta^2 / aspect^{3/2} [ (aspect - 1)^2 I1 + (4 pi^2 / 3) I2 ],
  I1 = integral mu / x^2, I2 = integral mu^3 (over R; 2x the integrals over x > 0). I1 is skipped at
  aspect = 1 (its prefactor is 0, and it diverges at the hard edge).
* Denoiser (spec §A3): each singular value s of Y / (d L)^{1/4} goes to
  s - (2 zeta / sqrt(aspect)) [ (aspect - 1) / (2 s) + Re G(s) ].

Branches (spec pitfall 1). At real x inside the support the quartic has a complex pair and the physical root
is the member with Im G > 0 (Im G(x - i0) = pi mu > 0). Outside the support the physical G is real with
dG/dx = -integral mu / (x - t)^2 < 0; of the real roots we take the one with the most negative dG/dx
(implicit differentiation, -Q_z / Q_G). The authors' "largest Im G at x - 1e-8 i" is ambiguous there: the
roots are real to rounding, and a non-physical, nearly real complex pair can occur (REAL_ROOT_TOL). Off the
real axis (Im z < 0) the physical root is the one with the largest Im G, and G(conj z) = conj G(z).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.interpolate import PchipInterpolator

from seqphase.core.errors import ParameterError
from seqphase.core.numerics import bisect_arrays
from seqphase.core.rie import bulk_rule

FOUR_PI2_OVER_3 = 4.0 * math.pi**2 / 3.0


def _check_zeta(zeta, allow_zero=True):
    zeta = np.asarray(zeta, dtype=float)
    bad = ~(zeta >= 0) if allow_zero else ~(zeta > 0)
    if np.any(bad):
        value = zeta[bad].ravel()[0]
        need = ">= 0" if allow_zero else "> 0"
        raise ParameterError("zeta", f"the noise variance must be {need}, got {value}", fix=f"pass zeta {need}")
    return zeta


def _positive_parameter(name, value, meaning):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ParameterError(name, f"must be a number, got {value!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise ParameterError(name, f"{meaning} must be > 0 and finite, got {value}", fix=f"pass {name} > 0")
    return value


def perfect_recovery_alpha(rho, beta):
    """alpha_PR = rho (1 + beta - rho) / beta for rho < min(1, beta), else 1 (spec §A5).

    It is also lim mmse(zeta) / zeta as zeta -> 0 (the tangent-space dimension of rank-r d x L matrices
    per entry, r (d + L - r) / (d L)), which is how this module uses it.
    """
    rho, beta = float(rho), float(beta)
    return rho * (1.0 + beta - rho) / beta if rho < min(1.0, beta) else 1.0


def infinite_beta_mmse(zeta, rho):
    """beta -> infinity closed form of the denoising MMSE (spec §A2 "Special limits", `eqs_larbebeta`).

    mmse_inf = zeta - (zeta / 2) [ sqrt(A) - (rho - 1) - zeta rho ],  A = rho^2 zeta^2 + 2 rho (rho + 1) zeta
    + (rho - 1)^2 (the spec's radicand, expanded). Since A - (rho zeta + rho - 1)^2 = 4 rho zeta this is
    zeta - 2 rho zeta^2 / D with D = sqrt(A) + rho zeta + rho - 1; D and the final difference are written
    without cancellation (D for rho < 1 at small zeta; zeta (D - 2 rho zeta) / D at large zeta).
    Limits: mmse ~ min(rho, 1) zeta as zeta -> 0 (alpha_PR at beta = infinity) and -> 1 as zeta -> infinity.
    """
    zeta = _check_zeta(zeta)
    rho = _positive_parameter("rho", rho, "the rank ratio r/d")
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # inf / inf at zeta = inf, replaced below
        root = np.sqrt(rho * rho * zeta * zeta + 2.0 * rho * (rho + 1.0) * zeta + (rho - 1.0) ** 2)
        if rho < 1.0:  # sqrt(A) - (1 - rho) = (A - (1 - rho)^2) / (sqrt(A) + 1 - rho)
            D = rho * zeta + rho * zeta * (rho * zeta + 2.0 * (rho + 1.0)) / (root + 1.0 - rho)
        else:
            D = root + rho * zeta + rho - 1.0
        # D - 2 rho zeta = sqrt(A) - rho zeta + rho - 1
        #                = (2 rho (rho + 1) zeta + (rho - 1)^2) / (sqrt(A) + rho zeta) + rho - 1
        excess = (2.0 * rho * (rho + 1.0) * zeta + (rho - 1.0) ** 2) / (root + rho * zeta) + rho - 1.0
        out = np.where(zeta <= 1.0, zeta - 2.0 * rho * zeta * zeta / D, zeta * excess / D)
    out = np.where(zeta == 0, 0.0, out)
    return np.where(np.isinf(zeta), 1.0, out)


class RectangularRIE:
    """RIE of S = U V^T / sqrt(r) (d x L, unit-variance entries) from Y = S + sqrt(zeta) Z.

    `rho` = r / d > 0, `beta` = L / d > 0 (any; reduced to aspect >= 1 internally, module docstring).
    Every method takes the noise variance per entry `zeta` in plain S units.
    """

    #: |Im G| / |G| below which a root at a real point counts as real (outside the support). Outside the
    #: support the quartic can have a non-physical, nearly real complex pair (near the double root
    #: G = -(aspect - 1) / x of its leading terms when x -> 0): its |Im G| / |G| was at most 2.7e-8 over
    #: rho in [0.01, 20], beta in [1, 1e4], zeta in [1e-7, 1e4]. Inside, the physical ratio falls below
    #: 1e-6 only within ~1e-12 (relative) of an edge, closer than any quadrature node.
    REAL_ROOT_TOL = 1e-6
    #: quintic zeros with |Im W| / |W| below this count as real edges
    EDGE_IMAG_TOL = 1e-7
    #: a complex edge-quintic zero x0 with |Im x0| < CUT_RATIO Re x0 cuts the bulk at Re x0: after two bulks
    #: merge the density keeps a dip of width ~ |Im x0| there, which the graded rule resolves from both sides
    CUT_RATIO = 0.5
    #: quadrature: panels halving toward each end of a piece, Gauss-Legendre nodes per panel (core/rie.py)
    LEVELS = 10
    NODES_PER_PANEL = 10
    #: below ZETA_SMALL mmse uses alpha_PR zeta (pitfall 3); above ZETA_LARGE (scaled, large_noise_switch)
    #: the large-noise series
    ZETA_SMALL = 1e-8
    ZETA_LARGE = 1e5
    #: zetas per quadrature batch (bounds memory)
    BATCH = 128

    def __init__(self, rho, beta):
        self.rho = _positive_parameter("rho", rho, "the rank ratio r/d")
        self.beta = _positive_parameter("beta", beta, "the aspect ratio L/d")
        # spec §8.1: transpose when L < d
        self.aspect = self.beta if self.beta >= 1.0 else 1.0 / self.beta
        self.rank = self.rho if self.beta >= 1.0 else self.rho / self.beta
        self.s = math.sqrt(self.aspect)
        self.b = self.aspect - 1.0
        #: mmse / zeta as zeta -> 0
        self.small_noise_slope = perfect_recovery_alpha(self.rho, self.beta)

    def __repr__(self):
        return f"RectangularRIE(rho={self.rho!r}, beta={self.beta!r})"

    # -- quartic -------------------------------------------------------------------------------------

    def _quartic(self, z, zeta):
        """Coefficients (increasing degree in G, shape (..., 5)) of Q(G, z) (module docstring)."""
        s, b, rho = self.s, self.b, self.rank
        z, zeta = np.broadcast_arrays(np.asarray(z), np.asarray(zeta, dtype=float))
        w = z * z
        K = 2.0 * s - s**3 - rho * s * (1.0 + zeta)
        M = 1.0 - rho * (1.0 + zeta)
        if b == 0.0:  # aspect 1: Q / w, regular at z = 0 (where Q itself vanishes identically)
            return np.stack([-rho + 0.0 * z, rho * z, M + 0.0 * z, -z, zeta + 0.0 * z], axis=-1)
        return np.stack([-rho * s * s * w,
                         z * s * (b * M + rho * s * w),
                         zeta * b * b + w * K,
                         z * (2.0 * zeta * b - s * w),
                         zeta * w], axis=-1)

    def _slope(self, G, z, zeta):
        """dG/dz = -Q_z / Q_G along the root G of Q(., z)."""
        s, b, rho = self.s, self.b, self.rank
        w = z * z
        K = 2.0 * s - s**3 - rho * s * (1.0 + zeta)
        M = 1.0 - rho * (1.0 + zeta)
        q_g = (((4.0 * zeta * w * G + 3.0 * z * (2.0 * zeta * b - s * w)) * G + 2.0 * (zeta * b * b + w * K)) * G
               + z * s * (b * M + rho * s * w))
        q_z = ((((2.0 * zeta * z * G + (2.0 * zeta * b - 3.0 * s * w)) * G + 2.0 * z * K) * G
                + s * (b * M + 3.0 * rho * s * w)) * G - 2.0 * rho * s * s * z)
        return -q_z / np.where(q_g == 0, 1e-300, q_g)

    def _roots(self, z, zeta, newton_steps=2):
        """The four roots G of Q(., z) (complex, shape (..., 4)): companion eigenvalues, Newton-polished.

        Each row is scaled by its largest coefficient first: the common factor w of aspect = 1 then drops
        out, and at large aspect the coefficients (spread ~ aspect^2) stay in range.
        """
        z = np.asarray(z)
        # real x: real coefficients and a real companion matrix (LAPACK's real eigensolver, ~2.5x faster)
        coef = self._quartic(z if np.isrealobj(z) else z.astype(complex), zeta)
        coef = coef / np.max(np.abs(coef), axis=-1, keepdims=True)
        lead = coef[..., 4:5]
        # a zero leading coefficient only at z = 0 (then aspect > 1): the two infinite roots are dropped
        # to a huge value, the physical root there is the finite one
        lead = np.where(np.abs(lead) < 1e-300, 1e-300, lead)
        companion = np.zeros(coef.shape[:-1] + (4, 4), dtype=coef.dtype)
        companion[..., 1:, :3] = np.eye(3)
        companion[..., :, 3] = -coef[..., :4] / lead
        G = np.linalg.eigvals(companion).astype(complex)
        c = coef[..., None, :]
        slope_coef = c[..., 1:] * np.arange(1, 5)

        def value(g):
            return (((c[..., 4] * g + c[..., 3]) * g + c[..., 2]) * g + c[..., 1]) * g + c[..., 0]

        current = value(G)
        for _ in range(newton_steps):  # guarded: a step is kept only where it lowers |Q|
            slope = ((slope_coef[..., 3] * G + slope_coef[..., 2]) * G + slope_coef[..., 1]) * G + slope_coef[..., 0]
            trial = G - current / np.where(slope == 0, 1.0, slope)
            trial_value = value(trial)
            better = (slope != 0) & (np.abs(trial_value) < np.abs(current))
            G = np.where(better, trial, G)
            current = np.where(better, trial_value, current)
        return G

    def _real_axis(self, x, zeta):
        """G(x - i0) at real x (complex, broadcast shape), physical branch inside and outside the support."""
        x, zeta = np.broadcast_arrays(np.asarray(x, dtype=float), np.asarray(zeta, dtype=float))
        roots = self._roots(x, zeta)
        g_inside = np.take_along_axis(roots, np.argmax(roots.imag, axis=-1)[..., None], axis=-1)[..., 0]
        inside = g_inside.imag > self.REAL_ROOT_TOL * np.abs(g_inside)
        slope = self._slope(roots.real, x[..., None], zeta[..., None])
        pick = np.argmin(np.where(np.isfinite(slope), slope, np.inf), axis=-1)
        g_outside = np.take_along_axis(roots.real, pick[..., None], axis=-1)[..., 0]
        return np.where(inside, g_inside, g_outside + 0j)

    def stieltjes(self, z, zeta):
        """G(z) = integral mu(t) / (z - t) dt of the symmetrised singular-value law (physical branch).

        `z` complex array (any shape); `zeta` > 0 broadcasts against it. On the real axis: the limit from
        below, G(x - i0) = P.V. integral + i pi mu(x), and the real analytic continuation outside the
        support (module docstring, "Branches").
        """
        zeta = _check_zeta(zeta, allow_zero=False)
        z = np.asarray(z, dtype=complex)
        z, zeta = np.broadcast_arrays(z, zeta)
        on_axis = z.imag == 0
        out = np.empty(z.shape, dtype=complex)
        if np.any(on_axis):
            out[on_axis] = self._real_axis(z.real[on_axis], zeta[on_axis])
        off = ~on_axis
        if np.any(off):
            lower = np.where(z[off].imag < 0, z[off], np.conj(z[off]))
            roots = self._roots(lower, zeta[off])
            g = np.take_along_axis(roots, np.argmax(roots.imag, axis=-1)[..., None], axis=-1)[..., 0]
            out[off] = np.where(z[off].imag < 0, g, np.conj(g))
        return out

    def density(self, x, zeta):
        """Symmetrised singular-value density mu(x) of Y / (d L)^{1/4} (even in x, total mass 1)."""
        zeta = _check_zeta(zeta, allow_zero=False)
        x = np.asarray(x, dtype=float)
        roots = self._roots(x, zeta)
        g = np.take_along_axis(roots, np.argmax(roots.imag, axis=-1)[..., None], axis=-1)[..., 0]
        real = g.imag <= self.REAL_ROOT_TOL * np.abs(g)
        return np.where(real, 0.0, g.imag) / math.pi

    # -- support -------------------------------------------------------------------------------------

    def _quintic(self, zeta):
        """Coefficients (increasing degree, shape (N, 6)) of the edge quintic in W = sqrt(aspect) x^2.

        The discriminant of Q(G, z) in G is s^4 z^8 times this polynomial (sympy; module docstring); each
        coefficient is grouped by powers of rho with factored (aspect, zeta) parts, which keeps the
        (aspect - 1) factors exact near aspect = 1.
        """
        k = np.asarray(zeta, dtype=float)
        B, r = self.aspect, self.rank
        b = B - 1.0
        k1 = k + 1.0
        p0 = k * k * b**4 * (r**4 * k1**4 + 2.0 * r**3 * (B + 1.0) * (k - 1.0) * k1**2
                             + r * r * (B * B * k1**2 + 4.0 * B * (k - 1.0) ** 2 + k1**2)
                             + 2.0 * r * B * (B + 1.0) * (k - 1.0) + B * B)
        p1 = 2.0 * k * b * b * (2.0 * r**5 * k1**5 + r**4 * (B + 1.0) * k1**3 * (3.0 * k - 5.0)
                                - r**3 * k1 * (B * B * (k * k - 7.0 * k - 4.0) - B * (6.0 * k * k - 22.0 * k + 12.0)
                                               + k * k - 7.0 * k - 4.0)
                                - r * r * (B + 1.0) * ((B * B + 1.0) * (2.0 * k * k + 3.0 * k + 1.0)
                                                       - B * (2.0 * k * k + 10.0 * k - 8.0))
                                - r * B * (B * B * (3.0 * k - 2.0) - 6.0 * B + 3.0 * k - 2.0)
                                - B * B * (B + 1.0))
        p2 = (-8.0 * r**5 * k * (B + 1.0) * k1**4
              - r**4 * k1**2 * ((B * B + 1.0) * (23.0 * k * k - 40.0 * k - 1.0) + B * (18.0 * k * k + 16.0 * k + 2.0))
              - 2.0 * r**3 * (B + 1.0) * ((B * B + 1.0) * (5.0 * k**3 + 20.0 * k * k + 14.0 * k + 1.0)
                                          + B * (14.0 * k**3 - 56.0 * k * k - 4.0 * k - 2.0))
              + r * r * ((B**4 + 1.0) * (6.0 * k * k + 6.0 * k + 1.0) + (B**3 + B) * (-26.0 * k * k - 6.0 * k + 2.0)
                         + B * B * (-24.0 * k * k + 64.0 * k - 6.0))
              + 2.0 * r * B * (B + 1.0) * ((B * B + 1.0) * (3.0 * k - 1.0) + B * (2.0 - 10.0 * k))
              + B * B * b * b)
        p3 = (4.0 * r**5 * k * k1**3
              + 2.0 * r**4 * (B + 1.0) * k1 * (12.0 * k * k - 25.0 * k - 1.0)
              + 2.0 * r**3 * ((B * B + 1.0) * (11.0 * k * k + 18.0 * k + 4.0) + B * (22.0 * k * k - 10.0 * k - 2.0))
              - 2.0 * r * r * (B + 1.0) * ((B * B + 1.0) * (2.0 * k + 1.0) + B * (1.0 - 16.0 * k))
              - 2.0 * r * B * (B * B - 4.0 * B + 1.0))
        p4 = r * r * (r * r * (-8.0 * k * k + 20.0 * k + 1.0) - 2.0 * r * (B + 1.0) * (8.0 * k + 5.0)
                      + B * B - 10.0 * B + 1.0)
        p5 = np.full(k.shape, 4.0 * r**3)
        return np.stack([p0, p1, p2, p3, p4, p5], axis=-1)

    def _support(self, zeta):
        """Quadrature pieces on x >= 0 for each zeta (1-D array): lo, hi of shape (N, 5).

        Breakpoints are 0, x = sqrt(W / sqrt(aspect)) for the quintic's real zeros W > 0 (edges,
        Newton-polished), and Re x0 for its nearly real zeros x0 (CUT_RATIO: the branch points that have
        left the axis after two bulks merged, where the density has a dip). Consecutive breakpoints bound a
        piece where the density at their midpoint is positive; the others get zero width. A breakpoint inside
        a bulk only splits it. The edges are then checked (`_refine_edges`).
        """
        zeta = np.asarray(zeta, dtype=float)
        n = len(zeta)
        coef = self._quintic(zeta)
        coef = coef / np.max(np.abs(coef), axis=1, keepdims=True)
        companion = np.zeros((n, 5, 5))
        companion[:, 1:, :4] = np.eye(4)
        companion[:, :, 4] = -coef[:, :5] / coef[:, 5:6]
        zeros = np.linalg.eigvals(companion)
        real = np.abs(zeros.imag) <= self.EDGE_IMAG_TOL * np.abs(zeros)
        W = np.where(real, zeros.real, np.nan)
        slope_coef = coef[:, 1:] * np.arange(1, 6)
        for _ in range(3):  # guarded Newton on the quintic: simple zeros to machine precision
            value = sum(coef[:, k:k + 1] * W**k for k in range(6))
            slope = sum(slope_coef[:, k:k + 1] * W**k for k in range(5))
            trial = W - value / np.where(slope == 0, 1.0, slope)
            trial_value = sum(coef[:, k:k + 1] * trial**k for k in range(6))
            W = np.where(np.abs(trial_value) < np.abs(value), trial, W)
        x_zero = np.sqrt(zeros.astype(complex) / self.s)
        x_zero = np.where(x_zero.real < 0, -x_zero, x_zero)
        near = ~real & (np.abs(x_zero.imag) < self.CUT_RATIO * x_zero.real)
        x_break = np.where(near, x_zero.real, np.sqrt(np.where(W > 0, W, np.nan) / self.s))
        breaks = np.sort(np.concatenate([np.zeros((n, 1)), x_break], axis=1), axis=1)  # NaN last
        lo, hi = breaks[:, :-1], breaks[:, 1:]
        known = np.isfinite(hi)
        inside = np.zeros(lo.shape, dtype=bool)
        rows = np.broadcast_to(zeta[:, None], lo.shape)
        inside[known] = self.density((lo[known] + hi[known]) / 2.0, rows[known]) > 0
        if not np.all(np.any(inside, axis=1)):
            bad = zeta[~np.any(inside, axis=1)][0]
            raise ArithmeticError(f"no bulk found for {self!r} at zeta={bad}")
        breaks = self._refine_edges(breaks, inside, zeta)
        lo, hi = breaks[:, :-1], breaks[:, 1:]
        lo = np.where(inside, lo, 0.0)
        hi = np.where(inside, hi, 0.0)
        return lo, hi

    def _refine_edges(self, breaks, inside, zeta):
        """Check each edge (a breakpoint between an inside and an outside piece) and re-locate the bad ones.

        A good edge has density just inside it and none just outside it (1e-9 of the spectrum's top away).
        Where two or three zeros of the quintic nearly coincide (rho = 1 at zeta <= 1e-6: the smoothed
        hard edge) the companion eigenvalues place the edge only to ~1e-4 relative; those edges are bisected
        on "the density is positive" between the midpoints of the two pieces, to 2^-50 of that bracket.
        """
        n = len(zeta)
        inside_right = np.concatenate([inside, np.zeros((n, 1), dtype=bool)], axis=1)[:, 1:]  # piece right of break j
        inside_left = inside  # piece left of break j + 1 (break columns 1..5)
        is_edge = inside_left != inside_right  # (n, 5): break column j + 1
        if not np.any(is_edge):
            return breaks
        rows, cols = np.nonzero(is_edge)
        edge = breaks[rows, cols + 1]
        top = np.nanmax(breaks, axis=1)[rows]
        toward_inside = np.where(inside_right[rows, cols], 1.0, -1.0)
        step = 1e-9 * top
        good = ((self.density(edge + toward_inside * step, zeta[rows]) > 0)
                & (self.density(edge - toward_inside * step, zeta[rows]) == 0))
        if np.all(good):
            return breaks
        rows, cols, edge, toward_inside = rows[~good], cols[~good], edge[~good], toward_inside[~good]
        left = breaks[rows, cols]  # the piece left of the edge is [left, edge], the right one [edge, right]
        right = np.where(cols + 2 < breaks.shape[1], breaks[rows, np.minimum(cols + 2, breaks.shape[1] - 1)], np.nan)
        right = np.where(np.isfinite(right), right, 2.0 * edge)  # beyond the top edge
        in_point = np.where(toward_inside > 0, (edge + right) / 2.0, (left + edge) / 2.0)
        out_point = np.where(toward_inside > 0, (left + edge) / 2.0, (edge + right) / 2.0)
        breaks = breaks.copy()
        breaks[rows, cols + 1] = bisect_arrays(lambda mid: self.density(mid, zeta[rows]) > 0, in_point, out_point, 50)
        return breaks

    def edges(self, zeta):
        """Sorted edges of the bulks on x >= 0 at one noise level zeta > 0: [a1, b1] or [a1, b1, a2, b2].

        The first bulk starts at 0 for aspect = 1 (the symmetrised density is positive at 0 there).
        """
        zeta = float(_check_zeta(zeta, allow_zero=False))
        lo, hi = self._support(np.array([zeta]))
        keep = hi[0] > lo[0]
        lo, hi = lo[0][keep], hi[0][keep]
        order = np.argsort(lo)
        lo, hi = lo[order], hi[order]
        joined = np.concatenate([[True], lo[1:] > hi[:-1] * (1.0 + 1e-12)])  # pieces sharing a breakpoint
        starts = lo[joined]
        ends = np.append(hi[np.flatnonzero(joined)[1:] - 1], hi[-1])
        return np.column_stack([starts, ends]).ravel()

    # -- mmse ----------------------------------------------------------------------------------------

    def integrals(self, zeta):
        """I1 = integral_R mu / x^2 and I2 = integral_R mu^3 (spec (A.2)) for zeta > 0 (1-D arrays out).

        Cosine-mapped graded Gauss-Legendre per piece (core/rie.py's rule); I1 is 0 when aspect = 1.
        """
        zeta = np.atleast_1d(_check_zeta(zeta, allow_zero=False)).ravel()
        u, w = bulk_rule(self.LEVELS, self.NODES_PER_PANEL)
        cos_map = np.sin(np.pi * u / 2.0) ** 2  # (1 - cos(pi u)) / 2 without cancellation near u = 0
        jacobian = w * np.pi * np.sin(np.pi * u) / 2.0
        I1, I2 = np.zeros(zeta.shape), np.zeros(zeta.shape)
        for start in range(0, len(zeta), self.BATCH):
            block = zeta[start:start + self.BATCH]
            lo, hi = self._support(block)
            row, piece = np.nonzero(hi > lo)
            width = (hi - lo)[row, piece][:, None]
            x = lo[row, piece][:, None] + width * cos_map
            mu = self.density(x, block[row][:, None])
            weights = 2.0 * width * jacobian  # 2x: the integrals over R of an even density
            I2[start:start + self.BATCH] = np.bincount(row, np.sum(weights * mu**3, axis=1), minlength=len(block))
            if self.aspect != 1.0:
                I1[start:start + self.BATCH] = np.bincount(row, np.sum(weights * mu / (x * x), axis=1),
                                                           minlength=len(block))
        return I1, I2

    def mmse(self, zeta):
        """Denoising MMSE lim E||E[S|Y] - S||_F^2 / (d L) at noise variance zeta >= 0 (spec (A.2); vectorised).

        mmse(0) = 0, mmse(inf) = 1 (the entries of S have unit variance). Below ZETA_SMALL the leading
        term alpha_PR zeta; above `large_noise_switch` `large_noise_mmse` (pitfall 3: the quadrature's two O(zeta)
        terms cancel down to O(1) there).
        """
        zeta = _check_zeta(zeta)
        shape = zeta.shape
        flat = zeta.ravel()
        out = np.empty(flat.shape)
        zero, inf = flat == 0, np.isinf(flat)
        small = (flat < self.ZETA_SMALL) & ~zero
        large = (flat > self.large_noise_switch) & ~inf
        out[zero] = 0.0
        out[inf] = 1.0
        out[small] = self.small_noise_slope * flat[small]
        out[large] = self.large_noise_mmse(flat[large])
        direct = ~(zero | inf | small | large)
        k = flat[direct]
        I1, I2 = self.integrals(k)
        out[direct] = k - k * k / self.aspect**1.5 * (self.b**2 * I1 + FOUR_PI2_OVER_3 * I2)
        return out.reshape(shape)

    def large_noise_mmse(self, zeta):
        """mmse ~ 1 - 1/zeta + 1/zeta^2 - (1 + aspect / rank^2) / zeta^3 as zeta -> infinity.

        The first three terms are those of an i.i.d. Gaussian S (mmse = zeta / (1 + zeta)): the prior
        enters first at order zeta^-3, through its fourth-order (rectangular free) cumulant. That
        coefficient, -(1 + beta / rho^2) (invariant under the transposition), was identified from the
        quadrature (Richardson in 1/zeta over zeta in [50, 400] for 9 (rho, beta) pairs, to 1e-3) and is
        checked against it in tests/core/test_rectangular_rie.py; it is not derived here. Used above
        `large_noise_switch`, where the quadrature's two O(zeta) terms cancel down to O(1) (rounding
        ~ 1e-16 zeta) and the next term is below ~ 1e-15.
        """
        zeta = np.asarray(zeta, dtype=float)
        inv = 1.0 / zeta
        return 1.0 - inv + inv * inv - self.large_noise_c3 * inv**3

    @property
    def large_noise_c3(self):
        """Coefficient of -1/zeta^3 in the large-noise series: 1 + aspect / rank^2 (= 1 + beta / rho^2)."""
        return 1.0 + self.aspect / self.rank**2

    @property
    def large_noise_switch(self):
        """zeta above which `mmse` uses the series: ZETA_LARGE, later when beta / rho^2 > 1 (the series
        is one in ~ sqrt(beta) / (rho zeta))."""
        return self.ZETA_LARGE * max(1.0, math.sqrt(self.aspect) / self.rank)

    # -- denoiser ------------------------------------------------------------------------------------

    def denoise_singular_values(self, s, zeta):
        """RIE map of singular values s of Y / (d L)^{1/4} (spec §A3), any s > 0.

        s -> s - (2 zeta / sqrt(aspect)) [(aspect - 1) / (2 s) + Re G(s)], with the real continuation of G
        outside the support (module docstring, "Branches"), i.e. also for finite-size outliers. The result
        is clipped at 0: a singular value cannot be negative, and below the lower edge the (aspect - 1) / (2 s)
        term would otherwise push tiny outliers far negative (s = 0 maps to 0). zeta = 0 returns s.
        """
        zeta = float(_check_zeta(zeta))
        s = np.asarray(s, dtype=float)
        if zeta == 0.0:
            return s.copy()
        positive = s > 0
        s_safe = np.where(positive, s, 1.0)  # a zero singular value (rank-deficient Y) stays 0
        G = self._real_axis(s_safe, zeta)
        shrunk = s_safe - (2.0 * zeta / self.s) * (self.b / (2.0 * s_safe) + G.real)
        # inside the support the map is >= 0 already (tests); the clip acts on outliers below the support
        return np.where(positive & np.isfinite(shrunk), np.maximum(shrunk, 0.0), 0.0)

    def denoise(self, Y, zeta):
        """RIE estimate of S from Y = S + sqrt(zeta) Z (d x L, plain S units): thin SVD, singular-value map."""
        Y = np.asarray(Y, dtype=float)
        if Y.ndim != 2:
            raise ParameterError("Y", f"must be a d x L matrix, got shape {Y.shape}")
        d, L = Y.shape
        if not math.isclose(L / d, self.beta, rel_tol=1e-12):
            raise ParameterError("Y", f"shape {Y.shape} has L/d = {L / d}, this RIE has beta = {self.beta}",
                                 fix="build RectangularRIE(rho, beta=L/d)")
        norm = (d * L) ** 0.25
        U, s, Vt = np.linalg.svd(Y / norm, full_matrices=False)
        shrunk = self.denoise_singular_values(s, zeta)
        return (U * (shrunk * norm)) @ Vt


# ----------------------------------------------------------------------------------------------------
# MMSE table
# ----------------------------------------------------------------------------------------------------

#: noise grid of every table: log-spaced over [1e-8, 1e4], TABLE_POINTS_PER_DECADE points per decade
TABLE_ZETA_MIN, TABLE_ZETA_MAX, TABLE_POINTS_PER_DECADE = 1e-8, 1e4, 100


class RectangularMMSETable:
    """mmse(zeta) of one RectangularRIE tabulated once and interpolated (spec §8.7: an alpha sweep at fixed
    (rho, beta) then only interpolates).

    Exact `RectangularRIE.mmse` on log-spaced zeta and a PCHIP interpolant of log mmse against log zeta;
    PCHIP keeps the interpolant increasing like the data, so alpha(zeta) = (Delta + mmse) / zeta stays
    monotone between nodes, and `zeta_of_mmse` is a second PCHIP on the swapped columns, Newton-polished
    on the forward one. Outside the grid both fall back to the exact function and its asymptotic branches.
    """

    def __init__(self, rie: RectangularRIE, points_per_decade: int = TABLE_POINTS_PER_DECADE):
        self.rie = rie
        decades = math.log10(TABLE_ZETA_MAX) - math.log10(TABLE_ZETA_MIN)
        self.zeta = np.logspace(math.log10(TABLE_ZETA_MIN), math.log10(TABLE_ZETA_MAX),
                                int(round(decades * points_per_decade)) + 1)
        self.values = rie.mmse(self.zeta)
        if np.any(np.diff(self.values) <= 0):
            raise ArithmeticError(f"mmse table of {rie!r} is not increasing")
        log_zeta, log_mmse = np.log(self.zeta), np.log(self.values)
        self._forward = PchipInterpolator(log_zeta, log_mmse, extrapolate=False)
        self._inverse = PchipInterpolator(log_mmse, log_zeta, extrapolate=False)
        self.zeta.setflags(write=False)
        self.values.setflags(write=False)

    def __repr__(self):
        return f"RectangularMMSETable({self.rie!r}, points={len(self.zeta)})"

    def mmse(self, zeta):
        """Interpolated mmse at noise variance zeta >= 0 (any shape)."""
        zeta = _check_zeta(zeta)
        out = np.empty(zeta.shape)
        inside = (zeta >= self.zeta[0]) & (zeta <= self.zeta[-1])
        out[inside] = np.exp(self._forward(np.log(zeta[inside])))
        if np.any(~inside):
            out[~inside] = self.rie.mmse(zeta[~inside])
        return out

    def zeta_of_mmse(self, mmse):
        """Noise variance at which the mmse equals `mmse` (inverse of `mmse`, 0 <= mmse <= 1)."""
        m = np.asarray(mmse, dtype=float)
        bad = ~((m >= 0) & (m <= 1))
        if np.any(bad):
            raise ParameterError("mmse", f"must lie in [0, 1], got {m[bad].ravel()[0]}")
        out = np.empty(m.shape)
        inside = (m >= self.values[0]) & (m <= self.values[-1])
        log_m = np.log(m[inside])
        log_zeta = self._inverse(log_m)
        for _ in range(2):  # Newton on the forward interpolant: the exact inverse of `mmse`
            step = (log_m - self._forward(log_zeta)) / self._forward(log_zeta, 1)
            log_zeta = np.clip(log_zeta + np.where(np.isfinite(step), step, 0.0),
                               math.log(self.zeta[0]), math.log(self.zeta[-1]))
        out[inside] = np.exp(log_zeta)
        below = m < self.values[0]
        out[below] = m[below] / self.rie.small_noise_slope
        above = (m > self.values[-1]) & (m < 1)
        if np.any(above):  # 1 - mmse = t - t^2 + c3 t^3 (t = 1 / zeta < 1e-4): fixed point in t
            gap = 1.0 - m[above]
            t = gap.copy()
            for _ in range(6):
                t = gap + t * t - self.rie.large_noise_c3 * t**3
            zeta = 1.0 / t
            for _ in range(2):  # Newton on the exact function (d mmse / d zeta ~ 1 / zeta^2 there)
                zeta = zeta + (m[above] - self.rie.mmse(zeta)) * zeta * zeta * (1.0 + 2.0 / zeta)
            out[above] = zeta
        out[m == 1] = np.inf
        return out


@lru_cache(maxsize=32)
def _cached_table(rho: float, beta: float) -> RectangularMMSETable:
    return RectangularMMSETable(RectangularRIE(rho, beta))


def rectangular_mmse_table(rho, beta) -> RectangularMMSETable:
    """The MMSE table of RectangularRIE(rho, beta), built once per process (lru_cache).

    Arguments are validated before the cache so bad input never gets cached. (rho, beta) and its
    transpose (rho / beta, 1 / beta) are the same problem but are cached separately.
    """
    rie = RectangularRIE(rho, beta)
    return _cached_table(rie.rho, rie.beta)
