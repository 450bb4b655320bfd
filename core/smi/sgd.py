"""Layer-wise SGD on the 2-layer tied-attention model (spec smi.md §6.2, the paper's Fig. 2 right).

Model (rank 1, beta = 1, skip c on the first layer only), for a sequence X (T x d, rows are tokens)
and weights q1, q2 in R^d:

    u = X q1 / sqrt(d),  S = softmax(u u^T),  A = c I_T + S,
    v = X q2 / sqrt(d),  h = A v,             y_hat = softmax(h h^T)   (row-wise, T x T),

i.e. `link.link(z, c)` with z = [u; v]. A teacher with w1, w2 ~ N(0, 1)^d labels n = round(alpha d)
fresh sequences; the student minimises sum_{batch,t,s} (y_hat - y)^2 / d by plain SGD with L2 weight
decay added to the gradient (torch.optim.SGD semantics), batches taken in order and each batch reused
for n_passes consecutive steps, as in the reference notebook.

The model is written for T = 2 (as in the paper): every row-wise softmax is then a sigmoid of one
log-ratio, and the backward pass, derived by hand, works on (B, 2) arrays of the indices z = (u, v).
The only d-sized work per step is the two products z = X W^T and grad = dz^T X, i.e. two passes over
the (B T) x d batch, which bound the speed (~170 us per step at d = 500, B = 200 on one core).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from seqphase.core.errors import ParameterError

N_LAYERS = 2
N_TOKENS = 2


def n_batches_per_epoch(d, alpha, batch_size):
    return -(-n_train(d, alpha) // batch_size)


def n_train(d, alpha):
    return int(round(alpha * d))


def n_logs(d, alpha, epochs, batch_size=200, log_every=1):
    """Number of logged points of `run_sgd`: one after every `log_every`-th batch (counted over all epochs)."""
    return (epochs * n_batches_per_epoch(d, alpha, batch_size)) // log_every


def n_tests(epochs, test_every=20):
    """Number of test-error evaluations: after epochs test_every, 2 test_every, ... <= epochs.
    (The reference notebook tests after 0-based epoch t with t % 20 == 0 and t > 0, i.e. after 21, 41,
    ... epochs: 84 values for 1700 epochs where this gives 85.)"""
    return epochs // test_every


def _sigmoid_minus(a):
    """sigmoid(-a) = 1 / (1 + e^a), without overflow warnings for large a."""
    return expit(-a)


def _swap(x):
    """The other token's entry: x[..., ::-1] for T = 2."""
    return x[..., ::-1]


def _pair_forward(U, V, skip):
    """Forward pass on the indices U = X q1 / sqrt(d), V = X q2 / sqrt(d), each (..., 2) over tokens.

    For T = 2 a row-wise softmax of an outer product h h^T is fixed by its off-diagonal entries:
    softmax(h h^T)[t, s != t] = sigmoid(-h_t (h_t - h_s)). So with S_off = (S01, S10) and
    P_off = (y_hat01, y_hat10):
        h_t = (c + 1) v_t + S_off_t (v_s - v_t),   (row t of (c I + S) v, using S_tt = 1 - S_off_t)
    Everything is symmetric under swapping the two tokens, so each line is one (..., 2) array op.
    """
    S_off = _sigmoid_minus(U * (U - _swap(U)))
    V_diff = _swap(V) - V
    H = (skip + 1.0) * V + S_off * V_diff
    P_off = _sigmoid_minus(H * (H - _swap(H)))
    return S_off, V_diff, H, P_off


def _pair_backward(U, V, skip, forward_values, grad_P_off):
    """Gradients (dU, dV) from the gradient w.r.t. P_off; the same chain as `_pair_forward`, reversed
    (forward_values is its output at (U, V)).

    With a_t = h_t (h_t - h_s) and P_off_t = sigmoid(-a_t): dP_off_t/da_t = -P(1 - P), and
    da_t/dh_t = 2 h_t - h_s, da_s/dh_t = -h_s; the first layer is the same with (u, S_off).
    """
    S_off, V_diff, H, P_off = forward_values
    g_a = -grad_P_off * P_off * (1.0 - P_off)
    H_other = _swap(H)
    dH = g_a * (2.0 * H - H_other) - _swap(g_a) * H_other
    # h_t depends on v_t through (c + 1 - S_off_t) and on v_s through S_off_s in h_s's row.
    dV = dH * (skip + 1.0 - S_off) + _swap(dH * S_off)
    g_a1 = -(dH * V_diff) * S_off * (1.0 - S_off)
    U_other = _swap(U)
    dU = g_a1 * (2.0 * U - U_other) - _swap(g_a1) * U_other
    return dU, dV


