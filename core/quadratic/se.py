"""Bayes-optimal error of the extensive-width quadratic network (spec rie_bsr_quadratic.md §B2, §8 "EW theory").

In S' units (S' = W*^T W* / m, spectrum Marchenko-Pastur with mean 1 and variance 1/kappa):

    prior step    mmse'(t) = mmse_RIE(t): the symmetric RIE of S' from S' + sqrt(t) GOE
                  (`seqphase.core.rie`: SymmetricRIE(rho = kappa, scale = 1), evaluated through the
                  per-kappa table of the AIM normalisation, `prior_mmse`)
    channel step  1/t = qhat = 4 alpha / (delta_th + 2 mmse'),  delta_th = delta / kappa   (channels.py)

so the fixed points solve 2 alpha t = mmse_RIE(t) + delta_th / 2 and the error in paper units (1 at alpha = 0,
the reference files' `gen_error`) is

    MMSE = kappa mmse_RIE(t) = 2 kappa alpha t - delta / 2.

Route (`bo_state`): alpha is explicit along the curve, alpha(t) = (mmse_RIE(t) + delta_th/2) / (2 t), so the
curve is tabulated on CURVE_POINTS log-spaced t in [T_MIN, T_MAX], checked to be decreasing (beyond rounding, CURVE_RTOL) (a
non-monotone alpha(t) would mean several fixed points: `ParametricCurveError` rather than one of them), and a
point is solved by brentq in log t inside the bracketing grid cell (the shared curve solver, `CURVE`,
core/parametric_curve.py).
* Noiseless: alpha(t) -> (2 kappa - kappa^2)/2 = alpha_PR as t -> 0 (mmse_RIE ~ (2 kappa - kappa^2) t for
  kappa < 1, ~ t for kappa >= 1), so alpha >= alpha(T_MIN) is perfect recovery: MMSE = 0, qhat = inf.
* Noisy: alpha(t) -> inf as t -> 0, every alpha has a root; below T_MIN mmse_RIE is its linear asymptote and
  the root is t = delta_th / (4 alpha - 2 slope) in closed form (mmse' = slope t).
The plain SE iteration t <- (delta_th + 2 mmse_RIE(t)) / (4 alpha) (`iterate_se`) reaches the same point; it
slows down critically near alpha_PR (spec pitfall 3) and is kept as a cross-check.

Small width (`small_width_mse`, spec §B5): kappa -> 0 at fixed alpha_bar = alpha / kappa, MMSE -> 1 for
alpha_bar <= 1/2, 4 alpha_bar (1 - alpha_bar) on [1/2, 1], 0 beyond.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from seqphase.core.numerics import fixed_point
from seqphase.core.parametric_curve import ParametricCurve
from seqphase.core.quadratic.channels import QuadraticChannel, check_delta, check_kappa

#: the curve and the root search in t = 1/qhat cover [T_MIN, T_MAX]
T_MIN = 1e-8
T_MAX = 1e12
#: points of the tabulated curve alpha(t) (and of its monotonicity check)
CURVE_POINTS = 2000  # 100 per decade
#: increases of alpha(t) between grid points up to this (relative) are rounding, not extra fixed points: at
#: small kappa the noiseless curve is flat to ~1e-13 relative for t < 1e-4 (alpha_PR - alpha(t) is tiny there),
#: below the RIE quadrature's ~1e-11 relative accuracy
CURVE_RTOL = 1e-10


@dataclass(frozen=True)
class QuadraticState:
    """An SE point: `mse` (paper units, kappa mmse', 1 at alpha = 0), `mse_prime` (S' units), t = 1/qhat
    (the effective noise of the prior step; 0 at perfect recovery) and qhat."""

    mse: float
    mse_prime: float
    t: float
    qhat: float


@lru_cache(maxsize=32)
def prior_mmse(kappa):
    """t -> mmse_RIE(t) of S' = W W^T / m, vectorised: the shared RIE's per-kappa table.

    S' is SymmetricRIE(kappa, scale=1); we evaluate it through the AIM normalisation (scale = sqrt(kappa),
    spectrum variance 1) with the exact identity mmse_1(t) = mmse_sqrt(kappa)(kappa t) / kappa (core/rie.py
    docstring). Why: the RIE switches to its large-noise series above delta = 1e5 in its own units, and that
    series is an expansion in (free cumulant) / delta, i.e. in 1/(kappa t) for scale 1: at scale 1 and
    kappa <~ 0.005 the switch lands where the series is still wrong (kappa = 0.001: a jump of x2.9 in
    alpha(t) at t = 1e5). In the AIM normalisation the switch sits at kappa t = 1e5, where it is accurate, and
    the table (delta in [1e-8, 1e4]) is the one the AIM family shares at rho = kappa.
    """
    from seqphase.core import rie

    kappa = float(kappa)
    table = rie.mmse_table(kappa)

    def mmse(t):
        return table.mmse(kappa * np.asarray(t, float)) / kappa

    return mmse


def small_noise_slope(kappa):
    """mmse_RIE(t) / t as t -> 0: 2 kappa - kappa^2 (kappa < 1), 1 (kappa >= 1)."""
    kappa = float(kappa)
    return 2.0 * kappa - kappa * kappa if kappa < 1.0 else 1.0


def alpha_of_t(t, kappa, delta=0.0):
    """alpha(t) = 1 / (t * channel_step(alpha = 1)) = (mmse_RIE(t) + delta_th / 2) / (2 t), vectorised."""
    channel = QuadraticChannel(delta, kappa)
    t = np.asarray(t, float)
    return 1.0 / (t * channel.channel_step(1.0, prior_mmse(channel.kappa)(t)))


#: alpha(t) on CURVE_POINTS log-spaced t in [T_MIN, T_MAX], decreasing beyond CURVE_RTOL (per (kappa, delta))
CURVE = ParametricCurve(alpha_of_t, T_MIN, T_MAX, CURVE_POINTS, name="t", params=("kappa", "delta"),
                        rtol=CURVE_RTOL)


def _state(t, kappa):
    mse_prime = float(prior_mmse(kappa)(np.array([t]))[0])
    return QuadraticState(mse=kappa * mse_prime, mse_prime=mse_prime, t=t, qhat=1.0 / t)


def bo_state(alpha, kappa, delta=0.0):
    """The Bayes-optimal SE point at (alpha, kappa, delta) (module docstring)."""
    alpha, kappa, delta = float(alpha), check_kappa(kappa), check_delta(delta)
    channel = QuadraticChannel(delta, kappa)
    slope = small_noise_slope(kappa)

    def small_noise(a):
        if delta == 0.0:  # beyond alpha(T_MIN) -> alpha_PR: perfect recovery
            return np.zeros(a.shape), np.zeros(a.shape)
        t = channel.delta_th / (4.0 * a - 2.0 * slope)  # below T_MIN mmse_RIE(t) = slope t
        return slope * t, t

    mse_prime, t = CURVE.solve(np.array([alpha]), (kappa, delta), error_of=lambda t, a: prior_mmse(kappa)(t),
                               small_noise=small_noise)
    mse_prime, t = float(mse_prime[0]), float(t[0])
    # past alpha(T_MIN) the closed form's paper-unit error is (kappa slope) t, the association it was stored with
    mse = kappa * slope * t if alpha >= CURVE.table(kappa, delta)[1][0] else kappa * mse_prime
    return QuadraticState(mse=mse, mse_prime=mse_prime, t=t, qhat=1.0 / t if t > 0 else math.inf)


def bo_mse(alpha, kappa, delta=0.0):
    """MMSE in paper units (1 at alpha = 0) for an array of alpha at one (kappa, delta)."""
    alpha = np.asarray(alpha, float)
    return np.array([bo_state(a, kappa, delta).mse for a in alpha.ravel()]).reshape(alpha.shape)


def iterate_se(alpha, kappa, delta=0.0, *, tol=1e-13, max_iter=100_000, t0=None):
    """The plain SE iteration t <- 1/channel_step(alpha, mmse_RIE(t)) in log t, from the uninformed
    t0 = (delta_th + 2 / kappa) / (4 alpha) (mmse' at alpha = 0 is 1/kappa); returns (state, n_iter,
    converged). Slow near alpha_PR; a cross-check of `bo_state`."""
    alpha, kappa, delta = float(alpha), check_kappa(kappa), check_delta(delta)
    channel = QuadraticChannel(delta, kappa)
    mmse = prior_mmse(kappa)
    if t0 is None:
        t0 = 1.0 / channel.channel_step(alpha, 1.0 / kappa)

    def step(x):
        t = math.exp(float(x))
        return math.log(1.0 / channel.channel_step(alpha, mmse(np.array([t]))[0]))

    fp = fixed_point(step, np.array(math.log(t0)), tol=tol, max_iter=max_iter)
    t = math.exp(float(fp.x))
    return _state(t, kappa), fp.n_iter, fp.converged


def small_width_mse(alpha_bar):
    """kappa -> 0 at fixed alpha_bar = alpha/kappa: 1 (alpha_bar <= 1/2), 4 alpha_bar (1 - alpha_bar)
    (1/2 <= alpha_bar <= 1), 0 beyond (spec §B5; BSR's beta = 1 low-rank curve)."""
    a = np.asarray(alpha_bar, float)
    return np.where(a <= 0.5, 1.0, np.where(a >= 1.0, 0.0, 4.0 * a * (1.0 - a)))
