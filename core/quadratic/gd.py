"""Gradient descent (GD) and averaged GD (AGD) for the extensive-width quadratic network (spec
rie_bsr_quadratic.md §B4, the authors' GD_vanilla.py / GD_averaged.py).

Teacher and student have the same architecture: first layer W (m x d, m = round(kappa d), N(0, 1) entries:
the teacher's law, i.e. the "prior" initialisation), fixed second layer 1/sqrt(m), quadratic activation. Our
prediction is CENTRED like the teacher's labels (channels.py, `QuadraticChannel.labels`):

    y_hat(x) = sum_k [(w_k . x)^2 - ||w_k||^2] / (d sqrt(m)) = Tr[(x x^T - I) S_hat] / d,   S_hat = W^T W / sqrt(m).

(The authors' scripts keep the constant sum_k ||w_k||^2 / (d sqrt(m)) in both teacher and student; it is not a
constant of the student, so removing it from one side only would bias the fit. We remove it from both: the
teacher's labels are the channel's, identical to the SE's measurement, and the student measures S_hat the
same way.)

Loss: L(W) = sum_mu (y_hat_mu - y_mu)^2 / 4 (a sum, as the authors'). Its curvature is O(1): dy_hat/dW has
entries ~ 2 / sqrt(d m), and n = alpha d^2 samples give a Hessian scale ~ 2 alpha / kappa, so a fixed learning
rate O(0.1) is stable at any d. Gradient (checked against central differences in tests), with e = (y_hat - y)/2
and Z = x W^T (n x m):

    dL/dW = (2 / (d sqrt(m))) [ (e * Z)^T x - (sum_mu e_mu) W ].

Optimiser (`OPTIMISERS` of core/optim.py): "gd" (default), plain full-batch gradient descent W <- W - lr dL/dW,
lr 0.1: the authors' averaged script (torch SGD, no momentum, full batch, lr 0.1) and the algorithm the paper's
"GD" names; "adam" (torch's Adam, the authors' vanilla script, lr 0.01) is available. One optimiser for GD and
AGD: mse_gd is the mean error of the very students whose average gives mse_agd.

Error (paper units, the SE's: 1 at alpha = 0): (1/d^2) ||S_hat - S*||_F^2 = kappa (1/d) ||S_hat' - S'||_F^2 with
S' = W^T W / m, kappa = m/d. The authors' plots divide their stored ||S_hat' - S'||^2 / d by 2, which is this
only at kappa = 1/2; we use kappa (1/d) ||.||^2 at every kappa.

GD versus AGD (spec §B4): for each instance (seed), `n_students` students start from independent N(0, 1)
initialisations and train on the same data. mse_gd = mean over students of the single-student error; mse_agd =
error of their mean S_hat. mse_gd - mse_agd = mean_i ||S_i - S_bar||^2 / d^2 >= 0 (Jensen: the spread). In the
noiseless case GD lands on a random interpolator with error ~ 2 MMSE (GD "samples the posterior") and AGD on
~ MMSE (1 + 1/n_students) (spec §B4 table, d = 200).

Random draws: a point's SeedSequence spawns one child per seed; each seed spawns (teacher and data,
students) and the students' child spawns one stream per student, so seed s and student i are the same
whatever n_seeds, n_students or the chunking.

Cost per step and student: two (n x d) by (d x m) products, 4 n m d = 4 alpha kappa d^4 flops.
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core.optim import OPTIMISERS
from seqphase.core.quadratic import gamp as gamp_mod

#: entries of one (n, s m) work array; sets the students per chunk (~32 MB of float64)
WORK_ELEMENTS = 4 * 2**20


def log_marks(steps, log_every):
    """Steps at which the errors are logged: 0 (the initialisation), every log_every, and the last."""
    return np.unique(np.append(np.arange(0, int(steps) + 1, int(log_every)), int(steps)))


def predict(x, W):
    """Centred network output y_hat (n,) of one student W (m, d) on inputs x (n, d) (module docstring)."""
    m, d = W.shape
    Z = x @ W.T
    return (np.einsum("nk,nk->n", Z, Z) - np.sum(W * W)) / (d * math.sqrt(m))


def loss_and_gradient(x, y, W):
    """Per-student loss sum (y_hat - y)^2 / 4 (s,) and gradient (s, m, d) for the stacked students W (s, m, d)."""
    s, m, d = W.shape
    n = x.shape[0]
    scale = 1.0 / (d * math.sqrt(m))
    Z = (x @ W.reshape(s * m, d).T).reshape(n, s, m)
    y_hat = (np.einsum("nsk,nsk->ns", Z, Z) - np.einsum("skd,skd->s", W, W)) * scale
    diff = y_hat - y[:, None]
    loss = np.einsum("ns,ns->s", diff, diff) / 4.0
    e = diff / 2.0                                                  # dL/dy_hat
    Z *= e[:, :, None]
    grad = (Z.reshape(n, s * m).T @ x).reshape(s, m, d)
    grad -= np.sum(e, axis=0)[:, None, None] * W
    grad *= 2.0 * scale
    return loss, grad


def paper_error(S_sum_unscaled, m, target_unscaled, d):
    """(1/d^2) ||S_hat - S*||_F^2 from the Gram matrices W^T W (..., d, d) (S_hat = W^T W / sqrt(m))."""
    diff = S_sum_unscaled - target_unscaled
    return np.sum(diff * diff, axis=(-2, -1)) / (m * d * d)


def train(x, y, W, *, optimiser, lr, steps, log_at, on_log):
    """Train the stacked students W (s, m, d) in place; on_log(index, W, loss (s,)) at the steps in log_at."""
    opt = OPTIMISERS[optimiser](W, lr)
    index = {int(t): i for i, t in enumerate(log_at)}
    for t in range(int(steps) + 1):
        loss, grad = loss_and_gradient(x, y, W)
        if t in index:
            on_log(index[t], W, loss)
        if t < steps:
            opt.step(W, grad)


def run_seed(*, alpha, kappa, delta, d, n_students, steps, lr, log_every, optimiser, seed_sequence):
    """One seed: a teacher and its n = round(alpha d^2) labelled inputs (gamp.sample_instance, the same
    instance law as GAMP), n_students students trained on them. Returns per logged step: mse_gd, mse_agd,
    train_loss (mean over students of L / n), mse_students (n_students, n_log) and log_steps."""
    data_seq, students_seq = seed_sequence.spawn(2)
    x, teacher, y = gamp_mod.sample_instance(alpha, kappa, delta, d, np.random.default_rng(data_seq))
    n, m = x.shape[0], teacher.shape[0]
    target = teacher.T @ teacher
    log_at = log_marks(steps, log_every)
    n_log = len(log_at)
    gram_sum = np.zeros((n_log, d, d))
    mse_students = np.empty((n_students, n_log))
    loss_students = np.empty((n_students, n_log))
    streams = students_seq.spawn(n_students)
    size = max(1, min(n_students, WORK_ELEMENTS // max(1, n * m)))
    for start in range(0, n_students, size):
        chunk = slice(start, min(start + size, n_students))
        W = np.stack([np.random.default_rng(seq).standard_normal((m, d)) for seq in streams[chunk]])

        def on_log(i, W, loss, chunk=chunk):
            grams = np.swapaxes(W, 1, 2) @ W
            gram_sum[i] += grams.sum(axis=0)
            mse_students[chunk, i] = paper_error(grams, m, target, d)
            loss_students[chunk, i] = loss / n

        train(x, y, W, optimiser=optimiser, lr=lr, steps=steps, log_at=log_at, on_log=on_log)
    return {"mse_gd": mse_students.mean(axis=0), "mse_agd": paper_error(gram_sum / n_students, m, target, d),
            "train_loss": loss_students.mean(axis=0), "mse_students": mse_students, "log_steps": log_at}
