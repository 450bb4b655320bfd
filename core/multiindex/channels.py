"""Multi-index output channels y = g(z), z in R^p, for the Gaussian cavity z ~ N(omega, V).

Interface (all batched over samples; y (n,), omega (n, p), V (p, p) or (n, p, p)):

* ``sample(z, rng) -> y`` for z (n, p);
* ``posterior(y, omega, V) -> (logZ, mean, second)``: log Z_out (probability or density of y),
  E[z | y, omega, V] and E[z z^T | y, omega, V] by vectorised quadrature (see `posterior.py`);
* ``g_out(y, omega, V) -> (g (n, p), dg (n, p, p))``: the protocol of `core/channel.py`,
  g = V^-1 (E[z|y] - omega) and dg = V^-1 Cov[z|y] V^-1 - V^-1 (analytic from the posterior moments,
  no finite differences);
* ``cond_moments(y) -> (E[z|y], E[z z^T|y])`` at omega = 0, V = I (threshold code);
* ``y_rule(fine)``: a rule (nodes, weights) for integrals over y, Lebesgue measure (continuous y) or
  counting measure (discrete y); E_{y|omega,V} f = sum_k w_k exp(logZ(y_k, omega, V)) f(y_k);
* ``base_law()``: (nodes, probabilities) of the law of y at omega = 0, V = I.

Channel names (registry `MI_CHANNELS`): "z1z2", "sign-z1z2", "norm2" (||z||^2, p = 1, 2), "z1z2z3",
"sign-z1z2z3", "committee3" (sum_{k<=3} sign z_k), "staircase" (z1^2 + sign(z1 z2 z3)),
"square" (z^2, p = 1) and "abs" (|z|, p = 1).

`MIChannel` subclasses the protocol `core.channel.Channel`. The p = 1 channels "square" and "abs" ARE
the scalar closed-form channels of `core/channel.py` (`SquareChannel`, `AbsChannel`): their g_out,
posterior and sample are the scalar kernel's (the GLM evaluates the same code), only the threshold
interface (cond_moments, y_rule, base_law) is added here. "norm2" with p = 1 keeps its own two-root
posterior (the same law as "square", evaluated by logsumexp over z = +-sqrt(y); the tests check the
two agree to rounding).
"""

from __future__ import annotations

import itertools

import numpy as np

from seqphase.core.channel import AbsChannel, Channel, NoisyChannel, SquareChannel
from seqphase.core.contract import Likelihood
from seqphase.core.errors import ParameterError
from seqphase.core.numerics import panel_rule

from . import posterior as post

#: largest p any channel takes (the stored p x p variables are padded to this size)
P_MAX = 3


class MIChannel(Channel, Likelihood):
    """A multi-index channel: a `seqphase.Likelihood` (``labels``, ``log_likelihood``, ``sample``; a
    channel whose y is a function of z with a continuous y is ``noiseless`` and has `noisy`), with the
    closed-form posterior moments that g_out is derived from and the threshold interface (see the module
    docstring). The closed forms are overrides of what the derived route
    (`plugin_channel.DerivedVectorChannel`) computes from the likelihood."""

    name = "mi-channel"
    p = 1
    even = True  # E[z | y] = 0 at omega = 0, V = I
    noiseless = True  # every shipped channel with a continuous y is a function of z

    @property
    def discrete(self):
        return self.labels is not None

    def sample(self, z, rng):
        raise NotImplementedError

    def log_likelihood(self, y, z):
        raise ValueError(f"{type(self).__name__} is noiseless (y a function of z): it has no finite "
                         "likelihood; use its noisy(delta) form")

    def noiseless_value(self, z):
        """f(z) of a noiseless channel, z (..., p)."""
        z = np.asarray(z, float)
        return self.sample(z.reshape(-1, self.p), None).reshape(z.shape[:-1])

    def noisy(self, delta):
        """y = f(z) + sqrt(delta) n: the finite likelihood of a noiseless channel y = f(z)."""
        if not self.noiseless:
            raise ValueError(f"{type(self).__name__} has a finite likelihood: it needs no noisy form")
        return NoisyChannel(self, delta)

    def label_values(self):
        """The labels of a discrete y as an array (ParameterError for a continuous y)."""
        if self.labels is None:
            raise ParameterError("params.channel", f"{self.name} has a continuous y (labels = None)",
                                 "declare the labels of a discrete y")
        return np.asarray(self.labels, float)

    def _posterior(self, y, omega, V):
        raise NotImplementedError

    def posterior(self, y, omega, V):
        y = np.asarray(y, float).reshape(-1)
        omega = np.asarray(omega, float).reshape(y.shape[0], self.p)
        V = np.asarray(V, float)
        if V.shape[-2:] != (self.p, self.p):
            raise ParameterError("V", f"expected a {self.p}x{self.p} covariance, got shape {V.shape}")
        V = np.broadcast_to(V, (y.shape[0], self.p, self.p))
        V, _ = post.checked_cov(V, self.p)
        return self._posterior(y, omega, V)

    def g_out(self, y, omega, V):
        y = np.asarray(y, float).reshape(-1)
        omega = np.asarray(omega, float).reshape(y.shape[0], self.p)
        V = np.broadcast_to(np.asarray(V, float), (y.shape[0], self.p, self.p))
        logZ, mean, second = self.posterior(y, omega, V)
        Vi = np.linalg.inv(0.5 * (V + np.swapaxes(V, 1, 2)))
        cov = second - mean[:, :, None] * mean[:, None, :]
        cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))
        g = np.einsum("nij,nj->ni", Vi, mean - omega)
        dg = np.einsum("nij,njk,nkl->nil", Vi, cov, Vi) - Vi
        bad = ~np.isfinite(logZ)  # label impossible under N(omega, V) (numerically): no information
        if np.any(bad):
            g[bad] = 0.0
            dg[bad] = 0.0
        return g, dg

    def cond_moments(self, y):
        y = np.asarray(y, float).reshape(-1)
        n = y.shape[0]
        _, mean, second = self.posterior(y, np.zeros((n, self.p)), np.eye(self.p))
        return mean, second

    def base_law(self, fine=True):
        y, w = self.y_rule(fine)
        n = y.shape[0]
        logZ, _, _ = self.posterior(y, np.zeros((n, self.p)), np.eye(self.p))
        return y, w * np.exp(logZ)

    def __repr__(self):
        return f"{type(self).__name__}(p={self.p})"


