"""Full-batch gradient descent (GD) and averaged GD (AGD) for the softmax AIM (spec aim.md §4, Fig. 2 right).

Teacher and student have the same architecture (spec §1.1, in the GD code's convention): W (R x D),
R = rho D (matched width), N(0, 1) entries, tied S = W^T W / sqrt(R D), and for a sequence X (T x D)

    Z = X W^T (T x R),  G = Z Z^T,  h = (G - |W|_F^2 I) / (D sqrt(R)) = (X S X^T - Tr S I) / sqrt(D),
    y_hat = softmax_row(beta h).

The teacher labels n = round(alpha D^2) sequences (alpha = n/D^2); a student minimises the full-batch loss

    L(W) = sum_{mu, a, b} (y_hat_mu,ab - y_mu,ab)^2 / D

with Adam (lr 0.1, betas (0.9, 0.999), eps 1e-8, torch's update written out in `Adam`) for `steps` steps
from its own N(0, 1) initialisation. The error is the paper's ||S_hat - S*||_F^2 / D, S_hat = W^T W /
sqrt(R D). AGD trains n_students students on the same data and measures the error of their mean S_hat.

Gradient (derived by hand, checked against finite differences in tests/aim/test_aim_gd.py). With
E = dL/dy_hat = 2 (y_hat - y)/D and the row-softmax Jacobian, Gamma = dL/dh has entries
Gamma_ab = beta y_hat_ab (E_ab - sum_c y_hat_ac E_ac) (not symmetric: h_ab and h_ba sit in different
rows). G_ab enters h_ab and G_ba = G_ab enters h_ba, so with c = D sqrt(R)

    dL/dZ = (Gamma + Gamma^T) Z / c,    dL/dW = sum_mu (dL/dZ_mu)^T X_mu - 2 W sum_{mu, a} Gamma_mu,aa / c

(the second term from the trace subtraction, d|W|^2/dW = 2 W). No n x D x D array is formed: per step the
work is two products of the flattened (n T, D) data with the (s R, D) stacked students, O(n T D R) per
student, plus O(n T^2 R) for the T x T Gram blocks. The students are stacked along the rows of one
matrix so each product is a single BLAS call; they are processed in chunks that keep the (n T, s R)
work arrays below `WORK_ELEMENTS` entries (the result does not depend on the chunking: each student
draws its initialisation from its own stream and trains independently).

GD versus AGD. mse_gd is the error of single students averaged over the n_students students of a seed:
the same expectation as the paper's one-student GD run (its script with `averages = 1`) at a lower
variance. mse_agd is the error of their mean; by convexity mse_gd - mse_agd = mean_i
||S_i - S_bar||_F^2 / D >= 0 (the spread of the students), an identity the tests check.

Random draws: a point's SeedSequence spawns one child per seed; each seed spawns (teacher, data,
students), and the students' child spawns one stream per student. A seed's teacher, data and student i
are therefore the same whatever n_students or the chunking.

Precision: the teacher, its labels and every error are float64; the training runs in `precision`,
float32 by default as the authors' torch code (spec §6.3): it halves the time, and at d = 30 the final
errors agree with float64 to 3-4 digits (the students converge to the same minima).

Cost: 2 n T D R multiply-adds per student and step, n = alpha D^2, R = rho D, i.e. 2 alpha rho T D^4:
x 16 per doubling of D. Measured on one core (float32, T = 2, rho = 0.5, 32 students, alpha = 0.3): 71 ms
per step at D = 100 (float64: 150 ms; ~70% in the two products), so 1000 steps x 16 seeds ~ 19 min per
point; at D = 200 (the paper's code) ~ 5 h per point.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core import gamp as core_gamp
from seqphase.core.optim import Adam  # torch.optim.Adam written out (the authors' script: lr=0.1)

#: entries of one (n T, s R) work array; sets the students per chunk (~32 MB of float64 each)
WORK_ELEMENTS = 4 * 2**20


def student_width(rho, d):
    """R = round(rho d), the width of teacher and student; ParameterError if R < 1."""
    return core_gamp.width(rho, d, "rho")

def n_samples(alpha, d):
    """n = round(alpha d^2) sequences; ParameterError if n < 1."""
    return core_gamp.n_samples(alpha, d)

def logged_steps(steps, log_every):
    """The steps at which the errors are logged: 0 (the initialisation), log_every, 2 log_every, ...,
    and always the last step."""
    marks = list(range(0, int(steps) + 1, int(log_every)))
    if marks[-1] != steps:
        marks.append(int(steps))
    return np.array(marks)


def estimate(W):
    """S_hat = W^T W / sqrt(R D) for W (..., R, D)."""
    R, D = W.shape[-2:]
    return np.swapaxes(W, -1, -2) @ W / math.sqrt(R * D)


def _softmax_rows(logits):
    shifted = logits - logits.max(axis=-1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=-1, keepdims=True)


def predict(X, W, beta=1.0):
    """y_hat (n, T, T) of one network W (R, D) on sequences X (n, T, D) (the teacher's labels)."""
    R, D = W.shape
    Z = X @ W.T                                                     # (n, T, R)
    h = (Z @ np.swapaxes(Z, -1, -2) - np.sum(W * W) * np.eye(X.shape[1])) / (D * math.sqrt(R))
    return _softmax_rows(beta * h)


def loss_and_gradient(X_flat, y, W, beta=1.0):
    """Per-student loss (s,) (float64) and gradient (s, R, D) of L(W) = sum (y_hat - y)^2 / D (module
    docstring), in the dtype of W.

    X_flat: the sequences flattened to (n T, D) rows (sample, token); y: labels (n, T, T); W: the stacked
    students (s, R, D). The (n T, s R) products keep the layout (n, T, s, R) of the BLAS output, so no
    work array is transposed: the Gram blocks and dL/dZ are einsums over it.
    """
    s, R, D = W.shape
    n, T = y.shape[:2]
    c = D * math.sqrt(R)
    Z = (X_flat @ W.reshape(s * R, D).T).reshape(n, T, s, R)
    h = np.einsum("nasr,nbsr->nsab", Z, Z)                          # (n, s, T, T)
    diag = np.arange(T)
    h[:, :, diag, diag] -= np.einsum("srd,srd->s", W, W)[:, None]
    h *= beta / c
    y_hat = _softmax_rows(h)
    diff = y_hat - y[:, None]
    loss = np.einsum("nsab,nsab->s", diff, diff, dtype=np.float64) / D
    E = diff
    E *= 2.0 / D                                                   # dL/dy_hat
    gamma = y_hat * (E - np.einsum("nsab,nsab->nsa", y_hat, E)[..., None])
    gamma *= beta / c                                              # dL/dG_ab (G enters h as G/c)
    M = gamma + np.swapaxes(gamma, -1, -2)
    dZ = np.einsum("nsab,nbsr->nasr", M, Z, order="C")              # dL/dZ, (n, T, s, R)
    grad = (dZ.reshape(n * T, s * R).T @ X_flat).reshape(s, R, D)
    grad -= 2.0 * np.einsum("nsaa->s", gamma)[:, None, None] * W   # the trace subtraction
    return loss, grad


def train(X_flat, y, W, *, beta, lr, steps, log_at, on_log):
    """Adam on the stacked students W (s, R, D), in place; calls on_log(index, W, loss (s,)) at the steps
    in log_at (step 0: the initialisation)."""
    optimiser = Adam(W, lr)
    log_index = {int(t): i for i, t in enumerate(log_at)}
    for t in range(int(steps) + 1):
        loss, grad = loss_and_gradient(X_flat, y, W, beta)
        if t in log_index:
            on_log(log_index[t], W, loss)
        if t < steps:
            optimiser.step(W, grad)


def chunk_size(n, T, R, n_students):
    """Students per chunk so that the (n T, s R) work arrays stay below WORK_ELEMENTS entries."""
    return max(1, min(int(n_students), WORK_ELEMENTS // max(1, n * T * R)))


def run_seed(*, alpha, rho, T, d, n_students, steps, lr, log_every, beta, seed_sequence, precision="float32"):
    """One seed: a teacher, its n = alpha d^2 labelled sequences, n_students students trained on them.

    The teacher, its labels and every error are float64; the training runs in `precision`. Returns per
    logged step (`logged_steps`): mse_gd (mean single-student error), mse_agd (error of the mean S_hat),
    train_loss (mean over the students of L / n), mse_students (n_students, n_log) and log_steps.
    """
    dtype = np.dtype(precision)
    R, n = student_width(rho, d), n_samples(alpha, d)
    teacher_seq, data_seq, students_seq = seed_sequence.spawn(3)
    teacher = np.random.default_rng(teacher_seq).standard_normal((R, d))
    X = np.random.default_rng(data_seq).standard_normal((n, T, d))
    y = predict(X, teacher, beta).astype(dtype)
    X_flat = np.ascontiguousarray(X.reshape(n * T, d), dtype=dtype)
    del X
    target = estimate(teacher)
    log_at = logged_steps(steps, log_every)
    n_log = len(log_at)
    S_sum = np.zeros((n_log, d, d))
    mse_students = np.empty((n_students, n_log))
    loss_students = np.empty((n_students, n_log))
    student_seqs = students_seq.spawn(n_students)
    size = chunk_size(n, T, R, n_students)
    for start in range(0, n_students, size):
        chunk = slice(start, min(start + size, n_students))
        W = np.stack([np.random.default_rng(seq).standard_normal((R, d)) for seq in student_seqs[chunk]])
        W = W.astype(dtype)

        def on_log(i, W, loss, chunk=chunk):
            S = estimate(W.astype(np.float64))
            S_sum[i] += S.sum(axis=0)
            mse_students[chunk, i] = np.sum((S - target) ** 2, axis=(1, 2)) / d
            loss_students[chunk, i] = loss / n

        train(X_flat, y, W, beta=beta, lr=lr, steps=steps, log_at=log_at, on_log=on_log)
    mse_agd = np.sum((S_sum / n_students - target) ** 2, axis=(1, 2)) / d
    return {"mse_gd": mse_students.mean(axis=0), "mse_agd": mse_agd, "train_loss": loss_students.mean(axis=0),
            "mse_students": mse_students, "log_steps": log_at}
