"""The noiseless limit eps -> 0 of the SMI SE (docs/validation/smi.md "The noiseless limit"; the perfect-recovery threshold at depth 2 and 3).

The SE of `se.py` has V = I - Q + eps I and a teacher with index noise eps (the reference code's
regulariser, spec smi.md §3.2); the paper's model is noiseless. The computations:

* `extrapolate`: a sequence of SE fixed points at eps_1 > eps_2 > ... extrapolated to eps = 0. The form is
  checked on the data, not assumed: 1 - Q11 = a eps^gamma by least squares in log-log on the smallest
  eps; when the local exponent of the two smallest eps is >= gamma_min (1 - Q11 still falls by 10^gamma_min
  per decade; a plateau's local exponent falls like eps itself) the limit is Q11 = 1 (perfect recovery of
  layer 1), else Q11(eps) = Q11(0) + b eps (Richardson on the two smallest eps), its error the last step,
  provided the data look linear: the last difference must be at most 3 eps_1/eps_2 times the one before
  (a plateau's differences shrink like eps); otherwise (Q11 still creeping, e.g. by a constant step per
  decade) no limit is claimed (form "none", NaN).
* `linear_response`: at a cavity V -> 0 the posterior given h (T = 2 equations on the p T entries of Z) is
  the cavity prior restricted to the tangent plane of h(Z) = u, so per sample Cov = V - V J^T (J V J^T)^-1 J V
  and m_a = V_aa E[sum_t g_at^2] (Nishimori: = V_aa E[sum_t -dg_t,aa]) satisfy m_1 + ... + m_p = T for every
  set of ratios V_aa / V_bb. `linear_response` reads m off the channel's posterior at a small V;
  `tangent_response` computes the same limit in closed form, m_a = v_a tr(J_a^T (sum_b v_b J_b J_b^T)^-1 J_a)
  with J_a = dh/dz_a by central differences of the link: it needs no posterior, so it holds at any depth
  and checks the channel (and the 3-layer sampler, which is not accurate at V33 << V11, V22) where V -> 0.
  The eps = 0 SE near Q = I is v_a' = v_a / (v_a + alpha m_a(v)) ~ v_a / (alpha m_a): the proportions of v
  flow to v* with m_1 = ... = m_p = T / p (a layer whose v is relatively larger takes more of the sum T and
  shrinks faster), and there v contracts by 1 / (alpha T / p) per iteration.
* `perfect_recovery`: the perfect-recovery threshold from that stability: v* by iterating the flow on the
  proportions of v, alpha_PR = 1 / m_1(v*) with its Monte Carlo s.e. (= p / T, 1 for 2 layers and 3/2 for
  3, if the identity holds); `contraction`: the same question asked of the full eps = 0 SE map
  (`se.qhat`, `se.prior_step`) started AT Q = I - s v* (v at the proportions it flows to), iterated
  n_steps times: the growth factor of each 1 - Q_aa over the last step, < 1 where perfect recovery is stable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqphase.core.numerics import psd_sqrt
from seqphase.core.smi import link
from seqphase.core.smi import se as sse


@dataclass
class Extrapolation:
    q0: float  # the eps -> 0 limit of Q11
    q0_err: float  # its error (the last Richardson step, or 0 when the limit is 1 by the power law)
    gamma: float  # exponent of 1 - Q11 = a eps^gamma on the smallest eps
    gamma_se: float  # its least-squares s.e. (inf with 2 points)
    gamma_local: float  # the exponent between the two smallest eps
    a: float
    form: str  # "power" (limit 1), "linear" or "none" (neither form fits: q0 NaN)


def extrapolate(eps, q, n_fit=3, gamma_min=0.2):
    """The eps -> 0 limit of an SE overlap from its values q at eps (any order). 1 - q = a eps^gamma is
    fitted in log-log on the n_fit smallest eps; a local exponent >= gamma_min between the two smallest eps
    means q -> 1 (form "power"), else the limit is the linear extrapolation through the two smallest eps
    (form "linear", error = that step) if the differences shrink like eps (see the module docstring), else
    form "none" with q0 = NaN."""
    eps, q = np.asarray(eps, float), np.asarray(q, float)
    order = np.argsort(eps)
    eps, q = eps[order], q[order]
    k = min(n_fit, eps.size)
    x, y = np.log(eps[:k]), np.log(np.clip(1.0 - q[:k], 1e-300, None))
    A = np.stack([np.ones(k), x], 1)
    coef, res, *_ = np.linalg.lstsq(A, y, rcond=None)
    if k > 2:
        s2 = float(np.sum((y - A @ coef) ** 2)) / (k - 2)
        gamma_se = float(np.sqrt(s2 * np.linalg.inv(A.T @ A)[1, 1]))
    else:
        gamma_se = np.inf
    gamma, a = float(coef[1]), float(np.exp(coef[0]))
    local = float((y[1] - y[0]) / (x[1] - x[0]))
    if local >= gamma_min:
        return Extrapolation(1.0, 0.0, gamma, gamma_se, local, a, "power")
    if k > 2 and abs(q[0] - q[1]) > 3.0 * eps[1] / eps[2] * abs(q[1] - q[2]):
        return Extrapolation(np.nan, np.inf, gamma, gamma_se, local, a, "none")
    step = (q[0] - q[1]) * eps[0] / (eps[1] - eps[0])
    return Extrapolation(float(q[0] + step), float(abs(step)), gamma, gamma_se, local, a, "linear")


def _teacher(channel, V, draws):
    """(omega, z) of the SE's teacher at overlap Q = I - V, eps = 0, on the draws."""
    omega = np.einsum("ab,nbt->nat", psd_sqrt(np.eye(channel.p) - V), draws.xi)
    return omega, omega + np.einsum("ab,nbt->nat", psd_sqrt(V), draws.u)


