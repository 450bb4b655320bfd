"""Weak-recovery thresholds of deep tied attention: the last layer alpha_2 and the first layer alpha_1
(spec smi.md §5), each two ways on ONE set of quasi-Monte Carlo points (threshold method version 5).

Last layer (Q = 0 is a fixed point: g is even in each layer's index). Linearising the SE at Q = 0,
Q_new ~ alpha F(Q) with
    F(M)_ab = E_Y sum_{t,s} sum_{c,e} G_(a,t),(c,s) M_ce G_(b,t),(e,s),  G = E[z z^T | Y] - I  (omega = 0, V = I)
(a (p^2 x p^2) matrix here, computed in full, not assuming its block structure); alpha_c = 1 / (Perron
eigenvalue of F on the PSD cone). For 2 layers F(M) = K o M (checked: the layer-cross moments vanish)
and alpha_2 = 1 / K_22.

First layer (the staircase): above alpha_2 the SE restricted to Q11 = Q12 = 0 has a fixed point
Q* = diag(0, q*(alpha)); linearising the Q11 direction there gives Q11_new ~ alpha K11(q*) Q11,
    K11(q) = E_{xi, Y} || Cov(z_1 | Y, omega) - I_T ||_F^2,  omega = (0, sqrt(q) xi_2), V = diag(1, 1 - q)
(+ eps on the diagonal of V, as the SE), and alpha_1 solves alpha K11(q*(alpha)) = 1. The fixed-point
curve is parametrised by q: one posterior pass at Q = diag(0, q) gives alpha(q) = q / ((1 - q) E g_2^2),
the alpha of which q is the fixed point, and K11(q) (`layer2_curve`), so no layer-2 SE is iterated.

Second route (stored as *_bisection): the full SE map itself (`se.qhat`, `se.prior_step`), iterated
n_steps times from a perturbation delta of the fixed point (delta I at Q = 0; Q11 = delta at
diag(0, q*)); the threshold is where the perturbation's growth factor over an iteration crosses 1
(`alpha2_growth`, `first_layer_growth`). Deciding on the growth RATE, not on an overlap passing a cut
within an iteration budget, makes the decision independent of critical slowing down (near the threshold
the rate -> 1 and a budgeted rule needs ~log(cut / delta) / log(rate) iterations). The map iterates on
`ring_pairs` of the first half of the stability route's points: the same u, and the perturbed layer's
xi paired so that xi xi^T is exact, so the two routes' Monte Carlo errors are correlated and their
difference measures the linearisation (and the half-set error), not two independent samplings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


# -- root searches --------------------------------------------------------------------------------
def _false_position(ratio, lo, hi, rtol, floor, alpha_hi):
    """Root of log ratio(alpha) (increasing) by false position, Illinois variant, from [lo, hi]. A
    bracket that misses the root moves by twice its width per step, within [floor, alpha_hi]: inf if
    ratio <= 1 up to alpha_hi, floor if ratio > 1 already there."""
    return _false_position_bracket(ratio, lo, hi, rtol, floor, alpha_hi)[0]


def _false_position_bracket(ratio, lo, hi, rtol, floor, alpha_hi):
    """`_false_position` with its final bracket: (root, lo, hi), ratio(lo) <= 1 < ratio(hi) (lo = hi = the
    root when a midpoint hit |log ratio| < 1e-6; (inf, alpha_hi, inf) and (floor, -inf, floor) at the ends)."""
    while ratio(hi) <= 1.0:
        if hi >= alpha_hi:
            return np.inf, alpha_hi, np.inf
        lo, hi = hi, min(hi + 2.0 * (hi - lo), alpha_hi)
    while ratio(lo) > 1.0:
        if lo <= floor:
            return floor, -np.inf, floor
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
            return mid, mid, mid
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
    return lo - f_lo * (hi - lo) / (f_hi - f_lo), lo, hi


# -- version 5: both routes on one point set, the SE map's growth rate ------------------------------
# Diagnosis (docs/smi.md, "Why the version-4 routes disagreed"): version 4's growth rule was within 0.09%
# of the root of its own map's growth rate (c = 1, 3 point sets), so the detection rule was not the
# cause; the routes disagreed because the bisection iterated a 2048-point map whose K22 scattered by
# -8.5% .. -1.3% and whose K11 response by -11% .. +14% (xi- and u-sampled), while the stability route
# averaged 32768 other points (scatter over scrambles ~0.15% for alpha_2, 0.2% for K11). Version 5 runs
# both routes on the same points and finds each threshold as the root of a growth rate, so neither
# depends on an iteration budget, a cut or a start far from the fixed point.
@dataclass
class Root:
    """A threshold with its bracket: the route says "not learned" at lo and "learned" at hi. `note`
    says why value is inf / NaN ('' when it is a root)."""
    value: float
    lo: float
    hi: float
    note: str = ""


def _log_interp(x0, y0, x1, y1):
    """Zero of the line through (x0, log y0), (x1, log y1)."""
    f0, f1 = np.log(y0), np.log(y1)
    return x0 - f0 * (x1 - x0) / (f1 - f0)


def ring_pairs(draws, layers):
    """The point set on which the SE-map routes iterate: every draw twice, with the xi of `layers` (the
    perturbed, linear-regime directions) replaced by sqrt(T) e and sqrt(T) R e, e = xi / |xi| (T = 2 tokens,
    R the quarter turn), the other xi and u repeated. The pair's xi xi^T sums to 2 I exactly, so the
    map's response to a small Q_ll has no xi-sampling error (the posterior of the perturbed layer is still
    evaluated at the sampled omega = sqrt(Q_ll) xi); with Gaussian xi the 32768-point map's K22 scatters
    by -2.4% .. +1.6% around the trace form on the same u (K11 at q = 0.973: -1.0% .. +2.9%),
    heavy-tailed (docs/smi.md)."""
    xi, u = draws.xi, draws.u
    if xi.shape[2] != 2:
        raise ValueError(f"ring_pairs needs T = 2 tokens, got {xi.shape[2]}")
    turned = xi.copy()
    xi = xi.copy()
    for l in layers:
        e = np.sqrt(2.0) * xi[:, l] / np.linalg.norm(xi[:, l], axis=1, keepdims=True)
        xi[:, l] = e
        turned[:, l] = np.stack([-e[:, 1], e[:, 0]], axis=1)
    out = object.__new__(se.Draws)
    out.xi, out.u = np.concatenate([xi, turned]), np.concatenate([u, u])
    return out


def last_layer_growth(channel, draws, *, eps=1e-3, delta=1e-6):
    """The full SE map (`se.qhat`, `se.prior_step`, no side information) from Q0 = delta I on `draws`:
    returns rate(alpha, steps), the growth factor of the last layer's overlap over the last of `steps`
    iterations. The first iterate is alpha-linear (Qhat = alpha E[g g^T](Q0)), so E(Q0) is computed once
    and shared by every alpha; each further step is one posterior pass at that alpha's own iterate."""
    p = channel.p
    Q0 = delta * np.eye(p)
    E0 = se.qhat(channel, Q0, 1.0, draws, eps)
    last = p - 1

    def rate(alpha, steps=1):
        Q_prev, Q = Q0, se.prior_step(alpha * E0)
        for _ in range(steps - 1):
            Q_prev, Q = Q, se.prior_step(se.qhat(channel, Q, alpha, draws, eps))
        return Q[last, last] / Q_prev[last, last]

    return rate


