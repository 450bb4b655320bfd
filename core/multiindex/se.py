"""p x p state evolution of multi-index models with a Gaussian prior N(0, I_p) (spec §1.3).

    Qhat = alpha E_{xi, y}[g_out g_out^T](omega = Q^{1/2} xi, V = I - Q) + lambda I,
    Q    = Qhat (I + Qhat)^{-1},  symmetrised,

iterated with `seqphase.core.numerics.fixed_point` (damping, tolerance, residual log). lambda >= 0 is side
information. Two expectation engines, both calling the channel's `g_out`:

* "mc": common random numbers (xi, u) drawn once, y = g(omega + (I - Q)^{1/2} u) sampled exactly
  (robust at any overlap; error ~ 1/sqrt(n_mc));
* "quadrature": Gauss-Hermite over xi (p-dim product rule) times the channel's y-rule, the law of y
  given omega entering through Z_out(y, omega, V) (deterministic; accurate where the law of y is
  not much sharper than at Q = 0, i.e. near the uninformative fixed point: used by the bisections).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from seqphase.core.errors import ParameterError
from seqphase.core.numerics import (
    fixed_point,
    gauss_hermite,
    gh_product,
    panel_rule,
    psd_sqrt,
    sym,
)


class Expectation:
    """E_{xi, y}[g g^T] (and optionally more) at a given Q."""

    def __init__(self, channel, engine="mc", n_mc=4000, n_gh=3, fine=False, rng=None):
        self.channel = channel
        self.engine = engine
        p = channel.p
        if engine == "mc":
            rng = rng if rng is not None else np.random.default_rng(0)
            half = n_mc // 2
            xi = rng.standard_normal((half, p))
            u = rng.standard_normal((half, p))
            self.xi = np.concatenate([xi, -xi])  # antithetic pairs
            self.u = np.concatenate([u, -u])
        elif engine == "quadrature":
            self.xi, self.wxi = gh_product(p, n_gh)
            self.y, self.wy = channel.y_rule(fine)
        else:
            raise ParameterError("method.engine", f"unknown expectation engine {engine!r}", "use mc or quadrature")

    def __call__(self, Q, func=None):
        """E[func(g, dg, post)] where func defaults to g g^T."""
        p = self.channel.p
        Q = sym(Q)
        V = np.eye(p) - Q
        if np.linalg.eigvalsh(V).min() <= 1e-13:
            V = V + (1e-13 - np.linalg.eigvalsh(V).min()) * np.eye(p)
        Qh = psd_sqrt(Q)
        if self.engine == "mc":
            omega = self.xi @ Qh.T
            z = omega + self.u @ psd_sqrt(V).T
            y = self.channel.sample(z, None)
            g, dg = self.channel.g_out(y, omega, V)
            vals = np.einsum("ni,nj->nij", g, g) if func is None else func(y, omega, V, g, dg)
            return vals.mean(0)
        omega = self.xi @ Qh.T  # (K, p)
        K, Ny = omega.shape[0], self.y.shape[0]
        yy = np.tile(self.y, K)
        om = np.repeat(omega, Ny, axis=0)
        logZ, mean, second = self.channel.posterior(yy, om, V)
        Vi = np.linalg.inv(V)
        g = (mean - om) @ Vi.T
        w = (np.repeat(self.wxi, Ny) * np.tile(self.wy, K) * np.exp(logZ))
        w = np.where(np.isfinite(w), w, 0.0)
        if func is None:
            return np.einsum("n,ni,nj->ij", w, g, g)
        cov = second - mean[:, :, None] * mean[:, None, :]
        dg = Vi @ cov @ Vi - Vi
        return np.einsum("n,n...->...", w, func(yy, om, V, g, dg))


@dataclass
class MIState:
    Q: np.ndarray
    Qhat: np.ndarray
    n_iter: int
    converged: bool
    residuals: np.ndarray = field(repr=False)
    stopped: bool = False


def se_step(expect, alpha, side_info=0.0, q_max=1.0 - 1e-9):
    p = expect.channel.p

    def step(Q):
        Qhat = alpha * sym(expect(Q)) + side_info * np.eye(p)
        w, U = np.linalg.eigh(sym(Qhat))
        w = np.clip(w, 0.0, None)
        q = np.minimum(w / (1.0 + w), q_max)
        return (U * q) @ U.T

    return step


def mi_se(channel, alpha, *, Q0=None, side_info=0.0, damping=0.0, tol=1e-8, max_iter=500,
          expect=None, stop=None):
    """Iterate the p x p SE from Q0 (default 1e-4 I, the uninformed start)."""
    p = channel.p
    expect = expect or Expectation(channel)
    Q0 = 1e-4 * np.eye(p) if Q0 is None else np.asarray(Q0, float)
    fp = fixed_point(se_step(expect, alpha, side_info), Q0, damping=damping, tol=tol, max_iter=max_iter,
                     stop=stop)
    Q = sym(fp.x)
    return MIState(Q=Q, Qhat=alpha * sym(expect(Q)), n_iter=fp.n_iter, converged=fp.converged,
                   residuals=fp.residuals)


def gen_error_mc(channel, Q, n=4000, rng=None):
    """Bayes-optimal squared test error E (y - E[y | omega])^2 (continuous y) or classification error
    (sign channels, predicting the most probable label), by Monte Carlo over (xi, u)."""
    rng = rng if rng is not None else np.random.default_rng(1)
    p = channel.p
    V = np.eye(p) - sym(Q)
    V = V + max(0.0, 1e-12 - np.linalg.eigvalsh(V).min()) * np.eye(p)
    omega = rng.standard_normal((n, p)) @ psd_sqrt(Q).T
    z = omega + rng.standard_normal((n, p)) @ psd_sqrt(V).T
    y = channel.sample(z, rng)
    if channel.discrete:
        labels = channel.label_values().astype(float)
        logp = np.stack([channel.posterior(np.full(n, lab), omega, V)[0] for lab in labels], 1)
        pred = labels[np.argmax(logp, axis=1)]
        return float(np.mean(pred != y))
    # E[y | omega] by inner MC with 64 fresh draws per omega
    zz = omega[:, None, :] + rng.standard_normal((n, 64, p)) @ psd_sqrt(V).T
    pred = channel.sample(zz.reshape(-1, p), rng).reshape(n, 64).mean(1)
    return float(np.mean((y - pred) ** 2))


# ---------------------------------------------------------------------------------------------
def learned(channel, alpha, *, expect, side_info=1e-12, q0=1e-6, overlap_cut=1e-2, burn_in=4,
            trend_iter=3, max_iter=300, direction=None):
    """Does the SE from Q0 = q0 P (P = direction, default I) with side information leave the
    uninformative fixed point? Returns (bool, n_iter).

    Early decisions: learned when the top eigenvalue of Q passes `overlap_cut`, or grows for
    `trend_iter` consecutive iterations after `burn_in`; not learned when it shrinks for `trend_iter`
    consecutive iterations after `burn_in` (or the SE converges below the cut).
    """
    p = channel.p
    P = np.eye(p) if direction is None else np.asarray(direction, float)
    step = se_step(expect, alpha, side_info)
    Q = q0 * P
    top = [np.linalg.eigvalsh(Q).max()]
    for it in range(1, max_iter + 1):
        Q = step(Q)
        top.append(np.linalg.eigvalsh(Q).max())
        if top[-1] > overlap_cut:
            return True, it
        if it > burn_in + trend_iter:
            d = np.diff(top[-trend_iter - 1:])
            if np.all(d > 0):
                return True, it
            if np.all(d < 0):
                return False, it
    return bool(top[-1] > top[burn_in]), max_iter


# ---------------------------------------------------------------------------------------------
# accurate SE on the isotropic family Q = q I (z1 z2, sign(z1 z2), z1 z2 z3)
def _iso_y_rule(channel, res):
    """Rule in y for E_{y | omega, V}: counting measure for discrete y; for products, Gauss-Legendre
    panels in s = log|y| on [-18, log(ymax)] (mass below e^-18 is < 1e-6 relative), `res` scales the
    node density."""
    if channel.discrete:
        y = channel.label_values().astype(float)
        return y, np.ones_like(y)
    top = np.log(80.0) if channel.p == 2 else np.log(400.0)
    s, w = panel_rule(-18.0, float(top), 1.0 / res, 10)
    t = np.exp(s)
    return np.concatenate([-t[::-1], t]), np.concatenate([(w * t)[::-1], w * t])


def iso_qhat(channel, q, *, n_gh=16, res=1.0):
    """E[|g_out|^2] / p at Q = q I (omega = sqrt(q) xi, V = (1 - q) I): Gauss-Hermite in xi restricted to
    the positive orthant (the channel is invariant under xi_k -> -xi_k up to y -> +-y, summed over),
    times the y rule weighted by Z_out. Deterministic; error measured by comparing resolutions."""
    p = channel.p
    x, w = gauss_hermite(2 * n_gh)
    x, w = x[x > 0], 2 * w[x > 0]
    xi = np.array(list(itertools.product(x, repeat=p)))
    wxi = np.prod(np.array(list(itertools.product(w, repeat=p))), axis=1)
    y, wy = _iso_y_rule(channel, res)
    v = 1.0 - q
    om = np.sqrt(q) * xi
    K, Ny = om.shape[0], y.shape[0]
    tot = 0.0
    chunk = max(1, 200_000 // Ny)
    for a in range(0, K, chunk):
        o = om[a:a + chunk]
        k = o.shape[0]
        logZ, mean, _ = channel.posterior(np.tile(y, k), np.repeat(o, Ny, axis=0), v * np.eye(p))
        g2 = np.sum((mean - np.repeat(o, Ny, axis=0)) ** 2, axis=1) / v**2
        wt = np.repeat(wxi[a:a + chunk], Ny) * np.tile(wy, k) * np.exp(logZ)
        tot += np.sum(np.where(np.isfinite(wt), wt, 0.0) * g2)
    return tot / p


def iso_se(channel, alpha, *, q0=1e-4, n_gh=16, res=1.0, tol=1e-8, max_iter=2000, q_perfect=1 - 1e-6):
    """AMP branch of the SE on Q = q I (uninformed start q0): q <- qhat / (1 + qhat),
    qhat = alpha iso_qhat(q). Valid for channels whose SE keeps Q isotropic (z1 z2, sign(z1 z2),
    z1 z2 z3: invariant under coordinate permutations and paired sign flips). Returns (q, n_iter)."""
    q = q0
    for it in range(1, max_iter + 1):
        qh = alpha * iso_qhat(channel, q, n_gh=n_gh, res=res)
        new = qh / (1.0 + qh)
        if new > q_perfect:
            return 1.0, it
        if abs(new - q) < tol:
            return new, it
        q = new
    return q, max_iter
