"""The one GAMP loop of seqphase: damping, the Onsager (reaction) bookkeeping, the per-iteration trace,
convergence and divergence, and instance sampling. A family fills in its prior and channel steps
(`GampSteps`) in its own gamp.py; the loop below is written once.

One iteration, for an estimate w_hat with prior-side variances C (shapes are the family's):

    V      = cavity(C)                          cavity covariance of the pre-activations
    R_t    = (1 - c) V(C_und) g_{t-1} + c R_{t-1}      (c = damping > 0)
           = V g_{t-1}                                  (c = 0)
    omega  = project(w_hat) - R_t               X w_hat minus the reaction term
    g, dg  = g_out(omega, V)                    the family's channel g_out (the one its SE uses)
    A, B   = fields(g, dg, w_hat)               prior-side precision and field
    w_new, C_new = denoise(B, A)                the prior's denoiser (posterior mean and variance)
    w_hat <- (1 - c) w_new + c w_hat,  C <- (1 - c) C_new + c C

Damping-consistent Onsager term: with damping the estimate w_hat_t = (1 - c) w_new,t + c w_hat_{t-1}
carries (1 - c) of the new reaction and c of the old one, so R_t = (1 - c) V(C_und,t) g_{t-1} +
c R_{t-1}, with C_und = C_new the Jacobian of the UNDAMPED denoiser. Subtracting the full V g_{t-1}
over-subtracts c V g_{t-1}, a negative feedback that makes the uninformative fixed point of even
channels stable (phase retrieval y = |z|, alpha = 1.5, d = 1000, damping 0.3, 8 seeds: mean |cos| 0.025
instead of 1; z1 z2 at alpha = 1.5: 0.011 instead of 0.557). This fix used to be written once per
family; it now lives here only.

Stops: `collapsed(V, C)` (nothing left for the channel to resolve: converged, the iteration is not
counted), a non-finite channel output or estimate (`divergence`: "stop" flags the run as diverged,
"raise" raises FloatingPointError, "ignore" lets NaN propagate), or the change of the estimate below
`tol` (converged).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from seqphase.core.errors import ParameterError


class GampSteps:
    """The prior and channel steps of one family's GAMP on one instance (override every method that
    raises). Hooks may keep state (e.g. a counter of clipped iterations) on `self`."""

    #: what a non-finite channel output or estimate does: "stop" (flag diverged), "raise", "ignore"
    divergence = "ignore"

    def initial(self):
        """(w_hat, C, g0): the starting estimate, its variances and a zero array shaped like g."""
        raise NotImplementedError

    def cavity(self, C):
        """The cavity covariance V of the pre-activations (what the channel sees)."""
        raise NotImplementedError

    def collapsed(self, V, C):
        """True when the cavity has no width left to resolve (stop, converged)."""
        return False

    def reaction(self, C, g, V=None, weight=1.0):
        """weight * V(C) applied to g. `V` is the cavity just computed from the same C (undamped), or
        None (damped: C is the undamped denoiser's C_und, V(C_und) is computed here and `weight` is
        1 - damping; a family applies the weight where its stored algorithm version did, so the
        floating-point operations stay those of the results already stored)."""
        raise NotImplementedError

    def project(self, w):
        """X w_hat: the pre-activations of the estimate before the reaction term is removed."""
        raise NotImplementedError

    def g_out(self, omega, V):
        """(g, dg) of the family's channel at (omega, V) (a hook, so `self.channel` can hold the
        channel object)."""
        raise NotImplementedError

    def fields(self, g, dg, w):
        """(A, B): the prior-side precision and field from the channel's g, dg and the estimate."""
        raise NotImplementedError

    def denoise(self, B, A):
        """(w_new, C_new): the prior's posterior mean and variance given the fields."""
        raise NotImplementedError

    def change(self, w_new, w):
        """How much the estimate moved (compared with tol)."""
        return float(np.sqrt(np.mean((w_new - w) ** 2)))

    def record(self, w):
        """What the trace keeps of an estimate (index 0 = the initialisation)."""
        raise NotImplementedError


