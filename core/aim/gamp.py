"""GAMP-RIE for the attention-indexed model (spec aim.md §3): the prior and channel steps (`AIMSteps`) of
the one GAMP loop of `core/gamp.py` (run with `gamp.iterate`), which owns the iteration, the damping, the
damping-consistent Onsager (reaction) term, the trace and the stops; the prior side (fields, RIE denoiser,
stops) is the shared `gamp.RIESteps`.

Instance (`sample_instance`): tokens X_mu (T x d, i.i.d. N(0, 1), not normalised), n = round(alpha d^2)
sequences, teacher W (d x r, r = round(rho d), i.i.d. N(0, 1)), S = W W^T / sqrt(r d), labels from the
channel's `sample` on the folded attention index h_ab = (x_a^T S x_b - delta_ab Tr S) / sqrt(d).

State: the estimate S_hat (d x d) and one scalar c, the predicted error ||S_hat - S||_F^2 / d (the RIE's
mmse). Start: S_hat = E[S] = sqrt(rho) I and c = Q0 - rho = 1, the SE's start q = rho (error 1), g = 0.
One iteration, hook by hook (spec §3 steps 1-9):

    cavity     V = diag((1 + delta_ab) c) on the p = T(T+1)/2 folded entries ("scalar",   (step 1)
               the spec's), or c M_mu per sample ("gram", `cavity_shape`)
    reaction   V g: (1 + delta_ab) c g_ab per entry, or c M_mu g_mu                    (step 3)
    project    Omega_mu = X_mu S_hat X_mu^T / sqrt(d) - (Tr S_hat / sqrt(d)) I, folded (step 2)
    g_out      the AIM channel's g_out (channels.py, the one the SE uses)             (step 5)
    fields     qhat = (2 / d^2) sum_mu sum_{a<=b} (1 + delta_ab) g_ab^2 (= 2 alpha / n sum ...)
               B = sum_mu [X_mu^T G_mu X_mu - (sum_a g_aa) I], G_aa = g_aa, G_ab = g_ab / 2
               R = S_hat + 2 / (qhat d^{3/2}) B                                       (steps 6, 7)
    denoise    S_new = RIE(rho).denoise(R, 1/qhat), c = mmse_RIE(1/qhat) (cached table) (step 8)
               (qhat = 0, no information: the start, S_hat = sqrt(rho) I, c = 1)
    change     ||S_hat_t - S_hat_{t-1}||_F^2 / d of the DAMPED iterate, stop below tol  (step 9)
    record     mse ||S_hat - S||_F^2 / d, overlap Tr(S_hat S) / d, the predicted error mse_predicted = c
               and qhat (index 0 = the start: c = 1, qhat = 0)

Damping. The loop damps the estimate and its variance, S_hat <- (1 - b) S_new + b S_hat and
c <- (1 - b) c_new + b c, and carries the reaction consistently, R_t = (1 - b) V(c_und) g_{t-1} +
b R_{t-1} (Omega is linear in S_hat, so the damped estimate's Onsager term is the damped sum of the
two reactions it is made of). The authors' code (spec steps 3-4) instead leaves S_hat undamped and damps
the channel side, V and omega = Omega - V g_old. Both have the same fixed points as the undamped
algorithm; the loop's form is the one the other families use and it reaches the SE (tests/aim and the
comparison in docs/benchmarks.md, "AIM GAMP-RIE").

Cavity. The spec's cavity diag((1 + delta_ab) c) is the average over samples of the exact cavity
covariance of the index under an isotropic error, c M_mu, which depends on the sample through its token
Gram matrix (`cavity_shape`): K_aa / d = 1 +- sqrt(2/d), so per-sample variances are off by ~ +-30 % at
d = 100. For the noiseless channels (softmax, linear: g = V^-1 (mean - omega)) this costs accuracy at
small d: softmax, alpha = 0.1, rho = 0.5 (SE 0.392), mean error over 8 seeds, scalar -> gram: d = 40
0.478 -> 0.408, d = 60 0.447 -> 0.411, d = 100 0.412 -> 0.412; linear alpha = 0.06 (SE 0.456), d = 80:
0.555 -> 0.504. "gram" is the default for every channel (`default_cavity`). For hardmax it used to be
"scalar" because Phi2 was evaluated with one Plackett rule per distinct correlation (one per sample under
"gram", ~170x slower); `bvn_cdf` now evaluates per-sample correlations in one vectorised rule (d = 40,
alpha = 2: 229 s -> 6.7 s for 3 instances) and "gram" removes most of the scalar cavity's bias there:
hardmax exact, alpha = 2, rho = 0.5 (SE 0.0238): scalar 0.0311 / 0.0353 / 0.0333 (d = 50 / 70 / 100,
8 seeds; it does not decay with d), gram 0.0255 +- 0.0024 (d = 40, 3 seeds), 0.0284 +- 0.0007 (d = 100,
4 seeds). The published variant (hardmax_gout = "paper") keeps the scalar cavity: it is there to reproduce
the authors' AMP, and with it GAMP lands on its own (published) SE (alpha = 1, d = 100, 16 seeds: 0.3155 +-
0.0033 against 0.3156), while the gram cavity moves it to 0.2835 +- 0.0040. What remains is a finite-d bias that decays like 1/d (benchmarks/aim_gamp_finite_d.py, 16
seeds per d, weighted fit mean = e_inf + b/d): softmax T = 2, alpha = 0.1 (SE 0.3922): +0.033 (d = 60),
+0.019 (d = 100), +0.005 (d = 200), e_inf = 0.3879 +- 0.0045, b = 1.7; softmax T = 5, alpha = 0.016
(SE 0.3198): +0.043 (d = 60), +0.019 (d = 120), +0.011 (d = 240), e_inf = 0.3208 +- 0.0030, b = 2.3.

Memory: nothing of size n x d x d is ever formed. Omega and B are computed in chunks of samples as
(X S_hat) . X (O(n T d^2) flops) and X_flat^T (G X)_flat (O(n T^2 d + n T d^2)), with temporaries of
CHUNK_ELEMENTS floats; the only O(n d) array is X itself (n T d floats: 128 MB at d = 100, alpha = 8,
T = 2), against n T^2 d^2 floats (25.6 GB) for the authors' (n, d, d, T, T) tensor.

Stops (core/gamp.py, `RIESteps`): converged when the change is below tol or when the predicted error c
collapses below C_MIN = 1e-12 (perfect recovery: nothing left for the channel to resolve, and g_out would
divide by ~0); a non-finite g or estimate stops the run as diverged.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core import gamp
from seqphase.core.aim.channels import entry_weights, pairs
from seqphase.core.rie import SymmetricRIE, mmse_table

#: floats per chunk temporary of the sample loops (8 MB): bounds the working memory beyond X itself
CHUNK_ELEMENTS = 1 << 20
#: cavity covariance of the folded index: "scalar" = diag((1 + delta_ab) c) (spec §3), "gram" = c M_mu
#: per sample (`cavity_shape`)
CAVITIES = ("scalar", "gram")


def teacher_rank(rho, d):
    """r = round(rho d), >= 1 (ParameterError naming `method.d` otherwise)."""
    return gamp.width(rho, d, "rho")

def _chunks(n, T, d):
    step = max(1, CHUNK_ELEMENTS // (T * d))
    return [slice(s, min(s + step, n)) for s in range(0, n, step)]


def attention_index(X, S):
    """Folded attention index h_mu,ab = (x_a^T S x_b - delta_ab Tr S) / sqrt(d), a <= b: (n, p).

    X is (n, T, d); chunked over samples, never more than CHUNK_ELEMENTS floats of temporaries."""
    n, T, d = X.shape
    rows, cols = pairs(T)
    out = np.empty((n, len(rows)))
    for part in _chunks(n, T, d):
        Xc = X[part]
        XS = (Xc.reshape(-1, d) @ S).reshape(Xc.shape)
        for k, (a, b) in enumerate(zip(rows, cols)):
            out[part, k] = np.einsum("nd,nd->n", XS[:, a], Xc[:, b])
    out[:, rows == cols] -= np.trace(S)
    return out / math.sqrt(d)


def back_projection(X, g):
    """B = sum_mu [X_mu^T G_mu X_mu - (sum_a g_mu,aa) I] with G_aa = g_aa, G_ab = G_ba = g_ab / 2 (d, d).

    (the gradient of sum_mu sum_{a<=b} g_ab h_ab in S, times sqrt(d)); chunked: (G X) per chunk, then one
    X_flat^T (G X)_flat product, O(n T^2 d + n T d^2) flops."""
    n, T, d = X.shape
    rows, cols = pairs(T)
    G = np.empty((n, T, T))
    G[:, rows, cols] = g
    G[:, cols, rows] = g
    off = rows != cols
    G[:, rows[off], cols[off]] *= 0.5
    G[:, cols[off], rows[off]] *= 0.5
    B = np.zeros((d, d))
    for part in _chunks(n, T, d):
        Xc = X[part]
        GX = np.einsum("nab,nbd->nad", G[part], Xc)
        B += Xc.reshape(-1, d).T @ GX.reshape(-1, d)
    B = 0.5 * (B + B.T)
    B[np.diag_indices(d)] -= float(np.sum(g[:, rows == cols]))
    return B


def sample_instance(channel, alpha, rho, d, rng):
    """(X (n, T, d), S (d, d), y) with n = round(alpha d^2): X i.i.d. N(0, 1), S = W W^T / sqrt(r d) with
    W (d, r) i.i.d. N(0, 1), r = round(rho d), y = channel.sample(h). Draw order: X, W, the labels."""
    r = teacher_rank(rho, d)

    def teacher(rng_):
        W = rng_.standard_normal((d, r))
        return W @ W.T / math.sqrt(r * d)

    return gamp.sample_instance(float(alpha) * d, d, rng, tokens=channel.T, normalise=False, teacher=teacher,
                                labels=lambda X, S, rng_: channel.sample(attention_index(X, S), rng_))


def cavity_shape(X):
    """Per-sample cavity covariance per unit c, M_mu (n, p, p), from the token Gram matrices K = X_mu X_mu^T.

    If the error S_hat - S is sqrt(c) times a GOE matrix (off-diagonal variance 1/d, diagonal 2/d), the
    folded index h_ab = <A_ab, S> with A_ab = (x_a x_b^T + x_b x_a^T) / (2 sqrt d) - delta_ab I / sqrt(d)
    has cavity covariance c M with M_(ab),(ce) = (2/d) Tr(A_ab A_ce)
        = (2/d) [(K_ac K_be + K_ae K_bc) / (2d) - delta_ce K_ab / d - delta_ab K_ce / d + delta_ab delta_ce].
    Its average is diag(1 + delta_ab) (the spec's cavity), but at finite d it fluctuates per sample:
    K_aa / d = 1 +- sqrt(2/d), so the diagonal variances are off by ~ 2 sqrt(2/d) (+-30 % at d = 100)
    and the entries of one sample are correlated at O(1/sqrt d)."""
    n, T, d = X.shape
    K = np.einsum("nad,nbd->nab", X, X)
    rows, cols = pairs(T)
    a, b, c, e = rows[:, None], cols[:, None], rows[None, :], cols[None, :]
    d_ab, d_ce = (a == b).astype(float), (c == e).astype(float)
    trace = ((K[:, a, c] * K[:, b, e] + K[:, a, e] * K[:, b, c]) / (2.0 * d)
             - d_ce * K[:, a, b] / d - d_ab * K[:, c, e] / d + d_ab * d_ce)
    return (2.0 / d) * trace


class AIMSteps(gamp.RIESteps):
    """GAMP-RIE steps on one AIM instance (module docstring); `cavity` "scalar" | "gram" (None:
    `default_cavity`)."""

    precision_scale = 2.0  # qhat = (2 / d^2) sum of the weighted g^2

    def __init__(self, channel, X, y, S_true, rho, cavity=None):
        cavity = default_cavity(channel) if cavity is None else cavity
        if cavity not in CAVITIES:
            raise ValueError(f"cavity must be one of {CAVITIES}, got {cavity!r}")
        self.channel, self.X, self.y, self.S_true = channel, X, y, S_true
        self.n, self.T, self.d = X.shape
        self.rho = float(rho)
        self.rie = SymmetricRIE(self.rho)
        self.table = mmse_table(self.rho)
        self.mmse = self.table.mmse
        self.entry_weights = entry_weights(self.T)  # 1 + delta_ab per folded entry
        self.precision_norm = self.d**2
        self.error_unit, self.error_norm = 1.0, self.d
        self.shape = cavity_shape(X) if cavity == "gram" else None
        self.precision, self.c = 0.0, 1.0

    def initial(self):
        S0 = math.sqrt(self.rho) * np.eye(self.d)  # E[S]: the SE's start q = rho, error Q0 - rho = 1
        return S0, 1.0, np.zeros((self.n, self.channel.p))

    def cavity(self, c):
        if self.shape is None:
            return np.diag(self.entry_weights * c)
        return c * self.shape

    def reaction(self, c, g, V=None, weight=1.0):
        if self.shape is None:
            return g * ((weight * c) * self.entry_weights)
        return (weight * c) * np.einsum("nij,nj->ni", self.shape, g)

    def project(self, S_hat):
        return attention_index(self.X, S_hat)

    def g_out(self, omega, V):
        return self.channel.g_out(self.y, omega, V)

    def back_projection(self, g):
        return back_projection(self.X, g)

    def uninformed(self, R):
        return math.sqrt(self.rho) * np.eye(self.d), 1.0

    def record(self, S_hat):
        return {"mse": self.error(S_hat, self.S_true), "overlap": float(np.sum(S_hat * self.S_true)) / self.d,
                "mse_predicted": self.c, "qhat": self.precision}


def default_cavity(channel):
    """"gram" (the per-sample cavity), except for the published hardmax variant (`gout = "paper"`), which
    reproduces the authors' algorithm and so keeps their scalar cavity (module docstring, "Cavity")."""
    return "scalar" if getattr(channel, "gout", None) == "paper" else "gram"
