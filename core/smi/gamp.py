"""GAMP for the sequence multi-index model of deep tied attention (spec smi.md §4, the paper's Algorithm 1).

Data: X (n, T, d) i.i.d. N(0, 1) (sequences, rows are tokens), W* (p, d) i.i.d. N(0, 1), indices
z_mu = W* X_mu^T / sqrt(d) (p, T), labels u_mu = channel.labels_of_z(z_mu) (the lossless encoding of the
T x T attention matrix y_mu, see `channels.py`). Prior: every column w_i in R^p ~ N(0, I_p).

Iteration (the paper's version "without indices", Eq. 112: the prior is Gaussian and the same for every
column, and sum_i X_mu,t,i^2 / d -> 1, so one p x p C_hat serves every column and every sample):

    V      = C_hat + eps I                                         (p x p) cavity covariance
    omega  = W_hat X_mu^T / sqrt(d) - R_t                          (n, p, T)  R_t: reaction term
    g, dg  = channel.g_out_tokens(u, omega, V)                     (n, p, T), (n, T, p, p)
    A      = -(1/d) sum_mu sum_t dg[mu, t]                         ("analytic", the reference's choice)
           or (1/d) sum_mu sum_t g[mu, :, t] g[mu, :, t]^T          ("nishimori": E[g g^T] = -E[dg])
    B      = (1/sqrt(d)) sum_mu g_mu X_mu + A W_hat                (p x d)
    W_new  = (I + A + lambda I)^-1 (B + sqrt(lambda) S),  C_new = (I + A + lambda I)^-1
    W_hat  <- (1 - c) W_new + c W_hat,   C_hat <- (1 - c) C_new + c C_hat

The loop itself is the one GAMP loop of seqphase (`core/gamp.py`, `iterate`); `AttentionSteps` fills in
the steps above, and a run is `gamp.iterate(AttentionSteps(...), max_iter=, damping=, tol=, stop=)`: it stops
after max_iter iterations or when the rms change of W_hat per entry is below tol (or when `stop(records)`,
e.g. the onset's stopping rule, says so). `channel.g_out_tokens` is the function the SE uses (one V for every
sample: the channel is called once per iteration on all n samples).

Damping convention: c = `damping` is the weight of the OLD iterate, as in the SE (`se.smi_se`) and the
multi-index GAMP. The reference code writes W <- delta W_new + (1 - delta) W with delta = 0.8 (spec
§4.1): that is damping = 0.2 here.

Onsager (reaction) term, damped consistently (the shared loop's, `core/gamp.py`): W_hat_t =
(1 - c) W_new,t + c W_hat_{t-1} carries (1 - c) of the new reaction and c of the old one, so

    R_t = (1 - c) C_new,t g_{t-1} + c R_{t-1}      (C_new: the Jacobian of the UNDAMPED denoiser)

(R_0 = 0, g_{-1} = 0). The reference code subtracts C_hat_t g_{t-1} with the damped C_hat_t = (1 - c)
C_new,t + c C_hat_{t-1} (`reaction = "reference"`): the old fraction c of the reaction is applied to the
new g_{t-1} instead of carrying R_{t-1}, although W_hat_{t-1}'s reaction is that of g_{t-2}; at alpha =
1.2 this leaves some instances stuck at M11 ~ 0. `reaction = "none"` drops the term and blows up. Both
are kept only for the comparison in docs/validation/smi.md. Neither is a damped reaction the shared loop can carry
(its R_t always mixes in c R_{t-1}), so they go through a flag of `AttentionSteps`: the loop's reaction
stays exactly 0 and `project` subtracts C_hat_t g_{t-1} itself ("reference") or nothing ("none"); the
consistent path is the loop's own.

Side information (spec §4.3, App. D.4): S = sqrt(lambda) W* + Xi, Xi i.i.d. N(0, 1), enters as the extra
Gaussian observation of each column: B += lambda W* + sqrt(lambda) Xi and A += lambda I in the denoiser
(the SE's prior step becomes Q = (Qhat + lambda)(I + Qhat + lambda)^-1, `se.prior_step`).

Guards. (i) A is symmetrised, and its negative eigenvalues are set to 0 before C_new = (I + A)^-1: for the
Bayes-optimal channel A is an estimate of the PSD Fisher information alpha E[g g^T] (Nishimori), so a
negative direction is finite-n / quadrature noise, and the Gaussian-prior denoiser (like the SE's prior
step, which clips Qhat the same way) is only a contraction for A >= 0; without the clip I + A can be
singular and C_hat indefinite, which the channel refuses (V must be positive definite). The number of
clipped iterations is reported; the clipped eigenvalues are small (>= -0.07 at d = 300) and the final
overlaps are the same without the clip (docs/validation/smi.md). (ii) eps (reference: 1e-3, as in the SE) keeps V positive definite when
C_hat -> 0 (recovery); with eps = 0 a run whose C_hat has collapsed below 1e-9 stops (converged: the
cavity has no width left for the posterior quadrature to resolve). (iii) A non-finite g, dg or
estimate stops the run and flags it as diverged (the caller NaN-pads the log).

Labels: `sample_instance(noise=...)` adds Gaussian noise of variance `noise` to the teacher's indices
before the link (0: the paper's noiseless model); noise = eps is the teacher the SE with the same eps
describes, the setting in which GAMP lands on the SE (docs/validation/smi.md).

Initialisation: "random" (the reference code): W_hat^0 ~ N(0, 1), i.e. |w_l|^2 / d ~ 1 and an overlap
O(d^-1/2) with W*, which plays the role of side information; "small": W_hat^0 ~ 1e-3 N(0, 1). C_hat^0 = I.

Logged per iteration (0 = the initialisation): M = W_hat W*^T / d, Q = W_hat W_hat^T / d and the plug-in
test error mean_mu ||g(W* X_mu^T / sqrt d) - g(W_hat X_mu^T / sqrt d)||_F^2 on n_gen fresh sequences (the
definition of `se.gen_error_plugin`, with the student's index W_hat x).
"""