# ---------------------------------------------------------------------------------------------
class SignPatternChannel(MIChannel):
    """y = f(sign z): the posterior is a Gaussian restricted to a union of orthants."""

    noiseless = False
    n_genz = 24

    def label(self, s):  # s (..., p) of +-1
        raise NotImplementedError

    @property
    def labels(self):
        pats = np.array(list(itertools.product((1.0, -1.0), repeat=self.p)))
        return tuple(float(v) for v in np.unique(self.label(pats)))

    def log_likelihood(self, y, z):
        """0 where y is the label of z's sign pattern, -inf elsewhere (sign 0 counts as +, as `sample`)."""
        z = np.asarray(z, float)
        return np.where(self.label(np.where(z >= 0, 1.0, -1.0)) == np.asarray(y, float), 0.0, -np.inf)

    def patterns(self, value):
        pats = np.array(list(itertools.product((1.0, -1.0), repeat=self.p)))
        return [tuple(s) for s in pats if self.label(s[None])[0] == value]

    def sample(self, z, rng):
        return self.label(np.where(np.asarray(z) >= 0, 1.0, -1.0)).astype(float)

    def _posterior(self, y, omega, V):
        n = y.shape[0]
        logZ = np.full(n, -np.inf)
        mean = np.zeros((n, self.p))
        second = np.zeros((n, self.p, self.p))
        known = self.label_values()
        if not np.all(np.isin(y, known)):
            raise ParameterError("y", f"labels of channel {self.name!r} must be in {list(known)}")
        for value in known:
            mask = y == value
            if not np.any(mask):
                continue
            lz, m, s = post.orthant_union(omega[mask], V[mask], self.patterns(value), self.n_genz)
            logZ[mask], mean[mask], second[mask] = lz, m, s
        return logZ, mean, second

    def y_rule(self, fine=True):
        y = self.label_values().astype(float)
        return y, np.ones_like(y)

    def cond_moments(self, y):
        """Exact orthant enumeration at omega = 0, V = I: E[z | s] = sqrt(2/pi) s and
        E[z z^T | s] = I + (2/pi)(s s^T - diag) for each orthant s, averaged over the orthants of y."""
        y = np.asarray(y, float).reshape(-1)
        mean = np.zeros((y.shape[0], self.p))
        second = np.zeros((y.shape[0], self.p, self.p))
        for value in self.label_values():
            pats = np.array(self.patterns(value))
            m = np.sqrt(2 / np.pi) * pats.mean(0)
            ss = np.einsum("ki,kj->ij", pats, pats) / len(pats)
            sec = np.eye(self.p) + (2 / np.pi) * (ss - np.diag(np.diag(ss)))
            mask = y == value
            mean[mask] = m
            second[mask] = sec
        return mean, second

    def base_law(self, fine=True):
        y = self.label_values().astype(float)
        pats = np.array(list(itertools.product((1.0, -1.0), repeat=self.p)))
        lab = self.label(pats)
        return y, np.array([(lab == v).mean() for v in y])