def linear_response(channel, V, draws):
    """m_a = V_aa E[sum_t g_at^2] (p,) and its s.e. at eps = 0, teacher overlap Q = I - V (V diagonal),
    on the draws (the SE's common random numbers), from the channel's posterior."""
    V = np.asarray(V, float)
    omega, z = _teacher(channel, V, draws)
    g, _ = channel.g_out_tokens(channel.labels_of_z(z), omega, V)
    x = np.diag(V)[None, :] * np.einsum("nat,nat->na", g, g)
    return x.mean(0), x.std(0) / np.sqrt(x.shape[0])


def link_jacobian(z, skip, step=1e-6):
    """dh_L / dz (n, T, p, T) at pre-activations z (n, p, T), by central differences of `link.last_h` (the
    link is smooth; the step's error, ~step^2 relative, is far below the Monte Carlo error of any use)."""
    n, p, T = z.shape
    J = np.empty((n, T, p, T))
    for a in range(p):
        for t in range(T):
            dz = np.zeros_like(z)
            dz[:, a, t] = step
            J[:, :, a, t] = (link.last_h(z + dz, skip) - link.last_h(z - dz, skip)) / (2.0 * step)
    return J


def tangent_response(channel, V, draws):
    """m (p,) and its s.e. of the V -> 0 limit in closed form: the posterior of Z given h is the cavity
    Gaussian on the tangent plane of h(Z) = u, so m_a = v_a tr(J_a^T K^-1 J_a), K = sum_b v_b J_b J_b^T,
    J_a = dh/dz_a at the teacher's z (V diagonal; only the proportions of V matter). That is the share of
    layer a in the orthogonal projector onto the row space of [sqrt(v_a) J_a]_a, computed by a QR
    factorisation rather than K^-1: at small skips the link is nearly singular on many draws (3 layers,
    c = 1e-4: cond K > 1e8 on 23% of them), where K^-1 loses every digit. sum_a m_a = T on every draw."""
    V = np.asarray(V, float)
    v = np.diag(V)
    _, z = _teacher(channel, V, draws)
    J = link_jacobian(z, channel.skip) * np.sqrt(v)[None, None, :, None]  # (n, T, p, T)
    n, T, p, _ = J.shape
    basis, _ = np.linalg.qr(J.reshape(n, T, p * T).transpose(0, 2, 1))  # (n, p T, T), orthonormal columns
    x = (basis ** 2).reshape(n, p, T * T).sum(axis=2)
    return x.mean(0), x.std(0) / np.sqrt(n)


@dataclass
class PerfectRecovery:
    alpha: float  # alpha_PR = 1 / m_1(v*)
    alpha_se: float
    v: np.ndarray  # v* (p,): the proportions of 1 - Q_aa at which all m_a are equal, the last layer's = 1
    m: np.ndarray  # (m_1, ..., m_p) at v*
    m_se: np.ndarray
    steps: int  # iterations of the flow

    @property
    def ratio(self):
        """V11 / V_pp at v* (for 2 layers the r* of docs/validation/smi.md)."""
        return float(self.v[0] / self.v[-1])


def _cavity_at(v, scale):
    """V = scale diag(v) / geometric mean(v): the proportions v at the size `scale`."""
    v = np.asarray(v, float)
    return scale * np.diag(v / np.exp(np.log(v).mean()))


def perfect_recovery(channel, draws, response=linear_response, start=None, scale=1e-6, tol=1e-4, max_steps=200):
    """alpha_PR of layer 1 from the linearised eps = 0 SE at Q = I: the proportions of v flow by
    v_a <- v_a / m_a(v) (the map v_a / (alpha m_a) without its common factor 1/alpha) from `start` (default all
    equal) until max_a |m_a / mean(m) - 1| <= tol; alpha_PR = 1 / m_1(v*), s.e. by the delta method.
    Raises RuntimeError when the flow has not settled after max_steps."""
    v = np.ones(channel.p) if start is None else np.asarray(start, float)
    for step in range(max_steps + 1):
        m, m_se = response(channel, _cavity_at(v, scale), draws)
        if np.max(np.abs(m / m.mean() - 1.0)) <= tol:
            return PerfectRecovery(1.0 / m[0], m_se[0] / m[0] ** 2, v / v[-1], m, m_se, step)
        v = v / m
        v = v / v[-1]
    raise RuntimeError(f"the flow of v did not settle in {max_steps} steps (m = {m})")


def contraction(channel, alpha, draws, v, scale=1e-6, n_steps=3):
    """Growth factors (p,) of 1 - diag Q over the last of n_steps iterations of the full eps = 0 SE map
    started at Q = I - scale diag(v) / geometric mean(v): < 1 where Q = I attracts."""
    Q = np.eye(channel.p) - _cavity_at(v, scale)
    for _ in range(n_steps):
        prev = 1.0 - np.diag(Q)
        Q = sse.prior_step(sse.qhat(channel, Q, alpha, draws, eps=0.0))
    return (1.0 - np.diag(Q)) / prev
