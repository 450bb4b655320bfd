"""Bayes-optimal error of bilinear sequence regression (spec rie_bsr_quadratic.md §A2, §8 "BSR theory").

The state evolution has two steps:

    prior step    V = mmse_den(zeta; beta, rho): the denoising MMSE of S* from S* + sqrt(zeta) Z (Z i.i.d.
                  N(0, 1), d x L), per entry; the rectangular RIE of the shared module
                  `seqphase.core.rectangular_rie` (its per-(rho, beta) table, `denoising_mmse`)
    channel step  zeta = (delta + V) / alpha                                        (channels.py)

so the fixed points solve (A.1), alpha zeta = delta + mmse_den(zeta), and the error is MMSE = alpha zeta - delta
= mmse_den(zeta) (1 at alpha = 0, the reference files' `mmse`).

Route (`bo_state`, `bo_mmse`): alpha is explicit along the curve, alpha(zeta) = (delta + mmse_den(zeta)) / zeta,
so the curve is tabulated on CURVE_POINTS log-spaced zeta in [ZETA_MIN, ZETA_MAX] and checked decreasing beyond
rounding (CURVE_RTOL) for every (rho, beta, delta) it is asked for (spec §9 item 10: the authors checked the
uniqueness of the fixed point only through free-entropy curves at 4 points; a rise of alpha(zeta) would mean
several fixed points, and we raise `ParametricCurveError` rather than return one of them). A point is then a
bisection in log zeta inside its bracketing grid cell, vectorised over all the alphas of a call (the shared curve
solver, `CURVE`, core/parametric_curve.py).
* Noiseless: alpha(zeta) -> alpha_PR = rho (1 + beta - rho) / beta (rho < min(1, beta); else 1) as zeta -> 0,
  because mmse_den(zeta) ~ alpha_PR zeta there (spec §A5 check 1); alpha >= alpha(ZETA_MIN) is perfect recovery
  (MMSE = 0, zeta = 0).
* Noisy: alpha(zeta) -> inf as zeta -> 0, every alpha has a root; below ZETA_MIN, mmse_den is its linear
  asymptote alpha_PR zeta and the root is zeta = delta / (alpha - alpha_PR) in closed form.
* Small alpha (alpha <= alpha(ZETA_MAX) ~ (1 + delta) / ZETA_MAX): the same bisection on [ZETA_MAX,
  (1 + delta)/alpha] (alpha(zeta) <= (1 + delta)/zeta since mmse_den <= 1), where the RIE evaluates its exact
  quadrature and, above 1e5, its large-noise series. alpha = 0 is the prior: MMSE = 1, zeta = inf.
* beta < 1: d and L swap roles (`channels.reduce_aspect`).

Limits with closed forms (spec §A2 "Special limits"):
* beta = inf (`large_beta_mmse`): mmse_inf(zeta; rho) in closed form (the shared module's
  `infinite_beta_mmse`), the same parametric solve; noiseless (1 - alpha)(1 - alpha/rho) below min(rho, 1)
  (`large_beta_noiseless_mmse`, a test of the solve).
* rho -> 0 at fixed alpha_bar = n / (r (d + L)) (`low_rank_mse`): the rank-O(1) matrix factorisation, with
  h = alpha_bar / (delta + 1 - g_a g_b) and g_a, g_b of the spec; no recovery below the weak-recovery threshold
  alpha_bar_weak = (1 + delta) sqrt(beta) / (1 + beta) (`low_rank_weak_threshold`). We solve it by bisection on h
  (h (delta + 1 - g_a g_b) is increasing in h, checked in the tests); `iterate_low_rank` is the authors' damped
  iteration, kept as a cross-check.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from seqphase.core import rectangular_rie
from seqphase.core.bsr.channels import BSRChannel, check_alpha, check_beta, check_delta, check_rho, reduce_aspect
from seqphase.core.numerics import bisect_arrays, fixed_point
from seqphase.core.parametric_curve import ParametricCurve

#: the curve covers [ZETA_MIN, ZETA_MAX], the range of the RIE's table (beyond it the RIE is exact, and slow)
ZETA_MIN = 1e-8
ZETA_MAX = 1e4
#: points of the tabulated curve alpha(zeta) (and of its monotonicity check): 100 per decade
CURVE_POINTS = 1201
#: rises of alpha(zeta) between grid points up to this (relative) are the RIE quadrature's error, not extra fixed
#: points: near zeta = ZETA_MIN the noiseless curve is flat to 1e-11-1e-5 relative (alpha -> alpha_PR), and the
#: quadrature there is good to ~1e-8 relative (a development version of the RIE showed a rise of 2.1e-8 at
#: zeta = 1.35e-8 for rho = 1, beta = 2). A second fixed point would need a rise of the curve itself.
CURVE_RTOL = 1e-7
#: bisection steps in log zeta: a grid cell (width ln 10 / 100) shrinks to 1e-16 relative in zeta in 48 steps,
#: the large-noise bracket [ZETA_MAX, (1 + delta)/alpha] (< 40 e-folds) to 1e-15 in 56
BISECTION_STEPS = 56


@dataclass(frozen=True)
class BSRState:
    """An SE point: `mmse` (per entry, 1 at alpha = 0) and zeta, the effective noise of the denoising step
    (1/qhat; 0 at perfect recovery, inf at alpha = 0)."""

    mmse: float
    zeta: float


def alpha_pr(rho, beta):
    """Perfect-recovery threshold in closed form (counting: r (d + L - r) degrees of freedom per dL):
    rho (1 + beta - rho) / beta for rho < min(1, beta), else 1. It is also the small-noise slope of mmse_den."""
    return rectangular_rie.perfect_recovery_alpha(check_rho(rho), check_beta(beta))


@lru_cache(maxsize=64)
def denoising_mmse(rho, beta):
    """zeta -> mmse_den(zeta; beta, rho), vectorised: the shared rectangular RIE's per-(rho', beta') table, after
    the reduction to beta' >= 1."""
    rho, beta = reduce_aspect(rho, beta)
    return rectangular_rie.rectangular_mmse_table(rho, beta).mmse


