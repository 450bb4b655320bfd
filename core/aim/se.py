"""Bayes-optimal state evolution of the attention-indexed model (spec aim.md §2).

Order parameters: q = Tr(S S_hat)/d in [rho, Q0], Q0 = 1 + rho, and its conjugate qhat (an effective SNR).
With V = Q0 - q (the paper's error ||S_hat - S||_F^2 / d):

    qhat = 2 alpha E_{omega, y}[ sum_a 2 g_aa^2 + sum_{a<b} g_ab^2 ]     channel step (2.1)
    q    = Q0 - mmse_RIE(1/qhat; rho)                                   prior step (2.2)

with omega_ab ~ N(0, (1 + delta_ab) q) and the cavity variance (1 + delta_ab) V per folded entry
(channels.py). The prior step is the symmetric RIE of the shared module `seqphase.core.rie`.

Routes:
* softmax and linear (`closed_form_se`): the channel step is qhat = k alpha / V with k = T^2 + T - 2
  (softmax: the row log-ratios fix h up to one constant) or T(T + 1) (linear), so the fixed points lie on
  the parametric curve Delta = 1/qhat in (0, inf): alpha(Delta) = mmse(Delta) / (k Delta), error =
  mmse(Delta). A point is solved by root-finding in log Delta (brentq) on the shared curve solver
  (`CURVE`, core/parametric_curve.py); alpha(Delta) is checked to be strictly decreasing on the whole
  Delta grid (a non-monotone curve would mean several fixed points, and `ParametricCurveError` is raised
  rather than one of them returned). Past the counting threshold (alpha above alpha(DELTA_MIN)) the error
  is 0 (perfect recovery) and qhat = inf.
* the general channel step (`general_se`): the expectation (2.1) by Monte Carlo with the channel's own
  g_out (common random numbers: the map is deterministic), iterated with `numerics.fixed_point`; for
  softmax it must coincide with the closed form (spec Fig. 4).
* hardmax T = 2 (`hardmax_se`): the bracket is a 2-D integral over (u_1, u_2) ~ N(0, q [[3, 1], [1, 3]])
  summed over the 4 sign patterns (`hardmax_bracket`). In k-space (u = s r k, r = sqrt(3 V)) the
  channel factor F_sigma(k) = [2 D_1^2 + 2 D_2^2 + (D_1 + sigma D_2)^2] / Phi2(k_1, k_2; sigma/3),
  sigma = s_1 s_2, does not depend on (q, V): it is tabulated once per process on a fixed composite
  Gauss-Legendre grid (panels 0, 1/8, 1/4, 1/2, 1, 2, ..., 2^14 on each side, `HARDMAX_NODES` nodes each;
  pitfall 4: the boundary layers of width ~sqrt(3 V) in u are O(1) in k) and only the Gaussian envelope
  is recomputed per call. When q/V < `GH_RATIO` the envelope is narrower than the grid's finest panels and
  a product Gauss-Hermite rule in the standardised omega is used instead (the integrand is smooth on the
  envelope's scale there). Terms with Phi2 < 1e-14 are dropped (pitfall 5: their weight vanishes). The
  fixed point iterates x = log V with `numerics.fixed_point` (damping 0.5 as in the authors' code; log V
  keeps full relative accuracy as V -> 0), from q = rho.
* small width (rho -> 0, alpha_bar = alpha/rho, Q0 -> 1): softmax/linear in closed form
  (`small_width_closed_form`); hardmax the 1-D fixed point q = max(1 - t, 0)^2,
  t = 1/(2 alpha_bar E[bracket](q, V = 1 - q)), solved as a bracketing root of
  G(q) = max(1 - t(q), 0)^2 - q (`small_width_hardmax`): the iteration slows down critically near the
  weak-recovery threshold, the root solve does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import optimize

from seqphase.core.aim.channels import HARDMAX_GOUT, SoftmaxChannel, cavity_variance, entry_weights, hardmax_kernel
from seqphase.core.numerics import fixed_point, gauss_hermite
from seqphase.core.parametric_curve import ParametricCurve

#: the parametric curve and the root search in Delta = 1/qhat cover [DELTA_MIN, DELTA_MAX]
DELTA_MIN = 1e-8
DELTA_MAX = 1e6
#: points of the monotonicity check of alpha(Delta)
CURVE_POINTS = 2000
#: Gauss-Legendre nodes per k-space panel of the hardmax grid, and the panel edges (one side)
HARDMAX_NODES = 12
HARDMAX_EDGES = np.concatenate(([0.0], 2.0 ** np.arange(-3, 15)))
#: below this q/V the hardmax bracket uses the Gauss-Hermite rule in omega (see the module docstring)
GH_RATIO = 2.0
GH_NODES = 48
#: Phi2 below this is dropped from the hardmax bracket (pitfall 5)
PHI2_DROP = 1e-14


def q0(rho):
    """Q0 = Tr S^2 / d = 1 + rho."""
    return 1.0 + float(rho)


def counting_k(channel, T):
    """Independent scalar observations per sample: k = T^2 + T - 2 (softmax), T(T + 1) (linear)."""
    T = int(T)
    if channel == "softmax":
        return T * T + T - 2
    if channel == "linear":
        return T * (T + 1)
    raise ValueError(f"channel {channel!r} has no closed-form channel step")


@lru_cache(maxsize=32)
def prior_mmse(rho):
    """Delta -> mmse_RIE(Delta; rho): the per-rho table of `seqphase.core.rie` (interpolated, cached per
    process), or the RIE's direct quadrature where the table is not available."""
    from seqphase.core import rie

    table = getattr(rie, "mmse_table", None)
    if table is not None:
        return table(float(rho)).mmse
    return rie.SymmetricRIE(float(rho)).mmse