def attention_from_off(P_off):
    """The 2 x 2 row-stochastic matrix (..., 2, 2) from its off-diagonal entries (..., 2)."""
    p, q = P_off[..., 0], P_off[..., 1]
    return np.stack([np.stack([1.0 - p, p], -1), np.stack([q, 1.0 - q], -1)], -2)


def _loss_target(y):
    """For labels y (..., 2, 2): the target tau with dL/dP_off = 4 (P_off - tau) for
    L = sum_{t,s} (y_hat - y)^2 (P_off_t enters y_hat[t, s] with + and y_hat[t, t] with -):
    tau_t = (1 + y[t, s] - y[t, t]) / 2, which is y[t, s] for row-stochastic y."""
    off = np.stack([y[..., 0, 1], y[..., 1, 0]], -1)
    diag = np.stack([y[..., 0, 0], y[..., 1, 1]], -1)
    return 0.5 * (1.0 + off - diag)


def _tokens_by_layer(X, weights):
    """(U, V), each (..., T): z = X W^T / sqrt(d) split into the layer-1 and layer-2 indices."""
    z = X @ np.asarray(weights, float).T / math.sqrt(X.shape[-1])
    return z[..., 0], z[..., 1]


def forward(X, weights, skip):
    """y_hat (..., 2, 2) for sequences X (..., 2, d) and weights (2, d) (rows q1, q2)."""
    _check_tokens(X)
    U, V = _tokens_by_layer(X, weights)
    return attention_from_off(_pair_forward(U, V, skip)[3])


def loss_and_gradient(X, y, weights, skip, weight_decay=0.0):
    """Objective sum_{b,t,s} (y_hat - y)^2 / d + weight_decay/2 |W|^2 over the batch X (B, 2, d),
    labels y (B, 2, 2), and its gradient w.r.t. weights (2, d). The weight-decay term is the one
    whose gradient SGD adds (torch's weight_decay)."""
    _check_tokens(X)
    weights = np.asarray(weights, float)
    d = X.shape[-1]
    U, V = _tokens_by_layer(X, weights)
    forward_values = _pair_forward(U, V, skip)
    P_off = forward_values[3]
    y_hat = attention_from_off(P_off)
    dU, dV = _pair_backward(U, V, skip, forward_values, 4.0 * (P_off - _loss_target(y)) / d)
    # z_{b,t,l} = X_{b,t,:} . W_l / sqrt(d)
    grad = np.stack([np.einsum("bt,btk->k", dU, X), np.einsum("bt,btk->k", dV, X)]) / math.sqrt(d)
    objective = np.sum((y_hat - y) ** 2) / d + 0.5 * weight_decay * np.sum(weights**2)
    return objective, grad + weight_decay * weights


def _check_tokens(X):
    if X.shape[-2] != N_TOKENS:
        raise ValueError(f"the SGD model is written for T = {N_TOKENS} tokens, got X of shape {X.shape}")


