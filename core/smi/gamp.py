"""GAMP for the sequence multi-index model of deep tied attention (spec smi.md §4, the paper's Algorithm 1).

Data: X (n, T, d) i.i.d. N(0, 1) (sequences, rows are tokens), W* (p, d) i.i.d. N(0, 1), indices
z_mu = W* X_mu^T / sqrt(d) (p, T), labels u_mu = channel.labels_of_z(z_mu) (the lossless encoding of the
T x T attention matrix y_mu, see `channel.py`). Prior: every column w_i in R^p ~ N(0, I_p).

Iteration (the paper's version "without indices", Eq. 112: the prior is Gaussian and the same for every
column, and sum_i X_mu,t,i^2 / d -> 1, so one p x p C_hat serves every column and every sample):

    V      = C_hat + eps I                                         (p x p) cavity covariance
    omega  = W_hat X_mu^T / sqrt(d) - R_t                          (n, p, T)  R_t: reaction term
    g, dg  = channel.g_out(u, omega, V)                            (n, p, T), (n, T, p, p)
    A      = -(1/d) sum_mu sum_t dg[mu, t]                         ("analytic", the reference's choice)
           or (1/d) sum_mu sum_t g[mu, :, t] g[mu, :, t]^T          ("nishimori": E[g g^T] = -E[dg])
    B      = (1/sqrt(d)) sum_mu g_mu X_mu + A W_hat                (p x d)
    W_new  = (I + A + lambda I)^-1 (B + sqrt(lambda) S),  C_new = (I + A + lambda I)^-1
    W_hat  <- (1 - c) W_new + c W_hat,   C_hat <- (1 - c) C_new + c C_hat

`channel.g_out` is the function the SE uses (one V for every sample: the channel is called once per
iteration on all n samples).

Damping convention: c = `damping` is the weight of the OLD iterate, as in the SE (`se.smi_se`) and the
multi-index GAMP. The reference code writes W <- delta W_new + (1 - delta) W with delta = 0.8 (spec
§4.1): that is damping = 0.2 here.

Onsager (reaction) term, damped consistently (the fix of `core/multiindex/gamp.py`): W_hat_t =
(1 - c) W_new,t + c W_hat_{t-1} carries (1 - c) of the new reaction and c of the old one, so

    R_t = (1 - c) C_new,t g_{t-1} + c R_{t-1}      (C_new: the Jacobian of the UNDAMPED denoiser)

(R_0 = 0, g_{-1} = 0). The reference code subtracts C_hat_t g_{t-1} with the damped C_hat_t = (1 - c)
C_new,t + c C_hat_{t-1} (`reaction = "reference"`): the old fraction c of the reaction is applied to the
new g_{t-1} instead of carrying R_{t-1}, although W_hat_{t-1}'s reaction is that of g_{t-2}; at alpha =
1.2 this leaves some instances stuck at M11 ~ 0. `reaction = "none"` drops the term and blows up. Both
are kept only for the comparison in docs/smi.md.

Side information (spec §4.3, App. D.4): S = sqrt(lambda) W* + Xi, Xi i.i.d. N(0, 1), enters as the extra
Gaussian observation of each column: B += lambda W* + sqrt(lambda) Xi and A += lambda I in the denoiser
(the SE's prior step becomes Q = (Qhat + lambda)(I + Qhat + lambda)^-1, `se.prior_step`).

Guards. (i) A is symmetrised, and its negative eigenvalues are set to 0 before C_new = (I + A)^-1: for the
Bayes-optimal channel A is an estimate of the PSD Fisher information alpha E[g g^T] (Nishimori), so a
negative direction is finite-n / quadrature noise, and the Gaussian-prior denoiser (like the SE's prior
step, which clips Qhat the same way) is only a contraction for A >= 0; without the clip I + A can be
singular and C_hat indefinite, which the channel refuses (V must be positive definite). The number of
clipped iterations is reported; the clipped eigenvalues are small (>= -0.07 at d = 300) and the final
overlaps are the same without the clip (docs/smi.md). (ii) eps (reference: 1e-3, as in the SE) keeps V positive definite when
C_hat -> 0 (recovery); with eps = 0 a run whose C_hat has collapsed below 1e-9 stops (converged: the
cavity has no width left for the posterior quadrature to resolve). (iii) A non-finite omega, g or
estimate stops the run and flags it as diverged (the caller NaN-pads the log).

Labels: `sample_instance(noise=...)` adds Gaussian noise of variance `noise` to the teacher's indices
before the link (0: the paper's noiseless model); noise = eps is the teacher the SE with the same eps
describes, the setting in which GAMP lands on the SE (docs/smi.md).

Initialisation: "random" (the reference code): W_hat^0 ~ N(0, 1), i.e. |w_l|^2 / d ~ 1 and an overlap
O(d^-1/2) with W*, which plays the role of side information; "small": W_hat^0 ~ 1e-3 N(0, 1). C_hat^0 = I.

Logged per iteration (0 = the initialisation): M = W_hat W*^T / d, Q = W_hat W_hat^T / d and the plug-in
test error mean_mu ||g(W* X_mu^T / sqrt d) - g(W_hat X_mu^T / sqrt d)||_F^2 on n_gen fresh sequences (the
definition of `se.gen_error_plugin`, with the student's index W_hat x).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqphase.core.smi.se import plugin_sq_error

INIT_SCALES = {"random": 1.0, "small": 1e-3}
REACTIONS = ("consistent", "reference", "none")


def sample_instance(channel, alpha, d, rng, noise=0.0):
    """X (n, T, d), W* (p, d), z (n, p, T) and labels u (n, T) with n = round(alpha d).

    noise: variance of a Gaussian noise added to the indices before the link, y = g(z + sqrt(noise) xi)
    (0: the noiseless model of the paper and the reference code). noise = eps is the teacher the SE
    with regulariser eps describes (z = omega + (I - Q + eps I)^{1/2} u, spec §3.2)."""
    n = int(round(alpha * d))
    X = rng.standard_normal((n, channel.T, d))
    W = rng.standard_normal((channel.p, d))
    z = indices(W, X)
    if noise > 0:
        z = z + np.sqrt(noise) * rng.standard_normal(z.shape)
    return X, W, z, channel.labels_of_z(z)


def indices(W, X):
    """z = W X^T / sqrt(d): (p, d) x (n, T, d) -> (n, p, T), as one BLAS product."""
    n, T, d = X.shape
    return (X.reshape(n * T, d) @ W.T).reshape(n, T, -1).transpose(0, 2, 1) / np.sqrt(d)


@dataclass
class GampTrace:
    overlap: np.ndarray  # (iterations + 1, p, p): M = W_hat W*^T / d, the initialisation first
    self_overlap: np.ndarray  # (iterations + 1, p, p): Q = W_hat W_hat^T / d
    gen_error: np.ndarray  # (iterations + 1,): plug-in test error on the n_gen test sequences
    n_iter: int
    converged: bool
    diverged: bool
    n_clipped: int  # iterations in which A had a negative eigenvalue (set to 0)
    C_hat: np.ndarray  # the last C_hat (p, p)


def _psd_part(A):
    """Symmetrised A with its negative eigenvalues set to 0, and whether any was."""
    w, U = np.linalg.eigh(0.5 * (A + A.T))
    clipped = bool(w.min() < 0)
    return (U * np.clip(w, 0.0, None)) @ U.T, clipped


def run_gamp(channel, X, u, W_star, *, max_iter=50, damping=0.2, tol=1e-6, side_info=0.0, rng=None,
             init="random", n_gen=1000, eps=1e-3, variance="analytic", reaction="consistent", W0=None):
    """Run GAMP on one instance; `rng` draws the test set, the initialisation and the side information.

    Stops after max_iter iterations or when the rms change of W_hat per entry is below tol. `W0` replaces
    the drawn start (e.g. an informed one). `variance = "nishimori"` (A = (1/d) sum g g^T) and `reaction`
    other than "consistent" are kept for the comparisons of docs/smi.md only: from the N(0, 1) start the
    Nishimori form makes C_hat collapse in a few iterations (omega's variance ~2 against V = I) and the
    overlaps freeze."""
    if variance not in ("analytic", "nishimori"):
        raise ValueError(f"variance must be 'analytic' or 'nishimori', got {variance!r}")
    if reaction not in REACTIONS:
        raise ValueError(f"reaction must be one of {REACTIONS}, got {reaction!r}")
    if init not in INIT_SCALES:
        raise ValueError(f"init must be one of {tuple(INIT_SCALES)}, got {init!r}")
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping (weight of the old iterate) must be in [0, 1), got {damping}")
    rng = rng if rng is not None else np.random.default_rng(0)
    n, T, d = X.shape
    p = channel.p
    eye = np.eye(p)
    # draw order fixed (test set, initialisation, side information): the same rng gives the same test
    # set and the same initial direction whatever init scale or side information is chosen
    X_gen = rng.standard_normal((n_gen, T, d))
    y_gen = channel.output(indices(W_star, X_gen))  # the teacher's test outputs, computed once
    w0 = rng.standard_normal((p, d))
    what = INIT_SCALES[init] * w0 if W0 is None else np.array(W0, float)
    side_b = side_info * W_star + np.sqrt(side_info) * rng.standard_normal((p, d)) if side_info > 0 else 0.0
    Xf = X.reshape(n * T, d)

    def log(w):
        return (w @ W_star.T / d, w @ w.T / d,
                float(np.mean(plugin_sq_error(channel, y_gen, indices(w, X_gen)))))

    logs = [log(what)]
    C = eye.copy()
    C_und = eye.copy()
    g = np.zeros((n, p, T))
    react = np.zeros((n, p, T))
    converged = diverged = False
    n_clipped = 0
    it = 0
    for it in range(1, max_iter + 1):
        if eps == 0 and np.linalg.eigvalsh(C).max() < 1e-9:
            converged = True  # C_hat collapsed: nothing left to resolve (see the module docstring)
            it -= 1
            break
        V = C + eps * eye
        if reaction == "consistent":
            react = (1 - damping) * np.einsum("ab,nbt->nat", C_und, g) + damping * react
        elif reaction == "reference":
            react = np.einsum("ab,nbt->nat", C, g)
        omega = (Xf @ what.T).reshape(n, T, p).transpose(0, 2, 1) / np.sqrt(d) - react
        g, dg = channel.g_out(u, omega, V)
        if not (np.all(np.isfinite(g)) and np.all(np.isfinite(dg))):
            diverged = True
            it -= 1
            break
        if variance == "analytic":
            A = -dg.sum(axis=(0, 1)) / d
        else:
            A = np.einsum("nat,nbt->ab", g, g) / d
        A, clipped = _psd_part(A)
        n_clipped += clipped
        B = g.transpose(1, 0, 2).reshape(p, n * T) @ Xf / np.sqrt(d) + A @ what + side_b
        C_new = np.linalg.inv(eye + A + side_info * eye)
        C_new = 0.5 * (C_new + C_new.T)
        w_new = (1 - damping) * (C_new @ B) + damping * what
        C = (1 - damping) * C_new + damping * C
        C_und = C_new
        if not np.all(np.isfinite(w_new)):
            diverged = True
            it -= 1
            break
        delta = float(np.sqrt(np.mean((w_new - what) ** 2)))
        what = w_new
        logs.append(log(what))
        if delta < tol:
            converged = True
            break
    M, Q, e = (np.array(x) for x in zip(*logs))
    return GampTrace(M, Q, e, max(it, 0), converged, diverged, n_clipped, C)
