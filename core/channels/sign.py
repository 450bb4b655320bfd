"""Sign channel (perceptron) y = sign(z)."""

from __future__ import annotations

import numpy as np
from scipy import special

from .base import Channel, H

_SQRT_HALF_PI = np.sqrt(np.pi / 2.0)


def _mills_terms(u):
    """R(u) = phi(u)/Phi(u) and K(u) = R (u + R) = -R'(u) >= 0, stably for all real u.

    Phi(u)/phi(u) = sqrt(pi/2) erfcx(-u/sqrt 2) (no underflow for u -> -inf). For u << 0,
    u + R = (1 - t M)/M with t = -u, M = 1/R, and 1 - tM cancels catastrophically, so there we use
    the asymptotic series 1 - tM = t^-2 - 3 t^-4 + 15 t^-6 - 105 t^-8 + 945 t^-10 (relative error
    < 1e-13 for t > 30).
    """
    u = np.asarray(u, float)
    with np.errstate(divide="ignore", over="ignore"):
        M = _SQRT_HALF_PI * special.erfcx(-u / np.sqrt(2.0))  # Phi/phi, +inf for u > ~38
        R = 1.0 / M
    far = u < -30.0
    t2 = np.where(far, u * u, 1.0)
    inv = 1.0 / t2
    series = inv * (1 - inv * (3 - inv * (15 - inv * (105 - inv * 945))))
    with np.errstate(invalid="ignore", over="ignore"):
        K = np.where(far, series / np.where(far, M, 1.0) ** 2, R * (u + R))
    K = np.where(np.isfinite(M), K, 0.0)
    return R, K


class SignChannel(Channel):
    """y = sign(z) in {-1, +1}. With u = y omega / sqrt V: Z_out = Phi(u) = H(-u),
    g = y phi(u) / (sqrt V Phi(u)), dg = -R(u)(u + R(u)) / V with R = phi/Phi."""

    name = "sign"

    def sample(self, z, rng):
        return np.where(np.asarray(z) >= 0, 1.0, -1.0)

    def log_partition(self, y, omega, V):
        return special.log_ndtr(np.asarray(y, float) * omega / np.sqrt(V))

    def g_out(self, y, omega, V):
        y, omega, V = np.broadcast_arrays(*(np.asarray(a, float) for a in (y, omega, V)))
        sv = np.sqrt(V)
        R, K = _mills_terms(y * omega / sv)
        return y * R / sv, -K / V

    def expect_y(self, func, omega, V):
        omega = np.asarray(omega, float)
        sv = np.sqrt(np.asarray(V, float))
        tot = 0.0
        for y in (-1.0, 1.0):  # discrete support, weighted by Z_out(y) = Phi(y omega / sqrt V)
            tot = tot + special.ndtr(y * omega / sv) * func(np.full(omega.shape, y), omega, V)
        return tot

    def prediction_error(self, omega, V):
        # Bayes-optimal label predictor sign(omega): error P(sign z != sign omega) = H(|omega|/sqrt V)
        return H(np.abs(np.asarray(omega, float)) / np.sqrt(V))

    def plugin_error(self, rho, m, q):
        if q <= 0 or rho <= 0:
            return 0.5
        return float(np.arccos(np.clip(m / np.sqrt(rho * q), -1.0, 1.0)) / np.pi)
