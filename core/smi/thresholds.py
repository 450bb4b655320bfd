"""Weak-recovery thresholds of deep tied attention: the last layer alpha_2 and the first layer alpha_1
(spec smi.md §5), each by linear stability of the SE and by SE bisection.

Last layer (Q = 0 is a fixed point: g is even in each layer's index). Linearising the SE at Q = 0,
Q_new ~ alpha F(Q) with
    F(M)_ab = E_Y sum_{t,s} sum_{c,e} G_(a,t),(c,s) M_ce G_(b,t),(e,s),  G = E[z z^T | Y] - I  (omega = 0, V = I)
(a (p^2 x p^2) matrix here, computed in full, not assuming its block structure); alpha_c = 1 / (Perron
eigenvalue of F on the PSD cone). For 2 layers F(M) = K o M (checked: the layer-cross moments vanish)
and alpha_2 = 1 / K_22.

First layer (the staircase): above alpha_2 the SE restricted to Q11 = Q12 = 0 has a fixed point
Q* = diag(0, q*(alpha)); linearising the Q11 direction there gives Q11_new ~ alpha K11(q*) Q11,
    K11(q) = E_{xi, Y} || Cov(z_1 | Y, omega) - I_T ||_F^2,  omega = (0, sqrt(q) xi_2), V = diag(1, 1 - q)
(+ eps on the diagonal of V, as the SE), and alpha_1 solves alpha K11(q*(alpha)) = 1 (bisection on alpha;
both q* and K11 use one fixed set of draws, so r(alpha) is a deterministic function).

Bisection: the full SE with side information lambda from Q0 = q0 I decides "learned" by the growth of the
layer's overlap over the iterations (after a burn-in), for the last layer from Q ~ 0, for the first layer
after Q22 has converged; the smallest alpha at which it grows is found by `numerics.bisect_alpha`. The two
methods use the same draws, so they test the linearisation against the nonlinear iteration; the Monte
Carlo error of the draws is reported separately (standard error of K).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from seqphase.core.numerics import bisect_alpha
from seqphase.core.smi import se


@dataclass
class KEstimate:
    F: np.ndarray  # (p*p, p*p) linearised SE map at Q = 0
    K: np.ndarray  # (p, p): K_ab = F[(a,a),(b,b)]
    K_se: np.ndarray  # Monte Carlo standard error of K
    perron: float  # top eigenvalue of F on the PSD cone
    cross: float  # max |E[z_a z_b | Y]| over a != b (0 for the attention link)


def _zero_state_moments(channel, draws, eps):
    """G = V^-1 Cov V^-1 - V^-1 at omega = 0, V = (1 + eps) I, with the SE's own teacher draws at Q = 0
    (z = sqrt(1 + eps) u), so that stability and bisection linearise one and the same sampled map."""
    p, T = channel.p, channel.T
    v = 1.0 + eps
    z = np.sqrt(v) * draws.u
    omega = np.zeros_like(z)
    _, cov = channel.posterior_covariance(channel.labels_of_z(z), omega, v * np.eye(p))
    G = cov / v**2 - np.eye(p * T) / v
    return G.reshape(-1, p, T, p, T)


def k_at_zero(channel, draws, eps=1e-3):
    """F, K and the Perron value at Q = 0."""
    p = channel.p
    G = _zero_state_moments(channel, draws, eps)
    per = np.einsum("natcs,nbtes->nabce", G, G)  # per-sample F[(a,b),(c,e)]
    F = per.mean(0).reshape(p * p, p * p)
    diag = np.einsum("naacc->nac", per)
    K, K_se = diag.mean(0), diag.std(0) / np.sqrt(diag.shape[0])
    cross = max((np.abs(G[:, a, :, b, :]).max() for a in range(p) for b in range(p) if a != b), default=0.0)
    return KEstimate(F=F, K=K, K_se=K_se, perron=perron_psd(F, p), cross=float(cross))


def perron_psd(F, p, iters=500):
    """Top eigenvalue of the linear map M -> F vec(M) restricted to the PSD cone (power iteration with
    projection onto the cone: F maps the cone into itself)."""
    M = np.eye(p) / np.sqrt(p)
    lam = 0.0
    for _ in range(iters):
        N = (F @ M.reshape(-1)).reshape(p, p)
        N = 0.5 * (N + N.T)
        w, U = np.linalg.eigh(N)
        N = (U * np.clip(w, 0.0, None)) @ U.T
        nrm = np.linalg.norm(N)
        if nrm == 0:
            return 0.0
        if abs(nrm - lam) < 1e-12 * nrm:
            lam = nrm
            break
        lam, M = nrm, N / nrm
    return float(lam)


# -- first layer ----------------------------------------------------------------------------------
def k11(channel, q, draws, eps=1e-3):
    """K11(q) and its standard error: ||Cov(z1 | Y, omega) - I||^2 at Q = diag(0, q)."""
    p, T = channel.p, channel.T
    V = np.diag([1.0 + eps, 1.0 - q + eps])
    omega = np.zeros_like(draws.xi)
    omega[:, 1] = np.sqrt(q) * draws.xi[:, 1]
    z = omega + np.sqrt(np.diag(V))[None, :, None] * draws.u
    _, cov = channel.posterior_covariance(channel.labels_of_z(z), omega, V)
    C11 = cov[:, :T, :T]
    # linear response of g_1 to omega_1 is V11^-2 Cov - V11^-1 (V11 = 1 + eps)
    val = np.sum((C11 / V[0, 0] ** 2 - np.eye(T) / V[0, 0]) ** 2, axis=(1, 2))
    return float(val.mean()), float(val.std() / np.sqrt(val.size))


def layer2_fixed_point(channel, alpha, draws, q0=0.05, eps=1e-3, tol=1e-6, max_iter=300):
    """q*(alpha): the last layer's SE fixed point with the first layer frozen at 0."""
    st = se.smi_se(channel, alpha, draws, Q0=np.diag([0.0, q0]), damping=0.0, tol=tol, max_iter=max_iter,
                   eps=eps, freeze=[0])
    return float(st.Q[1, 1])