@dataclass
class AIMState:
    """An SE point: error (= Q0 - q, the paper's ||S_hat - S||_F^2 / d), q, qhat, iterations, convergence
    flag and the residual log (empty for the closed forms)."""

    mse: float
    q: float
    qhat: float
    n_iter: int
    converged: bool
    residuals: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)


# -- softmax / linear: the parametric curve -------------------------------------------------------
def alpha_of_delta(delta, rho, k):
    """alpha(Delta) = mmse_RIE(Delta; rho) / (k Delta), vectorised."""
    return np.asarray(prior_mmse(float(rho))(delta), float) / (k * delta)


#: alpha(Delta) on CURVE_POINTS log-spaced Delta in [DELTA_MIN, DELTA_MAX], strictly decreasing (per (rho, k))
CURVE = ParametricCurve(alpha_of_delta, DELTA_MIN, DELTA_MAX, CURVE_POINTS, name="Delta", params=("rho", "k"))


def closed_form_se(alpha, rho, k):
    """The SE point at alpha on the parametric curve (module docstring)."""
    alpha, rho = float(alpha), float(rho)
    mmse = prior_mmse(rho)
    error, delta = CURVE.solve(np.array([alpha]), (rho, k), error_of=lambda d, a: mmse(d),
                               small_noise=lambda a: (np.zeros(a.shape), np.zeros(a.shape)))
    err, d = float(error[0]), float(delta[0])
    if d == 0.0:  # beyond the counting threshold: perfect recovery
        return AIMState(mse=0.0, q=q0(rho), qhat=math.inf, n_iter=0, converged=True)
    return AIMState(mse=err, q=q0(rho) - err, qhat=1.0 / d, n_iter=0, converged=True)


def infinite_rho_error(alpha, k):
    """rho = inf (GOE prior, mmse = Delta/(1 + Delta)): error = 1 - k alpha (0 beyond 1/k)."""
    return np.maximum(1.0 - k * np.asarray(alpha, float), 0.0)


# -- the general channel step (Monte Carlo with the channel's g_out) -------------------------------
def general_bracket(channel, q, V, n_mc, seed):
    """E[sum_ab (1 + delta_ab) g_ab^2] at (q, V) by Monte Carlo, n_mc samples of (omega, y) from a fixed
    seed (common random numbers), with the standard error of the mean."""
    T, p = channel.T, channel.p
    w = entry_weights(T)
    rng = np.random.default_rng(seed)
    xi, zeta = rng.standard_normal((n_mc, p)), rng.standard_normal((n_mc, p))
    omega = xi * np.sqrt(w * q)
    z = omega + zeta * np.sqrt(w * V)
    y = channel.sample(z, rng)
    g, _ = channel.g_out(y, omega, cavity_variance(T, V))
    values = (g * g) @ w
    return float(values.mean()), float(values.std(ddof=1) / math.sqrt(n_mc))


