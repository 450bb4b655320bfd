"""Weak-recovery thresholds of deep tied attention: the last layer alpha_2 and the first layer alpha_1
(spec smi.md §5), each two ways on ONE set of quasi-Monte Carlo points, computed as a graph of tasks
(threshold method version 6; the routes are version 5's).

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
(`alpha2_map`, `first_layer_rate`). Deciding on the growth RATE, not on an overlap passing a cut
within an iteration budget, makes the decision independent of critical slowing down (near the threshold
the rate -> 1 and a budgeted rule needs ~log(cut / delta) / log(rate) iterations). The map iterates on
`ring_pairs` of the first half of the stability route's points: the same u, and the perturbed layer's
xi paired so that xi xi^T is exact, so the two routes' Monte Carlo errors are correlated and their
difference measures the linearisation (and the half-set error), not two independent samplings.

As a graph of tasks (version 6). Every quantity above is a mean over the point set, so each posterior
pass (`Pass`: the Q = 0 moments, one point of the layer-2 curve, or sum g g^T at one overlap Q) is a
sum over blocks of draws: a block is one work (`block_sums`), which regenerates its rows of the
scrambled Sobol set from the point's stream, and the driver adds the blocks' sums up (`add_sums`). The
routes are *processes*: routes (core/search.py) whose works are passes; they yield the passes they need
next and receive {pass key: sums}, `side_by_side` runs several of them at once (the two layers' routes,
the probes of a search; a pass two of them ask for is computed once), and `as_tasks` turns a process into
a `Method.tasks` generator, a pass into its blocks. The root searches that version 5 ran one evaluation at
a time (false position) are rounds of k probes (`section_search` with the guided placement: k probes over
the bracket, then two at the interpolated root +- half the tolerance beside k - 2 section points); every
probe is a pass of its own, and the one-step rate of the last layer, which needs no pass, is bisected in
this process (`search.bisect`). k is a setting, not the number of workers, so a point's value does not
depend on the cluster. What version 6 changes in the numbers: the sums are added block by block
(rounding), and the searches' final brackets differ (the same root of the same sampled function, within
the search's rtol; docs/validation/smi.md, the table).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from seqphase.core.models import Work, children, drive
from seqphase.core.numerics import sym
from seqphase.core.search import bisect, section_search, side_by_side, single
from seqphase.core.smi import se
from seqphase.core.smi.channels import AttentionChannel


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


# -- sums over a point set: what a block of draws returns, added up by the driver --------------------
def zero_sums(channel, draws, eps):
    """Sums over the draws of the per-sample F map at Q = 0 and of its diagonal K (and K^2, for the
    standard error), their number n, and the largest layer-cross moment (a max, not a sum)."""
    p = channel.p
    G = _zero_state_moments(channel, draws, eps)
    per = np.einsum("natcs,nbtes->nabce", G, G)  # per-sample F[(a,b),(c,e)]
    diag = np.einsum("naacc->nac", per)
    cross = max((np.abs(G[:, a, :, b, :]).max() for a in range(p) for b in range(p) if a != b), default=0.0)
    return {"n": per.shape[0], "F": per.sum(0).reshape(p * p, p * p), "K": diag.sum(0),
            "K2": (diag**2).sum(0), "cross": float(cross)}


def k_of(sums, p):
    """F, K (with its iid standard error) and the Perron value from `zero_sums`."""
    n = sums["n"]
    K = sums["K"] / n
    K_se = np.sqrt(np.maximum(sums["K2"] / n - K**2, 0.0) / n)
    F = sums["F"] / n
    return KEstimate(F=F, K=K, K_se=K_se, perron=perron_psd(F, p), cross=sums["cross"])


def k_at_zero(channel, draws, eps=1e-3):
    """F, K and the Perron value at Q = 0."""
    return k_of(zero_sums(channel, draws, eps), channel.p)


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


def curve_values(channel, q, draws, eps):
    """Per draw, at Q = diag(0, q) (one posterior pass): sum_t g_2t^2 (whose mean gives alpha(q)) and the
    trace form ||C11 / V11^2 - I / V11||^2 (whose mean is K11)."""
    T = channel.T
    V = np.diag([1.0 + eps, 1.0 - q + eps])
    omega = np.zeros_like(draws.xi)
    omega[:, 1] = np.sqrt(q) * draws.xi[:, 1]
    z = omega + np.sqrt(np.diag(V))[None, :, None] * draws.u
    mean, cov = channel.posterior_covariance(channel.labels_of_z(z), omega, V)
    g2 = (mean[:, 1] - omega[:, 1]) / V[1, 1]
    C11 = cov[:, :T, :T]
    return np.sum(g2**2, axis=1), np.sum((C11 / V[0, 0] ** 2 - np.eye(T) / V[0, 0]) ** 2, axis=(1, 2))


def curve_sums(channel, q, draws, eps):
    """Sums of one point of the layer-2-only fixed-point curve (`curve_values`; K11 also squared, for
    the standard error)."""
    e22, val = curve_values(channel, q, draws, eps)
    return {"n": val.size, "e22": e22.sum(), "k11": val.sum(), "k11_2": (val**2).sum()}


def curve_of(q, sums):
    """(alpha(q), K11(q), its standard error) from `curve_sums`: alpha(q) = q / ((1 - q) E[sum_t g_2t^2])
    is the alpha at which q is the SE fixed point with Q11 = 0 (Q = Qhat / (1 + Qhat))."""
    n = sums["n"]
    k11 = sums["k11"] / n
    return (q / ((1.0 - q) * (sums["e22"] / n)), float(k11),
            float(np.sqrt(max(sums["k11_2"] / n - k11**2, 0.0) / n)))


def layer2_curve(channel, q, draws, eps=1e-3):
    """One point of the layer-2-only fixed-point curve and its first-layer linearisation, from ONE
    posterior pass at Q = diag(0, q): alpha(q), K11(q) (trace form) and its standard error.
    Parametrising by q replaces the layer-2 SE run per alpha by one pass."""
    return curve_of(q, curve_sums(channel, q, draws, eps))


def k11(channel, q, draws, eps=1e-3):
    """K11(q) and its standard error: ||Cov(z1 | Y, omega) - I||^2 at Q = diag(0, q) (`layer2_curve`)."""
    return layer2_curve(channel, q, draws, eps)[1:]


def ring_pairs(draws, layers):
    """The point set on which the SE-map routes iterate: every draw twice, with the xi of `layers` (the
    perturbed, linear-regime directions) replaced by sqrt(T) e and sqrt(T) R e, e = xi / |xi| (T = 2 tokens,
    R the quarter turn), the other xi and u repeated. The pair's xi xi^T sums to 2 I exactly, so the
    map's response to a small Q_ll has no xi-sampling error (the posterior of the perturbed layer is still
    evaluated at the sampled omega = sqrt(Q_ll) xi); with Gaussian xi the 32768-point map's K22 scatters
    by -2.4% .. +1.6% around the trace form on the same u (K11 at q = 0.973: -1.0% .. +2.9%),
    heavy-tailed (docs/validation/smi.md). Pairs are formed draw by draw, so a block of draws gives the ring pairs
    of its own draws and the blocks' sums add up to the whole set's."""
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


# -- passes, blocks and processes ----------------------------------------------------------------------
@dataclass(frozen=True)
class Points:
    """A point set of a point: the first `n` of its draws, ring-paired in `ring` layers (`ring_pairs`)."""

    n: int
    ring: tuple = ()


@dataclass(frozen=True)
class Pass:
    """One posterior pass over a point set: `kind` "zero" (the Q = 0 moments, `zero_sums`), "curve" (the
    layer-2 curve at q = arg, `curve_sums`) or "gg" (sum g g^T at Q = arg, a tuple of rows, `se.gg_sum`)."""

    kind: str
    points: Points
    arg: object = None

    @property
    def key(self):
        """A name for the pass that is the same on every run of the point and names what it computes
        (file-name safe: the driver keeps finished blocks under it); equal passes share it, so routes run
        side by side that ask for one pass compute it once."""
        text = repr((self.kind, self.points.n, self.points.ring, self.arg))
        return f"{self.kind}-{hashlib.blake2b(text.encode(), digest_size=6).hexdigest()}"


def _sums(channel, kind, arg, points, eps):
    if kind == "zero":
        return zero_sums(channel, points, eps)
    if kind == "curve":
        return curve_sums(channel, arg, points, eps)
    if kind == "gg":
        total, n = se.gg_sum(channel, np.array(arg, float), points, eps)
        return {"n": n, "gg": total}
    raise ValueError(f"unknown pass kind {kind!r}")


def add_sums(parts):
    """The sums of a pass from those of its blocks, in block order ("cross" is a max)."""
    total = dict(parts[0])
    for part in parts[1:]:
        for name, value in part.items():
            total[name] = max(total[name], value) if name == "cross" else total[name] + value
    return total


def pass_sums(channel, pas, draws, eps):
    """A pass evaluated in one go on `draws` (the whole set in this process): its point set is the head
    of the draws, ring-paired as the pass says."""
    points = draws.head(pas.points.n)
    if pas.points.ring:
        points = ring_pairs(points, pas.points.ring)
    return _sums(channel, pas.kind, pas.arg, points, eps)


def block_sums(kind, arg, ring, start, stop, skip, depth, eps, entropy, spawn_key, n_total):
    """One work: the sums of a pass over draws start .. stop - 1 of the point's n_total quasi-Monte Carlo
    points (ring-paired in `ring` layers), regenerated here from the point's stream (entropy, spawn_key):
    no draw array travels, a block costs ~0.5 ms to regenerate."""
    channel = AttentionChannel(depth, skip)
    rng = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=tuple(spawn_key)))
    points = se.Draws(channel.p, channel.T, n_total, rng, rows=(start, stop))
    if ring:
        points = ring_pairs(points, ring)
    return _sums(channel, kind, arg, points, eps)


def as_tasks(process, works_of):
    """The `Method.tasks` form of a process (a route whose works are passes, core/search.py): each round's
    passes become works (`works_of(pass)`: its blocks), the blocks' sums are added up in block order and
    sent back as {pass key: sums}. A pass asked for again later is not recomputed."""
    done = {}
    answers = None
    while True:
        try:
            passes = next(process) if answers is None else process.send(answers)
        except StopIteration as stop:
            return stop.value
        todo = {}
        for pas in passes:
            if pas.key not in done and pas.key not in todo:
                todo[pas.key] = works_of(pas)
        if todo:
            results = yield [work for works in todo.values() for work in works]
            for key, works in todo.items():
                done[key] = add_sums([results[work.key] for work in works])
        answers = {pas.key: done[pas.key] for pas in passes}


def solve(process, channel, draws, eps=1e-3):
    """Run a process in this process on `draws`, each pass in one go (`pass_sums`): the routes as plain
    functions, for tests and exploration."""
    def works_of(pas):
        return [Work(pas.key, pass_sums, {"channel": channel, "pas": pas, "draws": draws, "eps": eps})]

    return drive(as_tasks(process, works_of))


def block_works(pas, block, common):
    """The works of a pass: blocks of `block` evaluations (a ring-paired pass evaluates each draw twice,
    so its blocks hold block / 2 draws), keyed by the pass and the block's index."""
    size = max(block // 2, 1) if pas.points.ring else block
    return [Work(f"{pas.key}-{j}", block_sums,
                 dict(common, kind=pas.kind, arg=pas.arg, ring=list(pas.points.ring), start=start,
                      stop=min(start + size, pas.points.n)))
            for j, start in enumerate(range(0, pas.points.n, size))]


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


def _qhat(sums, alpha):
    """alpha E[sum_t g g^T] from the sums of a "gg" pass (as `se.qhat`)."""
    return alpha * sym(sums["gg"] / sums["n"])


def _gg(points, Q):
    return Pass("gg", points, tuple(tuple(float(v) for v in row) for row in np.asarray(Q)))


def alpha2_map(p, points, *, delta=1e-6, n_steps=2, rtol=2e-3, lo=1e-3, hi=10.0, max_walk=6, k=4):
    """alpha_2 by the SE map on `points` (a process): the alpha at which the last layer's overlap,
    iterated from delta I, stops decaying (growth factor over iteration `n_steps` = 1). The first iterate
    is alpha-linear (Qhat = alpha E[g g^T](Q0)): one pass gives E(Q0) for every alpha, so the root of the
    one-step rate is bisected here without a pass, and bracketed by rtol on either side; the
    n_steps-step rate is evaluated at both ends (one pass each per further step, side by side) and the
    bracket walks by its width while it does not contain the root, k positions a round (those version 5
    visited one at a time, so the bracket is version 5's). The root is the log-log interpolation (the
    rate is alpha-proportional in the linear regime). Raises if the map never grows below hi or grows
    already at lo, or if max_walk walks do not bracket the root."""
    last = p - 1
    Q0 = delta * np.eye(p)
    E0 = _qhat((yield from single(_gg(points, Q0))), 1.0)

    def rate1(alpha):
        return se.prior_step(alpha * E0)[last, last] / Q0[last, last]

    def rate(alpha):
        Q_prev, Q = Q0, se.prior_step(alpha * E0)
        for _ in range(n_steps - 1):
            Q_prev, Q = Q, se.prior_step(_qhat((yield from single(_gg(points, Q))), alpha))
        return Q[last, last] / Q_prev[last, last]

    if rate1(hi) <= 1.0:
        raise RuntimeError(f"threshold: the last layer's SE map does not grow below alpha = {hi:g} "
                           f"(growth factor {rate1(hi):.4g}); no last-layer transition")
    if rate1(lo) > 1.0:
        raise RuntimeError(f"threshold: the last layer's SE map grows already at alpha = {lo:g}")
    # the one-step rate: bisection in log alpha (geometric midpoints) to 1e-3 rtol, no posterior pass
    guess, a, b = bisect(lambda alpha: not rate1(alpha) <= 1.0, lo, hi, 1e-3 * rtol, geometric=True)
    if n_steps <= 1:
        return Root(float(np.exp(_log_interp(np.log(a), rate1(a), np.log(b), rate1(b)))), a, b)
    a, b = guess * (1 - rtol), guess * (1 + rtol)
    ra, rb = yield from side_by_side([rate(a), rate(b)])
    if ra <= 1.0 < rb:
        return Root(float(np.exp(_log_interp(np.log(a), ra, np.log(b), rb))), a, b)
    w, down = b - a, ra > 1.0
    edge, r_edge = (a, ra) if down else (b, rb)  # the bracket's end the walk moves from
    walked = 0
    while walked < max_walk:
        xs = [edge - (i + 1) * w if down else edge + (i + 1) * w for i in range(min(k, max_walk - walked))]
        rs = yield from side_by_side([rate(x) for x in xs])
        for x, r in zip(xs, rs):
            walked += 1
            if down and r <= 1.0:
                return Root(float(np.exp(_log_interp(np.log(x), r, np.log(edge), r_edge))), x, edge)
            if not down and r > 1.0:
                return Root(float(np.exp(_log_interp(np.log(edge), r_edge, np.log(x), r))), edge, x)
            edge, r_edge = x, r
    raise RuntimeError(f"threshold: the {n_steps}-step SE growth rate of the last layer was not bracketed "
                       f"within {max_walk} walks from alpha = {guess:.5g} (last probe {edge:.5g}, rate "
                       f"{r_edge:.5g})")


def alpha2_growth(channel, draws, *, eps=1e-3, k=4, **kwargs):
    """`alpha2_map` in this process, on all of `draws` as they are (e.g. already ring-paired)."""
    return solve(alpha2_map(channel.p, Points(draws.xi.shape[0]), k=k, **kwargs), channel, draws, eps)


def _q_of(x):
    """q = 1 - exp(-x): the layer-2 overlap on the axis x = -log(1 - q) of the alpha_1 searches, on
    which q -> 1 (where alpha_1 lies for large skips) is not crowded against 1."""
    return -np.expm1(-x)


def first_layer_rate(q, points, *, delta=1e-6, n_steps=2):
    """The full SE map (both layers free) at its own layer-2 fixed point q, perturbed in the first layer
    (a process): from Q0 = diag(delta, q) the first pass gives alpha(q) (the alpha that maps Q22 = q
    onto itself) and the first iterate; `n_steps` - 1 more passes follow at that alpha. Returns (alpha,
    growth factor of Q11 over the last iteration)."""
    Q0 = np.diag([delta, q])
    E = _qhat((yield from single(_gg(points, Q0))), 1.0)
    alpha = q / ((1.0 - q) * E[1, 1])
    Q_prev, Q = Q0, se.prior_step(alpha * E)
    for _ in range(n_steps - 1):
        Q_prev, Q = Q, se.prior_step(_qhat((yield from single(_gg(points, Q))), alpha))
    return float(alpha), float(Q[0, 0] / Q_prev[0, 0])


def alpha1_process(points, coarse, map_points, *, delta=1e-6, n_steps=2, rtol=2e-3, alpha_hi=4.0, x_lo=1.2,
                   x_hi=7.2, x_max=9.0, bisection=True, k=4):
    """alpha_1 two ways on the layer-2 fixed-point curve q -> alpha(q), searched on x = -log(1 - q) (a
    process; the root searches are guided `section_search`es, core/search.py, k probes a round):

    * stability: root of r(x) = alpha(q) K11(q) (trace form; `curve_sums`), first on the `coarse` points
      (None: one stage) from [x_lo, x_hi] to 0.02 in x, with 2k probes a round (a coarse probe costs
      k_coarse / n_k of a fine one, 1/8 by default; [1.2, 7.2] holds the roots of c = 1e-4 .. 8, q* = 0.76 ..
      0.9988, which version 5 reached by walking from [1.2, 3.0]), then on `points` from +-0.1 in x around
      that root, to rtol;
    * SE map: root of the growth factor of Q11 under the full map iterated at its perturbed fixed point
      (`first_layer_rate`) on `map_points` (no map route when bisection is false), started at the
      stability's root (the same fixed point) and moved by a secant step with the stability curve's slope
      of log r in x (the two rates differ by their Monte Carlo errors, nearly a constant factor); its two
      ends +-the predicted shift side by side, then a root search from there if they miss.

    Returns (stability Root, its (r at lo, r at hi, r standard error), q* at the root, map Root or None).
    A root whose alpha exceeds alpha_hi, or no root up to x_max (q = 1 - e^-x_max), is inf with a note."""
    cache = {}

    def curve(x, pts):
        if (x, pts) not in cache:
            q = _q_of(x)
            cache[(x, pts)] = curve_of(q, (yield from single(Pass("curve", pts, float(q)))))
        return cache[(x, pts)]

    def ratio_on(pts):
        def ratio(x):
            alpha, k11_value, _ = yield from curve(x, pts)
            return alpha * k11_value
        return ratio

    none = Root(np.inf, np.nan, np.inf, f"no first-layer transition up to q* = {_q_of(x_max):.6f}")
    guided = dict(placement="guided", floor=0.05, cap=x_max, max_rounds=60)  # the root searches on x
    lo, hi = x_lo, x_hi
    if coarse is not None:
        guess = (yield from section_search("coarse", ratio_on(coarse), lo, hi, 0.02, 2 * k, **guided))[0]
        if not np.isfinite(guess):
            return none, None, np.nan, None
        lo, hi = max(guess - 0.1, 0.05), min(guess + 0.1, x_max)
    x, xa, xb = yield from section_search("stability", ratio_on(points), lo, hi, rtol, k, **guided)
    if not np.isfinite(x):
        return none, None, np.nan, None
    if xa == -np.inf:
        raise RuntimeError(f"threshold: alpha K11 > 1 already at q* = {_q_of(0.05):.3f} next to alpha_2: the first "
                           "layer's search has no lower end (raise n_k; this model has alpha_1 >~ 0.7)")
    if xa == xb:  # a probe hit the root
        xa, xb = x - 0.5 * rtol * x, x + 0.5 * rtol * x
    (aa, ka, sa), (ab, kb, sb) = yield from side_by_side([curve(xa, points), curve(xb, points)])
    t = (x - xa) / (xb - xa)
    alpha = float(np.exp((1 - t) * np.log(aa) + t * np.log(ab)))
    stab = Root(alpha, aa, ab)
    if alpha > alpha_hi:
        stab = Root(np.inf, alpha_hi, np.inf, f"alpha_1 = {alpha:.4g} > alpha_hi = {alpha_hi:g}")
    r_info = (aa * ka, ab * kb, max(aa * sa, ab * sb))
    if not bisection:
        return stab, r_info, _q_of(x), None
    growth = {}

    def rate(y):
        if y not in growth:
            growth[y] = yield from first_layer_rate(_q_of(y), map_points, delta=delta, n_steps=n_steps)
        return growth[y][1]

    # slope of log r over the widest evaluations of the stability search on all its points
    fine = sorted((key[0], v[0] * v[1]) for key, v in cache.items() if key[1] == points)
    (x0, r0), (x1, r1) = fine[0], fine[-1]
    slope = np.log(r1 / r0) / (x1 - x0) if x1 > x0 and r1 > r0 else 1.0
    shift = -np.log((yield from rate(x))) / slope
    h = max(0.3 * abs(shift), 0.5 * rtol * x)
    ya, yb = max(x + shift - h, 0.05), min(x + shift + h, x_max)
    r_a, r_b = yield from side_by_side([rate(ya), rate(yb)])
    if r_a <= 1.0 < r_b:  # log rate is linear in x on this scale: interpolate
        y = _log_interp(ya, r_a, yb, r_b)
    else:
        y, ya, yb = yield from section_search("map", rate, ya, yb, rtol, k, **guided)
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


def alpha1_routes(channel, draws, *, n_map=None, eps=1e-3, k_coarse=4096, k=4, **kwargs):
    """`alpha1_process` in this process: the stability route on all of `draws` (coarse stage on the first
    k_coarse when there are at least twice as many), the SE map on ring pairs of the first n_map (default
    all)."""
    n = draws.xi.shape[0]
    coarse = Points(k_coarse) if k_coarse and n >= 2 * k_coarse else None
    process = alpha1_process(Points(n), coarse, Points(n_map or n, (0,)), k=k, **kwargs)
    return solve(process, channel, draws, eps)


# -- one point of the threshold method ---------------------------------------------------------------
def point_process(p, s, n_k):
    """The point's routes side by side (a process): K at Q = 0 (alpha_2 by stability, one pass), the
    last layer's SE map and the first layer's two routes; returns the point's outputs (`Threshold`'s
    layout in core/smi/model.py)."""
    half = min(1 << int(np.ceil(np.log2(s["n_mc"]))), n_k)
    route = dict(delta=s["delta"], n_steps=s["n_steps"], rtol=s["rtol"], k=s["k"])
    coarse = Points(s["k_coarse"]) if s["k_coarse"] and n_k >= 2 * s["k_coarse"] else None
    processes = [single(Pass("zero", Points(n_k))),
                 alpha1_process(Points(n_k), coarse, Points(half, (0,)), alpha_hi=s["alpha_hi"],
                                bisection=s["bisection"], **route)]
    if s["bisection"]:
        processes.append(alpha2_map(p, Points(half, tuple(range(p))), **route))
    zero, (stab, r_info, q_star, map1), *last = yield from side_by_side(processes)
    k0 = k_of(zero, p)
    a2 = 1.0 / k0.perron
    out = {"alpha2_stability": a2, "alpha2_stability_se": a2 * k0.K_se[-1, -1] / k0.K[-1, -1],
           "k22": k0.K[-1, -1], "k11_at_zero": k0.K[0, 0]}
    notes = []
    if last:
        out.update(alpha2_bisection=last[0].value, alpha2_bisection_lo=last[0].lo, alpha2_bisection_hi=last[0].hi)
    else:
        out.update(alpha2_bisection=np.nan, alpha2_bisection_lo=np.nan, alpha2_bisection_hi=np.nan)
        notes.append("bisection = false: no SE-map route")
    out["alpha1_stability"] = stab.value
    out["q_star_at_alpha1"] = q_star
    if r_info is not None and stab.hi > stab.lo:
        # r = alpha K11 crosses 1 with slope r'(alpha); an error dr of K11 shifts the root by dr / r'
        slope = (r_info[1] - r_info[0]) / (stab.hi - stab.lo)
        out["alpha1_stability_se"] = r_info[2] / slope if slope > 0 else np.nan
    else:
        out["alpha1_stability_se"] = np.nan
    if stab.note:
        notes.append(f"alpha1_stability: {stab.note}")
    if map1 is not None:
        out.update(alpha1_bisection=map1.value, alpha1_bisection_lo=map1.lo, alpha1_bisection_hi=map1.hi)
        if map1.note:
            notes.append(f"alpha1_bisection: {map1.note}")
    else:
        out.update(alpha1_bisection=np.nan, alpha1_bisection_lo=np.nan, alpha1_bisection_hi=np.nan)
    out["note"] = "; ".join(dict.fromkeys(notes))[:200]
    return out


def block_size(channel, s):
    """Evaluations per work: `block` where the posterior uses its plain grid, `block_strip` where it uses
    strip coordinates (small skips, 10-50x the cost a sample), so that a work is ~0.5-2 s at any skip.
    Every pass of a threshold point has V11 = 1 + eps (Q11 = 0 or delta), so one size serves the point."""
    return s["block_strip"] if channel.strip_coordinates(1.0 + s["eps"]) else s["block"]


def point_tasks(channel, s, seed_sequence):
    """The point as a task generator (`Method.tasks`): `point_process` with each pass cut into blocks.
    The draws are child 0 of the point's stream (version 5's `spawn(2)[0]`: the same points), n_k
    rounded up to a power of 2 as `se.Draws` does."""
    stream = children(seed_sequence, 1)[0]
    n_k = 1 << int(np.ceil(np.log2(max(s["n_k"], 2))))
    common = dict(skip=channel.skip, depth=channel.depth, eps=s["eps"], entropy=stream.entropy,
                  spawn_key=list(stream.spawn_key), n_total=n_k)
    block = block_size(channel, s)
    return (yield from as_tasks(point_process(channel.p, s, n_k), lambda pas: block_works(pas, block, common)))