def alpha2_growth(channel, draws, *, eps=1e-3, delta=1e-6, n_steps=2, rtol=2e-3, lo=1e-3, hi=10.0,
                  max_walk=6):
    """alpha_2 by the SE map: the alpha at which the last layer's overlap, iterated from delta I, stops
    decaying (growth factor over iteration `n_steps` = 1). The root of the one-step rate (free: shared
    E(Q0)) is bracketed by rtol on either side; the n_steps-step rate is evaluated at both ends (two
    passes) and the bracket walks by its width while it does not contain the root. The root is the
    log-log interpolation (the rate is alpha-proportional in the linear regime). Raises if the map
    never grows below hi or grows already at lo, or if the walk does not bracket the root."""
    rate = last_layer_growth(channel, draws, eps=eps, delta=delta)
    if rate(hi) <= 1.0:
        raise RuntimeError(f"threshold: the last layer's SE map does not grow below alpha = {hi:g} "
                           f"(growth factor {rate(hi):.4g}); no last-layer transition")
    if rate(lo) > 1.0:
        raise RuntimeError(f"threshold: the last layer's SE map grows already at alpha = {lo:g}")
    a, b = lo, hi
    for _ in range(200):  # one-step rate: bisection in log alpha, no posterior pass
        m = np.sqrt(a * b)
        a, b = (m, b) if rate(m) <= 1.0 else (a, m)
        if b - a <= 1e-3 * rtol * b:
            break
    guess = np.sqrt(a * b)
    if n_steps <= 1:
        return Root(float(np.exp(_log_interp(np.log(a), rate(a), np.log(b), rate(b)))), a, b)
    a, b = guess * (1 - rtol), guess * (1 + rtol)
    ra, rb = rate(a, n_steps), rate(b, n_steps)
    for _ in range(max_walk):
        if ra <= 1.0 < rb:
            x = _log_interp(np.log(a), ra, np.log(b), rb)
            return Root(float(np.exp(x)), a, b)
        w = b - a
        if ra > 1.0:
            a, b, rb, ra = a - w, a, ra, rate(a - w, n_steps)
        else:
            a, b, ra, rb = b, b + w, rb, rate(b + w, n_steps)
    raise RuntimeError(f"threshold: the {n_steps}-step SE growth rate of the last layer was not bracketed "
                       f"within {max_walk} walks from alpha = {guess:.5g} (last bracket [{a:.5g}, {b:.5g}], "
                       f"rates {ra:.5g}, {rb:.5g})")


