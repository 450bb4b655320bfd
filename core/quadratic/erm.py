"""ERM with weight decay of the extensive-width quadratic network (spec erm_quadratic.md §2, "The Nuclear Route"):
state evolution by xi-continuation, in S' units.

CONVENTIONS (the finite-d experiment `quadratic-erm`/`experiment` must use exactly these)
------------------------------------------------------------------------------------------
* Inputs x_mu ~ N(0, I_d), mu = 1..n, n = alpha d^2. Teacher W* (m* x d, m* = kappa_star d, i.i.d. N(0, 1)),
  S* = W*^T W* / m* (S' units: spectrum Marchenko-Pastur with ratio 1/kappa_star, mean 1, Tr S*^2 / d -> Q0 =
  1 + 1/kappa_star).
* Measurement matrices X_mu = (x_mu x_mu^T - I) / sqrt(d); labels
      y_mu = <X_mu, S*> + sqrt(delta) eps_mu = (x_mu^T S* x_mu - Tr S*) / sqrt(d) + sqrt(delta) eps_mu,
  eps_mu ~ N(0, 1): `delta` is the label-noise VARIANCE in these (S') label units.
* Student S = W^T W / m, W (m x d), m = kappa d (kappa >= 1: any PSD matrix, the problem is convex; kappa < 1:
  rank(S) <= kappa d). The loss the SE describes is
      L(S) = (1 / (4 n)) sum_mu (y_mu - <X_mu, S>)^2 + (lam / d) Tr S,          S PSD (rank <= kappa d),
  i.e. L(S) = c1 sum_mu (y_mu - <X_mu, S>)^2 + lam c2 Tr S with c1 = 1/(4n), c2 = 1/d. In the weights,
  Tr S = ||W||_F^2 / m, so the weight decay is (lam / (d m)) ||W||_F^2. `lam` = 0 means the limit lam -> 0+
  (the minimum-nuclear-norm interpolator where one exists, else least squares on the PSD cone).
  The follow-up code's loss ||y_hat - y||^2 / d^2 + lt Tr S / d (spec §3) is this one with lam = lt / (4 alpha).
* Outputs of the minimiser S_hat:
  - `test_error` = (1/d) ||S_hat - S*||_F^2 (S' units; Q0 at alpha -> 0, where S_hat -> 0);
  - `test_error_bo` = kappa_star * test_error = (1/d^2) ||S_hat_BO - S*_BO||_F^2 with S*_BO = W*^T W* / sqrt(m*),
    the units of the Bayes-optimal model `quadratic` (its `mse`, 1 at alpha = 0); the BO error of the same
    teacher is se.bo_mse(alpha, kappa_star, kappa_star * delta) (BO labels are sqrt(kappa_star) times ours, so
    its label-noise variance is kappa_star * delta);
  - `train_loss` = (1/(4n)) sum_mu (y_mu - <X_mu, S_hat>)^2, the data term of L at the minimiser (no lam term);
  - `rank_fraction` = rank(S_hat) / d.

DERIVATION (ours; it fixes the constants the spec leaves open)
-------------------------------------------------------------
In orthonormal coordinates of symmetric matrices (s_ii = S_ii, s_ij = sqrt(2) S_ij, N = d^2/2 of them),
<X_mu, S> = a_mu . s with a_mu of i.i.d. entries of variance 2/d (Gaussian equivalence for the x x^T - I
design). Rescaling a to variance 1/n (theta = sqrt(2 alpha d) s) gives the standard regularised least squares
with n/N = 2 alpha, whose (AMP / CGMT) fixed point is: S_hat = prox(S* + sqrt(xi) Z) with Z GOE (off-diagonal
variance 1/d, diagonal 2/d, i.e. variance 2 xi / d per orthonormal coordinate) and
    tau^2 = delta + (1 / (2 alpha)) 4 alpha E  =>  xi = tau^2 / (4 alpha),  i.e.  alpha = (E + delta/2) / (2 xi);
the prox of (lam / d) Tr on the PSD cone (rank cap: keep the top kappa d) acts on the eigenvalues of Y = S* +
sqrt(xi) Z as
    f(x) = (x - q) 1[x > b],   b = max(q, omega),   omega = the kappa-quantile of rho_xi from the top (kappa < 1),
with q = gamma lam, gamma = 1 / (1 - div / n) (the divergence correction of the loss), so
    q (1 - J / alpha) = lam,    J = div f / n = integral_{x > b} rho h (x - q),
using div f = (d^2/2) integral integral rho rho (f(x) - f(y)) / (x - y) = d^2 integral rho f h + O(d), h the
Hilbert transform (P.V.) of rho = rho_xi = MP(kappa_star) [+] semicircle(xi). Stein's lemma on Z gives the exact
risk of the spectral estimator
    E = MSE(xi, q) = Q0 + integral_{x > b} rho (q^2 - x^2) + 4 xi J,
and AMP's residual identity ||y - y_hat||^2 / n = tau^2 (1 - J / alpha)^2 gives
    train_loss = xi (alpha - J)^2 / alpha      (= lam^2 alpha xi / q^2 for lam > 0).
These are the spec's §2 equations (its "training loss" lam^2 alpha xi / q^2 + (delta/4)(1 - 2 lam / q) is the same
residual measured against the NOISELESS labels; we report the loss actually minimised).

NUMERICS
--------
* rho, h from the shared symmetric RIE (core/rie.py, SymmetricRIE(kappa_star, scale=1)): g(x - i0) = h + i pi rho on
  the support (`stieltjes`), bulks from `edges`. Integrals over x > b are a graded cosine-mapped Gauss-Legendre
  rule on each piece [max(lo, b), hi] of the support (`_graded_rule`).
* The 0/0 at small xi: E and xi both vanish in the noiseless limit. Q0 - integral_{x > b} rho x^2 is evaluated as
  integral_{x < b} rho x^2 - xi (the second moment of rho_xi is Q0 + xi), so E = integral_{x<b} rho x^2 - xi +
  q^2 integral_{x>b} rho + 4 xi J is a sum of O(xi) terms with no O(1) cancellation; E / (2 xi) stays accurate to
  xi = 1e-10 (tested against the xi -> 0 asymptotic form, thresholds.alpha_sr_statistical_dimension).
* Continuation: alpha(xi) is explicit. `ERMCurve` tabulates it on XI_POINTS log-spaced xi in [XI_MIN, XI_MAX]
  (each point: the q-equation by brentq, bracketed upward from q = lam), checks that alpha(xi) decreases
  (ERMCurveError otherwise: the regular alpha grid cannot be mapped), and a point alpha is solved by brentq in
  log xi inside the bracketing cell.
* Fold: with label noise and small lam the solution set folds back in xi near the interpolation threshold (the
  peak of the test error): at one xi the q-equation has three roots, and the table (one root per xi) jumps over an
  alpha interval (kappa_star = 0.5, kappa = 0.5, delta = 0.5, lam = 1e-3: alpha in ~[0.27, 0.36]). A point whose
  cell brentq lands on such a jump is solved on the `Fold` of that cell: the solution curve of the q-equation
  traced by pseudo-arclength continuation in (log xi, log q) (once per cell, 1-10 s), then a point by brentq
  along it. Solving at fixed alpha instead (q unknown, xi(q) from the alpha equation) is not enough: at fixed q,
  alpha(xi, q) dips below its large-xi value 1/4 and rises back, so the fixed-alpha level set turns in q (kappa_star
  = 0.1, kappa = 2, delta = 0.5, lam = 1e-7, alpha = 0.234: no xi at all for q < 0.5, two for q > 0.53).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from scipy import optimize

from seqphase.core.errors import ParameterError
from seqphase.core.rie import SymmetricRIE

XI_MIN = 1e-10
XI_MAX = 1e6
XI_POINTS = 113  # 7 per decade
#: rises of alpha(xi) up to this (relative) between grid points are rounding, beyond it non-monotone
CURVE_RTOL = 1e-9
#: graded rule per support piece: panels halving toward both ends (LEVELS below XI_FINE, LEVELS_COARSE above),
#: Gauss-Legendre nodes per panel. Measured (tests/quadratic/test_erm_se.py::test_exact_moments_of_rho_xi): mass,
#: integral rho h x and the second moment to < 1e-9, integral rho h to < 1e-8, for kappa_star in {0.1, 0.5, 1, 2}
#: and xi in [1e-10, 1e4]; 8 levels lose 1e-1 at xi = 1e-10, kappa_star = 1 (the hard-edge peak of width xi^{2/3})
LEVELS = 14
LEVELS_COARSE = 8
XI_FINE = 1e-4
NODES = 10
#: the fold's pseudo-arclength continuation in (log xi, log q): first, smallest and largest step; a step is halved
#: while the tangent turns by more than ARC_TURN_MAX (1 - cos) over it and doubled when it turns by < 1/4 of that
ARC_STEP = 0.05
ARC_STEP_MIN = 1e-4
ARC_STEP_MAX = 1.0
ARC_TURN_MAX = 2e-3
ARC_MAX_STEPS = 5000
#: lam = 0: the interpolating branch is traced down to this q; below it the start of interpolation is the q = 0
#: branch's (alpha error O(Q_FLOOR))
Q_FLOOR = 1e-10


def check_positive(value, field, what):
    value = float(value)
    if not (value > 0 and math.isfinite(value)):
        raise ParameterError(field, f"{what} must be > 0 and finite, got {value}", f"pass {field} > 0")
    return value


def check_nonnegative(value, field, what):
    value = float(value)
    if not (value >= 0 and math.isfinite(value)):
        raise ParameterError(field, f"{what} must be >= 0 and finite, got {value}", f"pass {field} >= 0")
    return value


class ERMCurveError(ParameterError):
    """alpha(xi) is not monotone for these parameters: the continuation cannot be mapped onto an alpha grid."""


@lru_cache(maxsize=4)
def _graded_rule(levels, nodes):
    """Nodes u in (0, 1) and weights of a composite Gauss-Legendre rule graded toward both ends, and the
    cosine map x = lo + (hi - lo)(1 - cos(pi u))/2 folded in: returns (t, w) with x = lo + (hi - lo) t and
    integral_lo^hi F dx ~ (hi - lo) sum w F(x). The map makes square-root edges smooth; the grading resolves
    the O(xi^{2/3}) hard-edge peak of kappa_star = 1 and the broadened atom at small xi."""
    inner = 2.0 ** -np.arange(levels, 0, -1)
    breaks = np.unique(np.concatenate([[0.0], inner, 1.0 - inner[::-1], [1.0]]))
    x, w = np.polynomial.legendre.leggauss(nodes)
    lo, hi = breaks[:-1, None], breaks[1:, None]
    u = (lo + (hi - lo) * (x + 1.0) / 2.0).ravel()
    wu = ((hi - lo) / 2.0 * w).ravel()
    t = (1.0 - np.cos(np.pi * u)) / 2.0
    weights = wu * np.pi * np.sin(np.pi * u) / 2.0
    t.setflags(write=False)
    weights.setflags(write=False)
    return t, weights


@dataclass(frozen=True)
class Integrals:
    """Integrals of rho_xi split at b: mass above b, integral_{x<b} rho x^2, integral_{x>b} rho h x^k (k = 0, 1)."""

    mass_above: float
    x2_below: float
    h0_above: float
    h1_above: float


#: entries kept by each per-xi cache of SpectralDenoising (oldest dropped first)
CACHE_SIZE = 4096


def _cached(cache, key, compute):
    """cache[key], computed once; the cache keeps the newest CACHE_SIZE keys."""
    if key not in cache:
        cache[key] = compute()
        if len(cache) > CACHE_SIZE:
            cache.pop(next(iter(cache)))
    return cache[key]


class SpectralDenoising:
    """The effective problem Y = S* + sqrt(xi) Z (S* in S' units, kappa_star) and the spectral soft threshold."""

    def __init__(self, kappa_star):
        self.kappa_star = check_positive(kappa_star, "kappa_star", "the teacher width ratio m*/d")
        self.rie = SymmetricRIE(self.kappa_star, scale=1.0)
        self.q0 = 1.0 + 1.0 / self.kappa_star
        self._bulks = {}
        self._quantiles = {}

    def bulks(self, xi):
        """Support of rho_xi as a tuple of (lo, hi) quadrature pieces, ascending (cached per xi).

        The pieces are the RIE's own: its bulks, and a single bulk cut where the density has a narrow dip (the
        real part of the quartic's complex zero pair just after two bulks merge, kappa_star < 1 at xi ~ 0.1-0.3).
        Integrating across that dip with one graded rule loses ~1e-4 (measured at kappa_star = 0.5, xi = 0.3).
        `SymmetricRIE.edges` does not report the cut; `SymmetricRIE.pieces` does."""
        key = float(xi)
        return _cached(self._bulks, key, lambda: self.rie.pieces(key))

    def top_edge(self, xi):
        return self.bulks(xi)[-1][1]

    def _nodes(self, pieces, xi):
        """x, weights, rho, h on the graded rule of each (lo, hi) piece (pieces of zero width dropped)."""
        t, w = _graded_rule(LEVELS if xi < XI_FINE else LEVELS_COARSE, NODES)
        pieces = [(lo, hi) for lo, hi in pieces if hi > lo]
        if not pieces:
            empty = np.zeros(0)
            return empty, empty, empty, empty
        lo = np.array([p[0] for p in pieces])[:, None]
        width = np.array([p[1] - p[0] for p in pieces])[:, None]
        x = (lo + width * t).ravel()
        weights = (width * w).ravel()
        g = self.rie.stieltjes(x + 0j, xi)
        return x, weights, g.imag / math.pi, g.real

    def integrals(self, xi, b):
        """Integrals of rho_xi and rho_xi h above / below the threshold b (one stieltjes call)."""
        bulks = self.bulks(xi)
        above = [(max(lo, b), hi) for lo, hi in bulks if hi > b]
        below = [(lo, min(hi, b)) for lo, hi in bulks if lo < b]
        x, w, rho, h = self._nodes(above + below, xi)
        n_above = sum(1 for lo, hi in above if hi > lo) * (len(x) // max(1, sum(1 for lo, hi in above + below
                                                                                  if hi > lo)))
        xa, wa, ra, ha = x[:n_above], w[:n_above], rho[:n_above], h[:n_above]
        xb, wb, rb = x[n_above:], w[n_above:], rho[n_above:]
        return Integrals(mass_above=float(np.sum(wa * ra)), x2_below=float(np.sum(wb * rb * xb * xb)),
                         h0_above=float(np.sum(wa * ra * ha)), h1_above=float(np.sum(wa * ra * ha * xa)))

    def mass_above(self, xi, b):
        x, w, rho, _ = self._nodes([(max(lo, b), hi) for lo, hi in self.bulks(xi) if hi > b], xi)
        return float(np.sum(w * rho))

    def quantile_from_top(self, xi, kappa):
        """omega with integral_{x > omega} rho_xi = kappa (0 < kappa < 1): the rank cap kappa d of the student.
        Cached per (xi, kappa): a brentq over ~40 mass integrals, asked again for every q at one xi (the fold's
        tangent and the alpha of each traced point)."""
        return _cached(self._quantiles, (float(xi), float(kappa)), lambda: self._quantile_from_top(xi, kappa))

    def _quantile_from_top(self, xi, kappa):
        bulks = self.bulks(xi)
        lo, hi = bulks[0][0], bulks[-1][1]
        # within a gap between two bulks the mass above is constant: the quantile is the gap's upper edge
        if len(bulks) == 2 and abs(self.mass_above(xi, bulks[1][0]) - kappa) < 1e-13:
            return bulks[1][0]
        return optimize.brentq(lambda b: self.mass_above(xi, b) - kappa, lo, hi, xtol=1e-14, rtol=1e-13)

    def risk(self, xi, q, omega=0.0):
        """(E, J, rank): the exact risk E = MSE(xi, q) of f(x) = (x - q) 1[x > max(q, omega)] (module docstring),
        the divergence term J = integral_{x>b} rho h (x - q), and the rank fraction integral_{x>b} rho."""
        b = max(q, omega)
        it = self.integrals(xi, b)
        j = it.h1_above - q * it.h0_above
        e = it.x2_below - xi + q * q * it.mass_above + 4.0 * xi * j
        return e, j, it.mass_above


