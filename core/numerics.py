"""Shared numerics of every model family: quadrature, special functions, fixed points,
small linear algebra and padding. Imports numpy/scipy (and numba, on first use, for the compiled loop of
``gaussian_window_sums``), never a family (core/<family>/ import it).

Quadrature rules for Gaussian expectations E_{xi ~ N(0,1)}[f(xi)]:

* ``gauss_hermite(n)``: probabilists' Gauss-Hermite, exact for polynomials of degree < 2n. Good for
  smooth integrands whose structure lives on the O(1) scale of the Gaussian.
* ``gaussian_panels(features)``: composite Gauss-Legendre on [-L, L] with the Gaussian density folded
  into the weights, refined around "features" (sharp transitions of known centre and width). This is
  the SNR-adaptive rule: at large SNR the integrands of SE switch over windows of width ~ 1/sqrt(mhat),
  which a fixed Gauss-Hermite rule under-resolves and turns into spurious fixed points (spec §3.2: a
  201-node GH rule gives a wrong compressed-sensing threshold 0.6985 instead of 0.6857).
* ``panel_rule(a, b, width, nodes)``: plain composite Gauss-Legendre on [a, b] (Lebesgue measure).

Fixed points:

* ``fixed_point``: the one damped SE iteration driver (x <- (1 - c) step(x) + c x, residual log).

(Threshold searches, the bisection among them, are core/search.py.)
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import special

_SQRT_2PI = np.sqrt(2.0 * np.pi)
_XI_MAX = 38.5  # exp(-xi^2/2) < 1e-321 beyond: the Gaussian weight is exactly 0 in float64


@lru_cache(maxsize=64)
def _gauss_hermite_cached(n: int):
    x, w = np.polynomial.hermite_e.hermegauss(n)
    w = w / w.sum()  # normalise: weights of E over N(0, 1) sum to one exactly
    x.setflags(write=False)
    w.setflags(write=False)
    return x, w


def gauss_hermite(n: int):
    """Probabilists' Gauss-Hermite rule: E_{xi~N(0,1)} f(xi) ~= sum_k w_k f(x_k), sum_k w_k = 1.

    Cached per n; the returned arrays are read-only.
    """
    return _gauss_hermite_cached(int(n))


@lru_cache(maxsize=16)
def _legendre(n: int):
    x, w = np.polynomial.legendre.leggauss(n)
    return x, w


def _panel_edges(features, half_width, base_width):
    """Sorted panel edges: a uniform base grid on [-L, L], refined grids around each feature, and
    base-width panels filling any gap between them (features in the far tail are reached this way
    without a uniform grid over a huge range)."""
    L = float(half_width)
    edges = [np.linspace(-L, L, max(2, int(np.ceil(2 * L / base_width))) + 1)]
    for c, w in features:
        c = float(c)
        w = float(w)
        if not (np.isfinite(c) and np.isfinite(w)) or w <= 0:
            continue
        if w >= base_width:  # feature no sharper than the base panels: nothing to refine
            continue
        # panels of width w/2 over +-3 widths, then growing geometrically (x1.5) up to the base
        # width, out to +-12 widths at least: the switch (tanh / sigmoid / erfc-like) is resolved to
        # ~1e-12 by 8 Legendre nodes per panel, at a cost logarithmic in base_width / w. Beyond
        # |xi| = 38.5 the N(0,1) density underflows, so nothing there can matter.
        offs = list(np.arange(0.0, 3.0 + 1e-9, 0.5))
        h, h_max = 0.5, base_width / w
        while offs[-1] < 12.0 or h < h_max:
            h = min(1.5 * h, h_max)
            offs.append(offs[-1] + h)
            if offs[-1] * w > 2 * _XI_MAX:
                break
        offs = np.asarray(offs) * w
        loc = np.concatenate((c - offs[::-1], c + offs[1:]))
        loc = loc[(loc > -_XI_MAX) & (loc < _XI_MAX)]
        if loc.size:
            edges.append(loc)
    e = np.unique(np.concatenate(edges))
    # drop slivers created by overlapping grids (they only cost nodes, never accuracy)
    e = e[np.concatenate(([True], np.diff(e) > 1e-14 * max(1.0, np.abs(e).max())))]
    gaps = np.diff(e)
    if gaps.max() > base_width * 1.0001:  # fill gaps between the base grid and far features
        parts = [np.linspace(a, b, int(np.ceil((b - a) / base_width)) + 1)[:-1]
                 for a, b in zip(e[:-1], e[1:])]
        e = np.concatenate(parts + [e[-1:]])
    return e


def gaussian_panels(features=(), half_width: float = 10.0, base_width: float = 0.5,
                    nodes_per_panel: int = 8):
    """Composite Gauss-Legendre rule for E_{xi~N(0,1)}[f(xi)] on [-L, L].

    Parameters
    ----------
    features : iterable of (centre, width)
        Sharp structures of f in the xi variable. Around each, panels of width ~ width/2 are laid over
        centre +- 3 widths, then graded geometrically up to the base width (so at least +- 12 widths are
        covered by refined panels; clipped to |xi| <= 38.5 where the density underflows). The range is
        extended to cover such features, with base-width panels bridging the gap, so a feature far
        in the tail is still resolved (its Gaussian weight may be small but not negligible in
        *relative* terms, e.g. for MMSEs near perfect recovery).
    half_width : L, the truncation of the Gaussian (mass outside +-10 is 1.5e-23).
    base_width : panel width of the base grid.
    nodes_per_panel : Gauss-Legendre nodes per panel.

    Returns
    -------
    nodes, weights : 1-d arrays; weights include the N(0,1) density (they sum to 1 up to truncation).
    """
    feats = tuple((float(c), float(w)) for c, w in features)
    return _panels_cached(feats, float(half_width), float(base_width), int(nodes_per_panel))


@lru_cache(maxsize=256)
def _panels_cached(feats, half_width, base_width, nodes_per_panel):
    edges = _panel_edges(feats, half_width, base_width)
    x, w = _legendre(nodes_per_panel)
    a, b = edges[:-1, None], edges[1:, None]
    half = (b - a) / 2
    nodes = ((a + b) / 2 + half * x[None, :]).ravel()
    weights = (half * w[None, :]).ravel() * np.exp(-0.5 * nodes**2) / _SQRT_2PI
    nodes.setflags(write=False)
    weights.setflags(write=False)
    return nodes, weights



def gh_product(p, n):
    """p-dimensional product Gauss-Hermite rule (nodes (n^p, p), weights summing to one)."""
    x, w = gauss_hermite(n)
    nodes = np.array(list(itertools.product(x, repeat=p)))
    weights = np.prod(np.array(list(itertools.product(w, repeat=p))), axis=1)
    return nodes, weights


@lru_cache(maxsize=32)
def panel_rule(a, b, width, nodes):
    """Composite Gauss-Legendre rule on [a, b] (Lebesgue measure): panels of at most `width`, `nodes`
    nodes each. Cached; returns (nodes, weights)."""
    n_pan = max(1, int(np.ceil((b - a) / width)))
    x, w = np.polynomial.legendre.leggauss(nodes)
    edges = np.linspace(a, b, n_pan + 1)
    half = np.diff(edges)[:, None] / 2
    mid = (edges[:-1, None] + edges[1:, None]) / 2
    return (mid + half * x).ravel(), (half * w).ravel()


# -- special functions --------------------------------------------------------------------------
LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def H(x):
    """Gaussian tail H(x) = P(xi > x) = erfc(x / sqrt 2) / 2."""
    return 0.5 * special.erfc(np.asarray(x, float) / np.sqrt(2.0))


def logcosh(x):
    """log cosh x without overflow: |x| + log1p(exp(-2|x|)) - log 2."""
    ax = np.abs(x)
    return ax + np.log1p(np.exp(-2.0 * ax)) - np.log(2.0)


def sech2(x):
    """sech^2 x = 4 e^{-2|x|} / (1 + e^{-2|x|})^2, with full relative accuracy for large |x|."""
    e = np.exp(-2.0 * np.abs(x))
    return 4.0 * e / (1.0 + e) ** 2


# -- small linear algebra -----------------------------------------------------------------------
def sym(A):
    """Symmetric part of A (over the last two axes)."""
    return 0.5 * (A + np.swapaxes(A, -1, -2))


def left_multiply(A, x):
    """A x per sample: A (p, p), x (n, p, ...) -> (n, p, ...), out[:, a] = sum_b A[a, b] x[:, b], summed in
    b order: the same bits as np.einsum("ab,nb...->na...", A, x) (checked in tests/core/test_numerics.py),
    3-5x faster at p = 2-3, where einsum's generic loop dominates."""
    out = np.empty(x.shape)
    for a in range(A.shape[0]):
        acc = A[a, 0] * x[:, 0]
        for b in range(1, A.shape[1]):
            acc = acc + A[a, b] * x[:, b]
        out[:, a] = acc
    return out


