"""Gaussian (linear) channel y = z + sqrt(Delta) n, n ~ N(0, 1)."""

from __future__ import annotations

import numpy as np

from .base import Channel, _LOG_SQRT_2PI


class LinearChannel(Channel):
    """y = z + sqrt(Delta) n. Z_out = N(y; omega, V + Delta), g = (y - omega)/(V + Delta),
    dg = -1/(V + Delta). Delta = 0 (noiseless compressed sensing) is allowed as long as V > 0."""

    name = "linear"
    n_hermite = 40  # integrands are polynomials / quadratic logs in t: exact with few nodes

    def __init__(self, delta=0.0):
        self.delta = float(delta)
        if self.delta < 0:
            raise ValueError("delta must be >= 0")

    def sample(self, z, rng):
        z = np.asarray(z, float)
        return z + np.sqrt(self.delta) * rng.standard_normal(z.shape)

    def log_partition(self, y, omega, V):
        s = np.asarray(V, float) + self.delta
        return -0.5 * (np.asarray(y, float) - omega) ** 2 / s - 0.5 * np.log(s) - _LOG_SQRT_2PI

    def g_out(self, y, omega, V):
        y, omega, V = np.broadcast_arrays(*(np.asarray(a, float) for a in (y, omega, V)))
        s = V + self.delta
        return (y - omega) / s, -1.0 / s

    def expect_y(self, func, omega, V):
        # y = omega + sqrt(V + Delta) t: the integrands used (polynomials in y, log-Gaussians) are
        # exact or near-exact under Gauss-Hermite.
        return self._expect_gaussian(func, omega, V, self.delta, lambda s: s)

    def omega_features(self, m, V):
        return []  # g^2 is a polynomial in (y - omega): no structure in omega

    def prediction_error(self, omega, V):
        return np.broadcast_to(np.asarray(V, float) + self.delta, np.shape(omega)).astype(float)

    def plugin_error(self, rho, m, q):
        return rho - 2.0 * m + q + self.delta

    def __repr__(self):
        return f"LinearChannel(delta={self.delta})"