@dataclass(frozen=True)
class ERMState:
    """One SE point of the ERM (module docstring for the units)."""

    alpha: float
    xi: float
    q: float
    omega: float
    test_error: float
    test_error_bo: float
    train_loss: float
    rank_fraction: float
    divergence: float  # J: the divergence term; J / alpha = 1 - lam / q


class ERMCurve:
    """The SE of ERM at fixed (kappa_star, kappa, delta, lam), as a function of xi and of alpha."""

    def __init__(self, kappa_star, kappa, delta=0.0, lam=0.0):
        self.denoising = SpectralDenoising(kappa_star)
        self.kappa_star = self.denoising.kappa_star
        self.kappa = check_positive(kappa, "kappa", "the student width ratio m/d")
        self.delta = check_nonnegative(delta, "delta", "the label-noise variance")
        self.lam = check_nonnegative(lam, "lam", "the weight decay")
        self._table = None
        self._folds = {}

    def __repr__(self):
        return f"ERMCurve(kappa_star={self.kappa_star}, kappa={self.kappa}, delta={self.delta}, lam={self.lam})"

    def omega(self, xi):
        return self.denoising.quantile_from_top(xi, self.kappa) if self.kappa < 1.0 else 0.0

    def alpha_of(self, xi, e):
        """The alpha equation: alpha = (E + delta/2) / (2 xi) (module docstring)."""
        return (e + self.delta / 2.0) / (2.0 * xi)

    def q_equation(self, xi, q, omega):
        """J / alpha(xi, q) + lam / q - 1 (the lam term only for lam > 0): zero on the SE solution curve."""
        e, j, _ = self.denoising.risk(xi, q, omega)
        return 2.0 * xi * j / (e + self.delta / 2.0) - 1.0 + (self.lam / q if self.lam > 0 else 0.0)

    def _state(self, xi, q, omega, risk=None):
        e, j, rank = risk if risk is not None else self.denoising.risk(xi, q, omega)
        alpha = self.alpha_of(xi, e)
        train = xi * (alpha - j) ** 2 / alpha
        return ERMState(alpha=alpha, xi=xi, q=q, omega=omega, test_error=e, test_error_bo=self.kappa_star * e,
                        train_loss=train, rank_fraction=rank, divergence=j)

    def state_at_xi(self, xi):
        """Solve the q-equation at this xi (module docstring) and return the SE point (its alpha is an output)."""
        xi = float(xi)
        den = self.denoising
        omega = self.omega(xi)
        top = den.top_edge(xi)

        def excess(q):  # decreasing in q
            return self.q_equation(xi, q, omega)

        if self.lam >= top:  # S_hat = 0: J = 0 at q = lam, lam / q = 1
            return self._state(xi, self.lam, omega)
        q_lo = self.lam
        if excess(q_lo) <= 0.0:  # lam -> 0+ only (lam > 0 gives J/alpha >= 0 at q = lam): q = 0, no interpolation
            return self._state(xi, 0.0, omega)
        q = optimize.brentq(excess, q_lo, top, xtol=1e-14, rtol=1e-12)
        return self._state(xi, q, omega)

    # -- continuation ---------------------------------------------------------------------------------
    def table(self):
        """(log xi grid, states, alpha) of the continuation; raises ERMCurveError if alpha(xi) rises."""
        if self._table is None:
            log_xi = np.linspace(math.log(XI_MIN), math.log(XI_MAX), XI_POINTS)
            states = [self.state_at_xi(math.exp(v)) for v in log_xi]
            alpha = np.array([s.alpha for s in states])
            rise = np.diff(alpha) / alpha[:-1]
            if np.any(rise > CURVE_RTOL):
                bad = int(np.argmax(rise > CURVE_RTOL))
                raise ERMCurveError(
                    "params", f"alpha(xi) is not decreasing at xi = {math.exp(log_xi[bad]):.3g} for {self!r}: "
                    "several SE fixed points, the alpha grid cannot be mapped", "choose another (kappa_star, kappa)")
            self._table = (log_xi, states, alpha)
        return self._table

    def alpha_range(self):
        _, _, alpha = self.table()
        return float(alpha[-1]), float(alpha[0])

    def recovered(self):
        """True where the curve reaches xi -> 0 at finite alpha with zero error (noiseless, lam -> 0+, exact
        recovery beyond alpha(XI_MIN)): points beyond it are S_hat = S*."""
        _, states, _ = self.table()
        s = states[0]
        return self.delta == 0.0 and self.lam == 0.0 and s.test_error < 1e-6

    def at_alpha(self, alpha):
        """The SE point at sample complexity alpha (brentq in log xi inside the bracketing table cell)."""
        alpha = check_positive(alpha, "alpha", "the sample complexity n/d^2")
        log_xi, states, curve = self.table()
        if alpha >= curve[0]:
            if self.recovered():
                rank = min(self.kappa_star, 1.0)
                return ERMState(alpha=alpha, xi=0.0, q=0.0, omega=0.0, test_error=0.0, test_error_bo=0.0,
                                train_loss=0.0, rank_fraction=rank, divergence=alpha)
            raise ParameterError("params.alpha", f"alpha = {alpha:g} is beyond the SE table of {self!r} "
                                 f"({curve[0]:.4g} at xi = {XI_MIN:g})", f"use alpha < {curve[0]:.4g}")
        if alpha <= curve[-1]:
            raise ParameterError("params.alpha", f"alpha = {alpha:g} is below the SE table of {self!r} "
                                 f"({curve[-1]:.3g} at xi = {XI_MAX:g})", f"use alpha > {curve[-1]:.3g}")
        i = int(np.searchsorted(-curve, -alpha))  # curve[i-1] > alpha >= curve[i]
        if curve[i] == alpha:
            return states[i]
        target = math.log(alpha)
        found = {}

        def f(v):
            s = self.state_at_xi(math.exp(v))
            found[v] = s
            return math.log(s.alpha) - target

        v = optimize.brentq(f, log_xi[i - 1], log_xi[i], xtol=1e-12, rtol=1e-12)
        state = found[v] if v in found else self.state_at_xi(math.exp(v))
        if abs(state.alpha - alpha) > 1e-6 * alpha:
            # alpha(xi) jumps over this alpha: near the interpolation threshold with label noise and small lam the
            # q-equation has several roots at one xi (kappa_star = 2, delta = 0.5, lam = 1e-7: q = 0.41 and q ~ 0
            # at xi = 1.907), the solution curve folds back in xi and the xi-table skips the fold
            return self.fold(i).at_alpha(alpha)
        return state

    # -- the fold ---------------------------------------------------------------------------------------
    def q_residual(self, log_xi, log_q):
        """`q_equation` at (log xi, log q): its zero set is the SE solution curve the folds trace."""
        xi = math.exp(log_xi)
        return self.q_equation(xi, math.exp(log_q), self.omega(xi))

    def alpha_at(self, log_xi, log_q):
        xi = math.exp(log_xi)
        e, _, _ = self.denoising.risk(xi, math.exp(log_q), self.omega(xi))
        return self.alpha_of(xi, e)

    @property
    def folds(self):
        """The folds traced so far (table cell index -> Fold)."""
        return dict(self._folds)

    def fold(self, i):
        """The solution curve through table cell i (where alpha jumps), traced once and cached: a `Fold`."""
        if i not in self._folds:
            self._folds[i] = Fold(self, i)
        return self._folds[i]