def psd_sqrt(Q):
    """Square root of the PSD part of a symmetric matrix (negative eigenvalues clipped at 0)."""
    w, U = np.linalg.eigh(sym(Q))
    return (U * np.sqrt(np.clip(w, 0.0, None))) @ U.T


# -- padding of stored results ------------------------------------------------------------------
def pad_matrix(a, size):
    """NaN-pad the trailing (p, p) of an array to (size, size): p x p order parameters of models of
    different p share one stored (row, col) layout."""
    a = np.asarray(a, float)
    p = a.shape[-1]
    out = np.full(a.shape[:-2] + (size, size), np.nan)
    out[..., :p, :p] = a
    return out


def forward_fill(trace, length):
    """Pad a per-iteration trace to `length` by repeating its last value (the converged state)."""
    trace = np.asarray(trace, dtype=float)
    if trace.shape[0] >= length:
        return trace[:length]
    pad = np.repeat(trace[-1:], length - trace.shape[0], axis=0)
    return np.concatenate([trace, pad], axis=0)


def nan_log(values, length):
    """A convergence log of `length` entries: `values` first, NaN after (and cut at `length`)."""
    values = np.asarray(values, dtype=float)
    log = np.full((length,) + values.shape[1:], np.nan)
    k = min(length, values.shape[0])
    log[:k] = values[:k]
    return log


# -- fixed points -------------------------------------------------------------------------------
@dataclass
class FixedPointResult:
    """Outcome of ``fixed_point``: final x, iterations done, convergence flag, and the residual log
    (max |x_new - x_old| per iteration)."""

    x: np.ndarray
    n_iter: int
    converged: bool
    residuals: np.ndarray = field(repr=False)


def fixed_point(step, x0, *, damping=0.0, tol=1e-10, max_iter=2000, stop=None):
    """Damped fixed-point iteration x <- (1 - damping) step(x) + damping x, on arrays of any shape.

    Converged when max |x_new - x_old| < tol. ``stop(x)`` (optional) ends the iteration early when
    it returns True (used by threshold bisections: "V already below the cut"); converged is then
    False unless the tolerance was also met.
    """
    x = np.array(x0, dtype=float, copy=True)
    res = []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        new = (1.0 - damping) * np.asarray(step(x), float) + damping * x
        r = float(np.max(np.abs(new - x))) if new.size else 0.0
        res.append(r)
        x = new
        if r < tol:
            converged = True
            break
        if stop is not None and stop(x):
            break
    return FixedPointResult(x=x, n_iter=it, converged=converged, residuals=np.asarray(res))


# -- adaptive quadrature of many one-dimensional integrals at once ------------------------------------


@lru_cache(maxsize=8)
def _unit_legendre(n):
    """Gauss-Legendre nodes and weights on [0, 1]."""
    x, w = np.polynomial.legendre.leggauss(n)
    return (x + 1.0) / 2.0, w / 2.0


def unit_legendre(n):
    """Gauss-Legendre nodes and weights on [0, 1] (cached)."""
    return _unit_legendre(int(n))


@dataclass
class AdaptiveMoments:
    """Moments of exp(log_f) per sample: `mass` = int exp(log_f - shift) dt, `mean` and `var` of t under
    the normalised weight, `shift` the per-sample log scale (mass is exp(shift) * mass in absolute
    terms)."""

    shift: np.ndarray
    mass: np.ndarray
    mean: np.ndarray
    var: np.ndarray

    @property
    def log_mass(self):
        with np.errstate(divide="ignore"):
            return self.shift + np.log(self.mass)


def _halves_points(a, b, u):
    """The points at which a bisection reads each panel [a, b]: a, the left half's Gauss-Legendre nodes
    (`u` on [0, 1]), the midpoint, the right half's nodes, b, in increasing order; and (half, mid)."""
    half = 0.5 * (b - a)
    mid = a + half
    t = np.concatenate([a[:, None], a[:, None] + half[:, None] * u[None, :], mid[:, None],
                        mid[:, None] + half[:, None] * u[None, :], b[:, None]], axis=1)
    return t, half, mid


@lru_cache(maxsize=4)
def _read_rule(nodes):
    """Weights on [0, 1] of the interpolatory rule on a bisection's read points (`_halves_points`: the ends,
    the midpoint and both halves' Gauss-Legendre nodes; exact for polynomials of degree 2 nodes + 2). It is
    the one estimate of a panel that reads its ends: a kink (a jump of a derivative) between a half's last
    node and the panel's end changes neither Gauss-Legendre estimate, so both agree and the panel would be
    accepted wrong; this rule sees it."""
    u, _ = _unit_legendre(nodes)
    points = np.concatenate([[0.0], 0.5 * u, [0.5], 0.5 + 0.5 * u, [1.0]])
    basis = np.polynomial.legendre.legvander(2.0 * points - 1.0, points.size - 1).T
    moments = np.zeros(points.size)
    moments[0] = 1.0  # int_0^1 P_k(2x - 1) dx = delta_k0
    weights = np.linalg.solve(basis, moments)
    weights.setflags(write=False)
    return weights


