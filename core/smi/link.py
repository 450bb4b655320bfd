"""The deep tied-attention link y = g(z) of the sequence multi-index model (spec smi.md §1).

Shapes: z is (..., L, T): one rank-1 index per layer (rows) over T tokens (columns), i.e. the
pre-activations z_l = W_l X^T / sqrt(d). The mixing recursion (M_0 = I_T)

    h_l = M_{l-1} z_l,   M_l = [c I_T + softmax(h_l h_l^T)] M_{l-1},   l = 1 .. L-1,

and the output is the last layer's attention matrix y = softmax(h_L h_L^T), h_L = M_{L-1} z_L
(row-wise softmax, beta = 1; the skip c multiplies only the non-final layers). Depth L and length T
are free here; the exact posterior of `channels.py` is written for T = 2.

T = 2 inversion (§1.4): log(y_tt / y_ts) = h_t (h_t - h_s) fixes h up to a global sign,
h = +-u with u = (-a, b) / sqrt(a + b), a = log(y00/y01), b = log(y11/y10).
"""

from __future__ import annotations

import numpy as np


def softmax_rows(S):
    S = S - S.max(axis=-1, keepdims=True)
    e = np.exp(S)
    return e / e.sum(axis=-1, keepdims=True)


def attention(h):
    """softmax(h h^T) for h of shape (..., T)."""
    return softmax_rows(h[..., :, None] * h[..., None, :])


def mixing(z, skip):
    """M_{L-1} of the recursion for z of shape (..., L, T): the T x T matrix mapping z_L to h_L."""
    z = np.asarray(z, float)
    T = z.shape[-1]
    M = np.broadcast_to(np.eye(T), z.shape[:-2] + (T, T)).copy()
    for layer in range(z.shape[-2] - 1):
        h = np.einsum("...ts,...s->...t", M, z[..., layer, :])
        M = np.einsum("...ts,...su->...tu", skip * np.eye(T) + attention(h), M)
    return M


def last_h(z, skip):
    """h_L = M_{L-1} z_L, shape (..., T)."""
    return np.einsum("...ts,...s->...t", mixing(z, skip), np.asarray(z, float)[..., -1, :])


def link(z, skip):
    """y = softmax(h_L h_L^T), shape (..., T, T)."""
    return attention(last_h(z, skip))


def log_ratios(h):
    """log(y_tt / y_ts) = h_t (h_t - h_s), computed from h without rounding y (T = 2: (a, b))."""
    return h * (h - h[..., ::-1])


def invert_t2(y):
    """u with h = +-u for T = 2 attention matrices y (..., 2, 2). y_00 and y_01 are used separately
    (log y00 - log y01), so labels with y01 near 1 keep their precision."""
    y = np.asarray(y, float)
    if y.shape[-2:] != (2, 2):
        raise ValueError(f"invert_t2 needs 2 x 2 attention matrices, got shape {y.shape}")
    with np.errstate(divide="ignore"):
        a = np.log(y[..., 0, 0]) - np.log(y[..., 0, 1])
        b = np.log(y[..., 1, 1]) - np.log(y[..., 1, 0])
    return u_from_ratios(a, b)


def u_from_ratios(a, b):
    """u = (-a, b) / sqrt(a + b); a + b = (h0 - h1)^2 >= 0 (floored at 1e-300 for h0 = h1)."""
    s = np.sqrt(np.maximum(a + b, 1e-300))
    return np.stack([-a / s, b / s], axis=-1)
