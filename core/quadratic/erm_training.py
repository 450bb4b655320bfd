"""Finite-d ERM for the quadratic network with weight decay (spec erm_quadratic.md §1, §3 "Experiments"):
the experiment that the ERM state evolution (erm.py) predicts.

Units (those of the ERM SE, "S' units"): the teacher is S* = W*^T W* / m* with W* (m* x d) i.i.d. N(0, 1),
m* = round(kappa_star d): a Marchenko-Pastur spectrum of mean 1 and second moment Q0 = 1 + 1/kappa_star. A
sample is x ~ N(0, I_d) with the label

    y = <X, S*> + sqrt(delta) xi,   <X, S> := (x^T S x - Tr S) / sqrt(d),   xi ~ N(0, 1),

n = round(alpha d^2) samples. `delta` is the label-noise variance in these units (the SE's Delta; the
Bayes-optimal model's label-unit variance is kappa times it).

The student is S = B B^T, B in R^{d x m}, m = round(kappa d) (Burer-Monteiro; for kappa < 1 this is the rank
cap of the network of width m: S = W^T W / m with B = W^T / sqrt(m)). It minimises the SE's objective

    L(B) = (1 / (4 n)) sum_mu (y_mu - <X_mu, B B^T>)^2 + (lam / d) Tr(B B^T),       (DATA_WEIGHT, TRACE_WEIGHT)

whose minimiser over S >= 0 (kappa >= 1; convex) is the soft threshold (x - q)_+ of the SE's spectral
denoising problem with the threshold equation q (1 - int rho h (x - q) / alpha) = lam (erm.py's derivation; an
independent replica/GLM-prox derivation gives the same constants). The training loss reported is the data term
(1 / (4 n)) sum (y - y_hat)^2, the SE's `train_loss`.

Measured against the SE (kappa_star = 0.5, lam = 0.1, 16 seeds; sweep quadratic-erm-experiment):
* alpha >= 0.15: the mean test error sits ABOVE the SE by a relative gap ~ 6/d (d x gap / SE from 3.4 to 8.8 over
  d = 30, 40, 50, 60, 100), e.g. alpha = 0.25, kappa = 0.5: +13% (d = 50, 60), +6% (d = 100). Training loss and
  rank fraction: within a few % for alpha >= 0.25 (the training loss is +35-60% at alpha = 0.15, n ~ 0.15 d^2).
* alpha = 0.05 (n = 2.5 d at d = 50, 5 d at d = 100) is outside the SE's regime at these d: with n = O(d) samples
  the objective is flat along directions A with Tr A = 0 and x_mu^T A x_mu = 0 for all mu inside the optimal face
  of the PSD cone, so the minimiser is not unique (d = 24: L-BFGS and the convex solve below reach the same
  objective to 1e-14 with S_hat 50% (alpha = 0.05) and 27% (0.1) apart in Frobenius norm; 1e-6 apart at 0.25).
  There the training loss is ~20x the SE's and the rank fraction 0.5-0.8 (d = 50-60) against 0.165, though at
  d = 100 the test error is back on the SE (2.725 +- 0.035 against 2.700; rank fraction 0.35).

Gradient (vectorised; the n x d x d tensor of the X_mu is never formed): with P = x B (n, m),
z_mu = (|P_mu|^2 - |B|_F^2) / sqrt(d) and residual r = y - z,

    dL/dB = -(1 / (n sqrt(d))) [x^T (r * P) - (sum r) B] + (2 lam / d) B,

O(n d m) per evaluation (two products of the (n, d) inputs with d x m matrices), checked against finite
differences in tests/quadratic/test_erm_training.py. The minimiser is scipy's L-BFGS-B with this analytic
gradient from B_0 with i.i.d. N(0, 1/d) entries (the spec's "init scale 1/sqrt(d)").

Errors. `test_error` = ||S_hat - S*||_F^2 / d, the SE's normalisation (Q0 = 1 + 1/kappa_star at S_hat = 0);
`test_error_bo` = kappa_star ||S_hat - S*||_F^2 / d, the unit of the Bayes-optimal paper (its S* is
W*^T W* / sqrt(m*), and its MMSE is ||S_hat - S*||_F^2 / d^2 in those units; 1 at alpha = 0 for the
Bayes-optimal estimator, 1 + kappa_star for S_hat = 0). A fresh noiseless label has squared error
2 test_error (E[(x^T A x - Tr A)^2] = 2 ||A||_F^2).

Rank: eigenvalues of S_hat above RANK_CUT times the teacher's mean eigenvalue (1 in these units).

Random draws: a seed's SeedSequence spawns (teacher, data, init); the point's sequence spawns one child per
seed, so seed s is the same whatever n_seeds is.

The projected-gradient solver in S (`solve_convex`) is the cross-check for kappa >= 1, where the problem is
convex in S: FISTA with the projection onto the PSD cone, on the same objective; it is meant for small d.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from seqphase.core.errors import ParameterError
from seqphase.core.models import children  # the seed streams by spawn key, shared by every seeded method
from seqphase.core.quadratic.gamp import n_samples  # n = round(alpha d^2) >= 1, the family's one definition

#: the objective's weights: L = DATA_WEIGHT / n * sum r^2 + lam * TRACE_WEIGHT / d * Tr S (module docstring)
DATA_WEIGHT = 0.25
TRACE_WEIGHT = 1.0
#: eigenvalues of S_hat counted in the rank: above this fraction of the teacher's mean eigenvalue (1)
RANK_CUT = 1e-3
#: L-BFGS-B memory and the relative decrease of the objective below which it stops (kept tiny: gtol decides)
LBFGS_MEMORY = 20
LBFGS_FTOL = 1e-15


def width(kappa, d, field="kappa"):
    """round(kappa d); ParameterError if it is below 1."""
    m = int(round(float(kappa) * int(d)))
    if m < 1:
        raise ParameterError(f"params.{field}", f"{field} d = {float(kappa) * int(d):g} rounds to width {m}",
                             f"use d >= {math.ceil(0.5 / float(kappa))} for {field} = {kappa:g} (method.d)")
    return m


def teacher(kappa_star, d, rng):
    """S* = W*^T W* / m* (d x d), W* (m* x d) i.i.d. N(0, 1)."""
    m_star = width(kappa_star, d, "kappa_star")
    W = rng.standard_normal((m_star, d))
    return W.T @ W / m_star


def measure(x, S):
    """<X_mu, S> = (x_mu^T S x_mu - Tr S) / sqrt(d) for all rows of x (n, d), without forming x x^T."""
    d = x.shape[1]
    return (np.einsum("nd,nd->n", x @ S, x) - np.trace(S)) / math.sqrt(d)


def draw_data(S_star, alpha, delta, rng):
    """(x (n, d), y (n,)) with y = <X, S*> + sqrt(delta) xi."""
    d = S_star.shape[0]
    n = n_samples(alpha, d)
    x = rng.standard_normal((n, d))
    y = measure(x, S_star) + math.sqrt(float(delta)) * rng.standard_normal(n)
    return x, y


def objective(B, x, y, lam):
    """(L(B), train_loss) with L the training objective and train_loss its data term (module docstring)."""
    n, d = x.shape
    P = x @ B
    r = y - (np.einsum("nm,nm->n", P, P) - np.sum(B * B)) / math.sqrt(d)
    data = DATA_WEIGHT * float(r @ r) / n
    return data + float(lam) * TRACE_WEIGHT * float(np.sum(B * B)) / d, data


def loss_and_gradient(B, x, y, lam):
    """L(B) and dL/dB (d, m) (module docstring)."""
    n, d = x.shape
    P = x @ B
    r = y - (np.einsum("nm,nm->n", P, P) - np.sum(B * B)) / math.sqrt(d)
    loss = DATA_WEIGHT * float(r @ r) / n + float(lam) * TRACE_WEIGHT * float(np.sum(B * B)) / d
    # d/dB of (r_mu)^2 = -2 r_mu (2 x x^T B - 2 B) / sqrt(d)
    grad = x.T @ (r[:, None] * P)
    grad -= r.sum() * B
    grad *= -4.0 * DATA_WEIGHT / (n * math.sqrt(d))
    grad += (2.0 * float(lam) * TRACE_WEIGHT / d) * B
    return loss, grad


@dataclass(frozen=True)
class Fit:
    """A trained student: B (d, m), the objective and its data term at B, L-BFGS-B's iterations, its
    convergence flag (projected gradient below gtol or no further decrease) and message."""

    B: np.ndarray
    loss: float
    train_loss: float
    n_iter: int
    converged: bool
    message: str


def fit(x, y, lam, B0, *, max_iter=20000, gtol=1e-7):
    """Minimise L(B) from B0 with scipy's L-BFGS-B and the analytic gradient."""
    d, m = B0.shape

    def fun(b):
        loss, grad = loss_and_gradient(b.reshape(d, m), x, y, lam)
        return loss, grad.ravel()

    result = optimize.minimize(fun, B0.ravel(), jac=True, method="L-BFGS-B",
                               options={"maxiter": int(max_iter), "maxfun": 2 * int(max_iter) + 100,
                                        "gtol": float(gtol), "ftol": LBFGS_FTOL, "maxcor": LBFGS_MEMORY})
    B = result.x.reshape(d, m)
    loss, train = objective(B, x, y, lam)
    return Fit(B=B, loss=loss, train_loss=train, n_iter=int(result.nit), converged=bool(result.success),
               message=str(result.message))