def general_se(alpha, rho, channel, *, n_mc=20000, seed=0, damping=0.5, tol=1e-9, max_iter=500):
    """SE with the general channel step (2.1) by Monte Carlo (`general_bracket`), iterated in log V."""
    Q0, mmse = q0(rho), prior_mmse(float(rho))

    def step(x):
        V = math.exp(float(x))
        bracket, _ = general_bracket(channel, Q0 - V, V, n_mc, seed)
        return math.log(float(mmse(np.array([1.0 / (2.0 * alpha * bracket)]))[0]))

    fp = fixed_point(step, np.array(math.log(Q0 - rho)), damping=damping, tol=tol, max_iter=max_iter)
    V = math.exp(float(fp.x))
    bracket, _ = general_bracket(channel, Q0 - V, V, n_mc, seed)
    return AIMState(mse=V, q=Q0 - V, qhat=2 * alpha * bracket, n_iter=fp.n_iter, converged=fp.converged,
                    residuals=fp.residuals)


def softmax_general_se(alpha, rho, T, **kwargs):
    return general_se(alpha, rho, SoftmaxChannel(T), **kwargs)


# -- hardmax T = 2 ---------------------------------------------------------------------------------
def _hardmax_factor(k1, k2, sigma, gout):
    """F_sigma(k) = [2 D1^2 + 2 D2^2 + (D1 + sigma D2)^2] / Phi2(k; sigma/3), 0 where Phi2 < PHI2_DROP."""
    Phi2, D1, D2, _ = hardmax_kernel(k1, k2, sigma / 3.0, gout)
    keep = Phi2 >= PHI2_DROP
    num = 2.0 * D1 * D1 + 2.0 * D2 * D2 + (D1 + sigma * D2) ** 2
    return np.where(keep, num / np.where(keep, Phi2, 1.0), 0.0)


@lru_cache(maxsize=4)
def _hardmax_grid(gout, nodes=HARDMAX_NODES):
    """(kappa nodes, weights, {sigma: F_sigma on the kappa x kappa grid}) of the k-space rule."""
    x, w = np.polynomial.legendre.leggauss(nodes)
    e = np.concatenate((-HARDMAX_EDGES[::-1], HARDMAX_EDGES[1:]))
    a, b = e[:-1, None], e[1:, None]
    kappa = ((a + b) / 2 + (b - a) / 2 * x).ravel()
    weights = ((b - a) / 2 * w).ravel()
    factors = {}
    for sigma in (1.0, -1.0):
        F = np.empty((kappa.size, kappa.size))
        for start in range(0, kappa.size, 32):  # row blocks bound the Plackett work array
            rows = kappa[start:start + 32]
            F[start:start + 32] = _hardmax_factor(rows[:, None], kappa[None, :], sigma, gout)
        F.setflags(write=False)
        factors[sigma] = F
    return kappa, weights, factors


def _bracket_hermite(q, V, gout):
    """The hardmax bracket by product Gauss-Hermite in the standardised omega (narrow envelopes)."""
    xi, w = gauss_hermite(GH_NODES)
    # (u1, u2) = L (xi1, xi2), L the Cholesky factor of q [[3, 1], [1, 3]]
    l11, l21 = math.sqrt(3.0 * q), math.sqrt(q / 3.0)
    l22 = math.sqrt(3.0 * q - q / 3.0)
    u1 = l11 * xi[:, None] + 0.0 * xi[None, :]
    u2 = l21 * xi[:, None] + l22 * xi[None, :]
    W = w[:, None] * w[None, :]
    r = math.sqrt(3.0 * V)
    total = 0.0
    for s1 in (1.0, -1.0):
        for s2 in (1.0, -1.0):
            F = _hardmax_factor(s1 * u1 / r, s2 * u2 / r, s1 * s2, gout)
            total += float(np.sum(W * F))
    return total / (r * r)


