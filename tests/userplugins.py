"""User plug-ins of the plug-in tests: channels and priors as a researcher writes them (a likelihood and a
sampler), some honest, some broken on purpose. On the workers' path through tests/conftest.py."""

import numpy as np
from scipy import special

import seqphase


class Probit(seqphase.Likelihood):
    """y = sign(z + sqrt(delta) n), n ~ N(0, 1): the likelihood and the sampler, nothing else."""

    labels = (-1.0, 1.0)

    def __init__(self, delta=0.1):
        if delta <= 0:
            raise ValueError("delta must be > 0")
        self.delta = delta

    def log_likelihood(self, y, z):
        return special.log_ndtr(y * z / np.sqrt(self.delta))

    def sample(self, z, rng):
        return np.where(z + np.sqrt(self.delta) * rng.standard_normal(np.shape(z)) >= 0, 1.0, -1.0)


class ClosedProbit(Probit):
    """The probit with its closed forms: Z_out = Phi(y omega / s), s = sqrt(V + delta)."""

    def g_out(self, y, omega, V):
        s = np.sqrt(V + self.delta)
        u = y * omega / s
        ratio = np.exp(-0.5 * u * u - 0.5 * np.log(2 * np.pi) - special.log_ndtr(u))
        return y * ratio / s, -ratio * (u + ratio) / s**2

    def log_partition(self, y, omega, V):
        return special.log_ndtr(y * omega / np.sqrt(V + self.delta))


class FlippedProbit(Probit):
    """The dishonest one: its sampler flips every label its likelihood gives."""

    def sample(self, z, rng):
        return -super().sample(z, rng)


class Sign(seqphase.Likelihood):
    """The perceptron's y = sign(z), re-implemented as a user channel (a step: located, not smeared)."""

    labels = (-1.0, 1.0)

    def log_likelihood(self, y, z):
        return np.where(y * z >= 0, 0.0, -np.inf)

    def sample(self, z, rng):
        return np.where(z >= 0, 1.0, -1.0)


class Band(seqphase.Likelihood):
    """y = +1 if |z| > theta, else -1: an even channel, whose weak-recovery threshold has the closed form
    p (1 - p) / (4 phi(theta)^2 theta^2), p = 2 Phi(-theta) (tests/glm/test_plugins.py)."""

    labels = (-1.0, 1.0)

    def __init__(self, theta=1.0):
        self.theta = theta

    def log_likelihood(self, y, z):
        return np.where((y > 0) == (np.abs(z) > self.theta), 0.0, -np.inf)

    def sample(self, z, rng):
        return np.where(np.abs(z) > self.theta, 1.0, -1.0)


class Binary(seqphase.Prior):
    """x = +-1 with probability 1/2: the shipped rademacher prior, re-implemented."""

    atoms = (-1.0, 1.0)

    def log_density(self, x):
        return np.full(np.shape(x), np.log(0.5))

    def sample(self, shape, rng):
        return rng.choice(np.array([-1.0, 1.0]), size=shape)


class Normal(seqphase.Prior):
    """x ~ N(0, 1), a continuous prior: the shipped gaussian prior, re-implemented."""

    scale = 1.0

    def log_density(self, x):
        return -0.5 * np.asarray(x) ** 2 - 0.5 * np.log(2 * np.pi)

    def sample(self, shape, rng):
        return rng.standard_normal(shape)


class RaisesOnBatches(Probit):
    """Passes the one-batch check before a run, then raises on the batches a run evaluates."""

    def log_likelihood(self, y, z):
        if np.size(z) > 64:
            raise RuntimeError("this channel is broken on large batches")
        return super().log_likelihood(y, z)


class ReturnsNaN(Probit):
    def log_likelihood(self, y, z):
        return np.full(np.shape(z), np.nan)


class WrongShape(Probit):
    def sample(self, z, rng):
        return np.ones(3)


class GaussianNoise(seqphase.Likelihood):
    """y = z + sqrt(delta) n, n ~ N(0, 1): the shipped linear channel as a user channel with a continuous y."""

    def __init__(self, delta=0.5):
        if delta <= 0:
            raise ValueError("delta must be > 0")
        self.delta = delta

    def log_likelihood(self, y, z):
        return -0.5 * (y - z) ** 2 / self.delta - 0.5 * np.log(2 * np.pi * self.delta)

    def sample(self, z, rng):
        return z + np.sqrt(self.delta) * rng.standard_normal(np.shape(z))