def spectrum(B):
    """Eigenvalues of S = B B^T (d of them, descending; zeros beyond the m columns)."""
    d = B.shape[0]
    s2 = np.linalg.svd(B, compute_uv=False) ** 2
    out = np.zeros(d)
    out[:min(d, len(s2))] = s2[:d]
    return out


def rank(S_or_eigenvalues):
    """Eigenvalues above RANK_CUT (teacher mean eigenvalue 1) of a matrix or of an eigenvalue array."""
    ev = np.asarray(S_or_eigenvalues, float)
    if ev.ndim == 2:
        ev = np.linalg.eigvalsh(ev)
    return int(np.sum(ev > RANK_CUT))


def test_error(S_hat, S_star):
    """||S_hat - S*||_F^2 / d (SE units)."""
    return float(np.sum((S_hat - S_star) ** 2)) / S_star.shape[0]


def run_seed(*, alpha, kappa_star, kappa, delta, lam, d, seed_sequence, max_iter=20000, gtol=1e-7):
    """One seed: a teacher, its n = alpha d^2 samples, one student trained by L-BFGS-B. Returns a dict of
    floats: test_error (SE units), test_error_bo (Bayes-optimal paper's unit), train_loss, loss, rank,
    rank_fraction, n_iter, converged, fit_seconds (wall time of the L-BFGS-B fit)."""
    teacher_seq, data_seq, init_seq = children(seed_sequence, 3)
    S_star = teacher(kappa_star, d, np.random.default_rng(teacher_seq))
    x, y = draw_data(S_star, alpha, delta, np.random.default_rng(data_seq))
    m = width(kappa, d)
    B0 = np.random.default_rng(init_seq).standard_normal((d, m)) / math.sqrt(d)
    start = time.perf_counter()
    result = fit(x, y, lam, B0, max_iter=max_iter, gtol=gtol)
    seconds = time.perf_counter() - start
    err = test_error(result.B @ result.B.T, S_star)
    r = rank(spectrum(result.B))
    return {"test_error": err, "test_error_bo": float(kappa_star) * err, "train_loss": result.train_loss,
            "loss": result.loss, "rank": r, "rank_fraction": r / d, "n_iter": result.n_iter,
            "converged": result.converged, "fit_seconds": seconds}