def hardmax_bracket(q, V, gout="exact"):
    """E[sum_a 2 g_aa^2 + sum_{a<b} g_ab^2] of the hardmax channel (T = 2) at overlap q and cavity V
    (module docstring: k-space grid, or Gauss-Hermite when q/V < GH_RATIO)."""
    if gout not in HARDMAX_GOUT:
        raise ValueError(f"unknown hardmax_gout {gout!r}")
    q, V = float(q), float(V)
    if q <= 0.0:  # omega = 0: k = 0 for every sign pattern
        return sum(float(_hardmax_factor(np.zeros(1), np.zeros(1), s, gout)[0]) * 2.0
                   for s in (1.0, -1.0)) / (3.0 * V)
    if q / V < GH_RATIO:
        return _bracket_hermite(q, V, gout)
    kappa, weights, factors = _hardmax_grid(gout)
    c = 3.0 * V / (16.0 * q)
    norm = 1.0 / (2.0 * math.pi * q * math.sqrt(8.0))
    k1, k2 = kappa[:, None], kappa[None, :]
    diag = 3.0 * (k1 * k1 + k2 * k2)
    cross = 2.0 * k1 * k2
    W = weights[:, None] * weights[None, :]
    total = 0.0
    for sigma, F in factors.items():
        envelope = np.exp(-c * (diag - sigma * cross)) * norm
        total += 2.0 * float(np.sum(W * envelope * F))  # x 2: the two sign patterns of each sigma
    return total


def hardmax_se(alpha, rho, gout="exact", *, damping=0.5, tol=1e-10, max_iter=5000):
    """Hardmax (T = 2) SE fixed point from q = rho, iterated in x = log V (module docstring)."""
    alpha, rho = float(alpha), float(rho)
    Q0, mmse = q0(rho), prior_mmse(rho)

    def qhat_of(V):
        return 2.0 * alpha * hardmax_bracket(Q0 - V, V, gout)

    def step(x):
        V = math.exp(float(x))
        return math.log(float(mmse(np.array([1.0 / qhat_of(V)]))[0]))

    fp = fixed_point(step, np.array(math.log(Q0 - rho)), damping=damping, tol=tol, max_iter=max_iter)
    V = math.exp(float(fp.x))
    return AIMState(mse=V, q=Q0 - V, qhat=qhat_of(V), n_iter=fp.n_iter, converged=fp.converged,
                    residuals=fp.residuals)


# -- small width (rho -> 0, alpha_bar = alpha / rho) -----------------------------------------------
def small_width_closed_form(alpha_bar, k):
    """Softmax (k = T^2 + T - 2) or linear (k = T(T + 1)) small-width error: 1 for k alpha_bar <= 1,
    k alpha_bar (2 - k alpha_bar) up to 2, 0 beyond (spec §2.4)."""
    x = k * np.asarray(alpha_bar, float)
    return np.where(x <= 1.0, 1.0, np.where(x >= 2.0, 0.0, x * (2.0 - x)))


def small_width_t(q, alpha_bar, gout):
    """t(q) = 1/(2 alpha_bar E[bracket](q, V = 1 - q)) (Delta = t/rho)."""
    return 1.0 / (2.0 * alpha_bar * hardmax_bracket(q, 1.0 - q, gout))


#: the smallest q of the small-width root search (q = 0 is the trivial fixed point)
SMALL_WIDTH_Q_MIN = 1e-12
#: largest q of the search: V = 1 - q stays above the k-grid's reach
SMALL_WIDTH_Q_MAX = 1.0 - 1e-7


def small_width_hardmax(alpha_bar, gout="exact"):
    """(error = 1 - q, q, t) of the hardmax small-width fixed point q = max(1 - t(q), 0)^2: the largest
    root of G(q) = max(1 - t(q), 0)^2 - q on [SMALL_WIDTH_Q_MIN, 1) (q = 0 when G < 0 there)."""
    alpha_bar = float(alpha_bar)

    def G(q):
        return max(1.0 - small_width_t(q, alpha_bar, gout), 0.0) ** 2 - q

    hi = SMALL_WIDTH_Q_MAX
    if G(hi) >= 0.0:
        q = hi
    else:
        # scan down a geometric ladder in V = 1 - q (the root moves to q -> 1 as alpha_bar grows) and in q
        ladder = np.unique(np.concatenate((1.0 - np.logspace(-7, -0.3, 24), np.logspace(-0.3, -12, 24))))[::-1]
        q = 0.0
        upper = hi
        for lower in ladder:
            if G(lower) >= 0.0:
                q = optimize.brentq(G, lower, upper, xtol=1e-15, rtol=1e-13)
                break
            upper = lower
    t = small_width_t(q, alpha_bar, gout)
    return 1.0 - q, q, t