from __future__ import annotations

import numpy as np

from seqphase.core import gamp
from seqphase.core.smi.se import plugin_sq_error

INIT_SCALES = {"random": 1.0, "small": 1e-3}
REACTIONS = ("consistent", "reference", "none")


def sample_instance(channel, alpha, d, rng, noise=0.0):
    """X (n, T, d), W* (p, d), z (n, p, T) and labels u (n, T) with n = round(alpha d).

    noise: variance of a Gaussian noise added to the indices before the link, y = g(z + sqrt(noise) xi)
    (0: the noiseless model of the paper and the reference code). noise = eps is the teacher the SE
    with regulariser eps describes (z = omega + (I - Q + eps I)^{1/2} u, spec §3.2)."""

    def labels(X, W, rng):
        z = indices(W, X)
        if noise > 0:
            z = z + np.sqrt(noise) * rng.standard_normal(z.shape)
        return z, channel.labels_of_z(z)

    X, W, (z, u) = gamp.sample_instance(alpha, d, rng, teacher=lambda r: r.standard_normal((channel.p, d)),
                                        labels=labels, tokens=channel.T, normalise=False)
    return X, W, z, u


def indices(W, X):
    """z = W X^T / sqrt(d): (p, d) x (n, T, d) -> (n, p, T), as one BLAS product."""
    n, T, d = X.shape
    return (X.reshape(n * T, d) @ W.T).reshape(n, T, -1).transpose(0, 2, 1) / np.sqrt(d)


def _psd_part(A):
    """Symmetrised A with its negative eigenvalues set to 0, and whether any was."""
    w, U = np.linalg.eigh(0.5 * (A + A.T))
    clipped = bool(w.min() < 0)
    return (U * np.clip(w, 0.0, None)) @ U.T, clipped