def _alpha_of_zeta(zeta, mmse, delta):
    """alpha(zeta) = 1 / channel_step(alpha = 1)... inverted: the alpha at which zeta is the channel step of
    V = mmse(zeta), i.e. (delta + mmse(zeta)) / zeta (channels.BSRChannel.channel_step is linear in 1/alpha)."""
    zeta = np.asarray(zeta, float)
    return BSRChannel(delta).channel_step(1.0, mmse(zeta)) / zeta


def alpha_of_zeta(zeta, rho, beta, delta=0.0):
    """alpha(zeta) = (delta + mmse_den(zeta)) / zeta, vectorised."""
    return _alpha_of_zeta(zeta, denoising_mmse(check_rho(rho), check_beta(beta)), check_delta(delta))


#: alpha(zeta) on CURVE_POINTS log-spaced zeta in [ZETA_MIN, ZETA_MAX], decreasing beyond CURVE_RTOL (per
#: (rho, beta, delta)); a point by BISECTION_STEPS vectorised steps in log zeta
CURVE = ParametricCurve(alpha_of_zeta, ZETA_MIN, ZETA_MAX, CURVE_POINTS, name="zeta", params=("rho", "beta", "delta"),
                        rtol=CURVE_RTOL, bisection_steps=BISECTION_STEPS, cache=128)


def _solve_on_curve(curve, alpha, params, slope, delta):
    """(mmse, zeta) arrays for an array of alpha on `curve` (the shared solver of the finite-beta and beta = inf
    cases): alpha = 0 is the prior (mmse 1, zeta = inf); past alpha(ZETA_MIN) perfect recovery (noiseless) or the
    small-noise root zeta = delta / (alpha - slope) of alpha zeta = delta + slope zeta; below alpha(ZETA_MAX) the
    bracket [ZETA_MAX, (1 + delta) / alpha] (module docstring)."""

    def small_noise(a):
        if delta == 0.0:
            return np.zeros(a.shape), np.zeros(a.shape)
        z = delta / (a - slope)
        return slope * z, z

    return curve.solve(alpha, params, error_of=lambda z, a: a * z - delta, small_noise=small_noise,
                       large_noise=lambda a: (1.0 + delta) / a, prior_error=1.0)


def bo_mmse_zeta(alpha, rho, beta, delta=0.0):
    """(MMSE, zeta) arrays for an array of alpha at one (rho, beta, delta) (module docstring)."""
    rho, beta, delta = check_rho(rho), check_beta(beta), check_delta(delta)
    alpha = np.asarray(alpha, float)
    if np.any(~(alpha >= 0)) or np.any(~np.isfinite(alpha)):
        check_alpha(alpha[~((alpha >= 0) & np.isfinite(alpha))].ravel()[0])
    return _solve_on_curve(CURVE, alpha, (rho, beta, delta), alpha_pr(rho, beta), delta)


