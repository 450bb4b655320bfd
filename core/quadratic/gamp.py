"""GAMP-RIE for the extensive-width quadratic network (spec rie_bsr_quadratic.md §B3, "same algorithm in S'
units", and §8 "GAMP-RIE at finite d"): the prior and channel steps (`QuadraticSteps`) of the one GAMP loop of
`core/gamp.py` (run with `gamp.iterate`), which owns the iteration, the estimate damping with its consistent
Onsager term, the trace and the stops; the prior side (fields, RIE denoiser, stops) is the shared
`gamp.RIESteps`.

Instance (`sample_instance`): inputs x (n x d, i.i.d. N(0, 1), n = round(alpha d^2)), teacher W* (m x d,
m = round(kappa d), i.i.d. N(0, 1)), labels from the network itself, y = Tr[(x x^T - I) S*]/d + sqrt(delta) z
with S* = W*^T W* / sqrt(m) (`QuadraticChannel.labels`). The algorithm runs in S' units, S' = W*^T W* / m
(spectrum Marchenko-Pastur: mean 1, variance 1/kappa), on y' = y / sqrt(m/d), where the channel is the
pre-activation z = Tr[(x x^T - I) S'] / sqrt(d) plus Gaussian noise of variance delta_th = delta / (m/d)
(channels.py). The instance's own ratio m/d is used throughout (it is kappa whenever kappa d is an integer,
as in every shipped sweep), so the unit map is exact.

State: the estimate S_hat of S' (d x d) and one scalar c, the predicted error ||S_hat - S'||_F^2 / d (the RIE's
mmse, S' units). Start: S_hat = E[S'] = I and c = 1/kappa (the signal variance: the SE's uninformed start,
error 1 in paper units up to O(1/sqrt d)), g = 0. One iteration, hook by hook:

    cavity     V = c M_mu per sample ("gram", default; `cavity_shape`) or 2 c ("scalar", the spec's:
               E[(x^T A x - Tr A)^2] = 2 ||A||_F^2, `CAVITY_FACTOR`, the sample average of c M_mu)
    reaction   V g
    project    (x_mu^T S_hat x_mu - Tr S_hat) / sqrt(d): row sums of (x S_hat) * x, never an n x d x d array
    g_out      the channel's kernel g = (y' - omega)/(V + delta_th)   (the one the SE uses)
    fields     qhat = 4 alpha mean(g^2) = 4 sum g^2 / d^2  (the empirical form of the spec, §B3)
               R = S_hat + 2 / (qhat d^{3/2}) [x^T diag(g) x - (sum g) I]
    denoise    S_new = SymmetricRIE(kappa, scale=1).denoise(R, t), c = mmse_RIE(t), t = 1/qhat (the family's
               cached table `se.prior_mmse`: the closed-form Onsager term, no empirical divergence)
               (qhat = 0, no information: the start, S_hat = I, c = 1/kappa)
    change     kappa ||S_hat_t - S_hat_{t-1}||_F^2 / d (paper units: the notebook's ||dS_hat||^2 / d)
    record     mse kappa ||S_hat - S'||_F^2 / d (paper units), the predicted error mse_predicted = kappa c and
               qhat (index 0 = the start: kappa c = 1, qhat = 0)

Damping (`DAMPING_FORMS`). The spec (§B3 steps 1-4, the authors' notebook) damps the channel side, V and
omega = project - V g_old, and leaves S_hat undamped; the shared loop damps the estimate and its variance,
S_hat <- (1 - b) S_new + b S_hat, c <- (1 - b) c_new + b c, with the damping-consistent Onsager term. Both have
the fixed points of the undamped algorithm. "estimate" is the loop's form; "channel" is the spec's,
realised in the `g_out` hook on an undamped loop (`loop_damping` keeps the run's damping for the hook): the
hook receives the undamped V_new = 2 c and omega_new = project - V_new g_old, mixes them with the previous
(damped) pair and keeps the mixture for the next iteration. Measured (docs/validation/quadratic.md
"GAMP-RIE"): undamped, the predicted error collapses to ~0 while the true error stays high (d = 80,
alpha = 0.3: 8 of 8 seeds); damped 0.5, both forms reach the SE to the same finite-d bias (d = 100,
alpha = 0.2: 0.406 +- 0.005 and 0.407 +- 0.004 against 0.392).

Cavity. The exact cavity variance of the pre-activation under an isotropic error depends on the sample through
||x_mu||^2 (`cavity_shape`), +-2 sqrt(2/d) around the spec's 2 c. With the scalar cavity the predicted error
of some seeds collapsed at d = 60 even when damped; with the per-sample one it did not; at d = 100 the two agree
(alpha = 0.2: 0.4056 and 0.4055).

Stops (core/gamp.py, `RIESteps`): converged when the change falls below tol or when c collapses below
C_MIN = 1e-12 (perfect recovery: nothing left for the channel to resolve, and g would divide by ~0); a
non-finite g or estimate stops the run as diverged.

Cost per iteration: two O(n d^2) products (project, back-projection) plus one d x d eigh and O(d) cubic
roots; memory O(n d) (x itself). benchmarks/quadratic_gamp.py measures it.
"""

from __future__ import annotations


import numpy as np

from seqphase.core import gamp
from seqphase.core.quadratic import se
from seqphase.core.quadratic.channels import CAVITY_FACTOR, QuadraticChannel
from seqphase.core.rie import SymmetricRIE

