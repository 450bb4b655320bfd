"""Output channels P(y | z) for GLMs with a scalar pre-activation z (p = 1).

Conventions
-----------
* The channel acts on z ~ N(omega, V) (the "cavity" Gaussian of GAMP / SE):
  Z_out(y, omega, V) = int N(z; omega, V) P(y | z) dz   (a probability for discrete y, a density
  otherwise).
* g_out = d_omega log Z_out = (E[z | y, omega, V] - omega) / V and dg = d_omega g_out
  = Var[z | y, omega, V] / V^2 - 1 / V.
* In SE, omega = sqrt(m) xi with xi ~ N(0, 1), V = rho - m, and y ~ P(y | omega, V) (the
  Bayes-optimal, Nishimori point), where m is the overlap and rho = E z^2 = E x^2.
* All methods broadcast numpy arrays y / omega / V.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from ..quadrature import gauss_hermite

_LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def H(x):
    """Gaussian tail H(x) = P(xi > x) = erfc(x / sqrt 2) / 2."""
    return 0.5 * special.erfc(np.asarray(x, float) / np.sqrt(2.0))


def logcosh(x):
    ax = np.abs(x)
    return ax + np.log1p(np.exp(-2.0 * ax)) - np.log(2.0)


def sech2(x):
    e = np.exp(-2.0 * np.abs(x))
    return 4.0 * e / (1.0 + e) ** 2


class Channel:
    """Base class. Subclasses implement ``sample``, ``log_partition``, ``g_out``, ``expect_y``,
    ``prediction_error`` and ``plugin_error``.

    Attributes
    ----------
    name : registry name.
    p : number of indices (1 here).
    even : True if P(y | z) = P(y | -z) (then omega = 0 is an exact fixed point of AMP/SE and
        E[z | y] = 0: weak recovery needs alpha above a stability threshold).
    """

    name = "channel"
    p = 1
    even = False
    #: Gauss-Hermite nodes for expectations over the Gaussian noise that generates y
    n_hermite = 120

    def sample(self, z, rng):
        raise NotImplementedError

    def log_partition(self, y, omega, V):
        raise NotImplementedError

    def g_out(self, y, omega, V):
        """(g, dg): g = d_omega log Z_out, dg = d_omega g (analytic)."""
        raise NotImplementedError

    def expect_y(self, func, omega, V):
        """E_{y ~ P(y | omega, V)}[func(y, omega, V)], vectorised over the array omega."""
        raise NotImplementedError

    def omega_features(self, m, V):
        """(centre, width) features in xi (omega = sqrt(m) xi) for the outer SE quadrature."""
        if m <= 0 or V <= 0:
            return []
        return [(0.0, float(np.sqrt(V / m)))]

    def prediction_error(self, omega, V):
        raise NotImplementedError

    def plugin_error(self, rho, m, q):
        raise NotImplementedError

    # helper for continuous channels: y = T(omega + sqrt(V + noise) t) with t ~ N(0,1)
    def _expect_gaussian(self, func, omega, V, var_extra, transform):
        t, w = gauss_hermite(self.n_hermite)
        omega = np.asarray(omega, float)
        V = np.asarray(V, float)
        om = omega[..., None]
        Vb = V[..., None] if V.ndim else V
        s = om + np.sqrt(Vb + var_extra) * t
        vals = func(transform(s), om, Vb)
        return vals @ w

    def __repr__(self):
        return f"{type(self).__name__}()"