def bo_mmse(alpha, rho, beta, delta=0.0):
    """Bayes-optimal MMSE (per entry, 1 at alpha = 0) for an array of alpha at one (rho, beta, delta)."""
    return bo_mmse_zeta(alpha, rho, beta, delta)[0]


def bo_state(alpha, rho, beta, delta=0.0):
    """The Bayes-optimal SE point at one (alpha, rho, beta, delta)."""
    mmse, zeta = bo_mmse_zeta(np.array([check_alpha(alpha)]), rho, beta, delta)
    return BSRState(mmse=float(mmse[0]), zeta=float(zeta[0]))


def iterate_se(alpha, rho, beta, delta=0.0, *, tol=1e-13, max_iter=100_000):
    """The plain SE iteration zeta <- channel_step(alpha, mmse_den(zeta)) in log zeta from the uninformed start
    (mmse = 1); returns (state, n_iter, converged). It slows down critically near alpha_PR (spec pitfall 3);
    kept as a cross-check of `bo_state`."""
    alpha, delta = check_alpha(alpha), check_delta(delta)
    channel = BSRChannel(delta)
    mmse = denoising_mmse(check_rho(rho), check_beta(beta))

    def step(x):
        return math.log(channel.channel_step(alpha, mmse(np.array([math.exp(float(x))]))[0]))

    fp = fixed_point(step, np.array(math.log(channel.channel_step(alpha, 1.0))), tol=tol, max_iter=max_iter)
    zeta = math.exp(float(fp.x))
    return BSRState(mmse=alpha * zeta - delta, zeta=zeta), fp.n_iter, fp.converged


# ----------------------------------------------------------------------------------------------------
# beta = inf
# ----------------------------------------------------------------------------------------------------


def large_beta_denoising_mmse(zeta, rho):
    """mmse_inf(zeta; rho), the beta -> inf limit of mmse_den (spec §A2; the shared module's closed form)."""
    return rectangular_rie.infinite_beta_mmse(zeta, check_rho(rho))


def large_beta_alpha_of_zeta(zeta, rho, delta=0.0):
    """alpha(zeta) = (delta + mmse_inf(zeta)) / zeta of the beta = inf equation, vectorised."""
    return (delta + large_beta_denoising_mmse(zeta, rho)) / zeta


#: the beta = inf curve, on the same grid and checked like `CURVE` (per (rho, delta))
LARGE_BETA_CURVE = ParametricCurve(large_beta_alpha_of_zeta, ZETA_MIN, ZETA_MAX, CURVE_POINTS, name="zeta",
                                   params=("rho", "delta"), context="beta = inf", rtol=CURVE_RTOL,
                                   bisection_steps=BISECTION_STEPS)


def large_beta_mmse(alpha, rho, delta=0.0):
    """Bayes-optimal MMSE at beta = inf for an array of alpha: alpha zeta = delta + mmse_inf(zeta)."""
    rho, delta = check_rho(rho), check_delta(delta)
    mmse, _ = _solve_on_curve(LARGE_BETA_CURVE, alpha, (rho, delta), min(rho, 1.0), delta)
    return mmse


def large_beta_noiseless_mmse(alpha, rho):
    """The noiseless beta = inf closed form (1 - alpha)(1 - alpha/rho) for alpha < min(rho, 1), else 0."""
    a = np.asarray(alpha, float)
    rho = check_rho(rho)
    return np.where(a < min(rho, 1.0), (1.0 - a) * (1.0 - a / rho), 0.0)


# ----------------------------------------------------------------------------------------------------
# rho -> 0: rank O(1), in alpha_bar = n / (r (d + L))
# ----------------------------------------------------------------------------------------------------


