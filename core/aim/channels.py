"""Output channels of the attention-indexed model on the folded attention index (spec aim.md §1.2, §2.3).

The pre-activation of one sample is the symmetric T x T index h, folded as its p = T(T+1)/2 distinct
entries h_ab, a <= b, in row-major order (`pairs(T)`: for T = 2 the order is h_11, h_12, h_22). In the
paper convention the entries are independent under the cavity, with variance (1 + delta_ab) V for a
scalar V (`cavity_variance`); the channels below accept any (p, p) or (n, p, p) cavity covariance (the
identity battery uses correlated ones) and reduce to the spec's formulas for the diagonal one.

Labels are 2-d arrays, one row per sample (the protocol's y (n,) with a label vector per sample):
- `LinearChannel` (any T, noiseless): y = h folded, (n, p). g = V^-1 (y - omega), dg = -V^-1.
- `SoftmaxChannel` (any T, inverse temperature beta): y = the row-wise LOG-softmax of beta h, (n, T*T).
  The labels are made from the logits and never round-tripped through probabilities, so the row
  log-ratios phi_ab = (y_ab - y_aT)/beta = h_ab - h_aT are exact up to rounding for any beta. They fix h
  up to one constant: h = Phi + c 11^T with Phi_ab = phi_ab + phi_Ta = h_ab - h_TT. The posterior of h
  is therefore the cavity Gaussian restricted to the line Phi + c u (u = all ones in the folded
  space): c* = u^T V^-1 (omega - Phi) / (u^T V^-1 u), E[h | y] = Phi + c* u,
  Cov[h | y] = u u^T / (u^T V^-1 u). For V = diag((1 + delta) V) this is the spec's
  c* = sum_ab w_ab (omega_ab - Phi_ab) / (T^2/2), w = 1/(1 + delta). Nothing depends on beta.
- `HardmaxChannel` (T = 2): y = the argmax of each row of h, (n, 2) (as floats). The label is the pair of
  bits s_a = +1 if token a attends to itself (h_aa > h_ab). With u_1 = h_11 - h_12, u_2 = h_22 - h_12
  (directions a_1 = (1, -1, 0), a_2 = (0, -1, 1)), sigma_i^2 = a_i^T V a_i, k_i = s_i a_i^T omega / sigma_i
  and r_s = s_1 s_2 a_1^T V a_2 / (sigma_1 sigma_2) (= s_1 s_2 / 3 in the paper convention),
  Z_out = Phi2(k_1, k_2; r_s) and g = sum_i (D_i / Phi2) s_i a_i / sigma_i with
    "exact" (default): D_i = d Phi2 / d k_i = phi(k_i) Phi((k_j - r k_i)/sqrt(1 - r^2)), the true
      Bayes g_out (dg = its Jacobian, the Hessian of log Phi2);
    "paper": D_i = phi2(k_1, k_2; r), the bivariate normal joint density, as in the authors'
      SE_hardmax.py / AMP_hardmax.py (spec §2.5: the published hardmax curves come from it). It is not
      the gradient of a log-likelihood (it fails the Nishimori identity); dg is its exact Jacobian.

The bivariate normal CDF is Sheppard/Plackett's formula Phi2(h, k; r) = Phi(h) Phi(k) + (1/2 pi)
int_0^{arcsin r} exp(-(h^2 + k^2 - 2 h k sin t) / (2 cos^2 t)) dt with a Gauss-Legendre rule in t
(`bvn_cdf`); `hardmax_kernel` returns (Phi2, D_1, D_2, phi2) for both variants and is what the SE
(se.py) integrates, so SE and the channel evaluate the same formulas.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import special

from seqphase.core.channel import Channel

HARDMAX_GOUT = ("exact", "paper")

#: Gauss-Legendre nodes of the Plackett integral in t over [0, arcsin r]. The exponent varies over the
#: interval by at most ~ (h^2 + k^2)(1 - 1/(1 + |r|)) ~ 30 where Phi2 is above the 1e-14 that matters
#: (pitfall 5); 40 nodes (degree 79) integrate exp(30 x) to ~1e-13 relative (tests/aim: against
#: scipy's multivariate_normal.cdf).
PLACKETT_NODES = 40
#: Phi2 below this is clipped (the channel's g stays finite; the SE drops such terms, their weight Phi2
#: being negligible).
PHI2_FLOOR = 1e-300
#: up to this many distinct correlations `bvn_cdf` uses one cached rule each (the SE and the scalar
#: cavity: bit-identical to the stored results); beyond, the per-element vectorised rule
FEW_CORRELATIONS = 16

_LOG_2PI = np.log(2.0 * np.pi)


@lru_cache(maxsize=64)
def pairs(T):
    """(rows, cols) of the p = T(T+1)/2 distinct entries a <= b of a symmetric T x T matrix, row-major."""
    rows, cols = np.triu_indices(int(T))
    rows.setflags(write=False)
    cols.setflags(write=False)
    return rows, cols


def n_entries(T):
    return int(T) * (int(T) + 1) // 2


def entry_weights(T):
    """1 + delta_ab per folded entry: the ratio of the entry's variance to the off-diagonal one."""
    rows, cols = pairs(T)
    return np.where(rows == cols, 2.0, 1.0)