def _max_pending(n):
    """The most panels an adaptive bisection of n samples keeps refining: past it every panel is accepted as
    it stands. An integrand that no rule resolves to the tolerance (a log integrand whose rounding noise
    exceeds it, log Z0 ~ 1e-17 at a vanishing SNR, say) would otherwise double its panels at every depth;
    the bound keeps the work linear in n whatever the integrand."""
    return 65_536 + 256 * n


def _largest_step(values):
    """Per row, the largest |difference| of consecutive log values (inf where a zero meets a non-zero,
    0 where two zeros meet): a step that no Gauss-Legendre estimate may see."""
    with np.errstate(invalid="ignore"):  # -inf - -inf: both zero, no step
        return np.nan_to_num(np.abs(np.diff(values, axis=1)), nan=0.0, posinf=np.inf).max(axis=1)


def _flat_panels(edges, nodes):
    """The non-empty panels of every row of `edges` (n, K + 1), flattened: (n, the unit Gauss-Legendre
    nodes and weights, each panel's sample index, its left and right ends)."""
    edges = np.asarray(edges, float)
    n = edges.shape[0]
    u, wu = _unit_legendre(nodes)
    sample = np.repeat(np.arange(n), edges.shape[1] - 1)
    a, b = edges[:, :-1].ravel(), edges[:, 1:].ravel()
    keep = b > a
    return n, u, wu, sample[keep], a[keep], b[keep]


def adaptive_moments(log_f, edges, *, tol=1e-11, nodes=5, max_depth=52, jump=0.5):
    """The integrals int exp(log_f(i, t)) t^k dt, k = 0, 1, 2, of n samples i at once, each over the
    panels of its row of `edges` (n, K + 1), by adaptive Gauss-Legendre bisection.

    Every panel is integrated by an `nodes`-point Gauss-Legendre rule as a whole and on its two halves.
    It is accepted when (1) the two estimates of every moment agree within `tol` times the sample's
    mass, and (2) the log integrand, read at the panel's ends, its midpoint and the halves' nodes in order,
    changes by less than `jump` between neighbours (a factor e^jump). (2) is what catches a
    step that falls between the nodes of both rules (a discrete label's likelihood): both rules then see
    one side only and agree. A rejected panel is halved (its halves' estimates become the children's
    whole-panel estimates), up to `max_depth` halvings; panels whose largest value times width is below
    `tol` of the mass are never refined for (2). This resolves what a fixed rule cannot know in advance:
    a step anywhere, a transition of any width, a mass far in a tail; smooth integrands stop early.

    `log_f(idx, t)` is called on flat arrays (the sample index of each node, and the node) and returns
    the log integrand there (-inf for zero; NaN raises FloatingPointError). The moments are taken about
    a per-sample origin (the largest node seen first), so that a narrow weight far from 0 keeps its
    variance, and in units of exp(shift), so that nothing underflows. A sample whose every node is
    zero gets mass 0.
    """
    n, u, wu, sample, a, b = _flat_panels(edges, nodes)
    read_rule = _read_rule(nodes)

    def evaluate(idx, t):
        values = log_f(np.repeat(idx, t.shape[1]), t.ravel()).reshape(t.shape)
        if np.isnan(values).any():
            raise FloatingPointError("the log integrand returned NaN")
        return values

    # Level 0: each panel's whole-panel rule sets the per-sample shift and origin.
    t = a[:, None] + (b - a)[:, None] * u[None, :]
    values = evaluate(sample, t)
    shift = np.full(n, -np.inf)
    np.maximum.at(shift, sample, values.max(axis=1))
    empty = ~np.isfinite(shift)
    shift[empty] = 0.0
    origin = np.zeros(n)
    best = np.argmax(values, axis=1)
    top = values[np.arange(len(sample)), best]
    order = np.lexsort((-top, sample))  # per sample, its panel with the largest node first
    first = order[np.r_[True, sample[order][1:] != sample[order][:-1]]] if len(order) else order
    origin[sample[first]] = t[first, best[first]]

    def scaled(idx, values):
        return np.exp(np.minimum(values - shift[idx][:, None], 700.0))

    def panel_moments(idx, weight, t, width):
        weight = weight * width[:, None] * wu[None, :]
        x = t - origin[idx][:, None]
        return np.stack([weight.sum(1), (weight * x).sum(1), (weight * x * x).sum(1)], axis=1)

    whole = panel_moments(sample, scaled(sample, values), t, b - a)
    total = np.zeros((n, 3))
    # current estimate of each sample's mass (accepted + pending panels)
    estimate = np.bincount(sample, whole[:, 0], minlength=n).astype(float)
    for depth in range(max_depth + 1):
        if len(sample) == 0:
            break
        t, half, mid = _halves_points(a, b, u)
        values = evaluate(sample, t)
        weight = scaled(sample, values)
        left = panel_moments(sample, weight[:, 1:nodes + 1], t[:, 1:nodes + 1], half)
        right = panel_moments(sample, weight[:, nodes + 2:-1], t[:, nodes + 2:-1], half)
        halves = left + right
        x = t - origin[sample][:, None]
        at_reads = weight * (b - a)[:, None] * read_rule[None, :]
        by_reads = np.stack([at_reads.sum(1), (at_reads * x).sum(1), (at_reads * x * x).sum(1)], axis=1)
        reference = tol * np.maximum(estimate[sample], 1e-300)
        rough = (_largest_step(values) > jump) & (weight.max(axis=1) * (b - a) > reference)
        done = ((np.abs(halves - whole).sum(1) <= reference) & (np.abs(halves - by_reads).sum(1) <= reference)
                & ~rough)
        if depth == max_depth or 2 * int((~done).sum()) > _max_pending(n):
            done[:] = True
        for k in range(3):
            total[:, k] += np.bincount(sample[done], halves[done, k], minlength=n)
        estimate += np.bincount(sample, halves[:, 0] - whole[:, 0], minlength=n)  # refine the mass estimate
        rest = ~done
        sample = np.concatenate([sample[rest], sample[rest]])
        a, b = np.concatenate([a[rest], mid[rest]]), np.concatenate([mid[rest], b[rest]])
        whole = np.concatenate([left[rest], right[rest]])
    mass = total[:, 0]
    safe = np.where(mass > 0, mass, 1.0)
    mean_offset = total[:, 1] / safe
    var = np.maximum(total[:, 2] / safe - mean_offset**2, 0.0)
    mass = np.where(empty, 0.0, mass)
    return AdaptiveMoments(shift=shift, mass=mass, mean=origin + mean_offset, var=var)


#: panel edges in units of the cavity's standard deviation for `adaptive_moments`: panels of 2 where the
#: Gaussian weight lives, widening into the tails, out to 40 (a label whose likelihood puts the posterior
#: far out is still integrated; exp(-40^2/2) ~ 1e-348 is the float64 limit of the Gaussian itself)
GAUSSIAN_EDGES = np.array([-40.0, -24.0, -14.0, -9.0, -6.0, -4.0, -2.0, 0.0, 2.0, 4.0, 6.0, 9.0, 14.0, 24.0, 40.0])


