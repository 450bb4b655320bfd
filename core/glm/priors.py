"""Separable priors P0(x) for GLM / GAMP, with their input denoisers and scalar-channel quantities.

Conventions
-----------
* ``rho = E x^2`` (second moment of P0).
* Input "partition function" Z0(B, A) = int P0(x) exp(B x - A x^2 / 2) dx; the posterior
  P(x | B, A) ∝ P0(x) exp(B x - A x^2/2) has mean f_in(B, A) = d_B log Z0 and variance d_B f_in.
* Scalar (Bayes-optimal) channel at SNR ``mhat``: B = mhat x0 + sqrt(mhat) xi with x0 ~ P0, xi ~ N(0,1),
  A = mhat. ``mmse(mhat) = E var(x | B, A)`` and ``free_entropy(mhat) = psi_P0(mhat) = E log Z0``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from seqphase.core.numerics import gauss_hermite, gaussian_panels, logcosh, sech2


class Prior:
    """Base class of separable priors. Subclasses define ``rho``, ``name``, ``mean`` (E x),
    ``sample``, ``denoise``, ``log_partition`` and ``mmse`` / ``free_entropy``."""

    name = "prior"
    rho = 1.0
    mean = 0.0

    def sample(self, rng, size):
        raise NotImplementedError

    def denoise(self, B, A):
        """Posterior (mean, variance) of x under P0(x) e^{Bx - A x^2/2}; B, A broadcast."""
        raise NotImplementedError

    def log_partition(self, B, A):
        """log Z0(B, A)."""
        raise NotImplementedError

    def mmse(self, mhat):
        raise NotImplementedError

    def free_entropy(self, mhat):
        raise NotImplementedError

    def mhat_for_mmse(self, v):
        """Inverse of ``mmse``: the SNR mhat >= 0 with mmse(mhat) = v (0 if v >= rho).

        Generic: brentq on log mmse as a function of log mhat (mmse is decreasing from rho to 0;
        log-log keeps relative accuracy both near rho and near perfect recovery).
        """
        v = float(v)
        if v >= self.rho:
            return 0.0
        if v <= 0:
            return math.inf
        lv = math.log(v)

        def f(t):
            return math.log(max(self.mmse(math.exp(t)), 1e-300)) - lv

        lo, hi = -40.0, 40.0
        if f(lo) < 0:  # v extremely close to rho: first-order expansion mmse ~ rho - rho^2 mhat
            return (self.rho - v) / self.rho**2
        while f(hi) > 0 and hi < 700:
            hi += 20.0
        return math.exp(optimize.brentq(f, lo, hi, xtol=1e-13, rtol=1e-12))

    def __repr__(self):
        return f"{type(self).__name__}(rho={self.rho})"


class GaussianPrior(Prior):
    """x ~ N(0, 1): rho = 1, f_in = B/(1+A), var = 1/(1+A), mmse(mhat) = 1/(1+mhat)."""

    name = "gaussian"
    rho = 1.0

    def sample(self, rng, size):
        return rng.standard_normal(size)

    def denoise(self, B, A):
        B, A = np.broadcast_arrays(np.asarray(B, float), np.asarray(A, float))
        var = 1.0 / (1.0 + A)
        return B * var, var.copy()

    def log_partition(self, B, A):
        B, A = np.asarray(B, float), np.asarray(A, float)
        return 0.5 * B**2 / (1.0 + A) - 0.5 * np.log1p(A)

    def mmse(self, mhat):
        return 1.0 / (1.0 + float(mhat))

    def free_entropy(self, mhat):
        # E B^2 = mhat^2 + mhat, so E log Z0 = mhat/2 - log(1+mhat)/2.
        mhat = float(mhat)
        return 0.5 * mhat - 0.5 * math.log1p(mhat)

    def mhat_for_mmse(self, v):
        v = float(v)
        if v >= 1.0:
            return 0.0
        return 1.0 / v - 1.0


class RademacherPrior(Prior):
    """x = +-1 with probability 1/2: rho = 1, log Z0 = log cosh B - A/2, f_in = tanh B, var = sech^2 B."""

    name = "rademacher"
    rho = 1.0

    def sample(self, rng, size):
        return rng.choice(np.array([-1.0, 1.0]), size=size)

    def denoise(self, B, A):
        B, A = np.broadcast_arrays(np.asarray(B, float), np.asarray(A, float))
        return np.tanh(B), sech2(B)

    def log_partition(self, B, A):
        return logcosh(np.asarray(B, float)) - 0.5 * np.asarray(A, float)

    def _rule(self, mhat):
        # By symmetry x0 = +1: B = mhat + sqrt(mhat) xi; the posterior switches where B ~ 0, i.e.
        # xi = -sqrt(mhat), over a width 1/sqrt(mhat) in xi.
        s = math.sqrt(mhat)
        return gaussian_panels([(-s, 1.0 / s)]) if mhat > 0 else gauss_hermite(2)

    def mmse(self, mhat):
        mhat = float(mhat)
        if mhat <= 0:
            return 1.0
        xi, w = self._rule(mhat)
        return float(w @ sech2(mhat + math.sqrt(mhat) * xi))

    def free_entropy(self, mhat):
        mhat = float(mhat)
        if mhat <= 0:
            return 0.0
        xi, w = self._rule(mhat)
        return float(w @ logcosh(mhat + math.sqrt(mhat) * xi)) - 0.5 * mhat


class GaussBernoulliPrior(Prior):
    """x = 0 w.p. 1 - rho, x ~ N(0, 1) w.p. rho; second moment rho.

    Z0 = (1-rho) + rho (1+A)^{-1/2} exp(B^2 / (2(1+A))); the posterior weight of the Gaussian
    component is pi1 = expit(L), L = log(rho/(1-rho)) - log(1+A)/2 + B^2/(2(1+A)), and
    f_in = pi1 B/(1+A), var = pi1/(1+A) + pi1 (1-pi1) B^2/(1+A)^2 (written without cancellation).
    """

    name = "gauss-bernoulli"

    def __init__(self, rho=0.5):
        rho = float(rho)
        if not 0.0 < rho < 1.0:
            raise ValueError("GaussBernoulliPrior needs 0 < rho < 1")
        self.rho = rho

    def sample(self, rng, size):
        return rng.standard_normal(size) * (rng.random(size) < self.rho)

    def _logit(self, B, A):
        return (math.log(self.rho) - math.log1p(-self.rho) - 0.5 * np.log1p(A)
                + 0.5 * B**2 / (1.0 + A))

    def denoise(self, B, A):
        B, A = np.broadcast_arrays(np.asarray(B, float), np.asarray(A, float))
        L = self._logit(B, A)
        p1, p0 = special.expit(L), special.expit(-L)
        r = B / (1.0 + A)
        return p1 * r, p1 / (1.0 + A) + p1 * p0 * r**2

    def log_partition(self, B, A):
        B, A = np.asarray(B, float), np.asarray(A, float)
        return np.logaddexp(math.log1p(-self.rho),
                            math.log(self.rho) - 0.5 * np.log1p(A) + 0.5 * B**2 / (1.0 + A))

    def _components(self, mhat):
        """The marginal of B is a mixture: (1-rho) N(0, mhat) [x0 = 0] + rho N(0, mhat(1+mhat)).

        Returns [(weight, scale s, (nodes, weights))] with B = s xi; each rule is refined around the
        posterior switch |B*| = sqrt(2(1+A) log((1-rho)/rho sqrt(1+A))), of width ~ (1+A)/|B*| in B,
        expressed in that component's own xi scale (width ~ 1/sqrt(mhat) for the x0 != 0 component).
        """
        A = mhat
        arg = math.log((1 - self.rho) / self.rho) + 0.5 * math.log1p(A)
        out = []
        for wt, s in ((1 - self.rho, math.sqrt(mhat)), (self.rho, math.sqrt(mhat * (1 + mhat)))):
            feats = []
            if arg > 0:
                bstar = math.sqrt(2 * (1 + A) * arg)
                width = (1 + A) / bstar / s
                feats = [(bstar / s, width), (-bstar / s, width)]
            else:  # no switch: pi1 > 1/2 everywhere; the structure is at B = 0 on scale sqrt(1+A)
                feats = [(0.0, math.sqrt(1 + A) / s)]
            out.append((wt, s, gaussian_panels(feats)))
        return out

    def mmse(self, mhat):
        mhat = float(mhat)
        if mhat <= 0:
            return self.rho
        tot = 0.0
        for wt, s, (xi, w) in self._components(mhat):
            tot += wt * float(w @ self.denoise(s * xi, mhat)[1])
        return tot

    def free_entropy(self, mhat):
        mhat = float(mhat)
        if mhat <= 0:
            return 0.0
        tot = 0.0
        for wt, s, (xi, w) in self._components(mhat):
            tot += wt * float(w @ self.log_partition(s * xi, mhat))
        return tot

    def __repr__(self):
        return f"GaussBernoulliPrior(rho={self.rho})"


PRIORS = {
    "gaussian": GaussianPrior,
    "rademacher": RademacherPrior,
    "gauss-bernoulli": GaussBernoulliPrior,
}