class SignZ1Z2(SignPatternChannel):
    name, p = "sign-z1z2", 2

    def label(self, s):
        return np.prod(s, axis=-1)


class SignZ1Z2Z3(SignPatternChannel):
    name, p = "sign-z1z2z3", 3

    def label(self, s):
        return np.prod(s, axis=-1)


class Committee3(SignPatternChannel):
    name, p, even = "committee3", 3, False

    def label(self, s):
        return np.sum(s, axis=-1)


# ---------------------------------------------------------------------------------------------
class Z1Z2(MIChannel):
    name, p = "z1z2", 2
    n_nodes = 48

    def sample(self, z, rng):
        return z[:, 0] * z[:, 1]

    def _posterior(self, y, omega, V):
        return post.product2(y, omega, V, self.n_nodes)

    def y_rule(self, fine=True):
        a, b = (-40.0, np.log(80.0)) if fine else (-24.0, np.log(40.0))
        s, w = panel_rule(a, b, 1.0 if fine else 2.0, 10 if fine else 6)
        t = np.exp(s)
        return np.concatenate([-t[::-1], t]), np.concatenate([(w * t)[::-1], w * t])


class Z1Z2Z3(MIChannel):
    name, p = "z1z2z3", 3
    n_outer, n_inner = 32, 32

    def sample(self, z, rng):
        return z[:, 0] * z[:, 1] * z[:, 2]

    def _posterior(self, y, omega, V):
        return post.product3(y, omega, V, self.n_outer, self.n_inner)

    def y_rule(self, fine=True):
        a, b = (-50.0, np.log(400.0)) if fine else (-30.0, np.log(200.0))
        s, w = panel_rule(a, b, 1.0 if fine else 2.5, 10 if fine else 6)
        t = np.exp(s)
        return np.concatenate([-t[::-1], t]), np.concatenate([(w * t)[::-1], w * t])


class Norm2(MIChannel):
    """y = ||z||^2 in p dims (p = 1: phase retrieval z^2)."""

    name = "norm2"
    n_angle = 256

    def __init__(self, p=2):
        if p not in (1, 2, 3):
            raise ParameterError("params.p", f"norm2 is implemented for p <= {P_MAX}, got {p}",
                                 f"use p in 1..{P_MAX}")
        self.p = int(p)

    def sample(self, z, rng):
        return np.sum(np.asarray(z) ** 2, axis=-1)

    def _posterior(self, y, omega, V):
        if np.any(y <= 0):
            raise ParameterError("y", "labels of ||z||^2 must be positive")
        r = np.sqrt(y)
        if self.p == 1:
            parts = []
            for s in (1.0, -1.0):
                z = s * r
                lz = post._log_gauss1(z, omega[:, 0], V[:, 0, 0]) - np.log(2 * r)
                parts.append((lz, z[:, None], (z * z)[:, None, None]))
            return post._logsumexp_combine(parts)
        if self.p == 2:
            th = 2 * np.pi * np.arange(self.n_angle) / self.n_angle
            z = r[:, None, None] * np.stack([np.cos(th), np.sin(th)], -1)[None]  # (n, N, 2)
            lw = _log_gauss_p(z, omega, V) + np.log(np.pi / self.n_angle)  # (1/2) dtheta
            return _weighted(lw, z)
        raise ParameterError("params.p", "g_out of norm2 is implemented for p <= 2 (quadrature budget)",
                             "use p = 1 or 2 for se/gamp; p = 3 only for the threshold stability")

    def cond_moments(self, y):
        y = np.asarray(y, float).reshape(-1)
        return np.zeros((y.shape[0], self.p)), (y / self.p)[:, None, None] * np.eye(self.p)

    def y_rule(self, fine=True):
        r, w = panel_rule(0.0, 14.0, 0.5 if fine else 1.0, 10 if fine else 6)
        return r**2, 2 * r * w

    def base_law(self, fine=True):
        from scipy import stats

        y, w = self.y_rule(True)
        return y, w * stats.chi2.pdf(y, self.p)

    def __repr__(self):
        return f"Norm2(p={self.p})"


class Square(SquareChannel, Norm2):
    """y = z^2 (p = 1): the scalar closed-form channel `core.channel.SquareChannel` (g_out, posterior
    and sample come first in the MRO) with the threshold interface of norm2 at p = 1 (cond_moments,
    y_rule, base_law)."""

    name = "square"

    def __init__(self):
        Norm2.__init__(self, 1)