def resolve_panels(log_f, lo, hi, *, width=0.5, nodes=5, jump=0.5, rtol=1e-12, floor=700.0, accurate=40.0,
                   max_depth=48, max_panels=20_000):
    """Panel edges over [lo, hi] on which one function, exp(log_f), is resolved in relative terms: each
    panel is halved while (1) its log, read at its ends, midpoint and the Gauss-Legendre nodes of its
    halves, changes by more than `jump` between neighbours, or (2) its integral by the `nodes`-point rule
    on the whole panel and on its halves differ by more than `rtol` of that integral, unless all of it
    lies more than `floor` below the function's largest value (where it is zero in float64). A step is
    located to `width` 2^-max_depth. At most `max_panels` panels are refined at one depth: past that the
    function is taken as resolved as far as it goes (a likelihood whose values carry rounding noise can
    never meet `rtol` there), so the work is bounded whatever the function. The panels a likelihood needs,
    found once, are shared by every cavity that integrates it (any smooth factor resolved on its own scale
    can multiply it)."""
    u, wu = _unit_legendre(nodes)
    a = np.arange(lo, hi, width)
    b = np.append(a[1:], hi)
    accepted = [np.array([lo, hi])]
    top = -np.inf
    for depth in range(max_depth + 1):
        if a.size == 0:
            break
        values, half, mid, _ = _panel_reads(log_f, a, b, u)
        top = max(top, float(values.max()))
        steps = _largest_step(values[:, :2 * nodes + 3])
        scaled = np.exp(np.minimum(values - top, 0.0))
        halves = (scaled[:, 1:nodes + 1] @ wu + scaled[:, nodes + 2:2 * nodes + 2] @ wu) * half
        whole = scaled[:, 2 * nodes + 3:] @ wu * 2 * half
        largest = values.max(axis=1)
        rough = ((steps > jump) & (largest > top - floor)) | \
            ((np.abs(halves - whole) > rtol * np.abs(halves)) & (largest > top - accurate))
        if depth == max_depth or 2 * int(rough.sum()) > max_panels:
            # the work is bounded by construction: a function no finite rule resolves in relative terms
            # (rounding noise in a likelihood computed as log(1 - p) with p near 1, say) keeps its panels
            rough[:] = False
        accepted.append(mid[rough])
        a, b = np.concatenate([a[rough], mid[rough]]), np.concatenate([mid[rough], b[rough]])
    return np.unique(np.concatenate(accepted + [np.arange(lo, hi, width)]))


# -- a fixed rule for Gaussian-weighted integrals of a resolved function ------------------------------


def _cramer_bound(j):
    """max_t |d^j/dt^j phi(t)| <= 1.0865 sqrt(j!) / sqrt(2 pi) (Cramer's bound on Hermite functions)."""
    return 1.0865 * math.sqrt(math.factorial(j)) / math.sqrt(2.0 * math.pi)


@lru_cache(maxsize=8)
def gaussian_kernel_rule(tol=1e-14):
    """(reach, nodes, width) of the composite Gauss-Legendre rule that integrates t^k phi(t) f(t), k = 0, 1, 2,
    over [-reach, reach] within `tol` for any f that is constant on the rule's panels, the fewest nodes
    per unit of t that the bounds allow:

    * the truncation: int_{|t| > R} t^k phi <= 2 phi(R) (R + 1) for k <= 2, so R is the smallest with
      2 phi(R) (R + 1) <= tol / 2;
    * each panel of width c: the n-point Gauss-Legendre error c^(2n+1) (n!)^4 / ((2n+1) ((2n)!)^3) times
      max |d^2n (t^2 phi)| <= R^2 B_2n + 4n R B_(2n-1) + 2n (2n-1) B_(2n-2) (Leibniz, B_j Cramer's bound on
      the derivatives of phi), summed over the 2R / c + 1 panels a cavity reads, below tol / 2.

    n is at most 12: the function the Gaussian multiplies is resolved on its own panels by a 5-point rule
    (`merged_panels`: locally a polynomial of degree <= 9 within its tolerance), and the product has to stay
    within the rule's degree 2n - 1; a function with structure finer than the panels needs its edges
    among them."""
    reach = 1.0
    while 2.0 * math.exp(-0.5 * reach * reach) / math.sqrt(2.0 * math.pi) * (reach + 1.0) > tol / 2:
        reach += 0.05
    best = None
    for n in range(4, 13):
        derivative = (reach**2 * _cramer_bound(2 * n) + 4 * n * reach * _cramer_bound(2 * n - 1)
                      + 2 * n * (2 * n - 1) * _cramer_bound(2 * n - 2))
        constant = math.factorial(n) ** 4 / ((2 * n + 1) * math.factorial(2 * n) ** 3) * derivative
        # the widest panel whose summed bound meets tol / 2 (60 halvings; the lower end meets it)
        lo, _ = halve_brackets(lambda width: constant * width ** (2 * n + 1) * (2.0 * reach / width + 1.0) <= tol / 2,
                               1e-3, 2.0 * reach, 60)
        lo = float(lo)
        if best is None or n / lo < best[1] / best[2]:
            best = (reach, n, lo)
    return best


#: steps per unit of t^2 / 2 of the Gaussian's table in `gaussian_window_sums`: exp(-t^2 / 2) is read as
#: exp(-i / 16) (the table) times exp(r), |r| <= 1/32, by its degree-7 Taylor polynomial (relative error
#: (1/32)^8 / 8! < 3e-17): a few multiplications instead of a call of the exponential, which a window's
#: loop would make once per node.
GAUSSIAN_TABLE_STEPS = 16.0


def _window_sums_loop(omega, inverse_sigma, reach, first, last, z, weight, values, nonzero_lo, nonzero_hi, table,
                      run_lo, run_hi, run_label, run_level, out):
    """The loop of `gaussian_window_sums` (compiled by numba on first use, `_window_sums_kernel`); `values`
    is (labels, nodes), each label's nonzero values within [nonzero_lo, nonzero_hi)."""
    n_labels = values.shape[0]
    kernel = np.empty(z.size)
    nodes_t = np.empty(z.size)
    for k in range(omega.size):
        start, stop = first[k], last[k]
        for j in range(start, stop):
            t = (z[j] - omega[k]) * inverse_sigma
            half_square = 0.5 * t * t
            index = int(half_square * GAUSSIAN_TABLE_STEPS + 0.5)
            r = index / GAUSSIAN_TABLE_STEPS - half_square
            taylor = 1.0 + r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (
                1.0 / 120 + r * (1.0 / 720 + r * (1.0 / 5040)))))))
            kernel[j] = weight[j] * table[index] * taylor
            nodes_t[j] = t
        for label in range(n_labels):  # one pass per label: its three sums stay in registers
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            # the nodes where the label's values are zero add exact zeros: skipped
            for j in range(max(start, nonzero_lo[label]), min(stop, nonzero_hi[label])):
                term = kernel[j] * values[label, j]
                s0 += term
                term *= nodes_t[j]
                s1 += term
                s2 += term * nodes_t[j]
            out[0, label, k] = s0
            out[1, label, k] = s1
            out[2, label, k] = s2
        for run in range(run_lo.size):
            ta = (run_lo[run] - omega[k]) * inverse_sigma
            tb = (run_hi[run] - omega[k]) * inverse_sigma
            if tb <= -reach or ta >= reach:
                continue  # outside the window, as the nodes beyond it are
            # Phi(t) and phi(t) at the ends; an end beyond the window counts as infinite (the same truncation)
            below_a, density_a, below_b, density_b = 0.0, 0.0, 1.0, 0.0
            if ta > -reach:
                below_a = 0.5 * math.erfc(-ta * 0.7071067811865476)
                density_a = math.exp(-0.5 * ta * ta)
            if tb < reach:
                below_b = 0.5 * math.erfc(-tb * 0.7071067811865476)
                density_b = math.exp(-0.5 * tb * tb)
            if ta > 0.0:  # above the mean: from the upper tails (no 1 - 1 cancellation)
                mass = 0.5 * math.erfc(ta * 0.7071067811865476) - (
                    0.5 * math.erfc(tb * 0.7071067811865476) if tb < reach else 0.0)
            else:
                mass = below_b - below_a
            mass *= 2.5066282746310002
            # the node sums are of dz and carry phi without its 1 / sqrt(2 pi) (both applied at the end)
            level = run_level[run] / inverse_sigma
            label = run_label[run]
            out[0, label, k] += level * mass
            out[1, label, k] += level * (density_a - density_b)
            out[2, label, k] += level * (mass + ta * density_a - tb * density_b)


