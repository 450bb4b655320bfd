"""Perfect-recovery threshold of the noiseless quadratic network, two independent ways (spec §B5).

* Closed form (counting): alpha_PR = kappa - kappa^2/2 (kappa < 1), 1/2 (kappa >= 1): the degrees of freedom
  per d^2 of a rank-m PSD d x d matrix (md - m(m - 1)/2) or of a full symmetric one (d^2/2), one equation per
  sample. In the SE it is the limit alpha(t -> 0) = slope / 2 of the parametric curve (se.py).
* Bisection: the smallest alpha at which the SE error (`se.bo_state`, root-finding on the curve with the RIE
  quadrature) falls below `mse_cut`. Near alpha_PR the error is ~ (alpha_PR - alpha) (kappa != 1) or
  ~ (alpha_PR - alpha)^{3/2} (kappa = 1, the hard edge of Marchenko-Pastur), so the bisection sits below the
  closed form by a small relative amount (measured: tests/quadratic/test_quadratic_thresholds.py).
There is no perfect recovery with label noise (delta > 0): the error stays > 0 for every alpha.
"""

from __future__ import annotations

import math

from seqphase.core.quadratic import se
from seqphase.core.quadratic.channels import check_kappa
from seqphase.core.search import section_search


def alpha_pr(kappa):
    """alpha_PR(kappa) in closed form."""
    kappa = check_kappa(kappa)
    return kappa - kappa * kappa / 2.0 if kappa < 1.0 else 0.5


def recovered(alpha, kappa, mse_cut):
    """The bisection's predicate at one alpha (one probe): noiseless SE error < mse_cut (paper units)."""
    return bool(se.bo_state(alpha, kappa, 0.0).mse < mse_cut)


def alpha_pr_bisection_route(kappa, *, mse_cut=1e-4, rtol=1e-9, k=1):
    """Smallest alpha with noiseless SE error < mse_cut (paper units), by bisection on [1e-3 alpha_PR, 2]:
    a route of rounds of k probes (core/search.py, the bisection placement: the serial bisection's value
    whatever k). Returns (value, bracket ends); NaN when the bracket holds no transition."""
    kappa = check_kappa(kappa)
    return section_search("bisection", lambda a: (recovered, {"alpha": a, "kappa": kappa, "mse_cut": mse_cut}),
                          1e-3 * alpha_pr(kappa), 2.0, rtol, k, placement="bisection")


# ----------------------------------------------------------------------------------------------------
# ERM with weight decay (model "quadratic-erm", spec erm_quadratic.md §2; conventions in erm.py)
# ----------------------------------------------------------------------------------------------------
#
# * Strong recovery alpha_SR(kappa_star), noiseless, lam -> 0+, convex student (kappa >= 1):
#   - dedicated equation (`alpha_sr_statistical_dimension`): the xi -> 0 limit of E / (2 xi) along the curve is the
#     statistical dimension per d^2 of the descent cone of Tr on the PSD cone at S* (rank kappa_star d):
#         alpha_SR = kappa_star - kappa_star^2/2 + min_t [kappa_star t^2 + (1 - kappa_star) E (u - t)_+^2],
#     u ~ semicircle of variance (1 - kappa_star)/2 (the GOE block on the null space of S*, per sqrt(d)); t is the
#     threshold q / sqrt(xi) up to scale; 1/2 for kappa_star >= 1 (S* in the interior: a half-space). This is the
#     asymptotic form of the SE at small xi, derived independently of the quadrature (no 0/0).
#   - curve (stored as `alpha_sr_bisection`; `sr_recovered` a probe of model.erm_sr_route): the smallest alpha
#     whose SE test error is < mse_cut, searched on the continuation (erm.py, which evaluates E without the O(1)
#     cancellation down to xi = 1e-10).
# * Interpolation alpha_interp(kappa_star, kappa, delta), lam -> 0+:
#   - dedicated equation (`alpha_interp_equation`): on the q = 0 branch, interpolation (J = alpha) starts where
#     alpha(xi, q = 0) = J(xi, 0) = integral_{x > omega+} rho h x; root in xi by brentq (bracketed on a log
#     grid), alpha_interp = alpha(xi*, 0).
#   - curve (stored as `alpha_interp_bisection`; `interp_exceeded` a probe of model.erm_interp_route): the
#     smallest alpha whose SE training loss at a small lam > 0 (full q-equation, no lam -> 0+ branch logic)
#     exceeds train_cut.
#   With delta = 0 and kappa >= kappa_star the student interpolates at every alpha (S* is feasible): inf.

import numpy as np  # noqa: E402  (appended section)

from seqphase.core.quadratic import erm as _erm  # noqa: E402  (erm imports no thresholds)


