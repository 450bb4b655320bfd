"""The channel protocol of every model family, and the scalar (p = 1) channels at the base of the ladder.

The protocol (`Channel`): a channel P(y | z) acts on a pre-activation z in R^p through the cavity
Gaussian z ~ N(omega, V) of SE and GAMP, Z_out(y, omega, V) = int N(z; omega, V) P(y | z) dz, and
exposes on batches of n samples

    sample(z (n, p), rng)      -> y (n,), or (n, k) where one sample's label is a vector (AIM: the
                                  T x T output of a sample, flattened)
    g_out(y (n,) or (n, k), omega (n, p), V (p, p) or (n, p, p))
                               -> g = V^-1 (E[z | y] - omega)             (n, p)
                                  dg = d g / d omega
                                     = V^-1 Cov[z | y] V^-1 - V^-1          (n, p, p)

Families with token axes fold them into the batch (`tokens` = T rows of one sequence are consecutive:
the posterior couples the tokens of a sequence, and dg is the token-diagonal block). SE and GAMP of a
family evaluate the same channel object, so they cannot drift apart; `seqphase.testing.check_channel_protocol`
runs one identity battery (Nishimori, finite-difference Jacobian, p = 1 reductions, batch = single
samples, finite at the edges) over every registered channel of every family.

The scalar channels (linear, sign, abs, square) are the GLM's channels and the multi-index model's
p = 1 abs and square: one closed-form kernel `g_out_scalar` (elementwise on broadcast arrays, which the
scalar SE evaluates on whole quadrature grids) from which the protocol's `g_out` and the posterior
moments are derived.

Conventions of the scalar channels: g_out = d_omega log Z_out = (E[z | y, omega, V] - omega) / V and
dg = Var[z | y, omega, V] / V^2 - 1 / V. In SE, omega = sqrt(m) xi with xi ~ N(0, 1), V = rho - m, and
y ~ P(y | omega, V) (the Bayes-optimal, Nishimori point), where m is the overlap and rho = E z^2 = E x^2.
"""

from __future__ import annotations

import numpy as np
from scipy import special

from seqphase.core.contract import Likelihood
from seqphase.core.numerics import LOG_SQRT_2PI as _LOG_SQRT_2PI
from seqphase.core.numerics import H, gauss_hermite, logcosh, sech2


class Channel:
    """The protocol (see the module docstring). Attributes: `name` (registry name), `p` (indices),
    `tokens` (rows of one sequence in the folded batch; 1 without a token axis), `even` (P(y | z) =
    P(y | -z): omega = 0 is a fixed point and weak recovery needs alpha above a stability threshold),
    `discrete` (y takes finitely many values)."""

    name = "channel"
    p = 1
    tokens = 1
    even = False
    discrete = False

    def sample(self, z, rng):
        """Labels y (n,) for pre-activations z (n, p)."""
        raise NotImplementedError

    def g_out(self, y, omega, V):
        """(g (n, p), dg (n, p, p)) at the cavity N(omega, V)."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(p={self.p})"


def _scalar_args(y, omega, V):
    """Protocol-shaped arguments of a p = 1 channel as 1-d arrays of the batch."""
    y = np.asarray(y, float).reshape(-1)
    omega = np.asarray(omega, float).reshape(y.shape[0])
    V = np.asarray(V, float)
    V = np.broadcast_to(V.reshape(-1) if V.ndim == 3 else V.reshape(()), y.shape).astype(float)
    return y, omega, V


class ScalarChannel(Channel, Likelihood):
    """A channel with a scalar pre-activation (p = 1) and closed forms. Subclasses implement
    ``sample_scalar``, ``log_partition``, ``g_out_scalar``, ``expect_y``, ``prediction_error`` and
    ``plugin_error``; the protocol's ``g_out`` and ``posterior`` are derived from ``g_out_scalar``.

    A scalar channel is a `seqphase.Likelihood` (`core/contract.py`): it states ``log_likelihood(y, z)``
    and ``labels`` as any user channel does, and its closed forms are overrides of what the derived
    route (`core/plugins.py` `DerivedScalarChannel`) computes from the likelihood. A noiseless channel
    with a continuous y (``noiseless``: |z|, z^2, z) has no finite likelihood; `noisy(delta)` is its
    form y = f(z) + sqrt(delta) n, which the derived route runs.

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
    discrete = False
    #: Gauss-Hermite nodes for expectations over the Gaussian noise that generates y
    n_hermite = 120

    def sample(self, z, rng):
        """Labels for z (n,) (the scalar SE/GAMP call) or for the protocol's z (n, 1) -> y (n,)."""
        z = np.asarray(z, float)
        return self.sample_scalar(z[:, 0] if z.ndim == 2 else z, rng)

    def sample_scalar(self, z, rng):
        """Labels elementwise for an array z of pre-activations."""
        raise NotImplementedError

    def log_likelihood(self, y, z):
        if self.noiseless:
            raise ValueError(f"{type(self).__name__} is noiseless (y a function of z): it has no finite "
                             "likelihood; use its noisy form, noisy(delta)")
        raise NotImplementedError

    def noisy(self, delta):
        """The channel with Gaussian label noise of variance `delta` added: y = f(z) + sqrt(delta) n, for a
        noiseless channel (its `sample_scalar` must then not draw from the generator)."""
        return NoisyChannel(self, delta)

    def noiseless_value(self, z):
        """f(z) of a noiseless channel, elementwise."""
        return self.sample_scalar(np.asarray(z, float), None)

    def log_partition(self, y, omega, V):
        raise NotImplementedError

    def g_out_scalar(self, y, omega, V):
        """(g, dg): g = d_omega log Z_out, dg = d_omega g (analytic), elementwise on broadcast arrays:
        the kernel that SE (on quadrature grids), GAMP and the protocol's ``g_out`` all evaluate."""
        raise NotImplementedError

    def g_out(self, y, omega, V):
        """The protocol form: y (n,), omega (n, 1), V (1, 1) or (n, 1, 1) -> g (n, 1), dg (n, 1, 1)."""
        y, omega, V = _scalar_args(y, omega, V)
        g, dg = self.g_out_scalar(y, omega, V)
        return g[:, None], dg[:, None, None]

    def posterior(self, y, omega, V):
        """log Z_out, E[z | y] (n, 1) and E[z^2 | y] (n, 1, 1) under z ~ N(omega, V), from the kernel:
        mean = omega + V g, variance = V + V^2 dg (what a multi-index quadrature engine consumes)."""
        y, omega, V = _scalar_args(y, omega, V)
        g, dg = self.g_out_scalar(y, omega, V)
        mean = omega + V * g
        second = V + V * V * dg + mean * mean
        return self.log_partition(y, omega, V), mean[:, None], second[:, None, None]

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


