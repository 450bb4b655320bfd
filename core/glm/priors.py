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

import itertools
import math

import numpy as np
from scipy import optimize, special

from seqphase.core import contract, plugins
from seqphase.core.numerics import (GAUSSIAN_EDGES, LOG_SQRT_2PI, adaptive_integrals, adaptive_moments,
                                    gauss_hermite, gaussian_panels, logcosh, sech2)


class Prior(contract.Prior):
    """Base class of this family's priors: a `seqphase.Prior` (`core/contract.py`: ``log_density``,
    ``atoms``, ``sample(shape, rng)``) with the denoiser's closed forms. Subclasses define ``rho``,
    ``name``, ``mean`` (E x), ``denoise``, ``log_partition`` and ``mmse`` / ``free_entropy``; the
    derived route (`DerivedPrior`) computes all of these from the contract alone."""

    name = "prior"
    rho = 1.0
    mean = 0.0

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

    def log_density(self, x):
        return -0.5 * np.asarray(x, float) ** 2 - LOG_SQRT_2PI

    def sample(self, shape, rng):
        return rng.standard_normal(shape)

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
    atoms = (-1.0, 1.0)

    def log_density(self, x):
        return np.where(np.abs(np.asarray(x, float)) == 1.0, -math.log(2.0), -np.inf)

    def sample(self, shape, rng):
        return rng.choice(np.array([-1.0, 1.0]), size=shape)

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
    atoms = (0.0,)
    continuous = True

    def __init__(self, rho=0.5):
        rho = float(rho)
        if not 0.0 < rho < 1.0:
            raise ValueError("GaussBernoulliPrior needs 0 < rho < 1")
        self.rho = rho

    def log_density(self, x):
        return math.log(self.rho) - 0.5 * np.asarray(x, float) ** 2 - LOG_SQRT_2PI

    def log_atom_probability(self, x):
        return np.where(np.asarray(x, float) == 0.0, math.log1p(-self.rho), -np.inf)

    def sample(self, shape, rng):
        return rng.standard_normal(shape) * (rng.random(shape) < self.rho)

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


