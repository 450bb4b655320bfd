"""The noiseless limit eps -> 0 of the 2-layer SE (docs/smi.md "The noiseless limit").

The SE of `se.py` has V = I - Q + eps I and a teacher with index noise eps (the reference code's
regulariser, spec smi.md §3.2); the paper's model is noiseless. Three computations:

* `extrapolate`: a sequence of SE fixed points at eps_1 > eps_2 > ... extrapolated to eps = 0. The form is
  checked on the data, not assumed: 1 - Q11 = a eps^gamma by least squares in log-log on the smallest
  eps; when the local exponent of the two smallest eps is >= gamma_min (1 - Q11 still falls by 10^gamma_min
  per decade; a plateau's local exponent falls like eps itself) the limit is Q11 = 1 (perfect recovery of
  layer 1), else Q11(eps) = Q11(0) + b eps (Richardson on the two smallest eps), its error the last step,
  provided the data look linear: the last difference must be at most 3 eps_1/eps_2 times the one before
  (a plateau's differences shrink like eps); otherwise (Q11 still creeping, e.g. by a constant step per
  decade) no limit is claimed (form "none", NaN).
* `linear_response`: at a cavity V -> 0 the posterior given h (2 equations on the 4 entries of Z) is the
  cavity prior restricted to the tangent plane of h(Z) = u, so per sample Cov = V - V J^T (J V J^T)^-1 J V
  and m_a = V_aa E[sum_t g_at^2] (Nishimori: = V_aa E[sum_t -dg_t,aa]) satisfy m_1 + m_2 = T = 2 for every
  ratio V11 / V22. The eps = 0 SE near Q = I is v_a' = v_a / (v_a + alpha m_a(v1/v2)) ~ v_a / (alpha m_a):
  the ratio r = v1/v2 flows to r* with m_1(r*) = m_2(r*) = 1 (m_1 grows with r), and there v contracts by
  1/(alpha m_1(r*)) per iteration.
* `perfect_recovery`: the perfect-recovery threshold of layer 1 from that stability: r* by bisection on
  log r, alpha_PR = 1 / m_1(r*) with its Monte Carlo s.e. (= p / T = 1 if the identity holds);
  `contraction`: the same question asked of the full eps = 0 SE map (`se.qhat`, `se.prior_step`) started AT
  Q = I - s diag(r*, 1) (v at the ratio it flows to), iterated n_steps times: the growth factor of
  1 - Q11 over the last step, < 1 where perfect recovery is stable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqphase.core.numerics import psd_sqrt
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


def linear_response(channel, V, draws):
    """m_a = V_aa E[sum_t g_at^2] (p,) and its s.e. at eps = 0, teacher overlap Q = I - V (V diagonal),
    on the draws (the SE's common random numbers)."""
    V = np.asarray(V, float)
    Q = np.eye(channel.p) - V
    omega = np.einsum("ab,nbt->nat", psd_sqrt(Q), draws.xi)
    z = omega + np.einsum("ab,nbt->nat", psd_sqrt(V), draws.u)
    g, _ = channel.g_out_tokens(channel.labels_of_z(z), omega, V)
    x = np.diag(V)[None, :] * np.einsum("nat,nat->na", g, g)
    return x.mean(0), x.std(0) / np.sqrt(x.shape[0])


@dataclass
class PerfectRecovery:
    alpha: float  # alpha_PR = 1 / m_1(r*)
    alpha_se: float
    ratio: float  # r* = V11 / V22 where m_1 = m_2
    m: np.ndarray  # (m_1, m_2) at r*
    m_se: np.ndarray


def perfect_recovery(channel, draws, scale=1e-6, r_lo=1e-3, r_hi=1e3, rtol=1e-3):
    """alpha_PR of layer 1 from the linearised eps = 0 SE at Q = I: r* with m_1(r*) = m_2(r*) (bisection
    on log r; V = scale diag(sqrt r, 1 / sqrt r)), alpha_PR = 1 / m_1(r*), s.e. by the delta method."""

    def at(r):
        V = scale * np.diag([np.sqrt(r), 1.0 / np.sqrt(r)])
        return linear_response(channel, V, draws)

    lo, hi = np.log(r_lo), np.log(r_hi)
    if not (at(r_lo)[0][0] < at(r_lo)[0][1] and at(r_hi)[0][0] > at(r_hi)[0][1]):
        raise ValueError("m_1 - m_2 does not change sign on [r_lo, r_hi]")
    while hi - lo > rtol:
        mid = 0.5 * (lo + hi)
        m, _ = at(np.exp(mid))
        lo, hi = (mid, hi) if m[0] < m[1] else (lo, mid)
    r = float(np.exp(0.5 * (lo + hi)))
    m, m_se = at(r)
    return PerfectRecovery(1.0 / m[0], m_se[0] / m[0] ** 2, r, m, m_se)


def contraction(channel, alpha, draws, ratio, scale=1e-6, n_steps=3):
    """Growth factors (p,) of v = 1 - diag Q over the last of n_steps iterations of the full eps = 0 SE map
    started at Q = I - scale diag(sqrt(ratio), 1 / sqrt(ratio)): < 1 where Q = I attracts."""
    v = scale * np.array([np.sqrt(ratio), 1.0 / np.sqrt(ratio)])
    Q = np.eye(channel.p) - np.diag(v)
    for _ in range(n_steps):
        prev = 1.0 - np.diag(Q)
        Q = sse.prior_step(sse.qhat(channel, Q, alpha, draws, eps=0.0))
    return (1.0 - np.diag(Q)) / prev
