"""Bayes-optimal state evolution of the sequence multi-index model and its test errors (spec smi.md §3).

    Qhat = alpha E_{xi,u}[ sum_t g_t g_t^T ] (omega = Q^{1/2} xi, z = omega + (I - Q + eps I)^{1/2} u,
           V = I - Q + eps I; g = the channel's g_out, summed over tokens, not averaged)
    Q    = (Qhat + lambda I)(I + Qhat + lambda I)^{-1}, damped and symmetrised,

the expectation by randomised quasi-Monte Carlo (scrambled Sobol points mapped to normals) with common
random numbers (the same xi, u at every iteration, so the sampled map is deterministic and can converge
to a tolerance). Sobol points cut the scatter of the fixed point ~4x against plain Monte Carlo at equal
cost (Q22 at alpha = 0.4333, 2048 points, 4 scrambles: +-0.007 against +-0.03); the scatter over
scrambles is the method's error bar. eps = 1e-3 and Q0 = 0.05 I, damping
0.2 are the reference code's choices (spec §3.2); lambda is side information.

Errors (§3.3), both by Monte Carlo:
* plug-in e_plug(Q) = E ||g(z) - g(omega)||_F^2: the student plugs its weights in, its index is omega
  (what the published gen_error CSVs contain);
* Bayes-optimal e_BO(Q) = E ||g(z) - E_u'[g(omega + (I-Q)^{1/2} u')]||_F^2, the inner mean over K draws;
  the K-sample mean adds tr Var/K to the squared error, which is subtracted (unbiased).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.special import expit as _expit

from seqphase.core.errors import ParameterError
from seqphase.core.numerics import left_multiply, psd_sqrt, sym


class Draws:
    """Common random numbers xi, u of shape (n, p, T): a scrambled Sobol sequence of 2^ceil(log2 n)
    points in 2 p T dimensions through the normal quantile (qmc=False: plain normals).

    `rows` = (start, stop): only those rows of that set, generated alone (the threshold method's blocks,
    computed on workers from the point's stream: no draw array travels). A scrambled Sobol sequence is
    a fixed sequence once its scrambling is drawn from `rng`, so skipping to `start` gives the same
    numbers as slicing the whole set (checked in tests/smi/test_threshold_tasks.py)."""

    def __init__(self, p, T, n, rng, qmc=True, rows=None):
        # scipy.stats costs ~1 s to import: only where draws are made, not in every process that loads the
        # family (a sweep's driver, GAMP workers)
        from scipy.stats import norm as _norm
        from scipy.stats import qmc as _qmc

        if rows is not None:
            if not qmc:
                raise ValueError("rows of a draw set need qmc = True (a fixed sequence)")
            start, stop = rows
            sobol = _qmc.Sobol(2 * p * T, scramble=True, seed=rng)
            if start:  # scipy refuses fast_forward(0)
                sobol.fast_forward(start)
            # from the start of the sequence scipy wants a power of 2 (balance); draw one and cut
            size = 1 << int(np.ceil(np.log2(max(stop - start, 1)))) if start == 0 else stop - start
            x = sobol.random(size)[: stop - start]
            z = _norm.ppf(np.clip(x, 1e-16, 1 - 1e-16))
        elif qmc:
            m = int(np.ceil(np.log2(max(n, 2))))
            x = _qmc.Sobol(2 * p * T, scramble=True, seed=rng).random_base2(m)
            z = _norm.ppf(np.clip(x, 1e-16, 1 - 1e-16))
        else:
            z = rng.standard_normal((n, 2 * p * T))
        self.xi = z[:, : p * T].reshape(-1, p, T)
        self.u = z[:, p * T:].reshape(-1, p, T)

    def head(self, n):
        """The first n draws (a power of 2 for Sobol points: the leading 2^k points of a scrambled Sobol
        sequence are a net of their own, balanced like the whole set)."""
        out = object.__new__(Draws)
        out.xi, out.u = self.xi[:n], self.u[:n]
        return out


def cavity(Q, eps):
    p = Q.shape[0]
    return np.eye(p) - sym(Q) + eps * np.eye(p)


def gg_sum(channel, Q, draws, eps=1e-3):
    """sum_n sum_t g_t g_t^T at overlap Q (p x p) over the draws, and their number: `qhat` without the
    mean, so that the threshold method can add it up over blocks of draws."""
    V = cavity(Q, eps)
    omega = left_multiply(psd_sqrt(Q), draws.xi)
    z = omega + left_multiply(psd_sqrt(V), draws.u)
    g, _ = channel.g_out_tokens(channel.labels_of_z(z), omega, V)
    return np.einsum("nat,nbt->ab", g, g), g.shape[0]


def qhat(channel, Q, alpha, draws, eps=1e-3):
    """alpha E[sum_t g_t g_t^T] at overlap Q (p x p)."""
    total, n = gg_sum(channel, Q, draws, eps)
    return alpha * sym(total / n)


def prior_step(Qhat, side_info=0.0):
    """Gaussian prior: Q = (Qhat + lambda)(I + Qhat + lambda)^{-1} (on the eigenvalues; Qhat PSD)."""
    w, U = np.linalg.eigh(sym(Qhat) + side_info * np.eye(Qhat.shape[0]))
    w = np.clip(w, 0.0, None)
    return (U * (w / (1.0 + w))) @ U.T


@dataclass
class SEState:
    Q: np.ndarray
    Qhat: np.ndarray
    n_iter: int
    converged: bool
    history: np.ndarray = field(repr=False)  # (n_iter + 1, p, p): Q per iteration, Q0 first
    n_coarse: int = 0  # of the n_iter iterations, those on the coarse draws


def _ratios(hist):
    """Per diagonal entry: the last change d and two successive ratios of changes (r1, r2) of the last
    four iterates (the map is deterministic under common random numbers, so near a fixed point every
    entry converges geometrically, d_n ~ C r^n, and the ratios agree)."""
    x = np.array([np.diag(h) for h in hist[-4:]])
    d = np.diff(x, axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return x[-1], d[-1], d[1] / d[0], d[2] / d[1]


def _aitken(hist, r_max=0.999):
    """Extrapolated diagonal of Q from the last four iterates, or None.

    x_n = x* + C r^n with r = slope of the map (0.8 at alpha = 0.43: ~60 iterations to 1e-6; 0.99 and
    more next to a threshold); Aitken's x* = x_n + d r/(1-r) jumps there. Only used when every entry
    is either settled (|d| < 1e-12) or converging with two ratios 0 < r < r_max that agree within 5% of
    1 - r: an entry that grows (r >= 1, a direction being learned) or oscillates is never
    extrapolated, so the iteration cannot be steered onto an unstable fixed point."""
    if len(hist) < 4:
        return None
    x, d, r1, r2 = _ratios(hist)
    out = x.copy()
    for k in range(x.size):
        if abs(d[k]) < 1e-12:
            continue
        if not (0.0 < r1[k] < r_max and 0.0 < r2[k] < r_max and abs(r2[k] - r1[k]) < 0.05 * (1.0 - r2[k])):
            return None
        out[k] = x[k] + d[k] * r2[k] / (1.0 - r2[k])
    return np.clip(out, 0.0, 1.0 - 1e-9)


def _settled(hist, tol, free, growth_tol):
    """Converged: every diagonal entry's estimated distance to its limit, |d| r / (1 - r) for geometric
    convergence with ratio r, is below tol (a change below tol / 100 counts as settled), no entry grows
    by more than growth_tol relative, and the off-diagonal entries changed by less than tol."""
    if len(hist) < 4:
        return False
    if np.max(np.abs(hist[-1] - hist[-2])) >= tol:
        return False
    x, d, r1, r2 = _ratios(hist)
    for k in free:
        if d[k] > 0.0 and d[k] > growth_tol * x[k]:
            return False
        if abs(d[k]) < 0.01 * tol:
            continue
        if not 0.0 < r2[k] < 1.0 or abs(d[k]) * r2[k] / (1.0 - r2[k]) >= tol:
            return False
    return True


def _grow_jump(hist, frozen, target=1e-3, min_ratio=1.0 + 1e-3):
    """Diagonal of Q with the entries that grow geometrically from tiny values moved up to `target`,
    or None.

    An entry x << 1 at an unstable fixed point (a layer about to be learned) is in the linear regime of
    the SE map: x_n = x_0 r^n with r = alpha K(current Q) > 1, so the iterates themselves say where the
    iteration will be k steps later; jumping there skips the ~log(target / x) / log(r) steps of pure
    exponential growth (~200 at r = 1.08 from the floor 1e-8). Only entries below target / 10 with two
    ratios > min_ratio that agree within 1% are moved; everything else is left to the iteration."""
    x0, x1, x2 = (np.diag(h) for h in hist[-3:])
    out = x2.copy()
    moved = False
    for k in range(x2.size):
        if k in frozen or not 0.0 < x2[k] < 0.1 * target or x0[k] <= 0.0 or x1[k] <= 0.0:
            continue
        r1, r2 = x1[k] / x0[k], x2[k] / x1[k]
        if r1 > min_ratio and r2 > min_ratio and abs(r2 - r1) < 0.01 * (r2 - 1.0) + 1e-12:
            out[k] = target
            moved = True
    return out if moved else None


def _anderson(xs, gs, free, growth_tol, window):
    """Anderson's extrapolated fixed point from the last `window` + 1 pairs (x_i, G(x_i)) of the map,
    and its distance to the last image, or None.

    The residuals R_i = G(x_i) - x_i on the free entries (upper triangle) are combined so that the
    differences of the last pairs cancel R_n in least squares: x_A = G(x_n) - dG gamma, with
    dR gamma ~ R_n (a multisecant Newton step: for a linear map in m <= window unknowns it is the fixed
    point). Only taken next to a stable fixed point: every free diagonal entry's secant slope
    (G_n - G_{n-1}) / (x_n - x_{n-1}) below 1. An entry growing from a tiny value (< 1e-3, relative
    growth > growth_tol) is left out of the secants (it keeps its image, and the distance is infinite
    while it grows): extrapolating it would pull it onto the unstable Q_ll = 0 branch (a layer about to
    be learned), which the plain iteration leaves. The distance is |x_A - G(x_n)| plus ten
    times the residual the secants leave unexplained."""
    if len(xs) < 2:
        return None
    x0, x1, g0, g1 = xs[-2], xs[-1], gs[-2], gs[-1]
    growing = [a for a in free if x1[a, a] < 1e-3 and g1[a, a] > x1[a, a] * (1.0 + growth_tol)]
    settling = [a for a in free if a not in growing]
    for a in settling:
        dx = x1[a, a] - x0[a, a]
        if abs(dx) > 1e-12 and (g1[a, a] - g0[a, a]) / dx >= 1.0:
            return None
    if not settling:
        return None
    rows, cols = np.triu_indices(x1.shape[0])
    keep = np.isin(rows, settling) & np.isin(cols, settling)
    rows, cols = rows[keep], cols[keep]
    k = min(window, len(xs) - 1)
    X = np.array([x[rows, cols] for x in xs[-k - 1:]])
    G = np.array([g[rows, cols] for g in gs[-k - 1:]])
    R = G - X
    dR, dG = np.diff(R, axis=0).T, np.diff(G, axis=0).T
    gamma, *_ = np.linalg.lstsq(dR, R[-1], rcond=1e-10)
    step = G[-1] - dG @ gamma
    out = gs[-1].copy()
    out[rows, cols] = step
    out[cols, rows] = step
    # the part of R_n that the secants do not explain (a direction the last pairs never moved in) is not
    # in the step: it counts in full, so that two pairs cannot declare three unknowns converged
    unexplained = float(np.max(np.abs(R[-1] - dR @ gamma)))
    distance = float(np.max(np.abs(step - G[-1]))) + 10.0 * unexplained
    return out, distance if not growing else np.inf


def _grow_secant(xs, gs, free, growth_tol, max_factor=4.0):
    """The images' diagonal with each entry that grows between two successive pairs moved ahead along
    its growth, or None.

    A layer being learned leaves the unstable Q_ll = 0 with G(x) = x rho(x), rho > 1 falling to 1 at the
    stable fixed point x*: a root of rho - 1 (the residual divided by x, which removes the trivial root
    x = 0 that a secant on G(x) - x itself would head for). The secant of rho through the last two pairs
    estimates it; the entry is moved there, at most max_factor times its image (rho is convex in x: the
    secant undershoots early in the growth, and a capped jump cannot leave the iteration's range). An
    entry still growing at a constant rate (no fall of rho yet) is moved to max_factor times its image.
    Only entries above 1e-4 are moved (below, `_grow_jump`); a jump past x* is harmless, as x* is
    approached from above by a stable iteration."""
    if len(xs) < 2:
        return None
    x0, x1, g0, g1 = xs[-2], xs[-1], gs[-2], gs[-1]
    out = np.diag(g1).copy()
    moved = False
    for a in free:
        if not (1e-4 <= x0[a, a] < x1[a, a] and g0[a, a] > x0[a, a] * (1.0 + growth_tol)
                and g1[a, a] > x1[a, a] * (1.0 + growth_tol)):
            continue
        r0, r1 = g0[a, a] / x0[a, a], g1[a, a] / x1[a, a]
        slope = (r1 - r0) / (x1[a, a] - x0[a, a])
        target = x1[a, a] + (1.0 - r1) / slope if slope < 0.0 else np.inf
        out[a] = min(max(target, g1[a, a]), max_factor * g1[a, a], 1.0 - 1e-6)
        moved = True
    return out if moved else None


def smi_se(channel, alpha, draws, *, Q0=None, side_info=0.0, damping=0.2, tol=1e-5, max_iter=100, eps=1e-3,
           freeze=None, accelerate=True, q_floor=1e-8, growth_tol=1e-3, coarse=1, anderson=0, newton=False):
    """Iterate the SE. This loop is not `numerics.fixed_point`: the sampled map needs a stopping rule on
    the estimated distance to the limit with a growth guard (`_settled`, not the last change), a floor
    on the free diagonal entries, frozen layers, Aitken / growth jumps that insert iterates into the
    history every 4th step, and a coarse-to-fine transient on a head of the draws; none of these fit a
    driver that only damps and compares successive iterates, and rewriting them as callbacks around it
    would change the order of the history the stored logs are made of.

    `freeze` (a list of layer indices) keeps those rows/cols of Q at zero: the
    layer-2-only fixed point of the staircase is the SE restricted to Q11 = Q12 = 0.

    Converged (`_settled`) means the estimated distance of Q to its limit is below tol (not just the
    last change: next to a threshold the map's slope r -> 1 and the distance is change / (1 - r)) AND no
    diagonal entry grows by more than `growth_tol` relative per iteration. The second condition matters
    at an unstable fixed point: from Q0 = 0.05 I
    the first-layer overlap first decays (while Q22 is learned) to ~1e-10 and then, above alpha_1, regrows
    by a factor alpha K11 ~ 1.05 per iteration; its absolute change is far below tol for a hundred
    iterations, and an absolute criterion alone stops the SE on the unstable Q11 = 0 branch (alpha = 0.8,
    2048 points: Q11 = 0 after 29 iterations, against 0.102 with this rule; docs/validation/smi.md).
    `q_floor` keeps unfrozen diagonal entries >= q_floor (an infinitesimal perturbation, like side
    information) so that such an entry can regrow and its relative growth is defined.
    `accelerate`: every 4th iteration, Aitken extrapolation of converging diagonal entries (`_aitken`)
    or a jump of geometrically growing tiny entries (`_grow_jump`), whichever applies.
    `coarse` = k > 1: the transient from Q0 runs on the first n / k draws (to tol_c = max(10 tol, 1e-4), at
    most max_iter / 2 iterations),
    then the iteration goes on from there on all n draws to tol. The result is the fixed point of the
    n-draw map, the same one (to tol) as without the coarse stage: only the start of the fine stage
    moves, from Q0 to the coarse fixed point, which differs from the fine one by the Monte Carlo
    error of n / k draws (2048 points, k = 8, c = 1: 2.3-2.7x faster at alpha = 0.8, 1.0, 1.6, fixed
    points equal within 1e-5; docs/validation/smi.md).
    `anderson` = m > 0: after every evaluation, Anderson's multisecant step from the last m + 1 pairs
    (x, G(x)) next to a stable fixed point (`_anderson`; converged when its estimated distance is below
    tol), else the secant of a growing layer's growth rate (`_grow_secant`); the plain rule and the
    every-4th-iteration jumps apply when neither does. Near the layer-1 threshold the slope of the map
    tends to 1: at alpha 0.77-1.1 (2048 points, c = 1) the plain iteration needs 15-66 fine iterations,
    the secants 6-21 to the same fixed point (within 2e-4; docs/benchmarks.md, SMI state evolution).
    `newton` (with coarse > 1): the fine stage takes quasi-Newton steps on the learned entries (`_newton_keys`)
    from the coarse fixed point, with the coarse map's finite-difference Jacobian there (`_coarse_jacobian`:
    one coarse evaluation per entry, n / k draws each) as the first estimate and Broyden's update after
    each fine evaluation (`_NewtonStage`). The two maps differ by their Monte Carlo error only, so their
    Jacobians nearly agree and the steps converge in a few fine evaluations where the slope of the map
    is near 1 (the layer-1 threshold), which secants built from fine evaluations alone need several to
    discover. Entries below 1e-3 (a layer not learned) keep the plain iteration; one that grows hands the
    stage back to the rules above (a layer being learned), so no step can pull it onto Q_ll = 0."""
    p = channel.p
    frozen = set(freeze or ())
    Q = 0.05 * np.eye(p) if Q0 is None else np.array(Q0, float)
    hist, n_coarse = [Q.copy()], 0
    args = (channel, alpha, side_info, damping, eps, frozen, accelerate, q_floor, growth_tol, anderson)
    n = draws.xi.shape[0] if draws is not None else 0
    stage = None
    if coarse > 1 and n // coarse >= 64:
        # at most half the budget: a coarse map that creeps (a layer on the edge of being learned) must not
        # leave the fine stage one iteration (3 layers, alpha = 0.75, 128 points: 200 of 200 were coarse)
        c_hist, _, n_coarse, _ = _iterate(*args, draws.head(n // coarse), Q, max(10 * tol, 1e-4),
                                          max(max_iter // 2, 1))
        hist += c_hist[1:]
        Q = c_hist[-1]
        keys = _newton_keys(Q, frozen) if newton else []
        if keys:
            step = lambda X, d: _step(channel, alpha, side_info, damping, eps, frozen, q_floor, d, X)[0]
            stage = _NewtonStage(keys, _coarse_jacobian(step, draws.head(n // coarse), Q, keys, eps), tol,
                                 growth_tol)
    f_hist, Qh, it, converged = _iterate(*args, draws, Q, tol, max(max_iter - n_coarse, 1), stage)
    hist += f_hist[1:]
    return SEState(Q=f_hist[-1], Qhat=Qh, n_iter=n_coarse + it, converged=converged, history=np.array(hist),
                   n_coarse=n_coarse)


def _step(channel, alpha, side_info, damping, eps, frozen, q_floor, draws, Q):
    """One evaluation of the SE map at Q: (the damped, floored, frozen image; its Qhat)."""
    Qh = qhat(channel, Q, alpha, draws, eps)
    new = prior_step(Qh, side_info)
    new = sym((1.0 - damping) * new + damping * Q)
    for a in range(Q.shape[0]):
        if a in frozen:
            new[a, :] = 0.0
            new[:, a] = 0.0
        else:
            new[a, a] = max(new[a, a], q_floor)
    return new, Qh


def _newton_keys(Q, frozen, learned=1e-3):
    """The upper-triangle entries (a, b) of Q that the Newton stage solves for: both layers learned (Q_aa,
    Q_bb >= `learned`). A layer below is at (or near) Q_aa = 0, a fixed point that is unstable above its
    threshold: a root finder would converge onto it, the plain iteration leaves it."""
    learned_layers = [a for a in range(Q.shape[0]) if a not in frozen and Q[a, a] >= learned]
    return [(a, b) for i, a in enumerate(learned_layers) for b in learned_layers[i:]]


def _coarse_jacobian(step, draws, Q, keys, eps, h=1e-4):
    """d G(Q)[keys] / d Q[keys] by forward differences of the map `step(Q, draws)` (a sampled map under
    common random numbers is deterministic and smooth, so the difference quotient has no noise; h = 1e-4
    against entries of 1e-3 and more: truncation O(h) relative to the curvature). Each difference is
    taken where the cavity I - Q + eps I stays positive definite (`_difference_step`)."""
    rows, cols = np.array(keys).T
    base = step(Q, draws)[rows, cols]
    J = np.empty((len(keys), len(keys)))
    for j, (a, b) in enumerate(keys):
        X, delta = _difference_step(Q, a, b, h, eps)
        J[:, j] = (step(X, draws)[rows, cols] - base) / delta
    return J


def _difference_step(Q, a, b, h, eps):
    """(Q moved by delta on the entries (a, b) and (b, a), delta): +h, or -h where Q_ab + h reaches 1; where
    that cavity I - Q + eps I is not positive definite (Q within h of a degenerate cavity: a small eps next
    to the perfect-recovery fixed point, e.g. 2 layers, alpha = 1.2, eps = 1e-6), the other sign, then
    steps shrunk 4x at a time (a quotient over a smaller step has a smaller truncation error; the map is
    deterministic, so no noise grows)."""
    first = h if Q[a, b] + h < 1.0 else -h  # stay below Q_aa = 1, where the cavity degenerates
    for delta in (first, -first, first / 4, -first / 4, first / 16, -first / 16, first / 64, -first / 64):
        X = Q.copy()
        X[a, b] += delta
        X[b, a] = X[a, b]
        if np.linalg.eigvalsh(cavity(X, eps)).min() > 0.0:
            return X, delta
    raise ParameterError("method.eps", f"the cavity I - Q + eps I is not positive definite within {h / 64:g} of "
                         f"Q = {np.round(Q, 6).tolist()}", "use a larger eps")


class _NewtonStage:
    """Quasi-Newton steps for the fixed point of G on `keys`: F(x) = G(x) - x with the Jacobian estimate
    B = J - I (J: `_coarse_jacobian`), Broyden's update of B from successive (x, F) pairs, x <- x - B^-1 F.
    The other entries take their image (plain iteration).

    `propose(Q, new)` (Q the point just evaluated, new its image) returns (converged, next point or None):
    converged when the step's length and that of the image's distance to the next point (G(x) - x_next) are
    below tol on the keys, and every other entry settled (`_rest_settled`); None hands the stage back to the
    plain rules (a tiny entry grows: a layer being learned; the step leaves the valid range; or 8 steps
    did not converge)."""

    def __init__(self, keys, J, tol, growth_tol, max_steps=8):
        self.rows, self.cols = np.array(keys).T
        self.B = J - np.eye(len(keys))
        self.tol, self.growth_tol, self.max_steps = tol, growth_tol, max_steps
        self.prev = None  # (x, F, change of every entry) at the previous evaluation
        self.steps = 0

    def _rest_settled(self, change, prev_change, Q, new):
        """Every entry outside the keys: no diagonal entry below 1e-3 grows by more than growth_tol
        relative, and each converges within tol (change below tol / 100, or geometric decay of its change
        with ratio r < 1 and |change| r / (1 - r) < tol, as `_settled`)."""
        p = Q.shape[0]
        on_keys = np.zeros((p, p), bool)
        on_keys[self.rows, self.cols] = on_keys[self.cols, self.rows] = True
        for a in range(p):
            if not on_keys[a, a] and Q[a, a] < 1e-3 and new[a, a] > Q[a, a] * (1.0 + self.growth_tol):
                return None  # a layer being learned
        rest = ~on_keys & np.triu(np.ones((p, p), bool))
        d = change[rest]
        if prev_change is None:
            return bool(np.all(np.abs(d) < 0.01 * self.tol))
        d0 = prev_change[rest]
        with np.errstate(divide="ignore", invalid="ignore"):
            r = d / d0
        small = np.abs(d) < 0.01 * self.tol
        geometric = (0.0 < r) & (r < 1.0) & (np.abs(d) * r / (1.0 - r) < self.tol)
        return bool(np.all(small | geometric))

    def propose(self, Q, new):
        x = Q[self.rows, self.cols]
        F = new[self.rows, self.cols] - x
        change = new - Q
        if self.prev is not None:
            x0, F0, _ = self.prev
            s = x - x0
            if s @ s > 0.0:
                self.B += np.outer(F - F0 - self.B @ s, s) / (s @ s)
        rest = self._rest_settled(change, self.prev[2] if self.prev is not None else None, Q, new)
        self.prev = (x, F, change)
        self.steps += 1
        if rest is None or self.steps > self.max_steps:
            return False, None
        try:
            dx = -np.linalg.solve(self.B, F)
        except np.linalg.LinAlgError:
            return False, None
        if not np.all(np.isfinite(dx)):
            return False, None
        if rest and np.max(np.abs(dx)) < self.tol and np.max(np.abs(F - dx)) < self.tol:
            return True, None
        nxt = new.copy()
        nxt[self.rows, self.cols] = x + dx
        nxt[self.cols, self.rows] = x + dx
        return False, nxt


def _iterate(channel, alpha, side_info, damping, eps, frozen, accelerate, q_floor, growth_tol, anderson, draws, Q,
             tol, max_iter, newton=None):
    """The SE loop of `smi_se` from Q: (list of iterates, Q first; last Qhat; iterations; converged).
    `newton`: a `_NewtonStage` that proposes the next point until it converges or hands back."""
    p = channel.p
    free = [a for a in range(p) if a not in frozen]
    hist = [Q.copy()]
    xs, gs = [], []  # the points the map was evaluated at and their images (`_anderson`)
    converged = False
    Qh = np.zeros((p, p))
    it = 0
    for it in range(1, max_iter + 1):
        new, Qh = _step(channel, alpha, side_info, damping, eps, frozen, q_floor, draws, Q)
        xs.append(Q)
        gs.append(new)
        if newton is not None:
            done, nxt = newton.propose(Q, new)
            Q = new
            hist.append(Q.copy())
            if done:
                converged = True
                break
            if nxt is not None and (np.all(np.diag(nxt)[free] >= q_floor) and np.all(np.diag(nxt) < 1.0)
                                    and np.linalg.eigvalsh(cavity(nxt, eps)).min() > 0.0):
                Q = nxt
                hist.append(Q.copy())
                continue
            newton = None  # handed back: the rules below from here
            continue
        Q = new
        hist.append(Q.copy())
        if _settled(hist, tol, free, growth_tol):
            converged = True
            break
        step = _anderson(xs, gs, free, growth_tol, anderson) if anderson else None
        if step is not None:
            extrapolated, distance = step
            if distance < tol:  # the last image is within tol of the fixed point that the secants estimate
                converged = True
                break
            if (np.all(np.diag(extrapolated)[free] >= q_floor) and np.all(np.diag(extrapolated) < 1.0)
                    and np.linalg.eigvalsh(cavity(extrapolated, eps)).min() > 0.0):
                Q = extrapolated
                hist.append(Q.copy())
                continue
        diag = _grow_secant(xs, gs, free, growth_tol) if anderson else None
        if diag is not None:
            jumped = Q - np.diag(np.diag(Q)) + np.diag(diag)
            if np.linalg.eigvalsh(cavity(jumped, eps)).min() > 0.0:
                Q = jumped
                hist.append(Q.copy())
                continue
        if accelerate and it % 4 == 3:
            diag = _aitken(hist)
            if diag is None:
                diag = _grow_jump(hist, frozen)
            if diag is not None:
                jumped = Q - np.diag(np.diag(Q)) + np.diag(diag)
                # a jump moves the diagonal only: at eps << 1 - Q it can leave I - Q + eps I indefinite (Q12
                # kept; alpha = 1.2, eps = 1e-6: eigenvalue -2.5e-5), which no posterior accepts; skip it then
                if np.linalg.eigvalsh(cavity(jumped, eps)).min() > 0.0:
                    Q = jumped
                    hist.append(Q.copy())
    return hist, Qh, it, converged


def _indices(channel, Q, n, rng):
    p, T = channel.p, channel.T
    Q = sym(Q)
    V = np.eye(p) - Q
    V = V + max(0.0, -np.linalg.eigvalsh(V).min()) * np.eye(p)
    omega = left_multiply(psd_sqrt(Q), rng.standard_normal((n, p, T)))
    z = omega + left_multiply(psd_sqrt(V), rng.standard_normal((n, p, T)))
    return omega, z, V


def plugin_sq_error(channel, y, omega):
    """||y - g(omega)||_F^2 per sample: the teacher's outputs y (N, T, T) against the student's, whose
    index is omega (N, p, T) (shared by the SE error below and GAMP's per-iteration test error)."""
    return np.sum((y - channel.output(omega)) ** 2, axis=(1, 2))


def output_diagonal(channel, z):
    """(y_00, y_11) of y = g(z) (N, 2) for z (N, p, 2): the whole output of a T = 2 channel, whose rows
    are (y_tt, 1 - y_tt), so ||y - y'||_F^2 = 2 sum_t (y_tt - y'_tt)^2. The mixing recursion of
    `link.mixing` written out on the 2 x 2 entries (y_tt = sigmoid(h_t (h_t - h_s)), `link.log_ratios`):
    the error estimates below evaluate it on ~10^5 draws, where the generic einsums cost ~4x more."""
    if z.shape[-1] != 2:
        raise ValueError(f"output_diagonal is the T = 2 output, got {z.shape[-1]} tokens")
    c = channel.skip
    m00, m01, m10, m11 = 1.0, 0.0, 0.0, 1.0  # M_{l-1} (the identity before the first layer)
    for layer in range(z.shape[1] - 1):
        h0 = m00 * z[:, layer, 0] + m01 * z[:, layer, 1]
        h1 = m10 * z[:, layer, 0] + m11 * z[:, layer, 1]
        s0, s1 = _expit(h0 * (h0 - h1)), _expit(h1 * (h1 - h0))
        # M_l = [c I + softmax(h h^T)] M_{l-1}, softmax rows (s0, 1 - s0), (1 - s1, s1)
        m00, m01, m10, m11 = ((s0 + c) * m00 + (1.0 - s0) * m10, (s0 + c) * m01 + (1.0 - s0) * m11,
                              (1.0 - s1) * m00 + (s1 + c) * m10, (1.0 - s1) * m01 + (s1 + c) * m11)
    h0 = m00 * z[:, -1, 0] + m01 * z[:, -1, 1]
    h1 = m10 * z[:, -1, 0] + m11 * z[:, -1, 1]
    return np.stack([_expit(h0 * (h0 - h1)), _expit(h1 * (h1 - h0))], axis=-1)


def gen_error_plugin(channel, Q, n=100_000, rng=None, chunk=50_000):
    """E ||g(z) - g(omega)||_F^2 and its Monte Carlo standard error (n iid draws)."""
    rng = rng if rng is not None else np.random.default_rng(0)
    vals = []
    for a in range(0, n, chunk):
        omega, z, _ = _indices(channel, Q, min(chunk, n - a), rng)
        vals.append(2.0 * np.sum((output_diagonal(channel, z) - output_diagonal(channel, omega)) ** 2, axis=1))
    v = np.concatenate(vals)
    return float(v.mean()), float(v.std() / np.sqrt(v.size))


def gen_error_bayes(channel, Q, n=20_000, k=4, rng=None, chunk=10_000):
    """E ||g(z) - E[g | omega]||_F^2 (posterior-mean predictor) = E_omega tr Var(g(z) | omega), and its
    standard error: per omega (n iid), k iid draws of z given omega and their unbiased sample variance
    (ddof = 1). Against the form ||g(z) - mean of k others||^2 - var / k, this uses all k + 1 outputs
    symmetrically; at equal cost, more omegas with fewer inner draws win, since the spread of
    tr Var(g | omega) over omega dominates (k = 4: at n = 20000, 4x fewer outputs than 17 per omega and a
    standard error 1.4-1.8x smaller, measured at Q = 0, diag(0, 0.95), diag(0.61, 0.994))."""
    if k < 2:
        raise ValueError(f"gen_error_bayes needs k >= 2 inner draws for a sample variance, got k = {k}")
    rng = rng if rng is not None else np.random.default_rng(0)
    p, T = channel.p, channel.T
    vals = []
    for a in range(0, n, chunk):
        m = min(chunk, n - a)
        omega, _, V = _indices(channel, Q, m, rng)
        inner = left_multiply(psd_sqrt(V), rng.standard_normal((m * k, p, T))).reshape(m, k, p, T)
        z = omega[:, None] + inner
        y = output_diagonal(channel, z.reshape(-1, p, T)).reshape(m, k, T)
        vals.append(2.0 * y.var(axis=1, ddof=1).sum(axis=1))
    v = np.concatenate(vals)
    return float(v.mean()), float(v.std() / np.sqrt(v.size))
