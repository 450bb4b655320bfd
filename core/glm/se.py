"""Bayes-optimal state evolution (SE) of GAMP for GLMs with a scalar pre-activation (p = 1).

Conventions
-----------
* alpha = n / d (samples per dimension), rho = E x^2 (prior second moment).
* Overlap m = E[x_hat x*] (= q at the Nishimori point), MSE V = rho - m.
* Channel update: mhat = alpha E_{xi, y}[g_out(y, sqrt(m) xi, V)^2], y ~ P(y | omega, V).
* Prior update: V_new = mmse(mhat + lambda) of the scalar channel B = mhat x0 + sqrt(mhat) xi,
  lambda >= 0 being optional side information (a small lambda seeds weak recovery).
* RS free entropy Phi = psi_P0(mhat + lambda) + alpha Psi_out(m) - m mhat / 2, with
  Psi_out = E log Z_out(y, sqrt(m) xi, V).

The iteration runs in the MSE variable V (not m): near perfect recovery V ~ 1e-12 is resolved with
full relative accuracy, whereas m = rho - V would lose it to rounding. The channel expectations use
the SAME ``g_out_scalar`` / ``log_partition`` as GAMP (core/channel.py), and the prior the SAME
``denoise`` (through ``Prior.mmse`` / ``Prior.free_entropy``); the iteration is the shared
``numerics.fixed_point``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from seqphase.core.numerics import fixed_point, gaussian_panels



#: base panel width of the outer xi rule: the outer integrands are smooth on the O(1) Gaussian scale
#: away from the channel features (8 Legendre nodes per unit panel: < 1e-12 on Gaussian-like
#: integrands, checked against the default 0.5 panels in the tests).
OUTER_BASE_WIDTH = 1.0


def _outer_rule(channel, m, V):
    return gaussian_panels(channel.omega_features(m, V), base_width=OUTER_BASE_WIDTH)


def _outer_expect(channel, func, m, V):
    """E_{xi} E_{y | omega, V}[func(y, omega, V)], omega = sqrt(m) xi (vectorised over xi)."""
    xi, w = _outer_rule(channel, m, V)
    omega = math.sqrt(max(m, 0.0)) * xi
    return float(w @ channel.expect_y(func, omega, V))


def channel_mhat(channel, alpha, m, V):
    """mhat = alpha E_{xi,y}[g_out(y, sqrt(m) xi, V)^2]."""
    return alpha * _outer_expect(channel, lambda y, o, v: channel.g_out_scalar(y, o, v)[0] ** 2, m, V)


def channel_free_entropy(channel, m, V):
    """Psi_out(m, V) = E_{xi,y} log Z_out(y, sqrt(m) xi, V)."""
    return _outer_expect(channel, channel.log_partition, m, V)


def channel_gen_error(channel, m, V):
    """Bayes-optimal test error E_xi prediction_error(sqrt(m) xi, V)."""
    xi, w = _outer_rule(channel, m, V)
    return float(w @ channel.prediction_error(math.sqrt(max(m, 0.0)) * xi, V))


@dataclass
class GLMState:
    """Fixed point of the scalar Bayes-optimal SE: mse V = rho - m, overlap m, mhat (channel part,
    without side information), RS free entropy, Bayes-optimal generalisation error, and the
    iteration log."""

    mse: float
    overlap: float
    mhat: float
    free_entropy: float
    gen_error: float
    n_iter: int
    converged: bool
    residuals: np.ndarray = field(repr=False)


def _initial_mse(prior, start):
    rho = prior.rho
    if isinstance(start, str):
        if start == "uninformed":
            return rho * (1.0 - 1e-6)  # overlap 1e-6 rho: breaks the symmetry of even channels
        if start == "informed":
            return rho * 1e-8
        raise ValueError(f"unknown start {start!r}")
    return float(start)


def se_step(prior, channel, alpha, side_info=0.0, v_min=1e-12):
    """The SE map V -> mmse(alpha E g^2 (m = rho - V, V) + side_info), clamped to [v_min, rho]."""
    rho = prior.rho

    def step(V):
        v = float(np.clip(V, v_min, rho))
        mhat = channel_mhat(channel, alpha, rho - v, v)
        return np.clip(prior.mmse(mhat + side_info), v_min, rho)

    return step


def glm_se(prior, channel, alpha, *, start="uninformed", side_info=0.0, damping=0.0, tol=1e-10,
           max_iter=2000, v_min=1e-12, stop=None):
    """Iterate the scalar SE to a fixed point and evaluate the order parameters there.

    start: "uninformed" (V0 = rho (1 - 1e-6)), "informed" (V0 = 1e-8 rho) or a float V0.
    V is clamped to >= v_min (perfect recovery). ``stop(V)`` optionally ends early.
    """
    rho = prior.rho
    v0 = min(max(_initial_mse(prior, start), v_min), rho)
    fp = fixed_point(se_step(prior, channel, alpha, side_info, v_min), np.array(v0), damping=damping,
                     tol=tol, max_iter=max_iter, stop=stop)
    V = float(np.clip(fp.x, v_min, rho))
    m = rho - V
    mhat = channel_mhat(channel, alpha, m, V)
    phi = (prior.free_entropy(mhat + side_info) + alpha * channel_free_entropy(channel, m, V)
           - 0.5 * m * mhat)
    return GLMState(mse=V, overlap=m, mhat=mhat, free_entropy=phi,
                    gen_error=channel_gen_error(channel, m, V), n_iter=fp.n_iter,
                    converged=fp.converged, residuals=fp.residuals)


def glm_se_branches(prior, channel, alpha, **settings):
    """Run SE from the uninformed ("amp") and informed starts; "bayes" is the branch of larger free
    entropy (the amp branch when both coincide)."""
    settings = dict(settings)
    settings.pop("start", None)
    amp = glm_se(prior, channel, alpha, start="uninformed", **settings)
    inf = glm_se(prior, channel, alpha, start="informed", **settings)
    same = abs(amp.mse - inf.mse) <= 1e-6 * prior.rho
    bayes = amp if (same or amp.free_entropy >= inf.free_entropy) else inf
    return {"amp": amp, "informed": inf, "bayes": bayes}
