"""The output channel of bilinear sequence regression (spec rie_bsr_quadratic.md §A1, §A3).

A sample is one noisy linear measurement of the target matrix:

    y = z + sqrt(delta) xi,    z = <X, S*> / sqrt(dL),    xi ~ N(0, 1),

X (d x L) i.i.d. N(0, 1), S* = U* V*^T / sqrt(r) with unit-variance entries, `delta` the label-noise VARIANCE
(Var y = 1 + delta). Under the cavity (SE and GAMP), z ~ N(omega, V) with V = ||S* - S_hat||_F^2 / (dL), the
per-entry error of the current estimate: X is i.i.d. N(0, 1), so <X, A>/sqrt(dL) has variance ||A||_F^2/(dL)
(`CAVITY_FACTOR` = 1, against 2 for the symmetric xx^T - I of the quadratic network).

Channel step of the SE (`channel_step`): the prior step sees the matrix-denoising channel S* + sqrt(zeta) Z
(Z i.i.d. N(0, 1), d x L) with 1/zeta = qhat = alpha E[g^2] = alpha (-E[dg]) (Nishimori), and for this Gaussian
channel -dg = 1/(delta + V) whatever y and omega: zeta = (delta + V) / alpha. With V = mmse_den(zeta) this is
the spec's (A.1), alpha zeta = delta + mmse_den(zeta).
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core.channel import LinearChannel
from seqphase.core.errors import ParameterError

#: cavity variance of the pre-activation per unit of per-entry error: Var <X, A>/sqrt(dL) = ||A||_F^2 / (dL)
CAVITY_FACTOR = 1.0


def _checked(value, field, valid, meaning, fix):
    """float(value) if valid(it), else a ParameterError naming `field`."""
    value = float(value)
    if not valid(value):
        raise ParameterError(field, f"{meaning}, got {value}", fix)
    return value


def check_rho(rho, field="rho"):
    """rho = r/d, the rank per token dimension: > 0 and finite (rho -> 0 is the separate low-rank limit)."""
    return _checked(rho, field, lambda v: 0 < v < math.inf, "the rank ratio r/d must be > 0 and finite",
                    "pass rho > 0 (the rank-O(1) limit rho -> 0 is se.low_rank_mse)")


def check_beta(beta, field="beta"):
    """beta = L/d, the sequence length per token dimension: > 0 and finite (beta = inf: se.large_beta_mmse)."""
    return _checked(beta, field, lambda v: 0 < v < math.inf, "the aspect ratio L/d must be > 0 and finite",
                    "pass beta > 0 (beta = inf is se.large_beta_mmse)")


def check_delta(delta, field="delta"):
    """delta, the label-noise variance: >= 0 and finite."""
    return _checked(delta, field, lambda v: 0 <= v < math.inf, "the label-noise variance must be >= 0 and finite",
                    "pass delta >= 0")


def check_alpha(alpha, field="alpha"):
    """alpha = n/(dL): >= 0 and finite (alpha = 0 is the prior: error 1)."""
    return _checked(alpha, field, lambda v: 0 <= v < math.inf, "the sample ratio n/(dL) must be >= 0 and finite",
                    "pass alpha >= 0")


def reduce_aspect(rho, beta):
    """(rho', beta') with beta' >= 1. The theory is written for d <= L; for L < d the roles of d and L swap
    (alpha = n/(dL) and the per-entry error are symmetric): beta' = L'/d' = 1/beta and rho' = r / min(d, L)
    = rho / beta (spec §8 step 1)."""
    rho, beta = check_rho(rho), check_beta(beta)
    return (rho, beta) if beta >= 1.0 else (rho / beta, 1.0 / beta)


class BSRChannel(LinearChannel):
    """y = z + sqrt(delta) xi on the pre-activation z = <X, S> / sqrt(dL).

    The kernel (g = (y - omega)/(V + delta), dg = -1/(V + delta)), sampling and posterior are those of the
    shared scalar linear channel at noise `delta`; this class adds the model's measurement (`preactivation`,
    `labels`) and the SE's channel step.
    """

    name = "bsr"

    def __init__(self, delta=0.0):
        super().__init__(check_delta(delta))

    # -- the model's measurement --------------------------------------------------------------------
    @staticmethod
    def preactivation(X, S):
        """z_mu = <X_mu, S> / sqrt(dL) for inputs X (n, d, L) and a matrix S (d, L): one matrix-vector
        product on the flattened inputs."""
        X = np.asarray(X, float)
        n, d, L = X.shape
        return X.reshape(n, d * L) @ np.asarray(S, float).reshape(d * L) / math.sqrt(d * L)

    def labels(self, X, S, rng):
        """Noisy labels y = <X_mu, S> / sqrt(dL) + sqrt(delta) xi_mu."""
        return self.sample_scalar(self.preactivation(X, S), rng)

    # -- state evolution ----------------------------------------------------------------------------
    @staticmethod
    def cavity_variance(mmse):
        """Variance of z under the cavity given the per-entry error of the estimate."""
        return CAVITY_FACTOR * np.asarray(mmse, float)

    def channel_step(self, alpha, mmse):
        """zeta = 1 / qhat = 1 / (alpha (-dg)) at cavity V = mmse: (delta + mmse) / alpha (module docstring;
        dg of this channel depends on neither y nor omega). Vectorised over mmse; inf at alpha = 0."""
        _, dg = self.g_out_scalar(0.0, 0.0, self.cavity_variance(mmse))
        with np.errstate(divide="ignore"):
            return 1.0 / (float(alpha) * (-dg))

    def __repr__(self):
        return f"BSRChannel(delta={self.delta})"