@dataclass
class GampRun:
    """The outcome of `iterate`: one record per logged estimate (the initialisation first), the
    iterations run, the flags, and the final estimate and variances."""

    records: list
    n_iter: int
    converged: bool
    diverged: bool
    w: np.ndarray
    C: np.ndarray
    stopped: bool = False  # ended by the caller's `stop` test (neither converged nor at max_iter)


def _finite(*arrays):
    return all(np.all(np.isfinite(a)) for a in arrays)


def iterate(steps, *, max_iter, damping=0.0, tol=1e-8, stop=None):
    """Run GAMP with the family's `steps` (see the module docstring for one iteration). `stop(records)`,
    if given, is asked after each iteration whether the run's outcome is decided (e.g. the onset's
    stopping rule, core/onset.py); True ends the run there, flagged `stopped`."""
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping (weight of the old iterate) must be in [0, 1), got {damping}")
    w, C, g = steps.initial()
    C_und = C  # Jacobian of the undamped denoiser (enters the damped Onsager term)
    react = np.zeros_like(g)
    records = [steps.record(w)]
    converged = diverged = stopped = False
    it = 0
    for it in range(1, max_iter + 1):
        V = steps.cavity(C)
        if steps.collapsed(V, C):
            converged = True
            it -= 1
            break
        if damping > 0:
            react = steps.reaction(C_und, g, weight=1 - damping) + damping * react
        else:
            react = steps.reaction(C, g, V)
        omega = steps.project(w) - react
        g, dg = steps.g_out(omega, V)
        if steps.divergence == "stop" and not _finite(g, dg):
            diverged = True
            it -= 1
            break
        A, B = steps.fields(g, dg, w)
        w_new, C_new = steps.denoise(B, A)
        C_und = C_new
        if damping > 0:
            w_new = (1 - damping) * w_new + damping * w
            C_new = (1 - damping) * C_new + damping * C
        if steps.divergence != "ignore" and not _finite(w_new):
            if steps.divergence == "raise":
                raise FloatingPointError("GAMP diverged (non-finite estimate)")
            diverged = True
            it -= 1
            break
        delta = steps.change(w_new, w)
        w, C = w_new, C_new
        records.append(steps.record(w))
        if delta < tol:
            converged = True
            break
        if stop is not None and it < max_iter and stop(records):
            stopped = True
            break
    return GampRun(records, max(it, 0), converged, diverged, w, C, stopped)


def sample_instance(alpha, d, rng, *, teacher, labels, tokens=None, normalise=True):
    """(X, W*, labels) of one instance with n = round(alpha d) samples: X i.i.d. N(0, 1) of shape
    (n, d) or (n, tokens, d), divided by sqrt(d) if `normalise`; W* = teacher(rng); labels(X, W*, rng).
    The draw order (X, then the teacher, then the labels' noise) is the same for every family, so an
    instance is a function of the point's seed alone."""
    n = int(round(alpha * d))
    X = rng.standard_normal((n, d) if tokens is None else (n, tokens, d))
    if normalise:
        X = X / np.sqrt(d)
    W = teacher(rng)
    return X, W, labels(X, W, rng)


def width(ratio, d, name):
    """round(ratio d), a width or rank of an instance of dimension d (m = kappa d, r = rho d, ...), >= 1:
    ParameterError naming `method.d` otherwise (`name` is the ratio's parameter name, for the message)."""
    m = int(round(float(ratio) * int(d)))
    if m < 1:
        raise ParameterError("method.d", f"d = {d} is too small for {name} = {float(ratio):g}: round({name} d) "
                             f"must be >= 1", f"use d >= {math.ceil(0.5 / float(ratio))}")
    return m


def n_samples(alpha, d):
    """n = round(alpha d^2) >= 1 for the models with n = alpha d^2 samples (ParameterError naming
    `params.alpha` otherwise)."""
    n = int(round(float(alpha) * int(d) ** 2))
    if n < 1:
        raise ParameterError("params.alpha", f"alpha d^2 = {float(alpha) * int(d) ** 2:g} rounds to no sample",
                             f"use alpha >= {0.5 / int(d) ** 2:g} at d = {d}")
    return n
