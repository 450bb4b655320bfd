"""GAMP-RIE for bilinear sequence regression (spec rie_bsr_quadratic.md §A3, §8 "GAMP-RIE at finite d"): the
prior and channel steps (`BSRSteps`) of the one GAMP loop of `core/gamp.py` (run with `gamp.iterate`, or one
seed of a point with `run_seed`), which owns the iteration, the damping, the damping-consistent Onsager
(reaction) term, the trace and the stops; the prior side (fields, RIE denoiser, stops) is the shared
`gamp.RIESteps` with the rectangular RIE.

Instance (`sample_instance`): n = round(alpha d L) inputs X_mu (d x L, i.i.d. N(0, 1)), stored flattened as
X_f (n, dL); teacher S* = U V^T / sqrt(r), U (d, r), V (L, r) i.i.d. N(0, 1), r = round(rho d); labels from
the family's channel, y = <X_mu, S*> / sqrt(dL) + sqrt(delta) xi.

State: the estimate S_hat (d x L) and one scalar C, the predicted per-entry error (the denoising MMSE).
One iteration, hook by hook (spec §A3 steps 1-9):

    cavity     V = C                                                                   (step 1)
    reaction   V g_{t-1}                                                               (step 2)
    project    X_f vec(S_hat) / sqrt(dL); omega = that minus the reaction              (step 2)
    g_out      the BSR channel's g_out, g = (y - omega) / (delta + V) (channels.py, the one the SE uses)
    fields     A = alpha mean(g^2) = sum(g^2) / (dL) (the estimate of 1/zeta),
               R = S_hat + (1/A) reshape(X_f^T g) / sqrt(dL)                           (steps 5, 6)
    denoise    S_new = RIE denoise(R, zeta = 1/A), C = mmse_den(zeta) from the cached table   (steps 7, 8)
               (A = 0, every residual 0: the estimate and C are kept, zeta = inf)
    change     ||S_hat_t - S_hat_{t-1}||_F^2 / (dL) of the damped iterate, stop below tol     (step 9)
    record     mse ||S_hat - S*||_F^2 / (dL), the predicted error mse_predicted = C and zeta (index 0 = the
               start: C_0, zeta = inf)

The variance is the closed-form denoising MMSE, not an empirical divergence: for the Bayes-optimal denoiser
zeta <div f> = mmse (Nishimori), the spec's step 8.

Damping. The loop damps the estimate and its variance, S_hat <- (1 - c) S_new + c S_hat, C <- (1 - c) C_new
+ c C, and carries the reaction as R_t = (1 - c) C_und g_{t-1} + c R_{t-1}. Since omega is linear in S_hat,
    omega_t = (1 - c) [X S_new,t - C_und g_{t-1}] + c omega_{t-1},   V_t = (1 - c) C_und + c V_{t-1}:
exactly the spec's damping of omega and V (its steps 3-4). The one difference from the authors' code is the
field: R = S_hat + X^T g / A uses the damped S_hat, theirs the undamped one; both have the same fixed points.
Without damping the iteration from the spec's start collapses (spec pitfall 7): at d = L = 100, rho = 0.5,
alpha = 0.5 (SE 0.3515) zeta -> 0 within 4 iterations and the error ends at 30.1 +- 1.6 (4 seeds), against
0.344 +- 0.007 with damping 0.5. The cause is the start's variance C_0 = 20, ten times the true error (2) of a
prior sample: undamped from C_0 = 2 it converges (0.344 +- 0.007). docs/validation/bsr.md, tests/bsr/test_bsr_gamp.py.

Start (spec: `scale` = 20). S_hat_0 = a fresh prior sample (its own random stream, independent of the
teacher: error 2 per entry), C_0 = `init_variance`; g_0 = 0, so the first omega = X S_hat_0 (the authors' code
instead starts from omega = scale, whose first residual is ~ -scale: pitfall 7).

Memory: X_f is the only O(n dL) array. In float32 (`precision`, the default) it is 4 n d L bytes: 400 MB at
d = L = 100, alpha = 1 (float64: 800 MB). It is filled in row blocks of float64 draws (core/gamp.py
`sample_instance` from a SeedSequence: CHUNK_ELEMENTS draws a block), and the labels are computed from the
float64 blocks, so the instance (teacher, X, labels) is the same whatever the precision; only the two
matrix-vector products of each iteration run in float32 (rounding 1e-7 relative per product; the final errors
of float32 and float64 runs agree to < 1e-5, tests/bsr/test_bsr_gamp.py).

Stops (core/gamp.py, `RIESteps`): converged when the change is below tol or when C collapses below
C_MIN = 1e-12 (noiseless perfect recovery: zeta -> 0 and g_out would divide by ~0); a non-finite g or
estimate stops the run as diverged.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core import gamp
from seqphase.core.errors import ParameterError
from seqphase.core.rectangular_rie import RectangularRIE, rectangular_mmse_table

#: floating point of the stored inputs (the two products per iteration run in it)
PRECISIONS = ("float32", "float64")


def sizes(alpha, rho, beta, d):
    """(L, r, n) = (round(beta d), round(rho d), round(alpha d L)); ParameterError if one is < 1."""
    d = int(d)
    L = int(round(float(beta) * d))
    r = int(round(float(rho) * d))
    if L < 1:
        raise ParameterError("method.d", f"d = {d} gives L = round(beta d) = {L} tokens for beta = {beta}",
                             f"use d >= {math.ceil(0.5 / float(beta))}")
    if r < 1:
        raise ParameterError("method.d", f"d = {d} is too small for rho = {rho}: the rank r = round(rho d) "
                             f"must be >= 1", f"use d >= {math.ceil(0.5 / float(rho))}")
    n = int(round(float(alpha) * d * L))
    if n < 1:
        raise ParameterError("params.alpha", f"alpha d L = {float(alpha) * d * L:g} rounds to no sample",
                             f"use alpha >= {0.5 / (d * L):g} at d = {d}, L = {L}")
    return L, r, n


def prior_sample(d, L, r, rng):
    """U V^T / sqrt(r) with U (d, r), V (L, r) i.i.d. N(0, 1): unit-variance entries, rank r."""
    U = rng.standard_normal((d, r))
    V = rng.standard_normal((L, r))
    return U @ V.T / math.sqrt(r)


def sample_instance(channel, alpha, rho, beta, d, seed_sequence, precision="float32"):
    """(X_f (n, dL) in `precision`, S* (d, L), y (n,)) of one instance.

    Streams (core/gamp.py `sample_instance` from a SeedSequence): the seed spawns (teacher, inputs, label
    noise), so each part is the same whatever the precision or the block size. X_f is filled in blocks of
    rows; y = X_f vec(S*) / sqrt(dL) + noise is computed from the float64 blocks."""
    L, r, n = sizes(alpha, rho, beta, d)

    def labels(X, S, rng):
        return channel.sample_scalar(X @ (S.reshape(-1) / math.sqrt(d * L)), rng)

    return gamp.sample_instance(n / (d * L), d * L, seed_sequence, normalise=False, dtype=np.dtype(precision),
                                teacher=lambda rng: prior_sample(d, L, r, rng), labels=labels)


class BSRSteps(gamp.RIESteps):
    """GAMP-RIE steps on one BSR instance (module docstring), from the start S_init with variance
    init_variance."""

    def __init__(self, channel, X, y, S_true, rho, beta, *, S_init, init_variance=20.0):
        self.channel, self.X, self.y, self.S_true = channel, X, np.asarray(y, float), S_true
        self.d, self.L = S_true.shape
        self.n = X.shape[0]
        self.dL = self.d * self.L
        self.root_dL = math.sqrt(self.dL)
        # the instance's own rank and aspect ratios (r/d, L/d): the denoiser needs L/d exactly
        self.rie = RectangularRIE(rho, self.L / self.d)
        self.table = rectangular_mmse_table(rho, self.L / self.d)
        self.mmse = self.table.mmse
        self.precision_scale, self.precision_norm = 1.0, self.dL  # A = sum(g^2) / (dL)
        self.error_unit, self.error_norm = 1.0, self.dL
        self.S_init, self.init_variance = S_init, float(init_variance)
        self.precision, self.c = 0.0, self.init_variance

    def initial(self):
        return self.S_init.copy(), self.init_variance, np.zeros((self.n, 1))

    def cavity(self, C):
        return np.array([[C]])

    def reaction(self, C, g, V=None, weight=1.0):
        return (weight * C) * g

    def project(self, S_hat):
        flat = S_hat.reshape(-1).astype(self.X.dtype)
        return (self.X @ flat).astype(np.float64)[:, None] / self.root_dL

    def g_out(self, omega, V):
        return self.channel.g_out(self.y, omega, V)

    def field(self, S_hat, g, A):
        # the rectangular field, its normalisation 1 / (A sqrt(dL)) applied as a division
        back = (self.X.T @ g[:, 0].astype(self.X.dtype)).astype(np.float64)
        return S_hat + back.reshape(self.d, self.L) / (A * self.root_dL)

    def uninformed(self, R):
        return R, self.c  # every residual 0: keep the estimate and its predicted error

    def record(self, S_hat):
        return {"mse": self.error(S_hat, self.S_true), "mse_predicted": self.c,
                "zeta": 1.0 / self.precision if self.precision > 0 else math.inf}


def run_seed(channel, alpha, rho, beta, d, seed_sequence, *, precision="float32", init_variance=20.0, max_iter=500,
             damping=0.5, tol=1e-6):
    """One seed of a point: the seed spawns (instance, start); the instance (`sample_instance`) and the
    start S_hat_0 (a prior sample) from their own streams, then GAMP-RIE (`BSRSteps`, `gamp.iterate`)."""
    instance_seq, init_seq = seed_sequence.spawn(2)
    X, S_true, y = sample_instance(channel, alpha, rho, beta, d, instance_seq, precision)
    L, r, _ = sizes(alpha, rho, beta, d)
    S_init = prior_sample(d, L, r, np.random.default_rng(init_seq))
    steps = BSRSteps(channel, X, y, S_true, r / d, L / d, S_init=S_init, init_variance=init_variance)
    return gamp.iterate(steps, max_iter=max_iter, damping=damping, tol=tol)