def _low_rank_error(h, beta):
    """1 - g_a g_b at the channel precision h, with g_a = ((beta+1)^2 h^2 - beta) / ((beta+1) h (beta h + h + 1)),
    g_b = (... same numerator) / ((beta+1) h (beta h + h + beta)) (spec §A2), written without the cancellation
    of 1 - g_a g_b at large h: with H = (beta + 1) h,
        1 - g_a g_b = ((1 + beta) H^3 + 3 beta H^2 - beta^2) / (H^2 (H + 1)(H + beta)),
    positive for H >= sqrt(beta) (where g_a, g_b >= 0) and ~ 1/h as h -> inf."""
    H = (beta + 1.0) * np.asarray(h, float)
    return ((1.0 + beta) * H**3 + 3.0 * beta * H * H - beta * beta) / (H * H * (H + 1.0) * (H + beta))


def low_rank_weak_threshold(beta, delta=0.0):
    """alpha_bar_weak = (1 + delta) sqrt(beta) / (1 + beta): the overlaps g_a, g_b become positive at
    h_c = sqrt(beta) / (1 + beta), reached from the uninformed h = alpha_bar / (1 + delta)."""
    beta, delta = check_beta(beta), check_delta(delta)
    return (1.0 + delta) * math.sqrt(beta) / (1.0 + beta)


def low_rank_mse(alpha_bar, beta, delta=0.0):
    """MMSE of the rho -> 0 limit at alpha_bar = n / (r (d + L)), vectorised over alpha_bar.

    The fixed point solves F(h) = h (delta + 1 - g_a g_b) = alpha_bar on h > h_c; F is increasing from
    h_c (1 + delta) = alpha_bar_weak to inf (delta > 0) or to 1 (delta = 0: perfect recovery from alpha_bar = 1).
    Below alpha_bar_weak the overlaps stay 0: MMSE = 1. Bisection in log h (64 vectorised steps; the bracket
    [h_c, alpha_bar/delta] or [h_c, 1e12] spans < 30 e-folds, so the root is located to 1e-16 relative).
    """
    beta, delta = check_beta(beta), check_delta(delta)
    a = np.asarray(alpha_bar, float)
    h_c = math.sqrt(beta) / (1.0 + beta)
    weak = low_rank_weak_threshold(beta, delta)
    out = np.ones(a.shape)
    perfect = (a >= 1.0) if delta == 0.0 else np.zeros(a.shape, bool)
    out[perfect] = 0.0
    solve = (a > weak) & ~perfect
    if np.any(solve):
        target = a[solve]
        lo = np.full(target.shape, math.log(h_c))
        hi = np.log(np.maximum(target / delta, h_c) * 2.0) if delta > 0 else np.full(target.shape, math.log(1e12))

        def below(log_h):  # F(h) < alpha_bar: the root lies at larger h
            h = np.exp(log_h)
            return h * (delta + _low_rank_error(h, beta)) < target

        out[solve] = _low_rank_error(np.exp(bisect_arrays(below, lo, hi, 64)), beta)
    return out


def iterate_low_rank(alpha_bar, beta, delta=0.0, *, damping=0.5, tol=1e-14, max_iter=200_000):
    """The authors' scheme (`low_rank_solution`): h <- alpha_bar / (delta + 1 - g_a g_b), damped 0.5 on h, from
    the uninformed h = alpha_bar / (1 + delta), with g_a, g_b clipped at 0 (physical overlaps; below h_c the
    spec's formulas turn negative). Returns (mmse, n_iter, converged). A cross-check of `low_rank_mse`; it
    slows down critically near the thresholds."""
    beta, delta, alpha_bar = check_beta(beta), check_delta(delta), float(alpha_bar)
    h_c = math.sqrt(beta) / (1.0 + beta)

    def error(h):
        return 1.0 if h <= h_c else float(_low_rank_error(h, beta))

    fp = fixed_point(lambda h: np.array(alpha_bar / (delta + error(float(h)))), np.array(alpha_bar / (1.0 + delta)),
                     damping=damping, tol=tol, max_iter=max_iter)
    return error(float(fp.x)), fp.n_iter, fp.converged


def large_beta_low_rank_mse(alpha_bar, delta=0.0):
    """beta = inf, rho -> 0 (spec §A2): 1 - q, q = (1 + delta + alpha_bar - sqrt((alpha_bar - 1)^2
    + 2 (alpha_bar + 1) delta + delta^2)) / 2 (noiseless: max(0, 1 - alpha_bar))."""
    a = np.asarray(alpha_bar, float)
    delta = check_delta(delta)
    root = np.sqrt((a - 1.0) ** 2 + 2.0 * (a + 1.0) * delta + delta * delta)
    return 1.0 - 0.5 * (1.0 + delta + a - root)
