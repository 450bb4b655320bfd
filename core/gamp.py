"""The one GAMP loop of seqphase: damping, the Onsager (reaction) bookkeeping, the per-iteration trace
(`GampTrace`), convergence and divergence, instance sampling, and the prior side of GAMP-RIE
(`RIESteps`). A family fills in its prior and channel steps (`GampSteps`) in its own gamp.py and runs
them with `iterate`; the loop below is written once.

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
from collections.abc import Mapping

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
        """What the trace keeps of an estimate (index 0 = the initialisation): a mapping of named
        metrics ({"overlap": ..., "mse": ...}), each a series of the trace (`GampTrace`). Called right
        after the estimate's `denoise`, so a family may also log the state of that step (e.g. its
        predicted error)."""
        raise NotImplementedError

    def loop_damping(self, damping):
        """The part of `damping` the loop applies to the estimate and its Onsager term: all of it,
        unless the family damps elsewhere (quadratic's channel form keeps it and returns 0)."""
        return damping

    def totals(self):
        """Run-level values the trace keeps besides its series (e.g. smi's count of clipped
        iterations): a mapping, read once the run has ended."""
        return {}


class GampTrace:
    """What `iterate` returns: the per-iteration records (index 0 = the start) and the run's outcome.

    `records` holds what the steps' `record` returned, one per logged estimate. Records that are
    mappings of named metrics are also the trace's series: `trace.overlap` is the array of every
    record's "overlap", iteration first (and `series` maps each name to its array). n_iter: iterations
    run; converged, diverged, stopped (ended by the caller's `stop` test: neither converged nor at
    max_iter); w, C: the last estimate and its variances; the steps' `totals()` are attributes too."""

    def __init__(self, records, n_iter, converged, diverged, stopped, w, C, totals):
        self.records = records
        self.n_iter, self.converged, self.diverged, self.stopped = n_iter, converged, diverged, stopped
        self.w, self.C = w, C
        self.series = ({name: np.array([r[name] for r in records]) for name in records[0]}
                       if isinstance(records[0], Mapping) else {})
        self.totals = dict(totals)

    def __getattr__(self, name):
        for values in (self.__dict__.get("series", {}), self.__dict__.get("totals", {})):
            if name in values:
                return values[name]
        names = sorted(self.__dict__.get("series", {}))
        raise AttributeError(f"the GAMP trace has no {name!r} (its series: {names})")


class RIESteps(GampSteps):
    """The prior side of GAMP-RIE, written once for the matrix families (aim, quadratic: symmetric d x d;
    bsr: rectangular d x L): the estimate S_hat is a matrix with one scalar variance c, the predicted
    error per entry (the RIE's mmse), and the prior step is the rotation-invariant denoiser at the
    effective noise 1/A of the channel's precision A.

        fields     A = precision_scale * sum of the squared g (folded entries weighted by
                   `entry_weights`, if any) / precision_norm;  R = `field`(S_hat, g, A)
        denoise    S_new = rie.denoise(R, 1/A),  c = mmse(1/A)  (the closed-form Onsager term)
        A = 0      (every g = 0, no information from the channel): R = S_hat and `uninformed(R)`
        stop       converged once c < C_MIN (perfect recovery: nothing left for the channel to resolve,
                   and g_out would divide by ~0); a non-finite g or estimate stops the run as diverged
        errors     error_unit * ||S - T||_F^2 / error_norm (`error`): the change compared with tol, and
                   the family's recorded error

    A family sets `rie` (with `denoise(R, noise)`), `mmse` (noise -> mmse, vectorised), the scales above,
    `back_projection(g)` for the symmetric field and `uninformed`, and keeps the loop's other hooks.
    `precision` is the last A (0 before the first iteration) and `c` the last undamped c, so a family's
    `record` can log them: the loop records an estimate right after its `denoise`."""

    divergence = "stop"
    #: predicted error below which the run stops as converged (perfect recovery)
    C_MIN = 1e-12
    entry_weights = None

    def collapsed(self, V, c):
        return c < self.C_MIN

    def fields(self, g, dg, S_hat):
        gg = g * g
        total = float(np.sum(gg if self.entry_weights is None else gg @ self.entry_weights))
        A = self.precision_scale * total / self.precision_norm
        self.precision = A
        if not A > 0:  # no information from the channel (every g = 0): the field is the estimate
            return 0.0, S_hat
        return A, self.field(S_hat, g, A)

    def field(self, S_hat, g, A):
        """R = S_hat + 2 / (A d^{3/2}) B(g), the symmetric families' field (B = `back_projection`)."""
        return S_hat + (2.0 / (A * self.d**1.5)) * self.back_projection(g)

    def denoise(self, R, A):
        if not A > 0:
            S_new, c = self.uninformed(R)
        else:
            noise = 1.0 / A
            S_new = self.rie.denoise(R, noise)
            c = float(self.mmse(np.array(noise)))
        self.c = c
        return S_new, c

    def uninformed(self, R):
        """(S_new, c) when the channel brought no information (A = 0); R is the current estimate."""
        raise NotImplementedError

    def change(self, S_new, S_hat):
        return self.error(S_new, S_hat)

    def error(self, S, T):
        """error_unit ||S - T||_F^2 / error_norm: the per-entry squared distance in the family's units."""
        return self.error_unit * float(np.sum((S - T) ** 2)) / self.error_norm


def _finite(*arrays):
    return all(np.all(np.isfinite(a)) for a in arrays)


def iterate(steps, *, max_iter, damping=0.0, tol=1e-8, stop=None):
    """Run GAMP with the family's `steps` (see the module docstring for one iteration); returns its
    `GampTrace`. `damping` in [0, 1) is the weight of the old iterate (`steps.loop_damping` says which
    part of it the loop applies). `stop(records)`, if given, is asked after each iteration whether the
    run's outcome is decided (e.g. the onset's stopping rule, core/onset.py); True ends the run there,
    flagged `stopped`."""
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping (weight of the old iterate) must be in [0, 1), got {damping}")
    damping = steps.loop_damping(damping)
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
    return GampTrace(records, max(it, 0), converged, diverged, stopped, w, C, steps.totals())


#: float64 draws per block of rows while an instance's inputs are filled from their own stream (8 MB)
CHUNK_ELEMENTS = 1 << 20


def sample_instance(alpha, d, rng, *, teacher, labels, tokens=None, normalise=True, dtype=np.float64):
    """(X, W*, labels) of one instance with n = round(alpha d) samples: X i.i.d. N(0, 1) of shape (n, d)
    or (n, tokens, d), divided by sqrt(d) if `normalise` and stored in `dtype`; W* = teacher(rng);
    labels(X, W*, rng), computed from the float64 draws whatever `dtype`.

    `rng` a Generator: one stream, drawn in the order X, the teacher, the labels' noise, the same for
    every family, so an instance is a function of the point's seed alone.
    `rng` a SeedSequence: it spawns three streams (teacher, inputs, labels' noise), so each part is the
    same whatever the others draw or store. X is then filled in blocks of rows (CHUNK_ELEMENTS float64
    draws each) and each block is labelled as it is drawn, `labels(block, W*, noise stream)`, the blocks'
    labels concatenated: the memory beyond X (e.g. float32) is one float64 block. `labels` must then
    return an array and draw its noise row by row in order (as one call on all rows would)."""
    n = int(round(alpha * d))
    row = (d,) if tokens is None else (tokens, d)
    if isinstance(rng, np.random.SeedSequence):
        teacher_rng, input_rng, noise_rng = (np.random.default_rng(s) for s in rng.spawn(3))
        W = teacher(teacher_rng)
        X = np.empty((n,) + row, dtype=dtype)
        parts = []
        step = max(1, CHUNK_ELEMENTS // math.prod(row))
        for start in range(0, n, step):
            block = input_rng.standard_normal((min(step, n - start),) + row)
            if normalise:
                block = block / np.sqrt(d)
            X[start:start + len(block)] = block
            parts.append(labels(block, W, noise_rng))
        return X, W, np.concatenate(parts)
    X = rng.standard_normal((n,) + row)
    if normalise:
        X = X / np.sqrt(d)
    W = teacher(rng)
    y = labels(X, W, rng)
    return (X if X.dtype == dtype else X.astype(dtype)), W, y


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
