"""Closed-form baselines of bilinear sequence regression (spec rie_bsr_quadratic.md §A4).

* Ridge / linear regression on the vectorised input. Flatten X_mu into a dL-vector x_mu; the labels are
  y = x . s* / sqrt(dL) + sqrt(delta) z with s* = vec(S*) of unit-variance entries, and ridge
  s_hat = argmin ||y - X s / sqrt(dL)||^2 + lam ||s||^2 has, as n, dL -> inf with n/(dL) = alpha, the per-entry
  error `ridge_mse(alpha, delta, lam)` = 1 - 2m + Q (the spec's general-lambda formula). lam = delta is the
  posterior mean for an i.i.d. N(0, 1) target (the rho -> inf limit of BSR), hence the best lam, with the
  closed form `mse_ridge(alpha, delta)` = 1 - 2 alpha / (1 + alpha + delta + sqrt((alpha - 1)^2
  + 2 (alpha + 1) delta + delta^2)) (noiseless: max(0, 1 - alpha)). It ignores the low rank of S*.
* Minimal nuclear-norm estimator: its asymptotic perfect-recovery threshold, the Donoho-Gavish-Montanari
  phase transition `alpha_mnne(rho, beta)`, in the spec's form (A4): with b = 1/beta <= 1 (after the swap
  of d and L when beta < 1, as in se.py), gamma = b (1 - rho) / (1 - rho b), gamma_pm = (1 +- sqrt gamma)^2 and the
  incomplete Marchenko-Pastur moments
      P_k(x) = (1/(2 pi gamma)) int_x^{gamma+} t^{k-1} sqrt((gamma+ - t)(t - gamma-)) dt,
  Lambda solves P_{1/2}(Lambda^2) - Lambda P_0(Lambda^2) = Lambda rho / (1 - rho) and
      alpha_MNNE = rho + b rho - b rho^2
                   + (1 - rho b) [rho Lambda^2 + (1 - rho)(P_1 - 2 Lambda P_{1/2} + Lambda^2 P_0)(Lambda^2)].
  Full rank (rho >= min(1, beta)): 1, like least squares.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import integrate, optimize

from seqphase.core.bsr.channels import check_alpha, check_beta, check_delta, check_rho, reduce_aspect


def mse_ridge(alpha, delta=0.0):
    """Per-entry error of optimal ridge (lam = delta) on the vectorised input, vectorised over alpha."""
    a = np.asarray(alpha, float)
    delta = check_delta(delta)
    root = np.sqrt((a - 1.0) ** 2 + 2.0 * (a + 1.0) * delta + delta * delta)
    return 1.0 - 2.0 * a / (1.0 + a + delta + root)


def ridge_mse(alpha, delta, lam):
    """Per-entry error of ridge with penalty lam > 0 (spec §A4: p = alpha + lam, c = alpha - lam,
    t = sqrt((p - 1)^2 + 4 lam), m = 2 alpha / (p + t + 1) the overlap, Q the squared norm; error 1 - 2m + Q).
    Vectorised over alpha and lam."""
    a, lam = np.broadcast_arrays(np.asarray(alpha, float), np.asarray(lam, float))
    delta = check_delta(delta)
    p, c = a + lam, a - lam
    t = np.sqrt((p - 1.0) ** 2 + 4.0 * lam)
    m = 2.0 * a / (p + t + 1.0)
    Q = (4.0 * a * (a * (p + t - 3.0) + (1.0 + delta) * (p + t + 1.0))
         / ((p + t + 1.0) * (p * p - 2.0 * c + t * t + 2.0 * t * (p + 1.0) + 1.0)))
    return 1.0 - 2.0 * m + Q


def _incomplete_mp_moment(k, x, gamma, lower, upper):
    """P_k(x) = (1/(2 pi gamma)) int_{max(x, lower)}^{upper} t^{k-1} sqrt((upper - t)(t - lower)) dt.

    Substituting t = lower + (upper - lower)(1 - cos theta)/2 turns the square-root edges into
    ((upper - lower)/2)^2 sin^2 theta d theta, smooth on [theta_x, pi]; at lower = 0 (beta = 1) t^{-1} sin^2 theta
    stays bounded as theta -> 0, so quad sees a smooth integrand.
    """
    half = 0.5 * (upper - lower)
    start = min(max(x, lower), upper)
    theta0 = math.acos(min(1.0, max(-1.0, 1.0 - (start - lower) / half)))

    def integrand(theta):
        s = math.sin(theta)
        t = lower + half * (1.0 - math.cos(theta))
        if t <= 0.0:  # theta = 0 at lower = 0: half^2 sin^2 / t = half (1 + cos theta) -> 2 half (k = 0), else 0
            return 2.0 * half if k == 0 else 0.0
        return t ** (k - 1.0) * half * half * s * s

    value, _ = integrate.quad(integrand, theta0, math.pi, epsabs=1e-14, epsrel=1e-12, limit=200)
    return value / (2.0 * math.pi * gamma)


@lru_cache(maxsize=256)
def alpha_mnne(rho, beta):
    """The minimal nuclear-norm perfect-recovery threshold alpha_MNNE(rho, beta) = n/(dL) (module docstring)."""
    rho, beta = reduce_aspect(rho, beta)
    if rho >= 1.0:
        return 1.0
    b = 1.0 / beta
    gamma = b * (1.0 - rho) / (1.0 - rho * b)
    lower, upper = (1.0 - math.sqrt(gamma)) ** 2, (1.0 + math.sqrt(gamma)) ** 2

    def P(k, x):
        return _incomplete_mp_moment(k, x, gamma, lower, upper)

    def balance(lam):
        x = lam * lam
        return P(0.5, x) - lam * P(0.0, x) - lam * rho / (1.0 - rho)

    # balance(0+) = P_{1/2}(0) > 0 and balance(sqrt(upper)) = -sqrt(upper) rho / (1 - rho) < 0
    lam = optimize.brentq(balance, 0.0, math.sqrt(upper), xtol=1e-15, rtol=4 * np.finfo(float).eps)
    x = lam * lam
    tail = P(1.0, x) - 2.0 * lam * P(0.5, x) + x * P(0.0, x)
    return rho + b * rho - b * rho * rho + (1.0 - rho * b) * (rho * x + (1.0 - rho) * tail)


def alpha_bar(alpha, rho, beta):
    """The low-rank sample ratio n / (r (d + L)) = alpha beta / ((1 + beta) rho) (the files' `alpha_LR`)."""
    return check_alpha(alpha) * check_beta(beta) / ((1.0 + beta) * check_rho(rho))
