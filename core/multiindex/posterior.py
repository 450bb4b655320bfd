"""Posterior moments of z ~ N(mu, S) conditioned on a label, vectorised over samples (p <= 3).

Every routine returns ``(logZ, mean, second)``: logZ (n,) the log of the probability (discrete
labels) or density (continuous labels) of y under z ~ N(mu, S), mean (n, p) = E[z | y], second
(n, p, p) = E[z z^T | y]. Samples are batched; the only Python loops run over sign patterns and
branches (at most 8), never over samples.

Quadratures:
* orthants (sign patterns): Genz's separation of variables. z = mu + L u (L = chol S); coordinate k
  is constrained to a half-line in u_k given u_<k, mapped to (0, 1) by u_k = -/+ ndtri(w e_k)
  (e_k its Gaussian mass, exact in the far tail), w = t^3 and Gauss-Legendre in t; the last
  coordinate is integrated in closed form (truncated normal moments).
* level sets of products (z1 z2 = y): log-coordinate s = log|z1| on each sign branch, Gauss-Legendre
  on the window where both z1 and z2 = y/z1 lie within +-8 standard deviations of their Gaussian
  (the window shrinks with S, so the rule resolves the posterior at any SNR).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from scipy import special

from seqphase.core.errors import ParameterError

K_WINDOW = 8.0  # standard deviations kept around the Gaussian (tail mass < 1e-15)
_LOG_2PI = np.log(2.0 * np.pi)


def _rescaled_weights(lw, ok):
    """Quadrature log-weights lw (n, nodes) -> weights rescaled by their row maximum (no overflow),
    that maximum (0 where a row is empty), the row sums Z and Z made safe for division. Rows with
    ok False get no weight."""
    lw = np.where(ok[:, None], lw, -np.inf)
    top = np.max(lw, axis=1)
    topf = np.where(np.isfinite(top), top, 0.0)
    W = np.exp(lw - topf[:, None])
    Z = W.sum(1)
    return W, topf, Z, np.where(Z > 0, Z, 1.0)


@lru_cache(maxsize=16)
def _leg01(n):
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1) / 2, w / 2


@lru_cache(maxsize=16)
def genz_rule(n):
    """Nodes w in (0, 1) and weights for int_0^1 f(w) dw, with w = t^3 (flattens the log singularity
    of u(w) at w -> 0)."""
    t, wt = _leg01(n)
    return t**3, 3 * t**2 * wt


def checked_cov(S, p, where="V"):
    """Broadcast S to (n, p, p), symmetrise, and check it is positive definite (ParameterError)."""
    S = np.asarray(S, float)
    S = 0.5 * (S + np.swapaxes(S, -1, -2))
    try:
        L = np.linalg.cholesky(S)
    except np.linalg.LinAlgError:
        raise ParameterError(where, "covariance V is singular or not positive definite",
                             "keep V positive definite (the SE/GAMP variance I - Q must stay > 0)") from None
    if not np.all(np.isfinite(L)) or np.any(np.diagonal(L, axis1=-2, axis2=-1) <= 1e-300):
        raise ParameterError(where, "covariance V is singular", "keep V positive definite")
    return S, L


def _logsumexp_combine(parts):
    """Combine [(logZ, mean, second), ...] (posteriors of disjoint pieces) into one."""
    logs = np.stack([p[0] for p in parts])  # (k, n)
    top = np.max(logs, axis=0)
    top = np.where(np.isfinite(top), top, 0.0)
    w = np.exp(logs - top)  # (k, n)
    tot = w.sum(0)
    safe = np.where(tot > 0, tot, 1.0)
    mean = sum(wi[:, None] * p[1] for wi, p in zip(w, parts)) / safe[:, None]
    second = sum(wi[:, None, None] * p[2] for wi, p in zip(w, parts)) / safe[:, None, None]
    logZ = np.where(tot > 0, top + np.log(safe), -np.inf)
    return logZ, mean, second


# ---------------------------------------------------------------------------------------------
# orthants
def orthant(mu, L, signs, n_nodes=24):
    """(logZ, mean, second) of z ~ N(mu, L L^T) restricted to {s_k z_k > 0 for all k}.

    mu (n, p), L (n, p, p) lower Cholesky factor, signs a length-p sequence of +-1.
    """
    s = np.asarray(signs, float)
    mu = mu * s
    L = L * s[None, :, None]  # rows flipped: z' = S z = S mu + (S L) u; keep a lower factor with
    # positive diagonal by flipping the columns of u as well (u -> S u leaves N(0, I) invariant)
    L = L * s[None, None, :]
    n, p = mu.shape
    wn, ww = genz_rule(n_nodes)
    # nodes for u_1..u_{p-1}: arrays (n, M); log weights (n, M)
    U = np.zeros((n, 1, 0))
    logW = np.zeros((n, 1))
    for k in range(p):
        a = mu[:, k, None] + np.einsum("nj,nmj->nm", L[:, k, :k], U)  # (n, M)
        c = -a / L[:, k, k, None]  # constraint u_k > c
        loge = special.log_ndtr(-c)  # log P(u_k > c)
        if k < p - 1:
            M = U.shape[1]
            q = np.exp(loge)[..., None] * wn[None, None, :]  # (n, M, N) in (0, e)
            uk = -special.ndtri(np.maximum(q, 1e-300))
            uk = np.where(np.isfinite(uk), uk, 0.0)
            U = np.concatenate([np.repeat(U, n_nodes, axis=1), uk.reshape(n, M * n_nodes, 1)], axis=2)
            logW = (np.repeat(logW + loge, n_nodes, axis=1)
                    + np.tile(np.log(ww), M)[None, :])
        else:
            # closed form on the last coordinate: E[1], E[u], E[u^2] over u > c (unnormalised)
            pdf_c = np.exp(-0.5 * c**2 - 0.5 * _LOG_2PI)
            e = np.exp(loge)
            m0 = e
            m1 = pdf_c
            m2 = e + np.where(np.isfinite(c), c, 0.0) * pdf_c
    top = np.max(logW + np.log(np.maximum(m0, 1e-300)), axis=1)
    top = np.where(np.isfinite(top), top, 0.0)
    W = np.exp(logW - top[:, None])  # (n, M)
    Z = np.einsum("nm,nm->n", W, m0)
    safe = np.where(Z > 0, Z, 1.0)
    # E[u] and E[u u^T] in the standardised coordinates
    Eu = np.zeros((n, p))
    Euu = np.zeros((n, p, p))
    Up = U  # (n, M, p-1)
    Eu[:, : p - 1] = np.einsum("nm,nm,nmj->nj", W, m0, Up)
    Eu[:, p - 1] = np.einsum("nm,nm->n", W, m1)
    Euu[:, : p - 1, : p - 1] = np.einsum("nm,nm,nmi,nmj->nij", W, m0, Up, Up)
    cross = np.einsum("nm,nm,nmi->ni", W, m1, Up)
    Euu[:, : p - 1, p - 1] = cross
    Euu[:, p - 1, : p - 1] = cross
    Euu[:, p - 1, p - 1] = np.einsum("nm,nm->n", W, m2)
    Eu /= safe[:, None]
    Euu /= safe[:, None, None]
    mean = mu + np.einsum("nij,nj->ni", L, Eu)
    second = (mu[:, :, None] * mu[:, None, :] + mu[:, :, None] * (mean - mu)[:, None, :]
              + (mean - mu)[:, :, None] * mu[:, None, :] + np.einsum("nij,njk,nlk->nil", L, Euu, L))
    logZ = np.where(Z > 0, top + np.log(safe), -np.inf)
    return logZ, mean * s, second * s[:, None] * s[None, :]


def orthant_union(mu, S, patterns, n_nodes=24):
    """Posterior restricted to a union of orthants. patterns: (n, k, p) per-sample sign patterns, or
    a list of patterns shared by all samples."""
    S, L = checked_cov(S, mu.shape[1])
    L = np.broadcast_to(L, (mu.shape[0],) + L.shape[-2:])
    parts = [orthant(mu, L, pat, n_nodes) for pat in patterns]
    return _logsumexp_combine(parts)


# ---------------------------------------------------------------------------------------------
# products
def _log_gauss1(x, m, v):
    return -0.5 * (x - m) ** 2 / v - 0.5 * (np.log(v) + _LOG_2PI)


def _window(m, sd, sign):
    """|t| range of t = sign*|t| within m +- K sd (lo may be 0; hi <= 0 means empty)."""
    lo = np.maximum(sign * m - K_WINDOW * sd, 0.0)
    hi = sign * m + K_WINDOW * sd
    return lo, hi


def product2(y, mu, S, n_nodes=48):
    """(logZ, mean, second) for z ~ N(mu, S) in R^2 on the hyperbola z1 z2 = y (logZ: density of y)."""
    y = np.asarray(y, float)
    n = y.shape[0]
    ay = np.maximum(np.abs(y), 1e-300)
    sy = np.where(y >= 0, 1.0, -1.0)
    s11, s12, s22 = S[:, 0, 0], S[:, 0, 1], S[:, 1, 1]
    sd1, sd2 = np.sqrt(s11), np.sqrt(s22)
    beta = s12 / s11
    cv = s22 - s12 * beta  # Var(z2 | z1)
    x, w = _leg01(n_nodes)
    parts = []
    for br in (1.0, -1.0):
        lo1, hi1 = _window(mu[:, 0], sd1, br)
        tau = br * sy  # sign of z2 on this branch
        lo2, hi2 = _window(mu[:, 1], sd2, tau)
        lo = np.maximum(lo1, ay / np.where(hi2 > 0, hi2, np.inf))
        hi = np.minimum(hi1, np.where(lo2 > 0, ay / np.maximum(lo2, 1e-300), np.inf))
        ok = (hi > lo) & (hi1 > 0) & (hi2 > 0)
        # the hyperbola misses the +-K sd box (a label far in the tail of a narrow Gaussian, e.g. GAMP
        # near perfect recovery): its posterior is still well defined. Locate the most probable point
        # of the branch on a coarse log grid and integrate over +-2 grid steps around it, instead of
        # returning log Z = -inf (which made g_out silently 0 and collapsed GAMP)
        far = ~ok
        if np.any(far):
            R = np.abs(mu[far]).max(1) + K_WINDOW * np.maximum(sd1[far], sd2[far]) + np.sqrt(ay[far])
            ga, gb = np.log(ay[far] / R), np.log(R)
            grid = ga[:, None] + (gb - ga)[:, None] * np.linspace(0, 1, 129)[None, :]
            zz1 = br * np.exp(grid)
            zz2 = y[far, None] / zz1
            lg = (_log_gauss1(zz1, mu[far, 0, None], s11[far, None]) + grid
                  + _log_gauss1(zz2, mu[far, 1, None] + beta[far, None] * (zz1 - mu[far, 0, None]), cv[far, None]))
            k = np.argmax(lg, axis=1)
            step = (gb - ga) / 128
            sc = grid[np.arange(k.size), k]
            lo[far] = np.exp(sc - 2 * step)
            hi[far] = np.exp(sc + 2 * step)
            ok = ok | far
        lo = np.where(ok, np.maximum(lo, 1e-300), 1.0)
        hi = np.where(ok, hi, 2.0)
        a, b = np.log(lo), np.log(hi)
        sgrid = a[:, None] + (b - a)[:, None] * x[None, :]  # (n, N)
        t = np.exp(sgrid)
        z1 = br * t
        z2 = y[:, None] / z1
        lw = (_log_gauss1(z1, mu[:, 0, None], s11[:, None])
              + _log_gauss1(z2, mu[:, 1, None] + beta[:, None] * (z1 - mu[:, 0, None]), cv[:, None])
              + np.log(w)[None, :] + np.log(b - a)[:, None])
        W, topf, Z, safe = _rescaled_weights(lw, ok)
        m1 = np.stack([(W * z1).sum(1), (W * z2).sum(1)], 1) / safe[:, None]
        m11 = (W * z1 * z1).sum(1) / safe
        m22 = (W * z2 * z2).sum(1) / safe
        m12 = np.full(n, 1.0) * y
        second = np.stack([np.stack([m11, m12], -1), np.stack([m12, m22], -1)], -2)
        parts.append((np.where(Z > 0, topf + np.log(safe), -np.inf), m1, second))
    return _logsumexp_combine(parts)


def conditional(mu, S, k):
    """Gaussian of z_{-k} given z_k = value: returns (coef (n, p-1), base (n, p-1), cov (n, p-1, p-1))
    with mean = base + coef * value."""
    idx = [j for j in range(mu.shape[1]) if j != k]
    skk = S[:, k, k]
    sk = S[:, idx, k]  # (n, p-1)
    coef = sk / skk[:, None]
    base = mu[:, idx] - coef * mu[:, k, None]
    cov = S[:, idx][:, :, idx] - sk[:, :, None] * sk[:, None, :] / skk[:, None, None]
    return coef, base, cov


def product3(y, mu, S, n_outer=32, n_inner=32):
    """z1 z2 z3 = y in R^3: log-coordinate rule on z1 (window from the z1 box and the bound
    |z2 z3| <= (|mu2| + K sd2)(|mu3| + K sd3)), and `product2` for (z2, z3) | z1 on z2 z3 = y / z1."""
    y = np.asarray(y, float)
    n = y.shape[0]
    ay = np.maximum(np.abs(y), 1e-300)
    sd = np.sqrt(np.diagonal(S, axis1=1, axis2=2))
    pmax = (np.abs(mu[:, 1]) + K_WINDOW * sd[:, 1]) * (np.abs(mu[:, 2]) + K_WINDOW * sd[:, 2])
    coef, base, cov = conditional(mu, S, 0)
    x, w = _leg01(n_outer)
    parts = []
    for br in (1.0, -1.0):
        lo1, hi1 = _window(mu[:, 0], sd[:, 0], br)
        lo = np.maximum(lo1, ay / pmax)
        ok = hi1 > lo
        lo = np.where(ok, lo, 1.0)
        hi = np.where(ok, hi1, 2.0)
        a, b = np.log(lo), np.log(hi)
        z1 = br * np.exp(a[:, None] + (b - a)[:, None] * x[None, :])  # (n, N)
        N = n_outer
        cm = (base[:, None, :] + coef[:, None, :] * z1[..., None]).reshape(n * N, 2)
        cc = np.repeat(cov, N, axis=0)
        lz, m23, s23 = product2((y[:, None] / z1).reshape(-1), cm, cc, n_inner)
        lw = (_log_gauss1(z1, mu[:, 0, None], S[:, 0, 0, None]) + lz.reshape(n, N)
              + np.log(w)[None, :] + np.log(b - a)[:, None])
        W, topf, Z, safe = _rescaled_weights(lw, ok)
        m23 = m23.reshape(n, N, 2)
        s23 = s23.reshape(n, N, 2, 2)
        mean = np.concatenate([(W * z1).sum(1)[:, None], np.einsum("nm,nmi->ni", W, m23)], 1) / safe[:, None]
        second = np.empty((n, 3, 3))
        second[:, 0, 0] = (W * z1 * z1).sum(1)
        c = np.einsum("nm,nm,nmi->ni", W, z1, m23)
        second[:, 0, 1:] = c
        second[:, 1:, 0] = c
        second[:, 1:, 1:] = np.einsum("nm,nmij->nij", W, s23)
        second /= safe[:, None, None]
        parts.append((np.where(Z > 0, topf + np.log(safe), -np.inf), mean, second))
    return _logsumexp_combine(parts)
