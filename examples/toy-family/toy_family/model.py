"""The linear channel y = F x + sqrt(delta) z, x ~ N(0, I_d): its Bayes-optimal state evolution in the error
V = 1 - m (m the overlap),
    V_{t+1} = 1 / (1 + mhat_t),   mhat_t = alpha / (delta + V_t)
(the Gaussian prior's denoiser at SNR mhat, and the channel's SNR at the cavity variance V), from V_0 = 1. Its
fixed point solves V^2 + (delta + alpha - 1) V - delta = 0: `closed_form_mse` gives the positive root, which the
iteration reaches for delta > 0.
"""

import math

import numpy as np

from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, Variable

MATRIX = ("row", "col")
ONE_BY_ONE = {"row": np.arange(1, 2), "col": np.arange(1, 2)}  # overlaps are p x p matrices in every family


def closed_form_mse(alpha, delta):
    """The fixed point V of the state evolution: the positive root of V^2 + b V - delta = 0, b = delta + alpha - 1
    (written without cancellation for b > 0)."""
    b = delta + alpha - 1.0
    root = math.sqrt(b * b + 4.0 * delta)
    return (root - b) / 2.0 if b <= 0 else 2.0 * delta / (root + b)


def state_evolution(alpha, delta, damping=0.0, tol=1e-12, max_iter=10_000):
    """(V, iterations, converged): the damped iteration from V = 1 until |change of V| < tol."""
    V = 1.0
    for n_iter in range(1, max_iter + 1):
        new = (1.0 - damping) / (1.0 + alpha / (delta + V)) + damping * V
        if abs(new - V) < tol:
            return new, n_iter, True
        V = new
    return V, max_iter, False


class SE(Method):
    def layout(self, settings):
        return Layout(ONE_BY_ONE, {
            "overlap": Variable(MATRIX, "f8", "overlap m = 1 - V at the SE fixed point"),
            "mse": Variable((), "f8", "Bayes-optimal error V = E (x_hat - x*)^2 per component"),
            "gen_error": Variable((), "f8", "Bayes-optimal test error of a new label, delta + V"),
            "n_iter": Variable((), "i4", "SE iterations run"),
            "converged": Variable((), "i1", "1 if the SE met its tolerance"),
        })

    def run(self, params, settings, seed_sequence):
        V, n_iter, converged = state_evolution(params["alpha"], params["delta"], **settings)
        return {"overlap": np.full((1, 1), 1.0 - V), "mse": V, "gen_error": params["delta"] + V,
                "n_iter": n_iter, "converged": int(converged)}


class LinearModel(Model):
    def __init__(self):
        super().__init__(
            name="toy-linear",
            description="linear channel y = F x + sqrt(delta) z with a Gaussian prior (a toy family)",
            params={
                "alpha": Param("alpha", "float", "samples per dimension n/d", REQUIRED, low=0.0),
                "delta": Param("delta", "float", "variance of the label noise", 0.1, low=0.0),
            },
            methods={
                "se": SE({"damping": Param("damping", "float", "weight of the old iterate", 0.0, low=0.0,
                                           high=1.0, low_inclusive=True, high_inclusive=False),
                          "tol": Param("tol", "float", "stop when |change of V| < tol", 1e-12, low=0.0),
                          "max_iter": Param("max_iter", "int", "iteration cap", 10_000, low=1, low_inclusive=True)},
                         version=1, doc="state evolution from V = 1"),
            },
        )