@lru_cache(maxsize=1)
def _window_sums_kernel():
    """`_window_sums_loop` compiled (cached on disk): numba is imported here, on first use, so that
    importing the package does not pay for it."""
    from numba import njit

    return njit(cache=True)(_window_sums_loop)


@lru_cache(maxsize=8)
def _gaussian_table(reach):
    """exp(-i / GAUSSIAN_TABLE_STEPS) for every i that t^2 / 2, |t| <= reach, rounds to (and one more)."""
    size = int(0.5 * reach * reach * GAUSSIAN_TABLE_STEPS) + 3
    table = np.exp(-np.arange(size) / GAUSSIAN_TABLE_STEPS)
    table.setflags(write=False)
    return table


_NO_RUNS = (np.zeros(0), np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0))


def gaussian_window_sums(omega, sigma, reach, z, weight, values, runs=None):
    """S[k, l, j] = int_{-reach}^{reach} t^k phi(t) f_l(omega_j + sigma t) dt, k = 0, 1, 2, for every cavity
    omega_j (1-d) and function f_l: on the rule (z, weight) (nodes sorted, weights of dz) where f_l takes the
    column l of `values` (the sum over the nodes of the cavity's window |z - omega_j| <= reach sigma), plus
    where f_l is a constant on an interval, the runs (lo, hi, label, level) (arrays; f_label = level on
    [lo, hi], 0 at those nodes), in closed form: Phi and phi at its ends, an end beyond the window taken as
    infinite. One compiled loop (the windows overlap, so a numpy form rebuilds each cavity's band of nodes
    and their Gaussian factors first, which costs more than the sums); phi at the nodes to a relative 3e-16
    (`GAUSSIAN_TABLE_STEPS`). With `gaussian_kernel_rule(tol)`'s (reach, nodes, width), panels of width
    <= width sigma and values resolved on them, each sum is within tol of the integral over the real line."""
    return gaussian_window_sums_by_label(omega, sigma, reach, z, weight, *by_label_values(values), runs)


def by_label_values(values):
    """`values` (nodes, labels) laid out for `gaussian_window_sums_by_label`: (labels, nodes) contiguous, and
    each label's first and last-plus-one node with a nonzero value (0, 0 where it has none)."""
    by_label = np.ascontiguousarray(np.asarray(values, float).T)  # each label's nodes side by side in memory
    if by_label.shape[1] == 0:  # no nodes (every stretch flat, in closed form): nothing to skip
        empty = np.zeros(by_label.shape[0], dtype=np.int64)
        return by_label, empty, empty
    nonzero = by_label != 0.0
    any_nonzero = nonzero.any(axis=1)
    nonzero_lo = np.where(any_nonzero, np.argmax(nonzero, axis=1), 0)
    nonzero_hi = np.where(any_nonzero, by_label.shape[1] - np.argmax(nonzero[:, ::-1], axis=1), 0)
    return by_label, nonzero_lo, nonzero_hi


def gaussian_window_sums_by_label(omega, sigma, reach, z, weight, by_label, nonzero_lo, nonzero_hi, runs=None):
    """`gaussian_window_sums` on values laid out by `by_label_values` (a table read many times is laid out
    once): the nodes outside a label's nonzero stretch are skipped."""
    omega = np.ascontiguousarray(omega, dtype=float)
    first = np.searchsorted(z, omega - reach * sigma, side="left")
    last = np.searchsorted(z, omega + reach * sigma, side="right")
    out = np.empty((3, by_label.shape[0], omega.size))
    run_lo, run_hi, run_label, run_level = _NO_RUNS if runs is None else runs
    if run_label.size and not 0 <= run_label.min() <= run_label.max() < by_label.shape[0]:
        raise ValueError(f"runs: labels must index the {by_label.shape[0]} columns of values")
    _window_sums_kernel()(omega, 1.0 / sigma, float(reach), first, last, z, weight, by_label, nonzero_lo, nonzero_hi,
                          _gaussian_table(float(reach)), run_lo, run_hi, run_label, run_level, out)
    out *= 1.0 / (sigma * _SQRT_2PI)
    return out


def _sparse_window_sums_loop(omega, inverse_sigma, first, last, z, weight, row_start, label_of, values, table,
                             out):
    """The loop of `gaussian_window_sums_sparse` (compiled by numba on first use)."""
    for k in range(omega.size):
        for j in range(first[k], last[k]):
            t = (z[j] - omega[k]) * inverse_sigma
            half_square = 0.5 * t * t
            index = int(half_square * GAUSSIAN_TABLE_STEPS + 0.5)
            r = index / GAUSSIAN_TABLE_STEPS - half_square
            taylor = 1.0 + r * (1.0 + r * (1.0 / 2 + r * (1.0 / 6 + r * (1.0 / 24 + r * (
                1.0 / 120 + r * (1.0 / 720 + r * (1.0 / 5040)))))))
            kernel = weight[j] * table[index] * taylor
            for entry in range(row_start[j], row_start[j + 1]):
                term = kernel * values[entry]
                label = label_of[entry]
                out[0, label, k] += term
                term *= t
                out[1, label, k] += term
                out[2, label, k] += term * t


@lru_cache(maxsize=1)
def _sparse_window_sums_kernel():
    from numba import njit

    return njit(cache=True)(_sparse_window_sums_loop)