class DerivedPrior(Prior):
    """A `seqphase.Prior` (`core/contract.py`: a user's class, or a shipped prior with its closed forms
    left aside) as this family's prior: the denoiser, log Z0, mmse and free entropy derived from
    `log_density` (`log_atom_probability`) and `sample`.

    Atoms: exact sums over them. Density: the denoiser by adaptive quadrature in x over panels of the
    prior's `scale` and of the Gaussian factor's width 1/sqrt(A) around B/A, clipped to the `support`;
    E over x0 ~ P0 by composite Gauss-Legendre over the support. Both (Gauss-Bernoulli): the two parts'
    masses and moments added. mmse and free entropy: atoms only, by the SNR-adaptive Gaussian panels
    refined where the posterior switches between two atoms (the rule of the shipped Rademacher prior);
    otherwise over the marginal of B by adaptive Gauss-Legendre (`_outer`), which finds the switch between
    the atoms and the density wherever it lies.
    """

    n_outer_nodes = 12  # Gauss-Legendre nodes a panel of the x0 rule (density)
    outer_tol = 1e-12   # relative tolerance of the adaptive xi integral (atoms and a density)

    def __init__(self, plugin, name="plugin", tol=1e-11):
        self.plugin, self.name, self.tol = plugin, name, float(tol)
        atoms = getattr(plugin, "atoms", None)
        has_density = plugin.has_density() if hasattr(plugin, "has_density") else atoms is None
        self.atoms = None if atoms is None else np.asarray(atoms, dtype=float)
        self.dense = bool(has_density)
        nodes, weights, total = [], [], 0.0
        if self.atoms is not None:
            method = "log_atom_probability" if self.dense else "log_density"
            self.log_p = plugins.checked(plugin, method, plugins.call(plugin, method, self.atoms), self.atoms.shape)
            nodes.append(self.atoms)
            weights.append(np.exp(self.log_p))
            total += float(weights[-1].sum())
        if self.dense:
            lo, hi = (float(v) for v in getattr(plugin, "support", (-math.inf, math.inf)))
            self.scale = float(getattr(plugin, "scale", 1.0))
            self.support = (lo, hi)
            x, w = self._outer_rule()
            self.density_mass = float(w.sum())
            nodes.append(x)
            weights.append(w)
            total += self.density_mass
        self.total_probability = total  # 1 for an honest prior (seqphase check)
        # the atoms' and the density's masses normalised together: a prior whose parts add up to 1 - eps
        # is read as the prior they describe
        self.log_norm = math.log(total) if total > 0 else 0.0
        if self.atoms is not None:
            self.log_p = self.log_p - self.log_norm
        x, w = np.concatenate(nodes), np.concatenate(weights) / (total if total > 0 else 1.0)
        self.x0_nodes, self.x0_weights = x, w
        self.rho = float(w @ (x * x))
        self.mean = float(w @ x)

    def log_density(self, x):
        x = np.asarray(x, float)
        return plugins.checked(self.plugin, "log_density", plugins.call(self.plugin, "log_density", x), x.shape)

    def sample(self, shape, rng):
        shape = (shape,) if np.ndim(shape) == 0 else tuple(shape)
        return plugins.checked(self.plugin, "sample", plugins.call(self.plugin, "sample", shape, rng),
                               shape, allow_inf=False)

    def _edges(self, centre=None, width=None):
        """Panel edges over the support: the prior's scale times the shared Gaussian edges, and (per
        sample) the Gaussian factor's width around its centre, clipped to the support and sorted."""
        lo, hi = self.support
        base = self.scale * GAUSSIAN_EDGES
        if centre is None:
            edges = base[None, :]
        else:
            local = centre[:, None] + width[:, None] * GAUSSIAN_EDGES[None, 3:-3]
            edges = np.concatenate([np.broadcast_to(base, (centre.size, base.size)), local], axis=1)
        low = lo if math.isfinite(lo) else edges.min(axis=1, keepdims=True)
        high = hi if math.isfinite(hi) else edges.max(axis=1, keepdims=True)
        edges = np.clip(edges, low, high)
        if math.isfinite(lo) or math.isfinite(hi):
            ends = np.broadcast_to(np.array([lo if math.isfinite(lo) else np.nan, hi if math.isfinite(hi) else np.nan]),
                                   (edges.shape[0], 2))
            edges = np.concatenate([edges, np.where(np.isnan(ends), edges[:, :1], ends)], axis=1)
        return np.sort(edges, axis=1)

    def _outer_rule(self):
        """(nodes, weights) of int p(x) f(x) dx over the density: composite Gauss-Legendre on the support's
        panels, the weights carrying the density (their sum its mass)."""
        edges = np.unique(self._edges()[0])
        u, wu = np.polynomial.legendre.leggauss(self.n_outer_nodes)
        a, b = edges[:-1, None], edges[1:, None]
        x = (a + (b - a) * (u + 1) / 2).ravel()
        w = ((b - a) / 2 * wu).ravel() * np.exp(self.log_density(x))
        return x, w

    def _atom_moments(self, B, A):
        logits = self.log_p[None, :] + B[:, None] * self.atoms[None, :] - 0.5 * A[:, None] * self.atoms[None, :] ** 2
        log_z = special.logsumexp(logits, axis=1)
        weight = np.exp(logits - log_z[:, None])
        mean = weight @ self.atoms
        # Var = sum_{a < b} w_a w_b (x_a - x_b)^2: no cancellation where one atom takes nearly all weight
        var = np.zeros_like(mean)
        for i, j in itertools.combinations(range(self.atoms.size), 2):
            var += weight[:, i] * weight[:, j] * (self.atoms[i] - self.atoms[j]) ** 2
        return log_z, mean, var

    def _density_moments(self, B, A):
        positive = A > 0
        centre = np.where(positive, B / np.where(positive, A, 1.0), 0.0)
        width = np.where(positive, 1.0 / np.sqrt(np.where(positive, A, 1.0)), self.scale)
        centre = np.clip(centre, *self.support)

        def log_f(idx, x):
            return self.log_density(x) - self.log_norm + B[idx] * x - 0.5 * A[idx] * x * x

        try:
            result = adaptive_moments(log_f, self._edges(centre, width), tol=self.tol)
        except FloatingPointError:
            raise plugins.PluginFault(f"{type(self.plugin).__name__}.log_density returned NaN") from None
        return result.log_mass, result.mean, result.var

    def _moments(self, B, A):
        """(log Z0, mean, variance) of P0(x) e^{Bx - Ax^2/2}, elementwise on broadcast B, A."""
        B, A = np.broadcast_arrays(np.asarray(B, float), np.asarray(A, float))
        shape = B.shape
        B, A = B.ravel(), A.ravel()
        parts = []
        if self.atoms is not None:
            parts.append(self._atom_moments(B, A))
        if self.dense:
            parts.append(self._density_moments(B, A))
        if len(parts) == 1:
            log_z, mean, var = parts[0]
        else:  # the mixture of the two posteriors, weighted by their masses
            (log_a, mean_a, var_a), (log_c, mean_c, var_c) = parts
            log_z = np.logaddexp(log_a, log_c)
            with np.errstate(invalid="ignore"):
                share = np.where(np.isfinite(log_a), np.exp(log_a - log_z), 0.0)
            mean = share * mean_a + (1.0 - share) * mean_c
            # the total variance, written so that neither part's mean is squared against the other's
            var = share * var_a + (1.0 - share) * var_c + share * (1.0 - share) * (mean_a - mean_c) ** 2
        return log_z.reshape(shape), mean.reshape(shape), var.reshape(shape)

    def denoise(self, B, A):
        _, mean, var = self._moments(B, A)
        return mean, var

    def log_partition(self, B, A):
        return self._moments(B, A)[0]

    def _outer(self, mhat, part):
        """E_{x0 ~ P0, xi} of the posterior's `part` (0: log Z0, 2: variance) at B = mhat x0 + sqrt(mhat) xi,
        A = mhat. Atoms only: per atom, Gaussian panels in xi refined where the posterior switches between
        two atoms. Otherwise over the marginal of B, N(B; 0, mhat) Z0(B, mhat) (the x0 integral done by Z0
        itself), by adaptive Gauss-Legendre in B (`numerics.adaptive_integrals`) from panels on the scales
        of both of its parts, sqrt(mhat) (an atom at 0) and sqrt(mhat + mhat^2 rho) (the density): the
        switch between atoms and density is found where it lies, and each node costs one denoiser."""
        s = math.sqrt(mhat)
        if not self.dense:
            total = 0.0
            for x0, w0 in zip(self.atoms, np.exp(self.log_p)):
                features = [((mhat * (a + b) / 2 + (lb - la) / (a - b) - mhat * x0) / s, 1.0 / (s * abs(a - b)))
                            for (a, la), (b, lb) in itertools.combinations(zip(self.atoms, self.log_p), 2)]
                xi, w = gaussian_panels(features)
                total += w0 * float(w @ self._moments(mhat * x0 + s * xi, np.full(xi.shape, mhat))[part])
            return total

        def evaluate(idx, B):
            log_z, mean, var = self._moments(B, mhat)
            log_w = -0.5 * B * B / mhat - 0.5 * math.log(mhat) - LOG_SQRT_2PI + log_z
            return log_w, (log_z if part == 0 else var)[:, None]

        scale = math.sqrt(mhat + mhat * mhat * self.rho)
        edges = np.unique(np.concatenate([s * GAUSSIAN_EDGES, scale * GAUSSIAN_EDGES]))[None, :]
        shift, integrals = adaptive_integrals(evaluate, edges, tol=self.outer_tol)
        return float(np.exp(shift[0]) * integrals[0, 1])

    def mmse(self, mhat):
        mhat = float(mhat)
        if mhat <= 0:
            return self.rho - self.mean**2
        return self._outer(mhat, 2)

    def free_entropy(self, mhat):
        mhat = float(mhat)
        if mhat <= 0:
            return 0.0
        return self._outer(mhat, 0)

    def __repr__(self):
        return f"DerivedPrior({self.plugin!r})"