class SignProduct(seqphase.Likelihood):
    """y = sign(z1 z2), p = 2: the shipped multi-index channel "sign-z1z2", re-implemented."""

    p = 2
    labels = (-1.0, 1.0)

    def log_likelihood(self, y, z):
        return np.where(y * z[..., 0] * z[..., 1] >= 0, 0.0, -np.inf)

    def sample(self, z, rng):
        return np.where(z[..., 0] * z[..., 1] >= 0, 1.0, -1.0)


class NoisyProduct(seqphase.Likelihood):
    """y = z1 z2 + sqrt(delta) n, n ~ N(0, 1), p = 2: the shipped "z1z2" channel with label noise (the
    noiseless one has no finite likelihood)."""

    p = 2

    def __init__(self, delta=0.01):
        if delta <= 0:
            raise ValueError("delta must be > 0")
        self.delta = delta

    def log_likelihood(self, y, z):
        return -0.5 * (y - z[..., 0] * z[..., 1]) ** 2 / self.delta - 0.5 * np.log(2 * np.pi * self.delta)

    def sample(self, z, rng):
        z = np.asarray(z)
        return z[..., 0] * z[..., 1] + np.sqrt(self.delta) * rng.standard_normal(z.shape[:-1])


class ProductReturnsNaN(SignProduct):
    def log_likelihood(self, y, z):
        return np.full(np.shape(y), np.nan)


class ProductWrongShape(SignProduct):
    def sample(self, z, rng):
        return np.ones(3)


class ProductRaises(SignProduct):
    def log_likelihood(self, y, z):
        raise RuntimeError("broken")


class ProductRaisesOnBatches(SignProduct):
    """Passes the one-batch check before a run, then raises on the batches a run evaluates."""

    def log_likelihood(self, y, z):
        if np.size(y) > 400:
            raise RuntimeError("this channel is broken on large batches")
        return super().log_likelihood(y, z)


class FlippedSignProduct(SignProduct):
    """The dishonest p = 2 one: its sampler flips every label its likelihood gives."""

    def sample(self, z, rng):
        return -super().sample(z, rng)


class NoisySignProduct(seqphase.Likelihood):
    """y = sign(z1 z2), flipped with probability eps, p = 2."""

    p = 2
    labels = (-1.0, 1.0)

    def __init__(self, eps=0.1):
        self.eps = eps

    def log_likelihood(self, y, z):
        return np.where(y * z[..., 0] * z[..., 1] >= 0, np.log1p(-self.eps), np.log(self.eps))

    def sample(self, z, rng):
        z = np.asarray(z)
        flip = rng.random(z.shape[:-1]) < self.eps
        return np.where(z[..., 0] * z[..., 1] >= 0, 1.0, -1.0) * np.where(flip, -1.0, 1.0)


class MiscalibratedSignProduct(NoisySignProduct):
    """The dishonest one: its sampler flips three times as often as its likelihood says."""

    def sample(self, z, rng):
        z = np.asarray(z)
        flip = rng.random(z.shape[:-1]) < 3 * self.eps
        return np.where(z[..., 0] * z[..., 1] >= 0, 1.0, -1.0) * np.where(flip, -1.0, 1.0)


class Logistic(seqphase.Likelihood):
    """P(y = +-1 | z) = 1 / (1 + exp(-beta y z)): smooth everywhere, no flat stretch."""

    labels = (-1.0, 1.0)

    def __init__(self, beta=2.0):
        if beta <= 0:
            raise ValueError("beta must be > 0")
        self.beta = beta

    def log_likelihood(self, y, z):
        return -np.logaddexp(0.0, -self.beta * y * z)

    def sample(self, z, rng):
        return np.where(rng.random(np.shape(z)) < special.expit(self.beta * np.asarray(z)), 1.0, -1.0)


class NoisyReLU(seqphase.Likelihood):
    """y = max(z, 0) + sqrt(delta) n: a continuous y whose likelihood is flat in z for z < 0."""

    def __init__(self, delta=0.1):
        if delta <= 0:
            raise ValueError("delta must be > 0")
        self.delta = delta

    def log_likelihood(self, y, z):
        return -0.5 * (y - np.maximum(z, 0.0)) ** 2 / self.delta - 0.5 * np.log(2 * np.pi * self.delta)

    def sample(self, z, rng):
        return np.maximum(z, 0.0) + np.sqrt(self.delta) * rng.standard_normal(np.shape(z))
