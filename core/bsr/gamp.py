"""GAMP-RIE for bilinear sequence regression (spec rie_bsr_quadratic.md §A3, §8 "GAMP-RIE at finite d"): the
prior and channel steps (`BSRSteps`) of the one GAMP loop of `core/gamp.py`, which owns the iteration, the
damping, the damping-consistent Onsager (reaction) term, the trace and the stops.

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
    change     ||S_hat_t - S_hat_{t-1}||_F^2 / (dL) of the damped iterate, stop below tol     (step 9)

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
d = L = 100, alpha = 1 (float64: 800 MB). It is filled in row blocks of CHUNK_ELEMENTS float64 draws, and the
labels are computed from the float64 blocks, so the instance (teacher, X, labels) is the same whatever the
precision; only the two matrix-vector products of each iteration run in float32 (rounding 1e-7 relative per
product; the final errors of float32 and float64 runs agree to < 1e-5, tests/bsr/test_bsr_gamp.py).

Stops (core/gamp.py): converged when the change is below tol or when C collapses below C_MIN (noiseless
perfect recovery: zeta -> 0 and g_out would divide by ~0); a non-finite g or estimate stops the run as
diverged.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core import gamp
from seqphase.core.errors import ParameterError
from seqphase.core.rectangular_rie import RectangularRIE, rectangular_mmse_table

#: float64 draws per block while filling X (8 MB): bounds the temporaries beyond X itself
CHUNK_ELEMENTS = 1 << 20
#: predicted error below which the run stops as converged (perfect recovery)
C_MIN = 1e-12
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

    Streams: the seed's SeedSequence spawns (teacher, inputs, label noise), so each part is the same whatever
    the precision or the block size. X_f is filled in blocks of rows; y = X_f vec(S*) / sqrt(dL) + noise is
    computed from the float64 blocks."""
    L, r, n = sizes(alpha, rho, beta, d)
    teacher_seq, input_seq, noise_seq = seed_sequence.spawn(3)
    S_true = prior_sample(d, L, r, np.random.default_rng(teacher_seq))
    rng = np.random.default_rng(input_seq)
    X = np.empty((n, d * L), dtype=np.dtype(precision))
    z = np.empty(n)
    s = S_true.reshape(-1) / math.sqrt(d * L)
    step = max(1, CHUNK_ELEMENTS // (d * L))
    for start in range(0, n, step):
        block = rng.standard_normal((min(step, n - start), d * L))
        X[start:start + len(block)] = block
        z[start:start + len(block)] = block @ s
    y = channel.sample_scalar(z, np.random.default_rng(noise_seq))
    return X, S_true, y


class BSRSteps(gamp.GampSteps):
    """GAMP-RIE steps on one BSR instance (module docstring). Keeps per-iteration traces of zeta = 1/A and
    of the undamped predicted error C on `self` (index 0 = the start)."""

    divergence = "stop"

    def __init__(self, channel, X, y, S_true, rho, beta, *, S_init, init_variance=20.0):
        self.channel, self.X, self.y, self.S_true = channel, X, np.asarray(y, float), S_true
        self.d, self.L = S_true.shape
        self.n = X.shape[0]
        self.dL = self.d * self.L
        self.root_dL = math.sqrt(self.dL)
        # the instance's own rank and aspect ratios (r/d, L/d): the denoiser needs L/d exactly
        self.rie = RectangularRIE(rho, self.L / self.d)
        self.table = rectangular_mmse_table(rho, self.L / self.d)
        self.S_init, self.init_variance = S_init, float(init_variance)
        self.zeta_trace = [math.inf]
        self.c_trace = [self.init_variance]

    def initial(self):
        return self.S_init.copy(), self.init_variance, np.zeros((self.n, 1))

    def cavity(self, C):
        return np.array([[C]])

    def collapsed(self, V, C):
        return C < C_MIN

    def reaction(self, C, g, V=None, weight=1.0):
        return (weight * C) * g

    def project(self, S_hat):
        flat = S_hat.reshape(-1).astype(self.X.dtype)
        return (self.X @ flat).astype(np.float64)[:, None] / self.root_dL

    def g_out(self, omega, V):
        return self.channel.g_out(self.y, omega, V)

    def fields(self, g, dg, S_hat):
        A = float(np.sum(g * g)) / self.dL  # alpha mean(g^2), n = alpha dL
        if not A > 0:  # every residual 0: no information from the channel, keep the estimate
            return 0.0, S_hat
        back = (self.X.T @ g[:, 0].astype(self.X.dtype)).astype(np.float64)
        return A, S_hat + back.reshape(self.d, self.L) / (A * self.root_dL)

    def denoise(self, R, A):
        if not A > 0:
            self.zeta_trace.append(math.inf)
            self.c_trace.append(self.c_trace[-1])
            return R, self.c_trace[-1]
        zeta = 1.0 / A
        S_new = self.rie.denoise(R, zeta)
        C = float(self.table.mmse(np.array(zeta)))
        self.zeta_trace.append(zeta)
        self.c_trace.append(C)
        return S_new, C

    def change(self, S_new, S_hat):
        return float(np.sum((S_new - S_hat) ** 2)) / self.dL

    def record(self, S_hat):
        return float(np.sum((S_hat - self.S_true) ** 2)) / self.dL


class GampTrace:
    """Per-iteration error ||S_hat - S*||_F^2 / (dL) (index 0 = the start), the algorithm's predicted error
    mmse_den(zeta) and zeta per iteration, iterations, flags and the final estimate."""

    def __init__(self, run, steps):
        self.mse = np.array(run.records)
        k = len(self.mse)
        self.mse_predicted = np.array(steps.c_trace[:k])
        self.zeta = np.array(steps.zeta_trace[:k])
        self.n_iter, self.converged, self.diverged = run.n_iter, run.converged, run.diverged
        self.S_hat = run.w


def run_gamp(channel, X, y, S_true, rho, beta, *, S_init, init_variance=20.0, max_iter=500, damping=0.5,
             tol=1e-6):
    """GAMP-RIE on one instance (module docstring)."""
    steps = BSRSteps(channel, X, y, S_true, rho, beta, S_init=S_init, init_variance=init_variance)
    return GampTrace(gamp.iterate(steps, max_iter=max_iter, damping=damping, tol=tol), steps)


def run_seed(channel, alpha, rho, beta, d, seed_sequence, *, precision="float32", **options):
    """One seed of a point: the seed spawns (instance, start); the instance (`sample_instance`) and the
    start S_hat_0 (a prior sample) from their own streams, then `run_gamp`."""
    instance_seq, init_seq = seed_sequence.spawn(2)
    X, S_true, y = sample_instance(channel, alpha, rho, beta, d, instance_seq, precision)
    L, r, _ = sizes(alpha, rho, beta, d)
    S_init = prior_sample(d, L, r, np.random.default_rng(init_seq))
    return run_gamp(channel, X, y, S_true, r / d, L / d, S_init=S_init, **options)