def _q_of(x):
    """q = 1 - exp(-x): the layer-2 overlap on the axis x = -log(1 - q) of the alpha_1 searches, on
    which q -> 1 (where alpha_1 lies for large skips) is not crowded against 1."""
    return -np.expm1(-x)


def layer2_curve(channel, q, draws, eps=1e-3):
    """One point of the layer-2-only fixed-point curve and its first-layer linearisation, from ONE
    posterior pass at Q = diag(0, q): alpha(q) = q / ((1 - q) E[sum_t g_2t^2]) (the alpha at which q is
    the SE fixed point with Q11 = 0: Q = Qhat / (1 + Qhat)), and K11(q) (trace form, with its standard
    error). Parametrising by q replaces the layer-2 SE run per alpha by one pass."""
    T = channel.T
    V = np.diag([1.0 + eps, 1.0 - q + eps])
    omega = np.zeros_like(draws.xi)
    omega[:, 1] = np.sqrt(q) * draws.xi[:, 1]
    z = omega + np.sqrt(np.diag(V))[None, :, None] * draws.u
    mean, cov = channel.posterior_covariance(channel.labels_of_z(z), omega, V)
    g2 = (mean[:, 1] - omega[:, 1]) / V[1, 1]
    e22 = float(np.mean(np.sum(g2**2, axis=1)))
    C11 = cov[:, :T, :T]
    val = np.sum((C11 / V[0, 0] ** 2 - np.eye(T) / V[0, 0]) ** 2, axis=(1, 2))
    alpha = q / ((1.0 - q) * e22)
    return alpha, float(val.mean()), float(val.std() / np.sqrt(val.size))


def k11(channel, q, draws, eps=1e-3):
    """K11(q) and its standard error: ||Cov(z1 | Y, omega) - I||^2 at Q = diag(0, q) (`layer2_curve`)."""
    return layer2_curve(channel, q, draws, eps)[1:]


def first_layer_growth(channel, q, draws, *, eps=1e-3, delta=1e-6, n_steps=2):
    """The full SE map (both layers free) at its own layer-2 fixed point q, perturbed in the first layer:
    from Q0 = diag(delta, q) the first pass gives alpha(q) (the alpha that maps Q22 = q onto itself) and
    the first iterate; `n_steps` - 1 more iterations follow at that alpha. Returns (alpha, growth factor
    of Q11 over the last iteration)."""
    Q0 = np.diag([delta, q])
    E = se.qhat(channel, Q0, 1.0, draws, eps)
    alpha = q / ((1.0 - q) * E[1, 1])
    Q_prev, Q = Q0, se.prior_step(alpha * E)
    for _ in range(n_steps - 1):
        Q_prev, Q = Q, se.prior_step(se.qhat(channel, Q, alpha, draws, eps))
    return float(alpha), float(Q[0, 0] / Q_prev[0, 0])


