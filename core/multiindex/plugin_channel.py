"""A user channel (`seqphase.Likelihood` with p = 2) as a multi-index channel: everything the family's
SE, GAMP and thresholds ask of a channel, derived from `log_likelihood(y, z)` and `sample(z, rng)`.

* Posterior moments under the cavity N(omega, V) (`posterior`: log Z_out, E[z | y], E[z z^T | y]) by the
  iterated adaptive quadrature `numerics.gaussian_posterior_2d`: rays from z = 0, each integrated by
  adaptive Gauss-Legendre in the cavity's standardised radius, the angle by adaptive Gauss-Legendre
  carrying each ray's moments. A step of the likelihood is located on every ray it crosses and a
  sign pattern's steps (the axes) are panel edges of the angle; a posterior far in the cavity's tail
  is found. Relative tolerance `tol` (1e-6 default; the acceptance test is conservative): on
  sign(z1 z2) the derived log Z_out agrees with the exact orthant formulas within 1e-10 and
  E[z z^T | y] within 1e-9 (tests/multiindex/test_plugin_channel.py).
  A discrete likelihood that depends on the direction of z only (`directional`, checked on 720 rays at
  radii 1e-3 .. 1e3: every sign pattern) has each ray's integral in closed form, leaving the angle.
  g_out and dg follow from the moments as for every multi-index channel (`MIChannel.g_out`).
* The rule over y that SE (quadrature engine) and the thresholds integrate against
  (E_{y | omega, V} f = sum_k w_k Z_out(y_k | omega, V) f(y_k)): the labels (discrete y); for a
  continuous y, composite Gauss-Legendre (Lebesgue measure) on panels whose edges are quantiles of
  `n_rule_draws` labels drawn by the plug-in's sampler at z ~ N(0, I) (fixed seed: the same rule every
  call), the range continued by half its width on each side, so the nodes sit where the law of y has
  its mass. Its accuracy shows in the mass it gives the law at omega = 0, V = I (`base_law`, sum 1 up
  to the quadrature error: checked by the tests and by `seqphase check`).
* Labels for the SE's Monte-Carlo engine come from the plug-in's sampler; `sample(z, None)` (the
  engine's common random numbers) draws from a fixed seed, so every SE step sees the same labels.
* `even`: P(y | z) = P(y | -z), checked on a grid of z and labels (drawn labels for a continuous y).

Faults of the user's code (an exception, NaN, a wrong shape) are a one-line `plugins.PluginFault`
naming the class and method, raised before anything is stored.
"""

from __future__ import annotations

import hashlib

import numpy as np

from seqphase.core import plugins
from seqphase.core.errors import ParameterError
from seqphase.core.numerics import gaussian_posterior_2d

from .channels import MIChannel


def dimension(plugin):
    """The plug-in's p, which must be 2 (ParameterError otherwise: one line naming the class)."""
    p = int(getattr(plugin, "p", 1))
    if p != 2:
        raise ParameterError("params.channel", f"{type(plugin).__name__} has p = {p}; the multi-index "
                             "family derives channels of p = 2", "declare p = 2 (use the glm family for p = 1)")
    return p