def _semicircle_excess_square(tau):
    """E (v - tau)_+^2 for v on the semicircle of radius 1 (density (2/pi) sqrt(1 - v^2))."""
    from scipy import integrate

    if tau >= 1.0:
        return 0.0
    lo = max(tau, -1.0)
    return integrate.quad(lambda v: (v - tau) ** 2 * math.sqrt(max(1.0 - v * v, 0.0)) * 2.0 / math.pi, lo, 1.0,
                          epsabs=1e-15, epsrel=1e-13, limit=200)[0]


def alpha_sr_statistical_dimension(kappa_star):
    """alpha_SR(kappa_star) from the statistical dimension (comment above); returns (alpha_SR, t*)."""
    from scipy import optimize

    k = _erm.check_positive(kappa_star, "kappa_star", "the teacher width ratio m*/d")
    if k >= 1.0:
        return 0.5, 0.0
    s = math.sqrt((1.0 - k) / 2.0)  # std of the null-space semicircle

    def excess(t):
        return k * t * t + (1.0 - k) * 4.0 * s * s * _semicircle_excess_square(t / (2.0 * s))

    res = optimize.minimize_scalar(excess, bounds=(0.0, 2.0 * s), method="bounded", options={"xatol": 1e-12})
    return k - k * k / 2.0 + float(res.fun), float(res.x)


def sr_bracket(kappa_star):
    """The alpha bracket of the alpha_SR search: [1.01 x the lowest alpha of the SE table, 1]."""
    k = _erm.check_positive(kappa_star, "kappa_star", "the teacher width ratio m*/d")
    return 1.01 * _erm.erm_curve(k, 2.0, 0.0, 0.0).alpha_range()[0], 1.0


def sr_recovered(kappa_star, alpha, *, mse_cut=1e-6):
    """The alpha_SR search's predicate at one alpha (one probe): noiseless lam -> 0+ SE error < mse_cut."""
    k = _erm.check_positive(kappa_star, "kappa_star", "the teacher width ratio m*/d")
    return bool(_erm.erm_curve(k, 2.0, 0.0, 0.0).at_alpha(alpha).test_error < mse_cut)


def interpolation_criterion(curve, xi):
    """alpha(xi, q = 0) - J(xi, 0) on the lam -> 0+ q = 0 branch (> 0: not interpolating)."""
    e, j, _ = curve.denoising.risk(xi, 0.0, curve.omega(xi))
    alpha = curve.alpha_of(xi, e)
    return alpha - j, alpha


def alpha_interp_equation(kappa_star, kappa, delta, *, xi_lo=1e-8, xi_hi=1e6, points=141):
    """alpha_interp (lam -> 0+) from the dedicated equation; inf when the student interpolates at every alpha."""
    from scipy import optimize

    curve = _erm.ERMCurve(kappa_star, kappa, delta, 0.0)
    grid = np.logspace(math.log10(xi_lo), math.log10(xi_hi), points)
    crit = np.array([interpolation_criterion(curve, xi)[0] for xi in grid])
    # crit > 0 at small xi (large alpha: no interpolation) and < 0 at large xi; take the last sign change
    change = np.nonzero((crit[:-1] > 0) & (crit[1:] <= 0))[0]
    if not len(change):
        if delta == 0.0 and np.all(crit <= 0):
            return math.inf
        raise _erm.ERMCurveError("params", f"no interpolation threshold found for kappa_star = {kappa_star}, "
                                 f"kappa = {kappa}, delta = {delta} on xi in [{xi_lo:g}, {xi_hi:g}]",
                                 "check the parameters")
    i = int(change[-1])
    xi_star = math.exp(optimize.brentq(lambda v: interpolation_criterion(curve, math.exp(v))[0],
                                       math.log(grid[i]), math.log(grid[i + 1]), xtol=1e-13, rtol=1e-13))
    return interpolation_criterion(curve, xi_star)[1]


def interp_bracket(kappa_star, kappa, delta, lam, *, alpha_max=5.0):
    """The alpha bracket of the alpha_interp search: [1.01 x the lowest alpha of the SE table at weight
    decay lam, min(alpha_max, 0.99 x its highest)] (raises erm.ERMCurveError when the table cannot be
    mapped onto alpha)."""
    curve = _erm.erm_curve(float(kappa_star), float(kappa), float(delta), float(lam))
    return 1.01 * curve.alpha_range()[0], min(alpha_max, 0.99 * curve.alpha_range()[1])


def interp_exceeded(kappa_star, kappa, delta, lam, alpha, *, train_cut=1e-9):
    """The alpha_interp search's predicate at one alpha (one probe): SE training loss > train_cut."""
    curve = _erm.erm_curve(float(kappa_star), float(kappa), float(delta), float(lam))
    return bool(curve.at_alpha(alpha).train_loss > train_cut)