class Fold:
    """The SE solution curve through one table cell where the xi-parametrisation jumps (module docstring, Fold).

    The curve {q_residual(log xi, log q) = 0} is followed by pseudo-arclength continuation in the plane (log xi,
    log q), which needs no monotone coordinate: predictor along the tangent (perpendicular to the residual's
    gradient), corrector back onto the curve along the gradient direction (brentq), step halved where the
    tangent turns fast and doubled where it is straight. Along the curve alpha must fall (one SE point per
    alpha, the convex problem); a rise is an ERMCurveError. lam > 0: from table state i-1 (small q) to state i.
    lam = 0: the states below the fold have q = 0 exactly (no interpolation), so the curve is followed backward
    from state i down to q = Q_FLOOR (the point where interpolation starts, alpha_interp); alphas between there
    and state i-1 lie on the q = 0 branch, solved by brentq in xi on alpha(xi, 0)."""

    def __init__(self, curve, i):
        self.curve = curve
        log_xi, states, _ = curve.table()
        below, above = states[i - 1], states[i]
        self.log_xi_below = float(log_xi[i - 1])
        self.alpha_below = below.alpha
        self.q_zero_branch = below.q == 0.0
        if above.q == 0.0:
            raise ERMCurveError("params", f"alpha(xi) jumps on the q = 0 branch of {curve!r} at xi = "
                                f"{math.exp(log_xi[i]):.4g}", "choose another (kappa_star, kappa, lam)")
        if self.q_zero_branch:
            start = (log_xi[i], math.log(above.q))
            points = self._trace(start, end=None)[::-1]
        else:
            start, end = (log_xi[i - 1], math.log(below.q)), (log_xi[i], math.log(above.q))
            points = self._trace(start, end)
        self.points = np.array(points)  # rows (log xi, log q, alpha), alpha falling
        rises = np.diff(self.points[:, 2]) > CURVE_RTOL * self.points[1:, 2]
        if np.any(rises):
            raise ERMCurveError("params", f"alpha rises along the fold of {curve!r} at xi = "
                                f"{math.exp(self.points[int(np.argmax(rises)), 0]):.4g}: several SE fixed points",
                                "choose another (kappa_star, kappa, lam)")

    def _tangent(self, z, eps=1e-6):
        f = self.curve.q_residual
        grad = np.array([(f(z[0] + eps, z[1]) - f(z[0] - eps, z[1])) / (2 * eps),
                         (f(z[0], z[1] + eps) - f(z[0], z[1] - eps)) / (2 * eps)])
        normal = grad / np.hypot(*grad)
        return np.array([-normal[1], normal[0]]), normal

    def _onto_curve(self, z, normal, reach):
        """The point z + c normal on the curve, |c| <= reach grown up to 8 times (None if no sign change)."""
        f = self.curve.q_residual

        def g(c):
            return f(*(z + c * normal))

        g0 = g(0.0)
        if g0 == 0.0:
            return z
        for _ in range(8):
            for side in (reach, -reach):
                if g0 * g(side) < 0:
                    lo, hi = sorted((0.0, side))
                    return z + optimize.brentq(g, lo, hi, xtol=1e-13, rtol=1e-13) * normal
            reach *= 2
        return None

    def _trace(self, start, end):
        """Points (log xi, log q, alpha) from start to end (or, end None, down to q = Q_FLOOR)."""
        curve = self.curve
        z = np.array(start, dtype=float)
        goal = None if end is None else np.array(end, dtype=float)
        points = [(z[0], z[1], curve.alpha_at(*z))]
        tangent, _ = self._tangent(z)
        heading = goal - z if goal is not None else np.array([0.0, -1.0])  # lam = 0: toward q -> 0
        if tangent @ heading < 0:
            tangent = -tangent
        step = ARC_STEP
        for _ in range(ARC_MAX_STEPS):
            if goal is not None and np.hypot(*(goal - z)) <= step:
                points.append((goal[0], goal[1], curve.alpha_at(*goal)))
                return points
            if goal is None and z[1] <= math.log(Q_FLOOR):
                return points
            new = self._onto_curve(z + step * tangent, self._tangent(z + step * tangent)[1], step / 2)
            if new is None or np.hypot(*(new - z)) > 2 * step:
                if step <= ARC_STEP_MIN:
                    break
                step /= 2
                continue
            moved = (new - z) / np.hypot(*(new - z))
            next_tangent, _ = self._tangent(new)
            if next_tangent @ moved < 0:
                next_tangent = -next_tangent
            # step control: the turn of the tangent over the step, not the corrector's size, so the
            # sharp turns of the fold get small steps and the long straight branches large ones
            turn = 1.0 - float(next_tangent @ tangent)
            if turn > ARC_TURN_MAX and step > ARC_STEP_MIN:
                step = max(step / 2, ARC_STEP_MIN)
                continue
            z, tangent = new, next_tangent
            points.append((z[0], z[1], curve.alpha_at(*z)))
            if turn < ARC_TURN_MAX / 4:
                step = min(2 * step, ARC_STEP_MAX)
        raise ERMCurveError("params", f"the fold of {curve!r} could not be traced from xi = {math.exp(start[0]):.4g}",
                            "choose another (kappa_star, kappa, lam)")

    def at_alpha(self, alpha):
        """The SE point at alpha inside this cell."""
        curve, pts = self.curve, self.points
        if self.q_zero_branch and alpha >= pts[0, 2]:
            return self._on_zero_branch(alpha)
        if not pts[-1, 2] <= alpha <= pts[0, 2]:
            raise ERMCurveError("params.alpha", f"alpha = {alpha:g} is outside the fold of {curve!r} "
                                f"[{pts[-1, 2]:.6g}, {pts[0, 2]:.6g}]", "report this")
        k = min(max(int(np.searchsorted(-pts[:, 2], -alpha)), 1), len(pts) - 1)  # pts[k-1, 2] >= alpha >= pts[k, 2]
        # between two traced points: along their chord, each point projected onto the curve
        chord = pts[k, :2] - pts[k - 1, :2]
        length = float(np.hypot(*chord))
        normal = np.array([-chord[1], chord[0]]) / length

        def on_curve(t):
            z = self._onto_curve(pts[k - 1, :2] + t * chord, normal, length)
            if z is None:
                raise ERMCurveError("params.alpha", f"alpha = {alpha:g}: the fold of {curve!r} left its chord",
                                    "report this")
            return z

        t = optimize.brentq(lambda t: math.log(curve.alpha_at(*on_curve(t)) / alpha), 0.0, 1.0,
                            xtol=1e-12, rtol=1e-12)
        log_xi, log_q = on_curve(t)
        xi = math.exp(log_xi)
        return curve._state(xi, math.exp(log_q), curve.omega(xi))

    def _on_zero_branch(self, alpha):
        """lam = 0, alpha between the start of interpolation and state i-1: q = 0, brentq in log xi."""
        curve, pts = self.curve, self.points
        if alpha >= self.alpha_below:
            raise ERMCurveError("params.alpha", f"alpha = {alpha:g} is not in this fold of {curve!r}", "report this")

        def excess_alpha(v):
            xi = math.exp(v)
            e, _, _ = curve.denoising.risk(xi, 0.0, curve.omega(xi))
            return math.log(curve.alpha_of(xi, e) / alpha)

        if excess_alpha(pts[0, 0]) >= 0:  # within O(Q_FLOOR) of alpha_interp: the first traced point
            xi = math.exp(pts[0, 0])
            return curve._state(xi, math.exp(pts[0, 1]), curve.omega(xi))
        xi = math.exp(optimize.brentq(excess_alpha, self.log_xi_below, pts[0, 0], xtol=1e-12, rtol=1e-12))
        return curve._state(xi, 0.0, curve.omega(xi))


