"""The output channel of the extensive-width quadratic network (spec rie_bsr_quadratic.md §B1, §B2).

A sample is one noisy linear measurement of the teacher matrix. In label units (the authors' AMP code and
data, spec §B1):

    y = (1/sqrt(m)) sum_k [(w_k . x)^2 / d - ||w_k||^2 / d] + sqrt(delta) xi = Tr[(x x^T - I) S*] / d + sqrt(delta) xi,

S* = W*^T W* / sqrt(m), xi ~ N(0, 1): `delta` is the LABEL-NOISE VARIANCE (the convention of the authors'
code, which their data confirm; their notebook caption "Delta = 0.25^2" disagrees, spec §9 item 1).

The theory works in S' units, S' = W*^T W* / m = S* / sqrt(m) (spectrum Marchenko-Pastur: mean 1, variance
1/kappa). Dividing the label by sqrt(kappa) (m = kappa d):

    y / sqrt(kappa) = z + sqrt(delta / kappa) xi,    z = Tr[(x x^T - I) S'] / sqrt(d),

so the channel acting on the pre-activation z is additive Gaussian noise of variance delta_th = delta / kappa
(the theory scripts' Delta). Under the cavity, z ~ N(omega, V) with V = 2 mmse' (mmse' = ||S_hat' - S'||_F^2 / d):
the factor 2 is E[(x^T A x - Tr A)^2] = 2 ||A||_F^2 for symmetric A (`CAVITY_FACTOR`). It is the AIM index
h_aa of one token (variance (1 + delta_aa) V) with additive noise.

Channel step of the SE (`channel_step`): the prior step sees S' + sqrt(t) Z (Z GOE, off-diagonal variance
1/d) with 1/t = qhat = 2 alpha (1 + delta_aa) E[g^2] = 4 alpha E[g^2], and at the Bayes-optimal (Nishimori)
point E[g^2] = -E[dg] = 1/(V + delta_th) for this Gaussian channel, whatever y: qhat = 4 alpha / (delta_th +
2 mmse'). That is the spec's "2 alpha t = mmse_RIE(t) + delta_th/2".
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core.channel import LinearChannel
from seqphase.core.errors import ParameterError

#: cavity variance of the pre-activation per unit of mmse': E[(x^T A x - Tr A)^2] = 2 ||A||_F^2
CAVITY_FACTOR = 2.0


def check_kappa(kappa, field="kappa"):
    kappa = float(kappa)
    if not (kappa > 0 and math.isfinite(kappa)):
        raise ParameterError(field, f"the width ratio m/d must be > 0 and finite, got {kappa}", "pass kappa > 0")
    return kappa


def check_delta(delta, field="delta"):
    delta = float(delta)
    if not (delta >= 0 and math.isfinite(delta)):
        raise ParameterError(field, f"the label-noise variance must be >= 0 and finite, got {delta}",
                             "pass delta >= 0")
    return delta


class QuadraticChannel(LinearChannel):
    """y' = z + sqrt(delta / kappa) xi on the pre-activation z = Tr[(x x^T - I) S'] / sqrt(d) (S' units).

    `delta` is the label-noise variance in label units (module docstring), `kappa` = m/d. The kernel
    (g = (y' - omega)/(V + delta_th), dg = -1/(V + delta_th)), sampling and posterior are those of the
    shared scalar linear channel at noise delta_th = delta / kappa; this class adds the network's
    measurement (`preactivation`, `labels`), the unit maps and the SE's channel step.
    """

    name = "quadratic"

    def __init__(self, delta=0.0, kappa=1.0):
        self.label_delta = check_delta(delta)
        self.kappa = check_kappa(kappa)
        super().__init__(self.label_delta / self.kappa)

    @property
    def delta_th(self):
        """Noise variance in S' units (the theory scripts' Delta): delta / kappa."""
        return self.delta

    # -- the network's measurement ------------------------------------------------------------------
    @staticmethod
    def preactivation(x, S):
        """z_mu = (x_mu^T S x_mu - Tr S) / sqrt(d) for inputs x (n, d) and a symmetric S (d, d): the
        pre-activation in S' units when S = S'. Never materialises x x^T (row sums of (x S) * x)."""
        x = np.asarray(x, float)
        d = x.shape[1]
        return (np.einsum("nd,nd->n", x @ S, x) - np.trace(S)) / math.sqrt(d)

    def labels(self, x, W, rng):
        """Labels in label units from teacher weights W (m, d) and inputs x (n, d): the network itself,
        (1/sqrt(m)) sum_k [(w_k . x)^2 / d - ||w_k||^2 / d] + sqrt(delta) xi."""
        x, W = np.asarray(x, float), np.asarray(W, float)
        m, d = W.shape
        h = x @ W.T
        clean = (np.sum(h * h, axis=1) - np.sum(W * W)) / (d * math.sqrt(m))
        return clean + math.sqrt(self.label_delta) * rng.standard_normal(len(clean))

    def to_theory_units(self, y):
        """Label -> channel output in S' units: y' = y / sqrt(kappa) (exact for m = kappa d)."""
        return np.asarray(y, float) / math.sqrt(self.kappa)

    # -- state evolution ----------------------------------------------------------------------------
    @staticmethod
    def cavity_variance(mmse):
        """Variance of z under the cavity given the prior's error mmse' (S' units)."""
        return CAVITY_FACTOR * np.asarray(mmse, float)

    def channel_step(self, alpha, mmse):
        """qhat = 2 alpha (1 + delta_aa) E[g^2] = 4 alpha (-dg) at cavity V = 2 mmse' (module docstring):
        E[g^2] = -E[dg] at the Nishimori point, and dg of this channel does not depend on y or omega."""
        V = self.cavity_variance(mmse)
        _, dg = self.g_out_scalar(0.0, 0.0, V)
        return 2.0 * float(alpha) * CAVITY_FACTOR * (-dg)

    def __repr__(self):
        return f"QuadraticChannel(delta={self.label_delta}, kappa={self.kappa})"