class AttentionSteps(gamp.GampSteps):
    """The steps of the module docstring on one instance (X, u, W*). The constructor draws, in this
    order, the test set, the initial direction and the side information from `rng` (default_rng(0) if
    None). Records per iteration: overlap M, self_overlap Q and the plug-in test error gen_error; the
    trace's total n_clipped counts the iterations whose A had a negative eigenvalue (set to 0).

    `W0` replaces the drawn start (e.g. an informed one). `variance = "nishimori"` (A = (1/d) sum g g^T)
    and `reaction` other than "consistent" are kept for the comparisons of docs/validation/smi.md only:
    from the N(0, 1) start the Nishimori form makes C_hat collapse in a few iterations (omega's variance
    ~2 against V = I) and the overlaps freeze."""

    divergence = "stop"

    def __init__(self, channel, X, u, W_star, rng=None, *, side_info=0.0, init="random", n_gen=1000, eps=1e-3,
                 variance="analytic", reaction="consistent", W0=None):
        if variance not in ("analytic", "nishimori"):
            raise ValueError(f"variance must be 'analytic' or 'nishimori', got {variance!r}")
        if reaction not in REACTIONS:
            raise ValueError(f"reaction must be one of {REACTIONS}, got {reaction!r}")
        if init not in INIT_SCALES:
            raise ValueError(f"init must be one of {tuple(INIT_SCALES)}, got {init!r}")
        rng = rng if rng is not None else np.random.default_rng(0)
        self.attention, self.u, self.W_star = channel, u, W_star
        self.side_info, self.eps, self.variance, self.mode = side_info, eps, variance, reaction
        n, T, d = X.shape
        self.n, self.T, self.d, self.p = n, T, d, channel.p
        self.eye = np.eye(self.p)
        # draw order fixed (test set, initialisation, side information): the same rng gives the same test
        # set and the same initial direction whatever init scale or side information is chosen
        self.X_gen = rng.standard_normal((n_gen, T, d))
        self.y_gen = channel.output(indices(W_star, self.X_gen))  # the teacher's test outputs, computed once
        w0 = rng.standard_normal((self.p, d))
        self.w_init = INIT_SCALES[init] * w0 if W0 is None else np.array(W0, float)
        self.side_b = (side_info * W_star + np.sqrt(side_info) * rng.standard_normal((self.p, d))
                       if side_info > 0 else 0.0)
        self.Xf = X.reshape(n * T, d)
        self.n_clipped = 0
        self.C_now = None  # the C_hat of the current iteration (the "reference" reaction uses it)
        self.ref_react = 0.0  # C_hat_t g_{t-1} of the "reference" mode, subtracted in `project`

    def initial(self):
        return self.w_init, self.eye.copy(), np.zeros((self.n, self.p, self.T))

    def cavity(self, C):
        self.C_now = C
        return C + self.eps * self.eye

    def collapsed(self, V, C):
        # C_hat collapsed: nothing left to resolve (see the module docstring)
        return self.eps == 0 and np.linalg.eigvalsh(C).max() < 1e-9

    def reaction(self, C, g, V=None, weight=1.0):
        # V is not used: the cavity's eps regularises the channel, not the reaction (R = C g)
        if self.mode == "consistent":
            react = np.einsum("ab,nbt->nat", C, g)
            return react if weight == 1.0 else weight * react
        if self.mode == "reference":
            self.ref_react = np.einsum("ab,nbt->nat", self.C_now, g)
        return np.zeros_like(g)  # the loop's reaction stays exactly 0 (module docstring)

    def project(self, w):
        omega = (self.Xf @ w.T).reshape(self.n, self.T, self.p).transpose(0, 2, 1) / np.sqrt(self.d)
        return omega - self.ref_react if self.mode == "reference" else omega

    def g_out(self, omega, V):
        return self.attention.g_out_tokens(self.u, omega, V)

    def fields(self, g, dg, w):
        if self.variance == "analytic":
            A = -dg.sum(axis=(0, 1)) / self.d
        else:
            A = np.einsum("nat,nbt->ab", g, g) / self.d
        A, clipped = _psd_part(A)
        self.n_clipped += clipped
        B = (g.transpose(1, 0, 2).reshape(self.p, self.n * self.T) @ self.Xf / np.sqrt(self.d) + A @ w
             + self.side_b)
        return A, B

    def denoise(self, B, A):
        C_new = np.linalg.inv(self.eye + A + self.side_info * self.eye)
        C_new = 0.5 * (C_new + C_new.T)
        return C_new @ B, C_new

    def record(self, w):
        d = self.d
        return {"overlap": w @ self.W_star.T / d, "self_overlap": w @ w.T / d,
                "gen_error": float(np.mean(plugin_sq_error(self.attention, self.y_gen, indices(w, self.X_gen))))}

    def totals(self):
        return {"n_clipped": self.n_clipped}
