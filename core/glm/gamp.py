"""GAMP on finite GLM instances: the prior and channel steps (`GLMSteps`) of the shared loop
(core/gamp.py, run with `gamp.iterate`), with the same channel kernel ``g_out_scalar`` and prior
``denoise`` as SE.

Conventions: F_{mu i} ~ N(0, 1/d), n = round(alpha d), z = F x, y ~ P(y | z); overlap
m = x_hat . x / d, self-overlap q = |x_hat|^2 / d, mse = |x_hat - x|^2 / d.

Steps (per-sample cavity variances, per-coordinate prior variances c_i):
V_mu = sum_i F_{mu i}^2 c_i, omega = F x_hat - R, (g, dg) = channel.g_out_scalar(y, omega, V),
A_i = -sum_mu F_{mu i}^2 dg_mu, B_i = sum_mu F_{mu i} g_mu + A_i x_hat_i,
(x_hat, c) = prior.denoise(B, A). The damping-consistent Onsager term R is the skeleton's.
Initialised at the prior mean with c = rho; if that mean is 0 and the channel is even, x_hat gets a
tiny random part (from rng) so AMP can leave the uninformative fixed point. Converged when
mean |x_hat_new - x_hat_old|^2 < tol (a mean square, not its root: algorithm version 2 of the model's
gamp method).
"""

from __future__ import annotations

import numpy as np

from seqphase.core import gamp


def sample_instance(prior, channel, alpha, d, rng):
    """(F, x, y) with F_{mu i} ~ N(0, 1/d), x ~ P0^d, y = channel.sample(F x)."""
    return gamp.sample_instance(alpha, d, rng, teacher=lambda r: prior.sample(d, r),
                                labels=lambda F, x, r: channel.sample(F @ x, r))


class GLMSteps(gamp.GampSteps):
    """Separable prior, scalar channel: vectors of per-sample V and per-coordinate c. `rng` draws the
    start's random part (even channels); records: overlap, self_overlap, mse, gen_error (plug-in)."""

    def __init__(self, prior, channel, F, y, x_true, rng=None):
        self.prior, self.channel, self.F, self.y, self.x_true, self.rng = prior, channel, F, y, x_true, rng
        self.F2 = F * F

    def initial(self):
        n, d = self.F.shape
        prior = self.prior
        x_hat = np.full(d, float(prior.mean))
        if prior.mean == 0 and getattr(self.channel, "even", False):
            rng = np.random.default_rng(0) if self.rng is None else self.rng
            x_hat = x_hat + 1e-3 * np.sqrt(prior.rho) * rng.standard_normal(d)
        return x_hat, np.full(d, prior.rho), np.zeros(n)

    def cavity(self, c):
        return np.maximum(self.F2 @ c, 1e-300)

    def reaction(self, c, g, V=None, weight=1.0):
        # ((1 - damping) V) g, the association of algorithm version 2 (weight 1 multiplies exactly)
        return (weight * (self.cavity(c) if V is None else V)) * g

    def project(self, x_hat):
        return self.F @ x_hat

    def g_out(self, omega, V):
        return self.channel.g_out_scalar(self.y, omega, V)

    def fields(self, g, dg, x_hat):
        A = np.maximum(-(self.F2.T @ dg), 1e-300)  # A >= 0 at the Nishimori point; guard rounding
        return A, self.F.T @ g + A * x_hat

    def denoise(self, B, A):
        return self.prior.denoise(B, A)

    def change(self, x_new, x_hat):
        return float(np.mean((x_new - x_hat) ** 2))

    def record(self, x_hat):
        d = x_hat.shape[0]
        m = float(x_hat @ self.x_true) / d
        q = float(x_hat @ x_hat) / d
        return {"overlap": m, "self_overlap": q, "mse": float(np.mean((x_hat - self.x_true) ** 2)),
                "gen_error": self.channel.plugin_error(self.prior.rho, m, q)}