# -- the convex cross-check (kappa >= 1) -------------------------------------------------------------------
def project_psd(S):
    """The nearest PSD matrix (Frobenius): negative eigenvalues set to 0."""
    w, V = np.linalg.eigh((S + S.T) / 2.0)
    return (V * np.maximum(w, 0.0)) @ V.T


def convex_objective(S, x, y, lam):
    n, d = x.shape
    r = y - measure(x, S)
    return DATA_WEIGHT * float(r @ r) / n + float(lam) * TRACE_WEIGHT * float(np.trace(S)) / d


def _convex_gradient(S, x, y, lam):
    n, d = x.shape
    r = y - measure(x, S)
    # d/dS sum r^2 = -2 sum r_mu (x x^T - I) / sqrt(d)
    G = -(2.0 * DATA_WEIGHT / (n * math.sqrt(d))) * ((x.T * r) @ x - r.sum() * np.eye(d))
    return G + (float(lam) * TRACE_WEIGHT / d) * np.eye(d)


def _lipschitz(x, n_power=50, seed=0):
    """Largest eigenvalue of the Hessian of the data term (power iteration on A^T A, A: S -> <X, S>)."""
    n, d = x.shape
    rng = np.random.default_rng(seed)
    V = rng.standard_normal((d, d))
    V = (V + V.T) / 2
    top = 1.0
    for _ in range(n_power):
        V /= np.linalg.norm(V)
        r = measure(x, V)
        W = ((x.T * r) @ x - r.sum() * np.eye(d)) / math.sqrt(d)
        top = float(np.sum(W * V))
        V = W
    return 2.0 * DATA_WEIGHT / n * top


def solve_convex(x, y, lam, *, max_iter=20000, tol=1e-12):
    """min over S >= 0 of the objective by FISTA with the PSD projection (small d only: eigh per step).
    Returns (S, objective, iterations)."""
    n, d = x.shape
    step = 1.0 / (1.01 * _lipschitz(x))
    S = np.zeros((d, d))
    Z, t = S.copy(), 1.0
    previous = convex_objective(S, x, y, lam)
    for it in range(1, max_iter + 1):
        S_new = project_psd(Z - step * _convex_gradient(Z, x, y, lam))
        t_new = (1.0 + math.sqrt(1.0 + 4.0 * t * t)) / 2.0
        Z = S_new + ((t - 1.0) / t_new) * (S_new - S)
        S, t = S_new, t_new
        if it % 200 == 0:
            value = convex_objective(S, x, y, lam)
            if abs(previous - value) <= tol * max(1.0, abs(value)):
                break
            previous = value
    return S, convex_objective(S, x, y, lam), it
