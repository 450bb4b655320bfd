"""The one contract of an output channel and of a prior: what every channel and prior of the scalar
families states, shipped or written by a user.

A channel states its likelihood P(y | z) and how to sample it (`Likelihood`); a prior, its density and a
sampler (`Prior`). Everything a family needs (Z_out, g_out and its derivative, the state evolution's
expectations over y, the denoiser, the mmse and the free entropy) is derived from those by quadrature
(`core/plugins.py`, `core/glm/priors.py`). A class may also give closed forms of any of them: they are
overrides of the derived defaults, used when present and switched off by the glm family's method setting
``derived = true`` (then the shipped closed forms are checked against the derived route).

This module imports nothing of seqphase: the shared channel protocol (`core/channel.py`), the plug-in
loader (`core/plugins.py`) and the families build on it.
"""

from __future__ import annotations

import math


class Likelihood:
    """An output channel P(y | z), z in R^p.

    Subclass it, write `log_likelihood` and `sample`, and name the class in a spec as
    ``channel = "module:Class"``. Z_out, g_out and its derivative, the state evolution's expectations
    over y and the errors are derived from the likelihood by quadrature, so every method of the family
    runs on it; ``seqphase check module:Class`` (or `seqphase.testing.check_likelihood`) runs the
    identity battery on it.

    Attributes
    ----------
    labels : tuple or None
        The values of a discrete y (e.g. ``(-1.0, 1.0)``), or None for a continuous y.
    p : int
        The dimension of z (1 for a GLM channel).
    noiseless : bool
        True when y is a deterministic function of z with a continuous y (``y = |z|``): such a channel
        has no finite likelihood, only closed forms, and the derived route runs its noisy form instead
        (``y = f(z) + sqrt(delta) n``, `noisy`).

    Notes
    -----
    The constructor's keyword arguments (numbers or booleans, each with a default or required) are model
    parameters: a spec sets them in ``[params]`` and several values make a grid axis.

    Methods to write:

    - ``log_likelihood(y, z)``: log P(y | z), elementwise and broadcasting (for p = 1 z has no trailing
      axis, for p > 1 it is ``(..., p)``): the log probability of a discrete y or the log density of a
      continuous one, ``-inf`` where impossible;
    - ``sample(z, rng)``: labels y ~ P(y | z) of the same leading shape, drawn from the
      `numpy.random.Generator` ``rng``.

    Optional closed forms (p = 1, elementwise on broadcast arrays), used when present and checked
    against the derived ones: ``g_out(y, omega, V) -> (g, dg)`` and ``log_partition(y, omega, V)``.
    """

    p = 1
    labels = None
    noiseless = False

    def log_likelihood(self, y, z):  # pragma: no cover - written by the user
        raise NotImplementedError(f"{type(self).__name__} must define log_likelihood(y, z)")

    def sample(self, z, rng):  # pragma: no cover - written by the user
        raise NotImplementedError(f"{type(self).__name__} must define sample(z, rng)")


class Prior:
    """A prior P0(x) of the signal's i.i.d. components.

    Subclass it, write `log_density` and `sample`, and name the class in a spec as
    ``prior = "module:Class"``. The denoiser, its variance, the mmse and the free entropy are derived by
    quadrature; ``seqphase check module:Class`` (or `seqphase.testing.check_prior`) runs the identity
    battery on it.

    Attributes
    ----------
    atoms : tuple or None
        The values of the prior's point masses, or None for a prior with a density only.
    continuous : bool or None
        Whether the prior has a density part; None (the default) means "when it has no atoms". A prior
        with both (Gauss-Bernoulli: an atom at 0 and a Gaussian) sets ``continuous = True``.
    support : tuple
        ``(lo, hi)`` of the density part; either end may be infinite.
    scale : float
        The width over which the density varies (the quadrature's first panels).

    Notes
    -----
    Methods to write: ``log_density(x)`` (elementwise: the log density of the continuous part, or for a
    prior with atoms only, the log probability of each atom) and ``sample(shape, rng)`` (draws of the
    given shape from the `numpy.random.Generator` ``rng``). A prior with atoms and a density also writes
    ``log_atom_probability(x)``, the log probability of each atom; its density then integrates to one
    minus the atoms' total probability. The constructor's keyword arguments are model parameters.
    """

    atoms = None
    continuous = None
    support = (-math.inf, math.inf)
    scale = 1.0

    def log_density(self, x):  # pragma: no cover - written by the user
        raise NotImplementedError(f"{type(self).__name__} must define log_density(x)")

    def log_atom_probability(self, x):
        """log P0(x) of each atom x: `log_density` for a prior with atoms only."""
        return self.log_density(x)

    def sample(self, shape, rng):  # pragma: no cover - written by the user
        raise NotImplementedError(f"{type(self).__name__} must define sample(shape, rng)")

    def has_density(self):
        """True when the prior has a continuous part (see `continuous`)."""
        return self.atoms is None if self.continuous is None else bool(self.continuous)