def run_sgd(*, d, alpha, skip, epochs, rng_teacher, rng_data, rng_init, batch_size=200, n_passes=3,
            lr=15.0, weight_decay=None, init_scale=0.9, n_test=2000, log_every=1, test_every=20):
    """One SGD run of spec §6.2; returns the logged overlaps and test errors (see module docstring).

    Draws: rng_teacher -> w1, w2 (each N(0,1)^d); rng_data -> training X (n, T, d) then test X
    (n_test, T, d); rng_init -> q1, q2 = init_scale * N(0,1)^d.
    """
    _check(d=d, alpha=alpha, epochs=epochs, batch_size=batch_size, n_passes=n_passes, n_test=n_test,
           log_every=log_every, test_every=test_every, skip=skip, lr=lr)
    if weight_decay is None:
        weight_decay = 0.07 / d
    n = n_train(d, alpha)
    T = N_TOKENS

    teacher = rng_teacher.standard_normal((N_LAYERS, d))
    # Scaled once, so that z = X_s W^T and grad = dz^T X_s need no per-step 1/sqrt(d).
    X_train = rng_data.standard_normal((n, T, d)) / math.sqrt(d)
    X_test = rng_data.standard_normal((n_test, T, d)) / math.sqrt(d)
    weights = init_scale * rng_init.standard_normal((N_LAYERS, d))

    y_train = _predict_scaled(X_train, teacher, skip)
    y_test = _predict_scaled(X_test, teacher, skip)

    per_epoch = n_batches_per_epoch(d, alpha, batch_size)
    total_logs = n_logs(d, alpha, epochs, batch_size, log_every)
    total_tests = n_tests(epochs, test_every)
    overlap = np.empty((total_logs, N_LAYERS))
    self_overlap = np.empty((total_logs, N_LAYERS))
    log_epoch = np.empty(total_logs)
    test_mse = np.empty(total_tests)
    test_epoch = np.empty(total_tests)
    teacher_norm2 = np.sum(teacher**2, axis=1) / d

    stepper = _Stepper(X_train, y_train, skip, lr, weight_decay, batch_size)
    batches_done = 0
    i_log = 0
    i_test = 0
    for epoch in range(epochs):
        for b in range(per_epoch):
            for _ in range(n_passes):
                stepper.step(weights, b)
            batches_done += 1
            if batches_done % log_every == 0:
                overlap[i_log] = np.sum(weights * teacher, axis=1) / d
                self_overlap[i_log] = np.sum(weights * weights, axis=1) / d
                log_epoch[i_log] = batches_done / per_epoch
                i_log += 1
        if (epoch + 1) % test_every == 0:
            test_mse[i_test] = np.mean((y_test - _predict_scaled(X_test, weights, skip)) ** 2)
            test_epoch[i_test] = epoch + 1
            i_test += 1

    cosine = overlap / np.sqrt(self_overlap)
    return {
        "cosine": cosine,
        "cosine_normalised": cosine / np.sqrt(teacher_norm2),
        "overlap": overlap,
        "self_overlap": self_overlap,
        "log_epoch": log_epoch,
        "test_mse": test_mse,
        "test_epoch": test_epoch,
        "teacher_overlap": float(teacher[0] @ teacher[1] / d),
    }


def _predict_scaled(X_scaled, weights, skip):
    """y_hat (n, 2, 2) for X already divided by sqrt(d)."""
    z = X_scaled @ weights.T
    return attention_from_off(_pair_forward(z[..., 0], z[..., 1], skip)[3])


class _Stepper:
    """SGD steps on batch b, updating weights (2, d) in place.

    The batches are views of the pre-scaled training set flattened to (B T, d) rows (sample, token),
    so z = X_b W^T and the gradient dz^T X_b are single matrix products; the rest works on (B, 2)
    arrays. The labels enter only through the loss target tau (see `_loss_target`).
    """

    def __init__(self, X_scaled, y, skip, lr, weight_decay, batch_size):
        n, T, d = X_scaled.shape
        self.d = d
        self.skip = skip
        self.lr = lr
        self.weight_decay = weight_decay
        flat = X_scaled.reshape(n * T, d)
        tau = _loss_target(y)
        self.batches = []
        for start in range(0, n, batch_size):
            stop = min(start + batch_size, n)
            self.batches.append((flat[start * T:stop * T], tau[start:stop], np.empty((stop - start, T, N_LAYERS))))
        self.grad = np.empty((N_LAYERS, d))

    def step(self, weights, b):
        X_flat, tau, dz = self.batches[b]
        z = (X_flat @ weights.T).reshape(dz.shape)
        U, V = z[..., 0], z[..., 1]
        forward_values = _pair_forward(U, V, self.skip)
        grad_P_off = (4.0 / self.d) * (forward_values[3] - tau)
        dz[..., 0], dz[..., 1] = _pair_backward(U, V, self.skip, forward_values, grad_P_off)
        # weights -= lr (dz^T X_s + wd weights); X_s already carries the 1/sqrt(d) of z.
        np.matmul(dz.reshape(-1, N_LAYERS).T, X_flat, out=self.grad)
        self.grad += self.weight_decay * weights
        self.grad *= self.lr
        weights -= self.grad


def _check(**kw):
    positive_int = ("d", "epochs", "batch_size", "n_passes", "n_test", "log_every", "test_every")
    for name in positive_int:
        value = kw[name]
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ParameterError(name, f"must be a positive integer, got {value!r}")
    if not kw["alpha"] > 0 or n_train(kw["d"], kw["alpha"]) < 1:
        raise ParameterError("alpha", f"alpha * d must round to at least one sample, got alpha = {kw['alpha']!r}")
    if not kw["skip"] >= 0:
        raise ParameterError("skip", f"must be >= 0, got {kw['skip']!r}")
    if not kw["lr"] > 0:
        raise ParameterError("lr", f"must be > 0, got {kw['lr']!r}")