def q_star_near(channel, alpha, draws, known, eps=1e-3):
    """q*(alpha), the layer-2 SE warm-started from the q* of the nearest alpha in `known` ({alpha: q*};
    0.05 when empty)."""
    q0 = known[min(known, key=lambda a: abs(a - alpha))] if known else 0.05
    return layer2_fixed_point(channel, alpha, draws, q0=q0, eps=eps)


def q_star_interp(cache, alpha):
    """q*(alpha) from the cached {alpha: (r, q*, r_se)}: linear through the two cached alphas nearest to
    alpha (extrapolated outside their range, clipped to [0, 1]); the one value if only one is cached.
    A start for `grows`, which settles the last layer on the full SE itself, so an error here costs a
    few iterations there, not accuracy."""
    pts = sorted(cache, key=lambda a: abs(a - alpha))[:2]
    if len(pts) == 1 or pts[0] == pts[1]:
        return cache[pts[0]][1]
    (a0, a1), (q0, q1) = pts, (cache[pts[0]][1], cache[pts[1]][1])
    return float(np.clip(q0 + (q1 - q0) * (alpha - a0) / (a1 - a0), 0.0, 1.0))


def _false_position(ratio, lo, hi, rtol, floor, alpha_hi):
    """Root of log ratio(alpha) (increasing) by false position, Illinois variant, from [lo, hi]. A
    bracket that misses the root moves by twice its width per step, within [floor, alpha_hi]: inf if
    ratio <= 1 up to alpha_hi, floor if ratio > 1 already there."""
    while ratio(hi) <= 1.0:
        if hi >= alpha_hi:
            return np.inf
        lo, hi = hi, min(hi + 2.0 * (hi - lo), alpha_hi)
    while ratio(lo) > 1.0:
        if lo <= floor:
            return floor
        lo, hi = max(lo - 2.0 * (hi - lo), floor), lo
    f_lo, f_hi = np.log(ratio(lo)), np.log(ratio(hi))
    side = 0
    for _ in range(60):
        if hi - lo <= rtol * hi:
            break
        mid = (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        mid = min(max(mid, lo + 0.1 * rtol * hi), hi - 0.1 * rtol * hi)
        f_mid = np.log(ratio(mid))
        if abs(f_mid) < 1e-6:
            return mid
        if f_mid > 0:
            hi, f_hi = mid, f_mid
            if side == 1:
                f_lo *= 0.5
            side = 1
        else:
            lo, f_lo = mid, f_mid
            if side == -1:
                f_hi *= 0.5
            side = -1
    return lo - f_lo * (hi - lo) / (f_hi - f_lo)


def alpha1_stability(channel, alpha2, draws, *, alpha_hi=4.0, rtol=1e-3, eps=1e-3, start=None, k_draws=None,
                     k_coarse=4096, bracket=0.02):
    """Smallest alpha > alpha2 with r(alpha) = alpha K11(q*(alpha)) > 1 (inf if none below alpha_hi).

    q* is the layer-2 SE fixed point on `draws`; K11 is averaged over `k_draws` (default: the same
    draws): K11 is one posterior pass per evaluation while q* needs a whole SE, so K11 can afford ~16x
    more points and its Monte Carlo error (~2% with 2048 points) drops to ~0.5%.

    r is increasing and smooth in alpha (fixed draws), so the root is found by false position on
    log r (Illinois variant), in two stages: from [alpha2, start] (default 2 alpha2; widened up to
    alpha_hi) with K11 on the first `k_coarse` of the k_draws (8x cheaper at 32768), then with all
    k_draws from the bracket (1 -+ bracket) around that root (widened if needed): the all-draw stage
    needs ~3-4 evaluations instead of ~8. Each evaluation is a layer-2 SE warm-started from the nearest
    q* already computed.
    Returns (alpha_1, {alpha: (r, q*, K11 standard error)}) with the all-draw evaluations only."""
    k_draws = draws if k_draws is None else k_draws
    q_cache, cache = {}, {}

    def q_star(alpha):
        if alpha not in q_cache:
            q_cache[alpha] = q_star_near(channel, alpha, draws, q_cache, eps)
        return q_cache[alpha]

    def ratio_with(kd, store):
        def ratio(alpha):
            if alpha not in store:
                q = q_star(alpha)
                k, k_se = k11(channel, q, kd, eps)
                store[alpha] = (alpha * k, q, alpha * k_se)
            return store[alpha][0]
        return ratio

    # the first bracket [alpha2, 2 alpha2] grows by twice its width while r < 1 (0.38, 0.95, 2.1 at c = 1):
    # large alphas are avoided where alpha_1 is small (c <= 0.1: q* -> 1 there makes the posterior ~5x
    # dearer per sample, and a bracket up to 1.0 cost minutes per skip)
    floor = alpha2 * 1.02
    lo, hi = floor, min(2.0 * floor if start is None else start, alpha_hi)
    if k_coarse and k_draws.xi.shape[0] >= 2 * k_coarse:
        guess = _false_position(ratio_with(k_draws.head(k_coarse), {}), lo, hi, max(rtol, 0.25 * bracket),
                                floor, alpha_hi)
        if np.isfinite(guess) and guess > floor:
            lo, hi = max(floor, guess * (1 - bracket)), min(guess * (1 + bracket), alpha_hi)
    return _false_position(ratio_with(k_draws, cache), lo, hi, rtol, floor, alpha_hi), cache


# -- bisection ------------------------------------------------------------------------------------
def grows(channel, alpha, draws, layer, *, side_info=1e-12, q0=1e-6, eps=1e-3, burn_in=2, trend=3,
          cut=0.05, max_iter=300, settle_tol=1e-5, min_growth=1e-3, q_last=0.05):
    """Does the full SE (side information lambda) learn `layer`? For the last layer the SE starts at
    Q0 = q0 I; for an earlier layer at Q0 = diag(q0, ..., q_last) and the layer's overlap is judged only
    after the last layer has settled (its change < settle_tol). Learned: the overlap passes `cut`, or
    grows by more than `min_growth` (relative) per iteration for `trend` consecutive iterations after
    the burn-in; not learned: it does not, that long. The relative margin matters: an unlearned
    overlap sits on the side-information floor lambda / (1 - alpha K), which drifts up by ~1e-5
    relative per iteration while the last layer converges, and must not count as growth."""
    p = channel.p
    Q = q0 * np.eye(p)
    if layer != p - 1:
        Q[p - 1, p - 1] = q_last
    hist = [Q[layer, layer]]
    settled_at = 0 if layer == p - 1 else None
    prev_last = Q[p - 1, p - 1]
    for it in range(1, max_iter + 1):
        Qh = se.qhat(channel, Q, alpha, draws, eps)
        Q = se.prior_step(Qh, side_info)
        hist.append(Q[layer, layer])
        if settled_at is None:
            if abs(Q[p - 1, p - 1] - prev_last) < settle_tol:
                settled_at = it
            prev_last = Q[p - 1, p - 1]
            continue
        if hist[-1] > cut:
            return True
        if it - settled_at >= burn_in + trend:
            h = np.asarray(hist[-trend - 1:])
            up = h[1:] > (1.0 + min_growth) * h[:-1]
            if np.all(up):
                return True
            if not np.any(up):
                return False
    return bool(hist[-1] > hist[0])


def bisect_layer(channel, draws, layer, lo, hi, *, guess=None, rtol=1e-3, q_last_of=None, **kw):
    """Smallest alpha in [lo, hi] at which `grows` holds (inf if it does not at hi); the guess (the
    stability value) is tried first with a +-2% bracket (`numerics.bisect_alpha`). `q_last_of`
    (alpha -> starting overlap of the last layer) warm-starts `grows` for an earlier layer."""
    cache = {}

    def learned(alpha):
        if alpha not in cache:
            extra = {} if q_last_of is None else {"q_last": q_last_of(alpha)}
            cache[alpha] = grows(channel, alpha, draws, layer, **kw, **extra)
        return cache[alpha]

    return bisect_alpha(learned, lo, hi, rtol=rtol, guess=guess, bracket=0.02)