def cavity_variance(T, V):
    """The paper-convention cavity covariance diag((1 + delta_ab) V) of the folded index, (p, p)."""
    return np.diag(entry_weights(T) * float(V))


def fold(h):
    """(n, T, T) symmetric -> (n, p) distinct entries a <= b."""
    h = np.asarray(h, float)
    rows, cols = pairs(h.shape[-1])
    return h[..., rows, cols]


def unfold(z, T):
    """(n, p) folded -> (n, T, T) symmetric."""
    z = np.asarray(z, float)
    rows, cols = pairs(T)
    h = np.empty(z.shape[:-1] + (T, T))
    h[..., rows, cols] = z
    h[..., cols, rows] = z
    return h


def _inverse(V, n, p):
    """V^-1 as (n, p, p): one inversion when the cavity is shared by the batch (a read-only view)."""
    V = np.asarray(V, float)
    if V.ndim == 2:
        return np.broadcast_to(np.linalg.inv(V), (n, p, p))
    return np.linalg.inv(V)


class AIMChannel(Channel):
    """A channel acting on the folded T x T attention index (p = T(T+1)/2, one row per sample)."""

    tokens = 1

    def __init__(self, T):
        self.T = int(T)
        self.p = n_entries(self.T)

    def __repr__(self):
        return f"{type(self).__name__}(T={self.T})"


class LinearChannel(AIMChannel):
    """y = h, noiseless (the counting baseline of the paper's Fig. 3)."""

    name = "linear"

    def sample(self, z, rng):
        return np.array(z, float, copy=True).reshape(-1, self.p)

    def g_out(self, y, omega, V):
        y = np.asarray(y, float).reshape(-1, self.p)
        omega = np.asarray(omega, float).reshape(y.shape)
        Vinv = _inverse(V, y.shape[0], self.p)
        g = np.einsum("nij,nj->ni", Vinv, y - omega)
        return g, -np.array(Vinv, copy=True)


class SoftmaxChannel(AIMChannel):
    """y = log softmax_row(beta h) (labels as log-probabilities; see the module docstring)."""

    name = "softmax"

    def __init__(self, T, beta=1.0):
        super().__init__(T)
        self.beta = float(beta)
        if not self.beta > 0:
            raise ValueError("beta must be > 0")

    def sample(self, z, rng):
        logits = self.beta * unfold(np.asarray(z, float).reshape(-1, self.p), self.T)
        return (logits - special.logsumexp(logits, axis=-1, keepdims=True)).reshape(-1, self.T * self.T)

    def observed(self, y):
        """Phi_ab = h_ab - h_TT (folded, (n, p)) from the log-softmax labels."""
        T = self.T
        logy = np.asarray(y, float).reshape(-1, T, T)
        phi = (logy - logy[:, :, T - 1:T]) / self.beta  # phi_ab = h_ab - h_aT
        rows, cols = pairs(T)
        return phi[:, rows, cols] + phi[:, T - 1, rows]  # + phi_Ta = h_Ta - h_TT

    def g_out(self, y, omega, V):
        Phi = self.observed(y)
        n, p = Phi.shape
        omega = np.asarray(omega, float).reshape(n, p)
        Vinv = _inverse(V, n, p)
        vu = Vinv.sum(axis=2)                 # V^-1 u (n, p)
        uvu = vu.sum(axis=1)                  # u^T V^-1 u (n,)
        c = np.einsum("ni,ni->n", vu, omega - Phi) / uvu
        mean = Phi + c[:, None]
        g = np.einsum("nij,nj->ni", Vinv, mean - omega)
        dg = vu[:, :, None] * vu[:, None, :] / uvu[:, None, None] - Vinv
        return g, dg