class Abs(AbsChannel, MIChannel):
    """y = |z| (p = 1): the scalar closed-form channel `core.channel.AbsChannel` (g_out, posterior and
    sample) with the threshold interface: E[z | y] = 0, E[z^2 | y] = y^2 at omega = 0, V = 1, and the
    half-normal law of y."""

    name = "abs"
    p = 1

    def cond_moments(self, y):
        y = np.asarray(y, float).reshape(-1)
        return np.zeros((y.shape[0], 1)), (y**2)[:, None, None] * np.ones((1, 1))

    def y_rule(self, fine=True):
        return panel_rule(0.0, 14.0, 0.5 if fine else 1.0, 10 if fine else 6)

    def base_law(self, fine=True):
        y, w = self.y_rule(True)
        return y, w * 2 * np.exp(-0.5 * y**2) / np.sqrt(2 * np.pi)


class Staircase(MIChannel):
    """y = z1^2 + sign(z1 z2 z3): roots z1 = +-sqrt(y - eps), eps = +-1, each forcing the sign of
    z2 z3 to eps sign(z1); (z2, z3) | z1 is a quadrant union (Genz rule)."""

    name, p = "staircase", 3
    n_genz = 24

    def sample(self, z, rng):
        z = np.asarray(z)
        return z[:, 0] ** 2 + np.sign(z[:, 0] * z[:, 1] * z[:, 2])

    def _posterior(self, y, omega, V):
        n = y.shape[0]
        coef, base, cov = post.conditional(omega, V, 0)
        _, Lc = post.checked_cov(cov, 2)
        parts = []
        for eps in (1.0, -1.0):
            ok = y > eps
            r = np.sqrt(np.where(ok, y - eps, 1.0))
            for sg in (1.0, -1.0):
                z1 = sg * r
                tau = eps * sg
                pats = [(1.0, 1.0), (-1.0, -1.0)] if tau > 0 else [(1.0, -1.0), (-1.0, 1.0)]
                cm = base + coef * z1[:, None]
                lq, m23, s23 = post._logsumexp_combine([post.orthant(cm, Lc, pt, self.n_genz) for pt in pats])
                lz = post._log_gauss1(z1, omega[:, 0], V[:, 0, 0]) - np.log(2 * r) + lq
                lz = np.where(ok, lz, -np.inf)
                mean = np.concatenate([z1[:, None], m23], 1)
                second = np.empty((n, 3, 3))
                second[:, 0, 0] = z1 * z1
                second[:, 0, 1:] = z1[:, None] * m23
                second[:, 1:, 0] = z1[:, None] * m23
                second[:, 1:, 1:] = s23
                parts.append((lz, mean, second))
        return post._logsumexp_combine(parts)

    def y_rule(self, fine=True):
        r1, w1 = panel_rule(0.0, np.sqrt(2.0), 0.5 if fine else 1.5, 10 if fine else 6)
        r2, w2 = panel_rule(0.0, 14.0, 0.5 if fine else 1.0, 10 if fine else 6)
        return np.concatenate([-1 + r1**2, 1 + r2**2]), np.concatenate([2 * r1 * w1, 2 * r2 * w2])


def _log_gauss_p(z, omega, V):
    """log N(z; omega, V) for z (n, N, p), omega (n, p), V (n, p, p)."""
    p = omega.shape[1]
    Vi = np.linalg.inv(V)
    d = z - omega[:, None, :]
    quad = np.einsum("nki,nij,nkj->nk", d, Vi, d)
    _, logdet = np.linalg.slogdet(V)
    return -0.5 * quad - 0.5 * (logdet[:, None] + p * np.log(2 * np.pi))


def _weighted(lw, z):
    top = np.max(lw, axis=1)
    topf = np.where(np.isfinite(top), top, 0.0)
    W = np.exp(lw - topf[:, None])
    Z = W.sum(1)
    safe = np.where(Z > 0, Z, 1.0)
    mean = np.einsum("nk,nki->ni", W, z) / safe[:, None]
    second = np.einsum("nk,nki,nkj->nij", W, z, z) / safe[:, None, None]
    return np.where(Z > 0, topf + np.log(safe), -np.inf), mean, second


MI_CHANNELS = {
    "z1z2": Z1Z2, "sign-z1z2": SignZ1Z2, "norm2": Norm2, "z1z2z3": Z1Z2Z3, "sign-z1z2z3": SignZ1Z2Z3,
    "committee3": Committee3, "staircase": Staircase, "square": Square, "abs": Abs,
}


def make_channel(name, p=None):
    if name not in MI_CHANNELS:
        raise ParameterError("params.channel", f"unknown multi-index channel {name!r}",
                             f"use one of {', '.join(MI_CHANNELS)}")
    if name == "norm2":
        return Norm2(2 if p is None else int(p))
    return MI_CHANNELS[name]()