def gaussian_window_sums_sparse(omega, sigma, reach, z, weight, row_start, label_of, values, n_labels):
    """`gaussian_window_sums` of functions stored sparsely, by node: node j (z sorted) carries the values
    values[row_start[j]:row_start[j + 1]] of the functions label_of[...] there, the others zero at it. For
    many functions each of which lives on a narrow stretch of z (a continuous label's likelihood, of width
    the label noise): the work and the memory go with the pairs stored, not with nodes x functions."""
    omega = np.ascontiguousarray(omega, dtype=float)
    first = np.searchsorted(z, omega - reach * sigma, side="left")
    last = np.searchsorted(z, omega + reach * sigma, side="right")
    out = np.zeros((3, n_labels, omega.size))
    _sparse_window_sums_kernel()(omega, 1.0 / sigma, first, last, z, weight, row_start, label_of, values,
                                 _gaussian_table(float(reach)), out)
    out *= 1.0 / (sigma * _SQRT_2PI)
    return out


def _window_log_moments_loop(omega, sigma, first, last, z, log_weight, log_z, mean, var):
    """The loop of `gaussian_window_log_moments` (compiled by numba on first use)."""
    for k in range(omega.size):
        inverse_sigma = 1.0 / sigma[k]
        top = -np.inf
        for j in range(first[k], last[k]):
            t = (z[j] - omega[k]) * inverse_sigma
            top = max(top, log_weight[j] - 0.5 * t * t)
        mass = 0.0
        first_moment = 0.0
        second_moment = 0.0
        if top > -np.inf:
            for j in range(first[k], last[k]):
                t = (z[j] - omega[k]) * inverse_sigma
                exponent = log_weight[j] - 0.5 * t * t - top
                if exponent < -708.0:
                    continue  # below 1e-307 of the largest term (itself 1): nothing, and a subnormal exp is slow
                term = math.exp(exponent)
                mass += term
                term *= t
                first_moment += term
                second_moment += term * t
        if mass > 0.0:
            log_z[k] = top + math.log(mass) - 0.9189385332046728 - math.log(sigma[k])  # log sqrt(2 pi)
            mean[k] = first_moment / mass
            var[k] = max(second_moment / mass - mean[k] * mean[k], 0.0)
        else:
            log_z[k], mean[k], var[k] = -np.inf, 0.0, 0.0


@lru_cache(maxsize=1)
def _window_log_moments_kernel():
    """`_window_log_moments_loop` compiled (cached on disk), numba imported on first use."""
    from numba import njit

    return njit(cache=True)(_window_log_moments_loop)


def gaussian_window_log_moments(omega, sigma, reach, z, log_weight):
    """(log Z, E[t], Var[t]) per cavity k of the measure sum_j exp(log_weight_j) N(z_j; omega_k, sigma_k^2) over
    the nodes z_j (sorted) of its window |z_j - omega_k| < reach sigma_k, t = (z - omega_k) / sigma_k: a
    rule's weights and a likelihood in log form, relative accuracy whatever the scale (each cavity's terms
    taken relative to its largest). omega, sigma 1-d; log Z = -inf and (0, 0) where the window holds no
    mass. One compiled loop, as `gaussian_window_sums`."""
    omega = np.ascontiguousarray(omega, dtype=float)
    sigma = np.ascontiguousarray(np.broadcast_to(sigma, omega.shape), dtype=float)
    first = np.searchsorted(z, omega - reach * sigma)
    last = np.searchsorted(z, omega + reach * sigma)
    log_z, mean, var = (np.empty(omega.shape) for _ in range(3))
    _window_log_moments_kernel()(omega, sigma, first, last, np.ascontiguousarray(z, dtype=float),
                                 np.ascontiguousarray(log_weight, dtype=float), log_z, mean, var)
    return log_z, mean, var


def _panel_reads(log_f, a, b, u):
    """log_f read at each panel's ordered points (`_halves_points`: ends, midpoint, the halves' nodes)
    followed by its whole-panel nodes; with the panels' half widths and midpoints."""
    n = u.size
    ordered, half, mid = _halves_points(a, b, u)
    t = np.concatenate([ordered, a[:, None] + 2 * half[:, None] * u[None, :]], axis=1)
    values = np.asarray(log_f(t.ravel()), float).reshape(t.shape)
    if np.isnan(values).any():
        raise FloatingPointError("the log integrand returned NaN")
    return values, half, mid, n


def merged_panels(log_f, edges, *, tol=1e-13, jump=0.05, nodes=5, fine=1e-12, unit=math.inf):
    """The fewest of `edges` (sorted panel edges on which exp(log_f) is resolved, e.g. by `resolve_panels`)
    on which exp(log_f) stays resolved in absolute terms, relative to its largest value M: an interior edge
    is dropped while the panel the merge leaves (1) integrates exp(log_f) x^k, k = 0, 1, 2 (x its position
    scaled to [-1, 1]), by one `nodes`-point rule within `tol` M per unit length of what the rules of its
    two parts give (the parts are resolved, so structure the one rule misses shows), and (2) its values
    read at its ends, the parts' nodes and the dropped edge change by at most `jump` M between
    neighbours (a step at the edge stays). Panels narrower than `fine` (a step located by the bisection)
    shrink to one edge at their midpoint. What stays are the function's own features: its steps and the
    panels its transitions need; a smooth or negligible stretch becomes one panel. `log_f` may be a
    sequence of functions (the edges resolving each of them, united): an edge is dropped when every one
    of them allows it, so that the panels are the fewest that serve them all. `unit` caps the length
    the tolerance scales with: a panel longer than it is held to tol M `unit` (a long panel's error
    sits where the function varies, not spread over its length, and a rule that reads a window of it
    sees all of it)."""
    functions = list(log_f) if isinstance(log_f, (list, tuple)) else [log_f]
    u, wu = _unit_legendre(nodes)
    edges = np.asarray(edges, float)
    narrow = np.flatnonzero(np.diff(edges) < fine)
    if narrow.size:
        edges = edges.copy()
        edges[narrow] = 0.5 * (edges[narrow] + edges[narrow + 1])
        edges = np.delete(edges, narrow + 1)
    midpoints = np.concatenate([edges, 0.5 * (edges[1:] + edges[:-1])])
    tops = [float(np.max(f(midpoints))) for f in functions]
    functions = [(f, top) for f, top in zip(functions, tops) if np.isfinite(top)]
    if not functions:
        return edges[[0, -1]]
    while edges.size > 2:
        a, e, b = edges[:-2, None], edges[1:-1, None], edges[2:, None]  # merging drops edge e
        parts = np.concatenate([a + (e - a) * u, b - (b - e) * u[::-1]], axis=1)
        whole = a + (b - a) * u
        points = np.concatenate([a, parts[:, :nodes], e, parts[:, nodes:], b, whole], axis=1)
        x = 2.0 * (points - a) / (b - a) - 1.0
        weights = np.concatenate([(e - a) * wu, (b - e) * wu[::-1]], axis=1)
        smooth = np.ones(e.shape[0], dtype=bool)
        for f, top in functions:
            values = np.asarray(f(points.ravel()), float).reshape(points.shape)
            if np.isnan(values).any():
                raise FloatingPointError("the log integrand returned NaN")
            scaled = np.exp(np.minimum(values - top, 0.0))
            smooth &= np.abs(np.diff(scaled[:, :2 * nodes + 3], axis=1)).max(axis=1) <= jump
            for k in range(3):
                g = scaled * x**k
                by_parts = (g[:, 1:nodes + 1] * weights[:, :nodes]).sum(1) + (g[:, nodes + 2:2 * nodes + 2]
                                                                               * weights[:, nodes:]).sum(1)
                by_one = (g[:, 2 * nodes + 3:] * wu).sum(1) * (b - a)[:, 0]
                smooth &= np.abs(by_one - by_parts) <= tol * np.minimum(b - a, unit)[:, 0]
        # drop every other edge of each run of droppable ones: no two merges touch the same panel
        index = np.arange(smooth.size)
        run_start = np.maximum.accumulate(np.where(np.r_[True, ~smooth[:-1]], index, 0))
        drop = smooth & ((index - run_start) % 2 == 0)
        if not drop.any():
            break
        edges = np.delete(edges, np.flatnonzero(drop) + 1)
    return edges


