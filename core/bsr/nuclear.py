"""Finite-d baselines of BSR (spec rie_bsr_quadratic.md §A4): the minimal nuclear-norm estimator (MNNE) and
ridge regression on the vectorised input.

MNNE. minimise ||S||_* subject to A(S) = y, A(S)_mu = <X_mu, S> / sqrt(dL) (the labels' own normalisation,
so the noiseless teacher is feasible; the authors' cvxpy script writes <X, S>/(dL) with their unnormalised
S = U V, the same problem). Solved by ADMM on the splitting S = Z (S in the affine set, Z carrying the norm):

    S <- P(Z - U)          P = Euclidean projection on {A(S) = y}: W - A^T (A A^T)^-1 (A(W) - y), one
                           Cholesky factor of the n x n Gram matrix A A^T = X_f X_f^T / (dL), computed once
    Z <- SVT(S + U, 1/tau)  singular-value soft thresholding (the prox of ||.||_* / tau)
    U <- U + S - Z          the scaled dual variable

Certificates of convergence (stored per solve):
- feasibility: ||A(S) - y|| / ||y|| of the returned S = P(Z) (feasible to rounding) and ||S - Z||_F / ||S||_F;
- duality gap: the dual of the MNNE is max y^T lam subject to ||A^T lam||_op <= 1. From Y = tau U (the
  subgradient of ||.||_* at Z that the Z-step produces) take lam = (A A^T)^-1 A(Y), the least-squares
  representation of Y in range(A^T), scaled down to dual feasibility, lam / max(1, ||A^T lam||_op); then
  y^T lam <= ||S||_* for every feasible S (weak duality: ||S||_* >= <A^T lam, S> = lam^T y), and
  gap = (||S||_* - y^T lam) / ||S||_* >= 0 bounds the relative suboptimality of the returned S.
The iteration stops when the relative gap and the consensus residual are both below `tol`.

Ridge. The posterior mean of vec(S) under an i.i.d. N(0, 1) prior (Bayes-optimal for i.i.d. Gaussian S; spec
§A4 "ridge with lambda = delta") in the dual (n x n) form vec(S_hat) = A^T (A A^T + delta I)^-1 y, which at
delta = 0 is the minimum-norm interpolator. Its error tends to baselines.mse_ridge (1 - alpha noiseless).

Errors are per entry, ||S_hat - S*||_F^2 / (dL), in the unit-variance units of S* (spec pitfall 8).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import cho_factor, cho_solve

#: ADMM penalty tau in units where the singular values of S* are ~ sqrt(dL / r): thresholds 1/tau of O(1)
ADMM_TAU = 1.0


def measurement(X, d, L):
    """The measurement operator as a matrix A (n, dL): A vec(S) = <X_mu, S> / sqrt(dL)."""
    return np.asarray(X, float).reshape(len(X), d * L) / math.sqrt(d * L)


def singular_value_threshold(M, threshold):
    """SVT: U max(s - threshold, 0) V^T, and the singular values of the result."""
    U, s, Vt = np.linalg.svd(M, full_matrices=False)
    shrunk = np.maximum(s - threshold, 0.0)
    return (U * shrunk) @ Vt, shrunk


class MNNEResult:
    """The estimate, its objective, and the certificates (module docstring)."""

    def __init__(self, S, nuclear_norm, dual_objective, residual, consensus, n_iter, converged):
        self.S, self.nuclear_norm, self.dual_objective = S, nuclear_norm, dual_objective
        self.gap = (nuclear_norm - dual_objective) / nuclear_norm if nuclear_norm > 0 else 0.0
        self.residual, self.consensus, self.n_iter, self.converged = residual, consensus, n_iter, converged


def min_nuclear_norm(A, y, d, L, *, tol=1e-6, max_iter=20000, tau=ADMM_TAU, check_every=10):
    """MNNE by ADMM (module docstring) for the measurement matrix A (n, dL) and labels y (n,)."""
    y = np.asarray(y, float)
    gram = cho_factor(A @ A.T)

    def project(W):
        w = W.reshape(-1)
        return (w - A.T @ cho_solve(gram, A @ w - y)).reshape(d, L)

    Z = np.zeros((d, L))
    U = np.zeros((d, L))
    converged = False
    for it in range(1, max_iter + 1):
        S = project(Z - U)
        Z, _ = singular_value_threshold(S + U, 1.0 / tau)
        U += S - Z
        if it % check_every == 0 or it == max_iter:
            certificate = _certificate(A, y, gram, Z, U, tau, d, L)
            nuclear, dual, _, consensus, _ = certificate
            if nuclear - dual <= tol * nuclear and consensus <= tol:
                converged = True
                break
    nuclear, dual, residual, consensus, S = certificate
    return MNNEResult(S, nuclear, dual, residual, consensus, it, converged)


def _certificate(A, y, gram, Z, U, tau, d, L):
    """(||S||_* of the feasible S = P(Z), the dual objective y^T lam of the scaled dual point, the relative
    constraint residual of S, the consensus ||S - Z||_F / ||S||_F, S) (module docstring)."""
    z = Z.reshape(-1)
    S = (z - A.T @ cho_solve(gram, A @ z - y)).reshape(d, L)
    nuclear = float(np.sum(np.linalg.svd(S, compute_uv=False)))
    lam = cho_solve(gram, A @ (tau * U).reshape(-1))
    op = float(np.linalg.norm((A.T @ lam).reshape(d, L), 2))
    dual = float(y @ lam) / max(1.0, op)
    residual = float(np.linalg.norm(A @ S.reshape(-1) - y)) / max(float(np.linalg.norm(y)), 1e-300)
    consensus = float(np.linalg.norm(S - Z)) / max(float(np.linalg.norm(S)), 1e-300)
    return nuclear, dual, residual, consensus, S


def ridge(A, y, delta, d, L):
    """Posterior mean of S under an i.i.d. N(0, 1) prior (ridge with lambda = delta), dual form (d, L)."""
    n = A.shape[0]
    coef = np.linalg.solve(A @ A.T + float(delta) * np.eye(n), np.asarray(y, float))
    return (A.T @ coef).reshape(d, L)


def per_entry_error(S_hat, S_true):
    return float(np.sum((S_hat - S_true) ** 2)) / S_true.size