def alpha1_routes(channel, draws, *, map_draws=None, eps=1e-3, delta=1e-6, n_steps=2, rtol=2e-3,
                  k_coarse=4096, alpha_hi=4.0, x_lo=1.2, x_hi=3.0, x_max=9.0, bisection=True):
    """alpha_1 two ways on the layer-2 fixed-point curve q -> alpha(q), searched on x = -log(1 - q):

    * stability: root of r(x) = alpha(q) K11(q) (trace form; `layer2_curve`), false position, first on the
      first `k_coarse` draws, then on all of them from +-0.1 in x around that root;
    * SE map: root of the growth factor of Q11 under the full map iterated at its perturbed fixed point
      (`first_layer_growth`) on `map_draws` (default: `draws`; a superset sharing their head gives
      correlated errors), started at the stability's root (the same fixed point) and moved by a secant
      step with the stability curve's slope of log r in x (the two rates differ by their Monte Carlo
      errors, nearly a constant factor), then false position from +-the predicted shift.

    Returns (stability Root, its (r at lo, r at hi, r standard error), q* at the root, map Root or None).
    A root whose alpha exceeds alpha_hi, or no root up to x_max (q = 1 - e^-x_max), is inf with a note."""
    cache = {}

    def curve(x, d):
        key = (x, d.xi.shape[0])
        if key not in cache:
            cache[key] = layer2_curve(channel, _q_of(x), d, eps)
        return cache[key]

    def ratio_on(d):
        return lambda x: curve(x, d)[0] * curve(x, d)[1]

    lo, hi = x_lo, x_hi
    if k_coarse and draws.xi.shape[0] >= 2 * k_coarse:
        head = draws.head(k_coarse)
        guess = _false_position(ratio_on(head), lo, hi, 0.02, 0.05, x_max)
        if not np.isfinite(guess):
            return (Root(np.inf, np.nan, np.inf, f"no first-layer transition up to q* = {_q_of(x_max):.6f}"),
                    None, np.nan, None)
        lo, hi = max(guess - 0.1, 0.05), min(guess + 0.1, x_max)
    x, xa, xb = _false_position_bracket(ratio_on(draws), lo, hi, rtol, 0.05, x_max)
    if not np.isfinite(x):
        return (Root(np.inf, np.nan, np.inf, f"no first-layer transition up to q* = {_q_of(x_max):.6f}"),
                None, np.nan, None)
    if xa == -np.inf:
        raise RuntimeError(f"threshold: alpha K11 > 1 already at q* = {_q_of(0.05):.3f} next to alpha_2: the first "
                           "layer's search has no lower end (raise n_k; this model has alpha_1 >~ 0.7)")
    if xa == xb:  # a midpoint hit the root
        xa, xb = x - 0.5 * rtol * x, x + 0.5 * rtol * x
    (aa, ka, sa), (ab, kb, sb) = curve(xa, draws), curve(xb, draws)
    t = (x - xa) / (xb - xa)
    alpha = float(np.exp((1 - t) * np.log(aa) + t * np.log(ab)))
    stab = Root(alpha, aa, ab)
    if alpha > alpha_hi:
        stab = Root(np.inf, alpha_hi, np.inf, f"alpha_1 = {alpha:.4g} > alpha_hi = {alpha_hi:g}")
    r_info = (aa * ka, ab * kb, max(aa * sa, ab * sb))
    if not bisection:
        return stab, r_info, _q_of(x), None
    growth = {}
    map_draws = draws if map_draws is None else map_draws

    def rate(x):
        if x not in growth:
            growth[x] = first_layer_growth(channel, _q_of(x), map_draws, eps=eps, delta=delta, n_steps=n_steps)
        return growth[x][1]

    # slope of log r over the widest all-draw evaluations of the stability search
    fine = sorted((k[0], v[0] * v[1]) for k, v in cache.items() if k[1] == draws.xi.shape[0])
    (x0, r0), (x1, r1) = fine[0], fine[-1]
    slope = np.log(r1 / r0) / (x1 - x0) if x1 > x0 and r1 > r0 else 1.0
    shift = -np.log(rate(x)) / slope
    h = max(0.3 * abs(shift), 0.5 * rtol * x)
    ya, yb = max(x + shift - h, 0.05), min(x + shift + h, x_max)
    if rate(ya) <= 1.0 < rate(yb):  # log rate is linear in x on this scale: interpolate (2 evaluations)
        y = _log_interp(ya, rate(ya), yb, rate(yb))
    else:
        y, ya, yb = _false_position_bracket(rate, ya, yb, rtol, 0.05, x_max)
    if not np.isfinite(y):
        return stab, r_info, _q_of(x), Root(np.inf, np.nan, np.inf, "the SE map's first layer does not grow "
                                                                    f"up to q* = {_q_of(x_max):.6f}")
    if ya == yb:
        return stab, r_info, _q_of(x), Root(growth[y][0], growth[y][0], growth[y][0])
    (ma, _), (mb, _) = growth[ya], growth[yb]
    t = (y - ya) / (yb - ya)
    a_map = float(np.exp((1 - t) * np.log(ma) + t * np.log(mb)))
    if a_map > alpha_hi:
        return stab, r_info, _q_of(x), Root(np.inf, alpha_hi, np.inf, f"alpha_1 (SE map) = {a_map:.4g} > "
                                                                      f"alpha_hi = {alpha_hi:g}")
    return stab, r_info, _q_of(x), Root(a_map, ma, mb)
