"""Full-batch gradient descent (GD) and averaged GD (AGD) for bilinear sequence regression (spec
rie_bsr_quadratic.md §A4, the authors' `standard_rect.py` / `averaged_rect.py`).

Student of the teacher's form and rank: S = A B^T / sqrt(r), A (d, r), B (L, r), r = round(rho d) (the
script's S = V U / sqrt(M) with M = rho * smaller side; here d <= L is the smaller side when beta >= 1),
prediction y_hat_mu = <X_mu, S> / sqrt(dL) (the labels' normalisation), full-batch loss

    loss(A, B) = sum_mu (y_hat_mu - y_mu)^2 / 4        (a sum over samples, as the scripts)

minimised by plain gradient descent (torch.optim.SGD without momentum) with learning rate `lr` (spec: 0.1)
for `steps` steps from the prior initialisation A, B i.i.d. N(0, 1) (the "prior" init of the spec). With
the measurement matrix M_f = X_f / sqrt(dL) (n, dL) and the residual e = M_f vec(S) - y:

    G = dloss/dS = reshape(M_f^T e) / 2,   dloss/dA = G B / sqrt(r),   dloss/dB = G^T A / sqrt(r)

(checked against finite differences in tests/bsr/test_bsr_gd.py). Why lr = 0.1 is stable at every d: the
Hessian of the loss in S is M_f^T M_f / 2, whose top eigenvalue is (1 + sqrt(alpha))^2 / 2 for alpha < 1,
and the factorisation multiplies it by ||B||_op^2 / r ~ (sqrt(L) + sqrt(r))^2 / r (the same for A with d),
so the top curvature at the prior start is ~ (1 + sqrt(alpha))^2 (sqrt(beta/rho) + 1)^2 / 2 per factor, ~ 10-13
at rho = 0.2, beta = 1, alpha <= 0.5, near 2 / lr = 20 for the pair (A, B): the scale is d-independent, as the
spec's script uses the same lr at every size; lr = 0.02 reaches the same final errors (docs/validation/bsr.md), and no run
of the sweeps diverged. A diverging student (non-finite loss) is recorded, not hidden.

The n_students students of one seed share the teacher and the data and are trained together: their factors
are stacked (s, d, r), (s, L, r), so each step is two (s, dL) x (dL, n) products. mse_gd is the error of
single students averaged over the seed's students (the expectation of the paper's one-student GD run at a
lower variance); mse_agd is the error of their mean S; by convexity mse_gd - mse_agd = mean_i
||S_i - S_bar||^2 / (dL) >= 0, the spread of the students (checked in the tests).

Random draws: a seed's SeedSequence spawns (instance, students); the instance is the GAMP method's
(`gamp.sample_instance`: teacher, inputs, label noise from their own streams), and the students' child
spawns one stream per student, so a seed's teacher, data and student i are the same whatever n_students.

Cost per step and student: 4 n d L flops (n = alpha d L), e.g. d = L = 40, alpha = 0.3: 3 Mflop.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core.bsr import gamp


def logged_steps(steps, log_every):
    """Steps at which errors are logged: 0, log_every, 2 log_every, ... and always the last."""
    marks = list(range(0, int(steps) + 1, int(log_every)))
    if marks[-1] != steps:
        marks.append(int(steps))
    return np.array(marks)


def estimate(A, B):
    """S = A B^T / sqrt(r) for stacked factors A (..., d, r), B (..., L, r)."""
    return A @ np.swapaxes(B, -1, -2) / math.sqrt(A.shape[-1])


def loss_and_gradient(M_f, y, A, B):
    """Per-student loss (s,) and gradients (dA (s, d, r), dB (s, L, r)) of sum (y_hat - y)^2 / 4 for the
    measurement matrix M_f (n, dL) (module docstring)."""
    s, d, r = A.shape
    L = B.shape[1]
    S = estimate(A, B)
    residual = S.reshape(s, d * L) @ M_f.T - y                       # (s, n)
    loss = 0.25 * np.einsum("sn,sn->s", residual, residual)
    G = (0.5 * residual @ M_f).reshape(s, d, L)                       # dloss/dS
    root_r = math.sqrt(r)
    return loss, G @ B / root_r, np.swapaxes(G, -1, -2) @ A / root_r


def run_seed(channel, *, alpha, rho, beta, d, n_students, steps, lr, log_every, seed_sequence):
    """One seed: a teacher, its n = alpha d L labelled inputs, n_students students trained by full-batch GD.

    Returns per logged step (`logged_steps`): mse_gd (mean single-student error), mse_agd (error of the mean
    S), train_loss (mean over students of 4 loss / n = the training MSE), and n_diverged (students whose
    loss became non-finite; their error is NaN and they are left out of the means)."""
    instance_seq, students_seq = seed_sequence.spawn(2)
    X, S_true, y = gamp.sample_instance(channel, alpha, rho, beta, d, instance_seq, "float64")
    L, r, n = gamp.sizes(alpha, rho, beta, d)
    M_f = X / math.sqrt(d * L)
    del X
    streams = [np.random.default_rng(seq) for seq in students_seq.spawn(n_students)]
    A = np.stack([rng.standard_normal((d, r)) for rng in streams])
    B = np.stack([rng.standard_normal((L, r)) for rng in streams])
    log_at = logged_steps(steps, log_every)
    mse_gd = np.empty(len(log_at))
    mse_agd = np.empty(len(log_at))
    train = np.empty(len(log_at))
    k = 0
    finite = np.ones(n_students, bool)
    with np.errstate(over="ignore", invalid="ignore"):
        for t in range(int(steps) + 1):
            loss, dA, dB = loss_and_gradient(M_f, y, A, B)
            if t == log_at[k]:
                finite &= np.isfinite(loss)
                S = estimate(A[finite], B[finite])
                mse_gd[k] = np.mean(np.sum((S - S_true) ** 2, axis=(1, 2))) / (d * L) if finite.any() else np.nan
                mse_agd[k] = np.sum((S.mean(axis=0) - S_true) ** 2) / (d * L) if finite.any() else np.nan
                train[k] = 4.0 * np.mean(loss[finite]) / n if finite.any() else np.nan
                k += 1
            if t < steps:
                A -= lr * dA
                B -= lr * dB
    return {"mse_gd": mse_gd, "mse_agd": mse_agd, "train_loss": train, "n_diverged": int(n_students - finite.sum()),
            "log_steps": log_at}