#: cavity variance of the pre-activation: "scalar" = 2 c (the spec's), "gram" = c M_mu per sample (`cavity_shape`)
CAVITIES = ("scalar", "gram")
#: where the damping acts: "estimate" (S_hat and c, the shared loop) or "channel" (V and omega, the spec's)
DAMPING_FORMS = ("estimate", "channel")


def teacher_width(kappa, d):
    """m = round(kappa d) >= 1 (ParameterError naming `method.d` otherwise)."""
    return gamp.width(kappa, d, "kappa")

def n_samples(alpha, d):
    """n = round(alpha d^2) >= 1 (ParameterError naming `params.alpha` otherwise)."""
    return gamp.n_samples(alpha, d)

def sample_instance(alpha, kappa, delta, d, rng):
    """(x (n, d), W* (m, d), y (n,)) in label units; draw order x, W*, the label noise (core/gamp.py)."""
    m, n = teacher_width(kappa, d), n_samples(alpha, d)
    channel = QuadraticChannel(delta, m / d)
    return gamp.sample_instance(n / d, d, rng, normalise=False, teacher=lambda r: r.standard_normal((m, d)),
                                labels=channel.labels)


def teacher_matrix(W):
    """S' = W^T W / m (d x d) of teacher (or student) weights W (m, d)."""
    return W.T @ W / W.shape[0]


def back_projection(x, g):
    """x^T diag(g) x - (sum g) I = sum_mu g_mu (x_mu x_mu^T - I) (d, d), without the n x d x d tensor."""
    B = x.T @ (g[:, None] * x)
    B = 0.5 * (B + B.T)
    B[np.diag_indices_from(B)] -= float(np.sum(g))
    return B


def cavity_shape(x):
    """Per-sample cavity variance per unit c, M_mu (n,): the variance of (x^T E x - Tr E)/sqrt(d) when E is
    sqrt(c) times a GOE matrix (off-diagonal variance 1/d, diagonal 2/d), at fixed x:
        M_mu = (2/d) [K_mu^2 / d - 2 K_mu / d + 1],   K_mu = ||x_mu||^2.
    Its average is 2 (1 + O(1/d)), the spec's cavity, but K_mu / d = 1 +- sqrt(2/d) makes it fluctuate by
    ~ +-2 sqrt(2/d) between samples (+-37 % at d = 60, +-28 % at d = 100)."""
    d = x.shape[1]
    K = np.einsum("nd,nd->n", x, x)
    return (2.0 / d) * (K * K / d - 2.0 * K / d + 1.0)


class QuadraticSteps(gamp.RIESteps):
    """GAMP-RIE steps on one instance (module docstring): x, y in label units, W the teacher weights (the
    trace's errors are against S' = W^T W / m, and kappa is the instance's m / d); `damp` says where the
    run's damping acts ("estimate": the shared loop's form, "channel": the spec's omega and V)."""

    precision_scale = 2.0 * CAVITY_FACTOR  # qhat = 4 sum g^2 / d^2

    def __init__(self, x, y, W, delta, *, cavity="gram", damp="estimate"):
        if cavity not in CAVITIES:
            raise ValueError(f"cavity must be one of {CAVITIES}, got {cavity!r}")
        if damp not in DAMPING_FORMS:
            raise ValueError(f"damp must be one of {DAMPING_FORMS}, got {damp!r}")
        m, d = W.shape
        self.x, self.S_true = np.asarray(x, float), teacher_matrix(W)
        self.shape = CAVITY_FACTOR if cavity == "scalar" else cavity_shape(self.x)
        self.n, self.d = self.x.shape
        self.kappa = float(m / d)  # the instance's m / d
        self.channel = QuadraticChannel(delta, self.kappa)
        self.y = self.channel.to_theory_units(y)
        self.rie = SymmetricRIE(self.kappa, scale=1.0)
        self.mmse = se.prior_mmse(self.kappa)
        self.precision_norm = self.d**2
        self.error_unit, self.error_norm = self.kappa, self.d
        self.damp, self.channel_damping = damp, 0.0
        self._channel_state = None  # the damped (omega, V) of the previous iteration ("channel" damping)
        self.precision, self.c = 0.0, 1.0 / self.kappa

    def loop_damping(self, damping):
        if self.damp == "channel":  # the hook `g_out` damps omega and V; the loop runs undamped
            self.channel_damping = float(damping)
            return 0.0
        return damping

    def initial(self):
        return np.eye(self.d), 1.0 / self.kappa, np.zeros(self.n)

    def cavity(self, c):
        return self.shape * c

    def reaction(self, c, g, V=None, weight=1.0):
        return (weight * c) * (self.shape * g)

    def project(self, S_hat):
        return self.channel.preactivation(self.x, S_hat)

    def g_out(self, omega, V):
        b = self.channel_damping
        if b > 0:
            if self._channel_state is not None:
                omega_old, V_old = self._channel_state
                omega, V = (1 - b) * omega + b * omega_old, (1 - b) * V + b * V_old
            self._channel_state = (omega, V)
        return self.channel.g_out_scalar(self.y, omega, V)

    def back_projection(self, g):
        return back_projection(self.x, g)

    def uninformed(self, R):
        return np.eye(self.d), 1.0 / self.kappa

    def record(self, S_hat):
        return {"mse": self.error(S_hat, self.S_true), "mse_predicted": self.kappa * self.c, "qhat": self.precision}
