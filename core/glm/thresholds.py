"""Critical sample complexities alpha = n/d of scalar GLMs, each computable two independent ways.

* Weak recovery (leaving m = 0): linear stability of the uninformative fixed point
  (``weak_recovery_stability``) vs SE bisection with a little side information (``weak_recovered``).
* Algorithmic perfect recovery (AMP spinodal): sup of the parametric fixed-point curve alpha(V)
  (``perfect_recovery_spinodal``) vs SE bisection from the uninformed start (``perfect_recovered``).
* Information-theoretic (first-order) threshold: crossing of the free entropies of the informed and
  uninformed SE branches (``informed_wins``).

All use the same channel kernel ``g_out_scalar`` and prior ``mmse`` as SE and GAMP. The searches over
alpha are the threshold method's graph (core/glm/model.py, `Threshold.tasks`): each predicate here is
one probe of a k-section (core/search.py).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize

from seqphase.core.glm.se import channel_mhat, glm_se


def weak_recovery_stability(prior, channel):
    """Linear stability threshold of the uninformative fixed point m = 0.

    If E[z | y] != 0 on the support (g_out(y, 0, rho) != 0), m = 0 is not a fixed point: weak
    recovery is trivial, return 0.0. Otherwise, to first order mhat = alpha m E_y[dg(y, 0, rho)^2]
    and m = rho^2 mhat, so m = 0 is unstable iff alpha > 1 / (rho^2 E_y[dg^2]), y ~ P(y | 0, rho).
    Returns inf if E[dg^2] vanishes (first order is blind: "hard" direction).
    """
    rho = prior.rho
    omega = np.zeros(1)
    eg2 = float(channel.expect_y(lambda y, o, v: channel.g_out_scalar(y, o, v)[0] ** 2, omega, rho)[0])
    if eg2 > 1e-12:
        return 0.0
    edg2 = float(channel.expect_y(lambda y, o, v: channel.g_out_scalar(y, o, v)[1] ** 2, omega, rho)[0])
    if edg2 <= 1e-14:
        return math.inf
    return 1.0 / (rho**2 * edg2)


def weak_recovered(prior, channel, alpha, *, side_info=1e-10, overlap_cut=1e-4, max_iter=3000, damping=0.0):
    """The weak-recovery bisection's predicate at one alpha (one probe): the SE from m = 0 with side
    information `side_info` ends with m > overlap_cut.

    Bias of this criterion at a continuous transition at alpha_c: below alpha_c the fixed point is
    m ~ rho^2 lambda / (1 - alpha/alpha_c), so it is declared recovered once
    alpha > alpha_c (1 - rho^2 lambda / overlap_cut) (downward bias ~ lambda/cut); above alpha_c,
    m grows like (alpha/alpha_c)^t from lambda, needing t ~ log(cut/lambda) / (alpha/alpha_c - 1)
    iterations, and the fixed point m ∝ (alpha - alpha_c) must exceed the cut: with max_iter
    iterations the search's estimate is biased upward by ~ alpha_c log(cut/lambda) / max_iter (0.5% at
    max_iter = 3000), plus (cut / slope of m(alpha)). The stability value is the unbiased one."""
    cut_v = prior.rho - overlap_cut  # m > cut  <=>  V < rho - cut
    st = glm_se(prior, channel, alpha, start=prior.rho, side_info=side_info, damping=damping,
                max_iter=max_iter, stop=lambda V: float(V) < cut_v)
    return bool(st.overlap > overlap_cut)


def _eg2(channel, prior, V):
    return channel_mhat(channel, 1.0, prior.rho - V, V)


def perfect_recovery_spinodal(prior, channel, *, mse_cut_fraction=1e-3, n_grid=120):
    """Algorithmic (AMP) perfect-recovery threshold from the parametric fixed-point curve.

    SE fixed points satisfy alpha(V) = mhat_for_mmse(V) / E_{xi,y}[g_out^2](m = rho - V, V); the
    uninformed iteration gets past V iff alpha > alpha(V), so alpha_alg = sup alpha(V) over
    V in [mse_cut_fraction rho, rho). We parametrise the curve by the SNR mhat (V = mmse(mhat)),
    which avoids inverting mmse: a dense geometric grid in mhat covering that V range, then a
    bounded refinement of the maximum in log mhat. At the maximum the linearised SE map has slope
    1 (saddle-node bifurcation), hence "spinodal".
    """
    rho = prior.rho
    v_cut = mse_cut_fraction * rho

    def alpha_of(log_mhat):
        mh = math.exp(log_mhat)
        V = prior.mmse(mh)
        return mh / _eg2(channel, prior, V), V

    # range of mhat: from V ~ rho(1 - 1e-6) down to V = v_cut
    lo = math.log(max(prior.mhat_for_mmse(rho * (1 - 1e-6)), 1e-12))
    hi = math.log(prior.mhat_for_mmse(v_cut))
    grid = np.linspace(lo, hi, n_grid)
    vals = np.array([alpha_of(t)[0] for t in grid])
    k = int(np.argmax(vals))
    if k == len(grid) - 1:  # sup at the cut: no interior maximum (e.g. Gaussian prior, linear)
        return float(vals[k])
    a, b = grid[max(k - 1, 0)], grid[min(k + 1, len(grid) - 1)]
    r = optimize.minimize_scalar(lambda t: -alpha_of(t)[0], bounds=(a, b), method="bounded",
                                 options={"xatol": 1e-9})
    return float(max(-r.fun, vals[k]))


def perfect_recovered(prior, channel, alpha, *, mse_cut_fraction=1e-3, max_iter=5000, damping=0.0):
    """The perfect-recovery bisection's predicate at one alpha (one probe): the SE from the uninformed
    start reaches V < mse_cut_fraction rho. Near the spinodal the iteration crawls through the bottleneck
    for ~ pi / sqrt(c (alpha - alpha_alg)) iterations; with max_iter iterations the search's estimate is
    biased upward by O(1 / max_iter^2) (negligible here)."""
    v_cut = mse_cut_fraction * prior.rho
    st = glm_se(prior, channel, alpha, start="uninformed", damping=damping, max_iter=max_iter,
                stop=lambda V: float(V) < v_cut)
    return bool(st.mse < v_cut)


def informed_wins(prior, channel, alpha, *, max_iter=5000, damping=0.0, distinct_tol=1e-6):
    """The information-theoretic (first-order) search's predicate at one alpha (one probe): the informed
    branch's free entropy is at least the uninformed one's. When both starts reach the same fixed point:
    if it is (near) perfect recovery, alpha is above the transition (True); otherwise the informed branch
    does not exist there (False)."""
    kw = dict(damping=damping, max_iter=max_iter)
    amp = glm_se(prior, channel, alpha, start="uninformed", **kw)
    inf = glm_se(prior, channel, alpha, start="informed", **kw)
    if abs(amp.mse - inf.mse) <= distinct_tol * prior.rho:
        return bool(inf.mse < 1e-3 * prior.rho)
    return bool(inf.free_entropy >= amp.free_entropy)