class LinearChannel(ScalarChannel):
    """y = z + sqrt(Delta) n. Z_out = N(y; omega, V + Delta), g = (y - omega)/(V + Delta),
    dg = -1/(V + Delta). Delta = 0 (noiseless compressed sensing) is allowed as long as V > 0."""

    name = "linear"
    n_hermite = 40  # integrands are polynomials / quadratic logs in t: exact with few nodes

    def __init__(self, delta=0.0):
        self.delta = float(delta)
        if self.delta < 0:
            raise ValueError("delta must be >= 0")

    @property
    def noiseless(self):
        return self.delta == 0.0

    def sample_scalar(self, z, rng):
        z = np.asarray(z, float)
        if self.delta == 0.0:  # noiseless: no draw (the stream stays as it was)
            return z.copy()
        return z + np.sqrt(self.delta) * rng.standard_normal(z.shape)

    def log_likelihood(self, y, z):
        if self.delta == 0.0:
            return super().log_likelihood(y, z)
        return -0.5 * (np.asarray(y, float) - z) ** 2 / self.delta - 0.5 * np.log(self.delta) - _LOG_SQRT_2PI

    def noisy(self, delta):
        return LinearChannel(self.delta + float(delta))

    def log_partition(self, y, omega, V):
        s = np.asarray(V, float) + self.delta
        return -0.5 * (np.asarray(y, float) - omega) ** 2 / s - 0.5 * np.log(s) - _LOG_SQRT_2PI

    def g_out_scalar(self, y, omega, V):
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


class SignChannel(ScalarChannel):
    """y = sign(z) in {-1, +1}. With u = y omega / sqrt V: Z_out = Phi(u) = H(-u),
    g = y phi(u) / (sqrt V Phi(u)), dg = -R(u)(u + R(u)) / V with R = phi/Phi."""

    name = "sign"
    labels = (-1.0, 1.0)
    discrete = True

    def sample_scalar(self, z, rng):
        return np.where(np.asarray(z) >= 0, 1.0, -1.0)

    def log_likelihood(self, y, z):
        y, z = np.broadcast_arrays(np.asarray(y, float), np.asarray(z, float))
        return np.where(np.where(z >= 0, 1.0, -1.0) == y, 0.0, -np.inf)

    def log_partition(self, y, omega, V):
        return special.log_ndtr(np.asarray(y, float) * omega / np.sqrt(V))

    def g_out_scalar(self, y, omega, V):
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


def _g_abs(s, omega, V):
    x = s * omega / V
    return (s * np.tanh(x) - omega) / V, s * s * sech2(x) / V**2 - 1.0 / V


def _logz_abs(s, omega, V):
    # log[N(s; w, V) + N(-s; w, V)] = -(s^2 + w^2)/(2V) + log(2 cosh(s w / V)) - log sqrt(2 pi V)
    return (-(s * s + omega * omega) / (2 * V) + logcosh(s * omega / V) + np.log(2.0)
            - 0.5 * np.log(V) - _LOG_SQRT_2PI)