class DerivedVectorChannel(MIChannel):
    """A p = 2 `Likelihood` with the multi-index channel interface (module docstring)."""

    noiseless = False  # a finite likelihood, by construction
    label_seed = 20240601
    n_rule_draws = {True: 1 << 15, False: 1 << 12}
    rule_panels = {True: (48, 8), False: (16, 4)}  # (quantile panels, Gauss-Legendre nodes each)

    def __init__(self, plugin, name="plugin", tol=1e-6):
        self.p = dimension(plugin)
        self.plugin = plugin
        self.name = name
        self.tol = float(tol)
        self._labels = None if plugin.labels is None else np.asarray(plugin.labels, dtype=float)
        self.even = self._is_even()
        self.directional = self._is_directional()

    # -- what the user wrote ---------------------------------------------------------------------------
    def log_likelihood(self, y, z):
        y = np.asarray(y, float)
        return plugins.checked(self.plugin, "log_likelihood", plugins.call(self.plugin, "log_likelihood", y, z),
                               y.shape)

    def sample(self, z, rng):
        z = np.asarray(z, float)
        rng = np.random.default_rng(self.label_seed) if rng is None else rng
        return plugins.checked(self.plugin, "sample", plugins.call(self.plugin, "sample", z, rng), z.shape[:-1],
                               allow_inf=False)

    @property
    def labels(self):
        return None if self._labels is None else tuple(self._labels)

    def _is_even(self):
        grid = np.linspace(-3.0, 3.0, 13) + 0.0371  # off the axes: a sign pattern's value there is a convention
        z = np.stack(np.meshgrid(grid, grid, indexing="ij"), axis=-1).reshape(-1, 2)
        if self.discrete:
            y = np.repeat(self._labels, z.shape[0])
            z = np.tile(z, (self._labels.size, 1))
        else:
            y = self.sample(z, np.random.default_rng(self.label_seed))
        return bool(np.allclose(self.log_likelihood(y, z), self.log_likelihood(y, -z), rtol=1e-10, atol=1e-12))

    def _is_directional(self):
        """A discrete label's likelihood that depends on the direction of z only (a sign pattern: the
        same on each of 720 rays at radii 1e-3 .. 1e3): each ray's integral is then closed form."""
        if not self.discrete:
            return False
        theta = (np.arange(720) + 0.5) * (2 * np.pi / 720)
        direction = np.stack([np.cos(theta), np.sin(theta)], axis=1)
        radii = np.array([1e-3, 0.1, 1.0, 10.0, 1e3])
        z = (radii[:, None, None] * direction[None]).reshape(-1, 2)
        for label in self._labels:
            values = self.log_likelihood(np.full(z.shape[0], label), z).reshape(radii.size, theta.size)
            if not np.all((values == values[2]) | (np.isneginf(values) & np.isneginf(values[2]))):
                return False
        return True

    # -- the posterior by quadrature -----------------------------------------------------------------
    def _posterior(self, y, omega, V):
        """(log Z_out, E[z | y], E[z z^T | y]) per sample, once per distinct (y, omega, V): the last few
        results are kept (g_out and a threshold's moments ask for the same cavities in turn)."""
        key = hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in (y, omega, V))).digest()

        def posterior():
            rows = np.concatenate([y[:, None], omega, V.reshape(-1, 4)], axis=1)
            unique, inverse = np.unique(rows, axis=0, return_inverse=True)
            inverse = inverse.ravel()
            labels = unique[:, 0]

            def log_likelihood(idx, z):
                return self.log_likelihood(labels[idx], z)

            try:
                log_z, mean, second = gaussian_posterior_2d(log_likelihood, unique[:, 1:3],
                                                            unique[:, 3:].reshape(-1, 2, 2), tol=self.tol,
                                                            directional=self.directional)
            except FloatingPointError:
                raise plugins.PluginFault(f"{type(self.plugin).__name__}.log_likelihood returned NaN") from None
            return log_z[inverse], mean[inverse], second[inverse]

        cache = self.__dict__.setdefault("_posterior_cache", {})
        return tuple(part.copy() for part in plugins.kept(cache, key, posterior))

    # -- the rule over y -----------------------------------------------------------------------------
    def y_rule(self, fine=True):
        if self.discrete:
            return self._labels.copy(), np.ones_like(self._labels)
        cache = self.__dict__.setdefault("_y_rules", {})
        if fine not in cache:
            rng = np.random.default_rng(self.label_seed)
            draws = self.sample(rng.standard_normal((self.n_rule_draws[fine], self.p)), rng)
            panels, nodes = self.rule_panels[fine]
            quantiles = np.quantile(draws, np.linspace(0.0, 1.0, panels + 1))
            lo, hi = quantiles[0], quantiles[-1]
            reach = 0.5 * (hi - lo)
            edges = np.unique(np.concatenate([np.linspace(lo - reach, lo, 9), quantiles,
                                              np.linspace(hi, hi + reach, 9)]))
            if fine:
                edges = self._refined_edges(edges, nodes)
            x, w = np.polynomial.legendre.leggauss(nodes)
            a, b = edges[:-1, None], edges[1:, None]
            cache[fine] = (((a + b) / 2 + (b - a) / 2 * x).ravel(), ((b - a) / 2 * w).ravel())
        y, w = cache[fine]
        return y.copy(), w.copy()

    def _refined_edges(self, edges, nodes, rounds=12, max_panels=4096):
        """The quantile panels bisected where the law of y at omega = 0, V = I (and its E[z z^T | y]) is not
        resolved: a panel whose Gauss-Legendre integrals of p(y) [1, E[z_i z_j | y]] differ from its two
        halves' by more than 1e-4 of its own (a hundred times the posterior's quadrature noise, which does
        not shrink with the panel) and 1e-7 of the total is split, until none is (or `rounds`, `max_panels`). An edge or a narrow peak of the law that
        no quantile falls on (a noisy y = |z|^2 at y = 0) is thus resolved: thresholds integrate the law's
        moments over this rule."""
        x, w = np.polynomial.legendre.leggauss(nodes)

        def integrals(a, b):
            y = ((a + b) / 2)[:, None] + ((b - a) / 2)[:, None] * x
            log_z, _, second = self.posterior(y.ravel(), np.zeros((y.size, 2)), np.eye(2))
            density = np.exp(log_z)
            parts = np.stack([density, density * second[:, 0, 0], density * second[:, 0, 1],
                              density * second[:, 1, 1]], axis=1).reshape(y.shape + (4,))
            return np.einsum("kn,knc->kc", ((b - a) / 2)[:, None] * w, parts)

        a, b = edges[:-1], edges[1:]
        whole = integrals(a, b)
        scale = np.abs(whole).sum(axis=0).max()  # one scale: a component that vanishes by symmetry is noise
        kept = []
        for _ in range(rounds):
            mid = 0.5 * (a + b)
            left, right = integrals(a, mid), integrals(mid, b)
            error = np.abs(left + right - whole)
            bad = np.any((error > 1e-4 * np.abs(whole)) & (error > 1e-7 * scale), axis=1)
            kept.append(a[~bad])
            if not bad.any() or len(np.concatenate(kept)) + 2 * bad.sum() > max_panels:
                kept.append(np.concatenate([a[bad], mid[bad]]))
                break
            a, b = np.concatenate([a[bad], mid[bad]]), np.concatenate([mid[bad], b[bad]])
            whole = np.concatenate([left[bad], right[bad]])
        else:
            kept.append(a)
        return np.unique(np.concatenate(kept + [edges[-1:]]))

    def __repr__(self):
        return f"DerivedVectorChannel({self.plugin!r})"