def uniform_resolution(log_f, lo, hi, *, tol=1e-12, nodes=12, widest=4.0, narrowest=1e-6):
    """The widest panel width h (from `widest`, halving) on which every panel of a uniform grid over
    [lo, hi] resolves exp(log_f) in absolute terms: the `nodes`-point rule on each panel and on its halves
    agree within `tol` M per unit length (M the largest value read). For a smooth function whose scale
    does not depend on where it is read (a continuous label's likelihood); `narrowest` if none does."""
    u, wu = _unit_legendre(nodes)
    width = float(widest)
    while width > narrowest:
        a = np.arange(lo, hi, width)
        b = np.minimum(a + width, hi)
        values, half, _, n = _panel_reads(log_f, a, b, u)
        scaled = np.exp(values - values.max())
        halves = (scaled[:, 1:n + 1] @ wu + scaled[:, n + 2:2 * n + 2] @ wu) * half
        whole = scaled[:, 2 * n + 3:] @ wu * 2 * half
        if np.all(np.abs(halves - whole) <= tol * 2 * half):
            return width
        width /= 2
    return narrowest

# -- posterior moments of a bivariate Gaussian cavity times a black-box likelihood ----------------------
def adaptive_integrals(evaluate, edges, *, tol=1e-10, nodes=5, max_depth=48, jump=0.5):
    """The integrals int exp(log_w(i, t)) [1, h_1(i, t), ..., h_k(i, t)] dt of n samples i at once, each
    over the panels of its row of `edges` (n, K + 1): the adaptive Gauss-Legendre bisection of
    `adaptive_moments` (whole panel against its halves within `tol`, log weight changing by less than
    `jump` between the points read in order), for a weight that carries a payload h (the moments of an
    inner integral, for an iterated one). `evaluate(idx, t)` takes flat arrays (sample index, node) and
    returns (log_w (m,), h (m, k)); NaN in log_w raises FloatingPointError. Each component is accepted
    against `tol` times its own running estimate of int exp(log_w) |h_j| (and the mass for j = 0).

    Returns (shift (n,), integrals (n, k + 1)): the integrals in units of exp(shift) (shift the largest
    log weight seen at the first level, 0 for a sample whose weight is zero everywhere)."""
    n, u, wu, sample, a, b = _flat_panels(edges, nodes)
    read_rule = _read_rule(nodes)

    def read(idx, t):
        log_w, h = evaluate(np.repeat(idx, t.shape[1]), t.ravel())
        log_w = np.asarray(log_w, float).reshape(t.shape)
        if np.isnan(log_w).any():
            raise FloatingPointError("the log weight returned NaN")
        h = np.asarray(h, float).reshape(t.shape + (-1,))
        return log_w, np.where(np.isfinite(log_w)[..., None], h, 0.0)  # no payload where no weight

    t = a[:, None] + (b - a)[:, None] * u[None, :]
    log_w, h = read(sample, t)
    k = h.shape[-1]
    shift = np.full(n, -np.inf)
    np.maximum.at(shift, sample, log_w.max(axis=1))
    shift[~np.isfinite(shift)] = 0.0

    def panel_integrals(idx, log_w, h, width):
        weight = np.exp(np.minimum(log_w - shift[idx][:, None], 700.0)) * (width[:, None] * wu[None, :])
        parts = np.concatenate([weight[..., None], weight[..., None] * h], axis=2)
        return parts.sum(1), np.abs(parts).sum(1)

    whole, whole_abs = panel_integrals(sample, log_w, h, b - a)
    total = np.zeros((n, k + 1))
    scale = np.zeros((n, k + 1))  # running estimate of int |integrand| per component
    for j in range(k + 1):
        scale[:, j] = np.bincount(sample, whole_abs[:, j], minlength=n)
    for depth in range(max_depth + 1):
        if len(sample) == 0:
            break
        t, half, mid = _halves_points(a, b, u)
        # the panel's ends are read just inside it: a step exactly at an edge (a direction given in
        # `angles`) is then no jump within the panel
        t_read = t.copy()
        t_read[:, 0] += 1e-13 * (b - a)
        t_read[:, -1] -= 1e-13 * (b - a)
        log_w, h = read(sample, t_read)
        left, left_abs = panel_integrals(sample, log_w[:, 1:nodes + 1], h[:, 1:nodes + 1], half)
        right, right_abs = panel_integrals(sample, log_w[:, nodes + 2:-1], h[:, nodes + 2:-1], half)
        halves = left + right
        at_reads = np.exp(np.minimum(log_w - shift[sample][:, None], 700.0)) * ((b - a)[:, None] * read_rule[None, :])
        by_reads = np.concatenate([at_reads.sum(1)[:, None], np.einsum("pj,pjk->pk", at_reads, h)], axis=1)
        reference = tol * np.maximum(scale[sample], 1e-300)
        largest = np.exp(np.minimum(log_w.max(axis=1) - shift[sample], 700.0)) * (b - a)
        rough = (_largest_step(log_w) > jump) & (largest > reference[:, 0])
        done = (np.all(np.abs(halves - whole) <= reference, axis=1)
                & np.all(np.abs(halves - by_reads) <= reference, axis=1) & ~rough)
        if depth == max_depth or 2 * int((~done).sum()) > _max_pending(n):
            done[:] = True
        for j in range(k + 1):
            total[:, j] += np.bincount(sample[done], halves[done, j], minlength=n)
            scale[:, j] += np.bincount(sample, left_abs[:, j] + right_abs[:, j] - whole_abs[:, j], minlength=n)
        rest = ~done
        sample = np.concatenate([sample[rest], sample[rest]])
        a, b = np.concatenate([a[rest], mid[rest]]), np.concatenate([mid[rest], b[rest]])
        whole = np.concatenate([left[rest], right[rest]])
        whole_abs = np.concatenate([left_abs[rest], right_abs[rest]])
    return shift, total