# -- bivariate normal ----------------------------------------------------------------------------
@lru_cache(maxsize=16)
def _plackett_rule(r, nodes):
    x, w = np.polynomial.legendre.leggauss(nodes)
    top = np.arcsin(r)
    t = 0.5 * top * (x + 1.0)
    return np.sin(t), np.cos(t) ** 2, 0.5 * top * w / (2.0 * np.pi)


def bvn_cdf(h, k, r, nodes=PLACKETT_NODES):
    """Phi2(h, k; r) = P(X < h, Y < k), corr(X, Y) = r, |r| < 1, by Plackett's formula (module
    docstring); h, k broadcast, r a scalar or an array broadcast with them."""
    h, k, r = np.broadcast_arrays(np.asarray(h, float), np.asarray(k, float), np.asarray(r, float))
    out = np.empty(h.shape)
    values = np.unique(r)
    if len(values) > FEW_CORRELATIONS:
        # one correlation per sample (GAMP with the per-sample "gram" cavity): the rule's nodes per element,
        # (n, nodes) temporaries, instead of one cached rule per distinct r in a Python loop
        x, w = np.polynomial.legendre.leggauss(int(nodes))
        top = np.arcsin(r)[..., None]
        t = 0.5 * top * (x + 1.0)
        sin_t, cos2_t = np.sin(t), np.cos(t) ** 2
        hh, kk = h[..., None], k[..., None]
        integrand = np.exp(-(hh * hh + kk * kk - 2.0 * hh * kk * sin_t) / (2.0 * cos2_t))
        out = special.ndtr(h) * special.ndtr(k) + np.sum(integrand * (0.5 * top * w / (2.0 * np.pi)), axis=-1)
        return np.clip(out, 0.0, 1.0)
    for value in values:  # a handful of distinct r (two in SE and GAMP with the scalar cavity): one rule each
        at = r == value
        sin_t, cos2_t, w = _plackett_rule(float(value), int(nodes))
        hh, kk = h[at][..., None], k[at][..., None]
        integrand = np.exp(-(hh * hh + kk * kk - 2.0 * hh * kk * sin_t) / (2.0 * cos2_t))
        out[at] = special.ndtr(h[at]) * special.ndtr(k[at]) + integrand @ w
    return np.clip(out, 0.0, 1.0)


def bvn_pdf(h, k, r):
    """The joint density phi2(h, k; r)."""
    one = 1.0 - r * r
    return np.exp(-(h * h - 2.0 * r * h * k + k * k) / (2.0 * one) - 0.5 * np.log(one) - _LOG_2PI)


def hardmax_kernel(k1, k2, r, gout="exact"):
    """(Phi2, D1, D2, phi2) at (k1, k2; r): D_i = dPhi2/dk_i ("exact") or the joint density phi2
    ("paper"), the numerators of the hardmax g_out."""
    if gout not in HARDMAX_GOUT:
        raise ValueError(f"unknown hardmax_gout {gout!r}")
    k1, k2, r = np.broadcast_arrays(np.asarray(k1, float), np.asarray(k2, float), np.asarray(r, float))
    Phi2 = bvn_cdf(k1, k2, r)
    pdf = bvn_pdf(k1, k2, r)
    if gout == "paper":
        return Phi2, pdf, pdf, pdf
    s = np.sqrt(1.0 - r * r)
    D1 = np.exp(-0.5 * k1 * k1 - 0.5 * _LOG_2PI) * special.ndtr((k2 - r * k1) / s)
    D2 = np.exp(-0.5 * k2 * k2 - 0.5 * _LOG_2PI) * special.ndtr((k1 - r * k2) / s)
    return Phi2, D1, D2, pdf