@lru_cache(maxsize=64)
def erm_curve(kappa_star, kappa, delta=0.0, lam=0.0):
    """The ERMCurve of one (kappa_star, kappa, delta, lam), built once per process (its table is lazy)."""
    return ERMCurve(kappa_star, kappa, delta, lam)


def erm_state(alpha, kappa_star, kappa, delta=0.0, lam=0.0):
    """The ERM SE point at (alpha, kappa_star, kappa, delta, lam)."""
    return erm_curve(float(kappa_star), float(kappa), float(delta), float(lam)).at_alpha(alpha)


def check_covered(params, method="se"):
    """Refuse, before anything runs, the parameter combinations the equations do not cover.

    Ranges (kappa_star > 0, kappa > 0, delta >= 0, lam >= 0) are the model's Param bounds. Beyond them: a rank-
    capped student (kappa < 1) in the limit lam -> 0+ (lam = 0). The rank-capped problem is non-convex and its SE
    can have several fixed points; at lam -> 0+ the q = 0 (least-squares) branch with the cap b = omega is a
    spurious one at large xi (test error above Q0, alpha(xi) rising: measured at kappa_star = 0.1 with kappa = 0.2,
    delta = 0 and kappa = 0.5, delta = 0.5), so the continuation cannot be mapped onto alpha without a free-energy
    selection that the spec's equations do not give. The threshold method needs lam -> 0+, hence kappa >= 1."""
    kappa = params.get("kappa")
    lam = params.get("lam", 0.0)
    if kappa is not None and kappa < 1.0 and (method == "threshold" or lam == 0.0):
        what = "the thresholds (defined at lam -> 0+)" if method == "threshold" else "lam = 0 (the limit lam -> 0+)"
        raise ParameterError("params.kappa", f"a rank-capped student (kappa = {kappa:g} < 1) with {what} is not "
                             "covered: the non-convex SE has several fixed points there",
                             "use kappa >= 1 (convex), or lam > 0 for kappa < 1")
    return params