def _ray_moments(t0):
    """K_m = int_{t0}^inf (t - t0)^m e^{-t^2/2} dt, m = 0..3 (columns), by the recurrence
    K_m = (m - 1) K_{m-2} - t0 K_{m-1} from K_0 = sqrt(2 pi) Phi(-t0), K_1 = e^{-t0^2/2} - t0 K_0: no
    overflow at any t0, and no cancellation where the ray carries the mass (t0 <= 0)."""
    k0 = math.sqrt(2.0 * math.pi) * special.ndtr(-t0)
    k1 = np.exp(-0.5 * t0 * t0) - t0 * k0
    k2 = k0 - t0 * k1
    k3 = 2.0 * k1 - t0 * k2
    return np.maximum(np.stack([k0, k1, k2, k3], axis=1), 0.0)


def gaussian_posterior_2d(log_likelihood, omega, V, *, tol=1e-8, angles=(), directional=False):
    """(log Z, E[z], E[z z^T]) of the posterior exp(log_likelihood(i, z)) N(z; omega_i, V_i) of n samples,
    z in R^2 (omega (n, 2), V (n, 2, 2) positive definite; log_likelihood takes the flat sample index
    (m,) and points z (m, 2)); log Z = log int N(z; omega, V) exp(log_likelihood) dz.

    An iterated adaptive integral in polar coordinates about z = 0, z = r (cos theta, sin theta): along
    each ray by `adaptive_moments` in t = sqrt(a) (r - r0) (the cavity restricted to the ray is a Gaussian
    in r of precision a = e^T V^-1 e and centre r0; the Jacobian r is part of the integrand), over theta
    by `adaptive_integrals` on 8 panels of [0, 2 pi) plus the edges `angles` (directions where the
    likelihood steps, when the caller knows them: no bisection is then spent on them), carrying each
    ray's mass and first two radial moments. Rays from the origin suit multi-index likelihoods, whose
    structure is centred there: a sign pattern is constant along every ray (its steps are the angles
    of the axes), a level set of z1 z2 or of |z| crosses each ray once, so no ray meets a window
    narrower than its nodes (a Cartesian line near the crossing of two steps does, and misses it). A
    cavity far from the origin is a narrow bump in theta, which the adaptive rule refines. Both
    levels stop at relative tolerance `tol`.

    `directional`: the likelihood depends on the direction of z only (a sign pattern); each ray's
    integral is then closed form (`_ray_moments`: the cavity on a ray is a Gaussian in r, times r^m)
    and only the angle is integrated, the likelihood read at r = 1."""
    omega = np.asarray(omega, float)
    n = omega.shape[0]
    V = np.broadcast_to(np.asarray(V, float), (n, 2, 2))
    P = np.linalg.inv(V)
    log_norm = -math.log(2.0 * math.pi) - 0.5 * np.linalg.slogdet(V)[1] + LOG_SQRT_2PI
    c_quad = np.einsum("ni,nij,nj->n", omega, P, omega)
    P_omega = np.einsum("nij,nj->ni", P, omega)
    # the quadratic forms on a ray from the entries (gathering (m, 2, 2) blocks per point costs more)
    p11, p12, p22 = P[:, 0, 0], 0.5 * (P[:, 0, 1] + P[:, 1, 0]), P[:, 1, 1]

    def ray(idx, theta):
        cos, sin = np.cos(theta), np.sin(theta)
        e = np.stack([cos, sin], axis=1)
        a = p11[idx] * cos * cos + 2.0 * p12[idx] * cos * sin + p22[idx] * sin * sin
        b = P_omega[idx, 0] * cos + P_omega[idx, 1] * sin
        r0, root_a = b / a, np.sqrt(a)
        base = log_norm[idx] - 0.5 * np.maximum(c_quad[idx] - b * b / a, 0.0)
        if directional:  # int_0^inf r^(m+1) N(r e; omega, V) dr = exp(base) s^(m+2) K_(m+1), s = 1 / sqrt(a)
            s = 1.0 / root_a
            k = _ray_moments(-r0 * root_a)
            with np.errstate(divide="ignore", invalid="ignore"):
                log_w = base - LOG_SQRT_2PI + 2.0 * np.log(s) + np.log(k[:, 1]) + log_likelihood(idx, e)
                mean_r = np.where(k[:, 1] > 0, s * k[:, 2] / k[:, 1], 0.0)
                second_r = np.where(k[:, 1] > 0, s * s * k[:, 3] / k[:, 1], 0.0)
            return log_w, np.stack([mean_r * cos, mean_r * sin, second_r * cos * cos, second_r * sin * sin,
                                    second_r * cos * sin], axis=1)
        edges = np.maximum(GAUSSIAN_EDGES[None, :], -r0[:, None] * root_a[:, None])  # r >= 0

        def inner_log_f(j, t):
            r = r0[j] + t / root_a[j]
            with np.errstate(divide="ignore"):
                log_r = np.log(np.maximum(r, 0.0))
            return -0.5 * t * t - LOG_SQRT_2PI + log_r + log_likelihood(idx[j], r[:, None] * e[j])

        inner = adaptive_moments(inner_log_f, edges, tol=tol)
        log_w = base - np.log(root_a) + inner.log_mass
        mean_r = r0 + inner.mean / root_a
        second_r = inner.var / a + mean_r**2
        return log_w, np.stack([mean_r * cos, mean_r * sin, second_r * cos * cos, second_r * sin * sin,
                                second_r * cos * sin], axis=1)

    outer_edges = np.unique(np.concatenate([np.linspace(0.0, 2.0 * math.pi, 9),
                                            np.mod(np.asarray(angles, float), 2.0 * math.pi)]))
    shift, total = adaptive_integrals(ray, np.broadcast_to(outer_edges, (n, outer_edges.size)), tol=tol)
    mass = total[:, 0]
    safe = np.where(mass > 0, mass, 1.0)
    m1, m2, m11, m22, m12 = (total[:, j] / safe for j in range(1, 6))
    mean = np.stack([m1, m2], axis=1)
    second = np.stack([np.stack([m11, m12], -1), np.stack([m12, m22], -1)], -2)
    with np.errstate(divide="ignore"):
        log_z = np.where(mass > 0, shift + np.log(safe), -np.inf)
    return log_z, mean, second


# -- many roots at once: a vectorised bisection ----------------------------------------------------------
def halve_brackets(moves_first, first, second, steps):
    """Many brackets [first, second] (arrays or numbers, one root each, either end first) after `steps`
    vectorised halvings: at each step mid = (first + second) / 2 replaces `first` where moves_first(mid) is
    True (the root lies on second's side of mid) and `second` elsewhere. A fixed number of steps rather than
    a tolerance: every bracket shrinks by 2^-steps. Returns (first, second). The one array bisection of
    seqphase (a threshold search, whose probes are tasks, is `core/search.py`)."""
    for _ in range(steps):
        mid = 0.5 * (first + second)
        move = moves_first(mid)
        first, second = np.where(move, mid, first), np.where(move, second, mid)
    return first, second


def bisect_arrays(moves_first, first, second, steps):
    """The midpoints of the brackets `halve_brackets` leaves."""
    first, second = halve_brackets(moves_first, first, second, steps)
    return 0.5 * (first + second)