class HardmaxChannel(AIMChannel):
    """y_a = argmax_b h_ab for T = 2 (two bits per sample); g_out "exact" (default) or "paper"."""

    name = "hardmax"
    discrete = True
    # the two directions u_1 = h_11 - h_12 and u_2 = h_22 - h_12 in the folded order (h_11, h_12, h_22)
    directions = np.array([[1.0, -1.0, 0.0], [0.0, -1.0, 1.0]])

    def __init__(self, T=2, gout="exact"):
        if int(T) != 2:
            raise ValueError("the hardmax channel is implemented for T = 2 only")
        if gout not in HARDMAX_GOUT:
            raise ValueError(f"unknown hardmax_gout {gout!r}")
        super().__init__(2)
        self.gout = gout

    def __repr__(self):
        return f"HardmaxChannel(T=2, gout={self.gout!r})"

    def sample(self, z, rng):
        h = unfold(np.asarray(z, float).reshape(-1, self.p), 2)
        return np.argmax(h, axis=-1).astype(float)

    def signs(self, y):
        """s_a = +1 if row a of the label attends to a (itself), (n, 2)."""
        y = np.asarray(y, float).reshape(-1, 2)
        return np.where(y == np.arange(2.0), 1.0, -1.0)

    def _geometry(self, y, omega, V):
        s = self.signs(y)
        n = s.shape[0]
        omega = np.asarray(omega, float).reshape(n, self.p)
        A = self.directions
        V = np.asarray(V, float)
        AVA = np.einsum("ip,...pq,jq->...ij", A, V, A)  # (2, 2) or (n, 2, 2)
        AVA = np.broadcast_to(AVA, (n, 2, 2))
        sigma = np.sqrt(np.stack([AVA[:, 0, 0], AVA[:, 1, 1]], axis=1))   # (n, 2)
        k = s * (omega @ A.T) / sigma
        r = s[:, 0] * s[:, 1] * AVA[:, 0, 1] / (sigma[:, 0] * sigma[:, 1])
        r = np.round(r, 15)  # the paper convention's +-1/3 is one Plackett rule, not n of them
        return s, sigma, k, r

    def g_out(self, y, omega, V):
        s, sigma, k, r = self._geometry(y, omega, V)
        k1, k2 = k[:, 0], k[:, 1]
        Phi2, D1, D2, pdf = hardmax_kernel(k1, k2, r, self.gout)
        Phi2 = np.maximum(Phi2, PHI2_FLOOR)
        L = np.stack([D1, D2], axis=1) / Phi2[:, None]                     # d log Z / d k_i (or the paper's)
        # Jacobian M_ij = d L_i / d k_j
        if self.gout == "exact":
            d11 = -k1 * D1 - r * pdf
            d22 = -k2 * D2 - r * pdf
            M = np.empty((k.shape[0], 2, 2))
            M[:, 0, 0] = d11 / Phi2 - L[:, 0] ** 2
            M[:, 1, 1] = d22 / Phi2 - L[:, 1] ** 2
            M[:, 0, 1] = M[:, 1, 0] = pdf / Phi2 - L[:, 0] * L[:, 1]
        else:
            one = 1.0 - r * r
            dpdf = np.stack([-(k1 - r * k2) / one, -(k2 - r * k1) / one], axis=1) * pdf[:, None]
            true_d = np.stack([np.exp(-0.5 * k1 * k1) * special.ndtr((k2 - r * k1) / np.sqrt(one)),
                               np.exp(-0.5 * k2 * k2) * special.ndtr((k1 - r * k2) / np.sqrt(one))],
                              axis=1) / np.sqrt(2.0 * np.pi)
            row = dpdf / Phi2[:, None] - L[:, :1] * true_d / Phi2[:, None]   # d(pdf/Phi2)/dk_j
            M = np.stack([row, row], axis=1)
        B = (s / sigma)[:, :, None] * self.directions[None, :, :]           # dk_i/domega (n, 2, p)
        g = np.einsum("ni,nip->np", L, B)
        dg = np.einsum("nip,nij,njq->npq", B, M, B)
        return g, dg


#: the model's `channel` parameter
CHANNELS = {"softmax": SoftmaxChannel, "hardmax": HardmaxChannel, "linear": LinearChannel}


def make_channel(name, T, hardmax_gout="exact"):
    """The channel of a point."""
    if name == "hardmax":
        return HardmaxChannel(T, hardmax_gout)
    return CHANNELS[name](T)