def _folded_mean(omega, V):
    """E|z| for z ~ N(omega, V)."""
    sv = np.sqrt(V)
    a = omega / sv
    return sv * np.sqrt(2 / np.pi) * np.exp(-0.5 * a * a) + omega * special.erf(a / np.sqrt(2.0))


class AbsChannel(ScalarChannel):
    """y = |z|."""

    name = "abs"
    even = True
    noiseless = True
    # GH in t converges slowly here: g has complex poles at distance pi/(2a) from the real t axis at
    # t* = -omega/sqrt V (a = |omega|/sqrt V), damped by the weight exp(-a^2/2). Measured worst
    # relative error of E[g^2] over a in [0.5, 10]: 1.1e-6 (120 nodes), 4.8e-8 (200), 3.1e-9 (300).
    n_hermite = 240

    def sample_scalar(self, z, rng):
        return np.abs(np.asarray(z, float))

    def log_partition(self, y, omega, V):
        y, omega, V = (np.asarray(a, float) for a in (y, omega, V))
        return _logz_abs(np.abs(y), omega, V)

    def g_out_scalar(self, y, omega, V):
        y, omega, V = np.broadcast_arrays(*(np.asarray(a, float) for a in (y, omega, V)))
        return _g_abs(np.abs(y), omega, V)

    def expect_y(self, func, omega, V):
        # y = |omega + sqrt(V) t|; passing |s| (not the signed s) keeps non-even func correct, and
        # for even integrands (g, dg, log Z) the t-integrand is smooth.
        return self._expect_gaussian(func, omega, V, 0.0, np.abs)

    def prediction_error(self, omega, V):
        omega = np.asarray(omega, float)
        return omega**2 + V - _folded_mean(omega, V) ** 2  # Var[|z|]

    def plugin_error(self, rho, m, q):
        # E(|z| - |w|)^2 = rho + q - 2 E|z w|, (z, w) centred Gaussian with cov [[rho, m], [m, q]]:
        # E|z w| = sqrt(rho q) (2/pi) (sqrt(1 - r^2) + r arcsin r), r = m / sqrt(rho q).
        if q <= 0:
            return float(rho)
        r = float(np.clip(m / np.sqrt(rho * q), -1.0, 1.0))
        e_abs = np.sqrt(rho * q) * 2 / np.pi * (np.sqrt(1 - r * r) + r * np.arcsin(r))
        return float(rho + q - 2 * e_abs)


class SquareChannel(ScalarChannel):
    """y = z^2; Z_out carries the Jacobian 1/(2 sqrt y) of the density of y."""

    name = "square"
    even = True
    noiseless = True
    n_hermite = 240  # same integrand as AbsChannel

    def sample_scalar(self, z, rng):
        return np.asarray(z, float) ** 2

    def log_partition(self, y, omega, V):
        y, omega, V = (np.asarray(a, float) for a in (y, omega, V))
        s = np.sqrt(y)
        return _logz_abs(s, omega, V) - np.log(2.0 * s)

    def g_out_scalar(self, y, omega, V):
        y, omega, V = np.broadcast_arrays(*(np.asarray(a, float) for a in (y, omega, V)))
        return _g_abs(np.sqrt(y), omega, V)

    def expect_y(self, func, omega, V):
        return self._expect_gaussian(func, omega, V, 0.0, np.square)

    def prediction_error(self, omega, V):
        omega = np.asarray(omega, float)
        return 4 * omega**2 * V + 2 * np.asarray(V, float) ** 2  # Var[z^2]

    def plugin_error(self, rho, m, q):
        # E(z^2 - w^2)^2 = 3 rho^2 + 3 q^2 - 2 E z^2 w^2, with E z^2 w^2 = rho q + 2 m^2 (Isserlis)
        return float(3 * rho**2 + 3 * q**2 - 2 * (rho * q + 2 * m * m))


class NoisyChannel(Likelihood):
    """y = f(z) + sqrt(delta) n for a noiseless channel y = f(z), z in R^p (`noisy` of a scalar or a
    multi-index channel; f is its `noiseless_value`): the finite likelihood through which the derived
    route approaches a noiseless channel as delta -> 0."""

    def __init__(self, channel, delta):
        self.channel, self.delta = channel, float(delta)
        self.p = getattr(channel, "p", 1)
        if not self.delta > 0:
            raise ValueError("the noisy form of a channel needs delta > 0")

    def log_likelihood(self, y, z):
        f = self.channel.noiseless_value(z)
        return -0.5 * (np.asarray(y, float) - f) ** 2 / self.delta - 0.5 * np.log(self.delta) - _LOG_SQRT_2PI

    def sample(self, z, rng):
        f = self.channel.noiseless_value(z)
        return f + np.sqrt(self.delta) * rng.standard_normal(f.shape)

    def __repr__(self):
        return f"{self.channel!r}.noisy({self.delta})"


#: the scalar channels by registry name (the GLM's `channel` parameter)
SCALAR_CHANNELS = {
    "linear": LinearChannel,
    "sign": SignChannel,
    "abs": AbsChannel,
    "square": SquareChannel,
}
