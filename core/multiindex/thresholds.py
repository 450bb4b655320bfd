"""Weak-learnability thresholds of multi-index models (spec §1.4-1.6) and the grand staircase.

* trivial subspace T = range E_y[E[z|y] E[z|y]^T] (learned at any alpha > 0);
* easy subspace: alpha_c = 1 / lambda_max of F(M) = E_y[G M G], G = E[z z^T|y] - I, on symmetric
  matrices (K = E[G (x) G], p^2 x p^2), with its Perron eigenvector checked PSD; ||K|| < 1e-10 means
  hard (alpha_c = inf);
* staircase: conditional stages after a learned subspace (committee: specialisation of the perp
  block along the non-specialised branch; z1^2 + sign(z1 z2 z3): perfect recovery of z1, then the
  (z2, z3) block at m1 = 1, where it is exactly the sign(z2 z3) channel).

Every stage also gets an SE bisection (`se.learned`, small side information).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize

from seqphase.core.models import Work
from seqphase.core.numerics import gauss_hermite
from seqphase.core.search import section_search, side_by_side, single

from . import se as mse
from .channels import SignZ1Z2

KIND_TRIVIAL, KIND_EASY, KIND_HARD, KIND_FIRST_ORDER = 0, 1, 2, 3
RANK_TOL = 1e-8


@dataclass
class Stage:
    kind: int
    alpha_stability: float
    alpha_bisection: float
    projector: np.ndarray  # cumulative learned subspace after this stage

    @property
    def subspace_dim(self):
        return int(round(np.trace(self.projector)))


def projector_onto(vectors, p):
    if len(vectors) == 0:
        return np.zeros((p, p))
    A = np.column_stack(vectors)
    U, s, _ = np.linalg.svd(A, full_matrices=False)
    U = U[:, s > RANK_TOL * max(1.0, s.max())]
    return U @ U.T


def trivial_matrix(channel):
    y, w = channel.base_law()
    m, _ = channel.cond_moments(y)
    return np.einsum("n,ni,nj->ij", w, m, m)


def trivial_subspace(channel):
    """Projector onto T = span{E[z|y]} (zero matrix when E[z|y] = 0)."""
    T = trivial_matrix(channel)
    ev, U = np.linalg.eigh(T)
    keep = ev > RANK_TOL
    return (U[:, keep] @ U[:, keep].T), T


def sym_basis(p):
    """Frobenius-orthonormal basis of symmetric p x p matrices, as columns of a (p^2, p(p+1)/2) array."""
    cols = []
    for i in range(p):
        for j in range(i, p):
            E = np.zeros((p, p))
            if i == j:
                E[i, i] = 1.0
            else:
                E[i, j] = E[j, i] = 1 / np.sqrt(2)
            cols.append(E.ravel())
    return np.column_stack(cols)


def k_matrix(channel, y=None, w=None):
    """K = E_y[G (x) G], G = E[z z^T | y] - I (p^2 x p^2)."""
    if y is None:
        y, w = channel.base_law()
    _, second = channel.cond_moments(y)
    G = second - np.eye(channel.p)
    return np.einsum("n,nij,nkl->ikjl", w, G, G).reshape(channel.p**2, channel.p**2)


def easy_spectrum(K, p):
    """(lambda_max, top eigen-matrices (list), all eigenvalues) of K restricted to symmetric matrices."""
    B = sym_basis(p)
    Ks = B.T @ K @ B
    Ks = 0.5 * (Ks + Ks.T)
    ev, U = np.linalg.eigh(Ks)
    lam = ev[-1]
    top = [(B @ U[:, k]).reshape(p, p) for k in range(len(ev)) if ev[k] >= lam - 1e-8 * max(abs(lam), 1e-300)]
    return lam, top, ev


def easy_threshold(channel):
    """alpha_c = 1/lambda_max(F) and the projector onto the easy subspace (inf, 0 if hard)."""
    K = k_matrix(channel)
    p = channel.p
    if np.abs(K).max() < 1e-10:
        return np.inf, np.zeros((p, p)), K
    lam, top, _ = easy_spectrum(K, p)
    if lam <= 0:
        return np.inf, np.zeros((p, p)), K
    # a PSD element of the top eigenspace: project I onto it (Krein-Rutman: one exists)
    M = sum(np.sum(E * np.eye(p)) * E for E in top)
    if np.abs(M).max() < 1e-12:
        M = top[0]
    M = M if np.trace(M) >= 0 else -M
    evm = np.linalg.eigvalsh(0.5 * (M + M.T))
    if evm.min() < -1e-8 * evm.max():
        raise RuntimeError(f"{channel.name}: Perron eigenvector of F is not PSD (eigenvalues {evm})")
    vecs = [v for E in top for v in np.linalg.svd(E)[0].T[np.linalg.svd(E)[1] > RANK_TOL]]
    return 1.0 / lam, projector_onto(vecs, p), K


# ---------------------------------------------------------------------------------------------
def perron_matrix(channel):
    """A PSD element of the top eigenspace of F (the projection of I onto it), scaled to top eigenvalue 1."""
    K = k_matrix(channel)
    _, top, _ = easy_spectrum(K, channel.p)
    M = sum(np.sum(E * np.eye(channel.p)) * E for E in top)
    if np.abs(M).max() < 1e-12:
        M = top[0]
    M = 0.5 * (M + M.T)
    M = M if np.trace(M) >= 0 else -M
    return M / np.linalg.eigvalsh(M).max()


def easy_learned(channel, a, side_info, *, n_gh=3, expect=None, direction=None):
    """The easy bisection's predicate at one alpha (one probe). The SE starts at q0 M, M the Perron
    eigen-matrix of F, so in the linear regime the top eigenvalue of Q is multiplied by alpha lambda every
    step; for even channels the first correction is O(q0) relative (q0 = 1e-6), so the sign of the growth
    over the steps 1 -> 3 decides (burn_in 0, trend_iter 2). The channels of ISOTROPIC run the isotropic
    family instead (`iso_learned`)."""
    if channel.name in ISOTROPIC and direction is None:
        return iso_learned(channel, a, side_info)
    expect = expect or mse.Expectation(channel, "quadrature", n_gh=n_gh)
    direction = perron_matrix(channel) if direction is None else direction
    return bool(mse.learned(channel, a, expect=expect, side_info=side_info, direction=direction,
                            burn_in=0, trend_iter=2)[0])


#: channels whose SE keeps Q = q I (permutation invariance and paired sign flips) and whose F has
#: the Perron eigen-matrix I: their bisection runs the scalar SE on that family
ISOTROPIC = ("z1z2z3",)


def iso_learned(channel, a, side_info, q0=1e-6, steps=3):
    """The easy bisection's predicate on the isotropic family Q = q I: q <- qhat / (1 + qhat), qhat =
    alpha E|g|^2 / p + lambda (`se.iso_qhat`, one Gauss-Hermite node per positive half-axis: exact for the
    quadratic leading order in omega, relative corrections O(q0)). Learned iff q grows over `steps` steps
    from q0. One SE step costs one posterior evaluation per y node instead of 27 x the y rule."""
    q, tops = q0, [q0]
    for _ in range(steps):
        qh = a * mse.iso_qhat(channel, q, n_gh=1) + side_info
        q = qh / (1 + qh)
        tops.append(q)
    return bool(np.all(np.diff(tops) > 0))


# ---------------------------------------------------------------------------------------------
# z1^2 + sign(z1 z2 z3)
def _m1_gout(y, omega, v):
    """g_out of the 1-D effective channel of z1 on the branch Q = m e1 e1^T (perp block 0): there
    (z2, z3) ~ N(0, I) independent of z1, so sign(z1 z2 z3) is a fair coin s and y = z1^2 + s. The
    posterior of z1 is on the (up to 4) roots z1 = +-sqrt(y - s), weights N(z1; omega, v) / (2 |z1|)."""
    parts = []
    for s in (1.0, -1.0):
        ok = y > s
        r = np.sqrt(np.where(ok, y - s, 1.0))
        for sg in (1.0, -1.0):
            z1 = sg * r
            lw = np.where(ok, -0.5 * (z1 - omega) ** 2 / v - np.log(r), -np.inf)
            parts.append((lw, z1))
    top = np.max([p[0] for p in parts], axis=0)
    num = den = 0.0
    for lw, z1 in parts:
        w = np.exp(lw - top)
        num = num + w * z1
        den = den + w
    return (num / den - omega) / v


def staircase_m1(channel, alpha, *, n_mc=40000, max_iter=2000, side_info=1e-8, rng_seed=3, Q0=None):
    """1-D SE for m1 on Q = m e1 e1^T (the perp block stays 0 exactly), Monte Carlo with common random
    numbers (antithetic) on the closed-form effective channel `_m1_gout`: returns m1."""
    rng = np.random.default_rng(rng_seed)
    half = n_mc // 2
    xi = rng.standard_normal(half)
    u = rng.standard_normal(half)
    s = np.where(rng.random(half) < 0.5, 1.0, -1.0)
    xi, u, s = np.concatenate([xi, -xi]), np.concatenate([u, -u]), np.concatenate([s, s])
    m = 1e-4 if Q0 is None else Q0
    for _ in range(max_iter):
        v = max(1.0 - m, 1e-12)
        om = np.sqrt(m) * xi
        y = (om + np.sqrt(v) * u) ** 2 + s
        mh = alpha * np.mean(_m1_gout(y, om, v) ** 2) + side_info
        new = min(mh / (1 + mh), 1 - 1e-9)
        if abs(new - m) < 1e-7 or new > 0.995:
            return new
        m = new
    return m


def m1_perfect(channel, a):
    """The perfect-recovery bisection's predicate of z1^2 + sign(z1 z2 z3) at one alpha: m1 > 0.99."""
    return bool(staircase_m1(channel, a) > 0.99)


# ---------------------------------------------------------------------------------------------
# committee sum_k sign z_k
E_COMMITTEE = np.ones(3) / np.sqrt(3)


_BRANCH_CACHE = {}


def committee_branch_m(channel, alpha, *, n_gh=40, tol=1e-10, max_iter=2000, m0=None):
    """m_par(alpha) of the non-specialised branch Q = m e e^T (1-D SE, exact labels, 1-D GH); the fixed
    point iteration is warm-started at the cached value of the nearest alpha (the fixed point is
    unique on this branch) and accelerated by a safeguarded secant step."""
    key = (channel.name, n_gh, tol)
    cache = _BRANCH_CACHE.setdefault(key, {})
    if alpha in cache:
        return cache[alpha]
    if m0 is None:
        m0 = cache[min(cache, key=lambda a: abs(a - alpha))] if cache else 1e-3
    e = E_COMMITTEE
    x, w = gauss_hermite(n_gh)
    labels = channel.label_values().astype(float)

    def mhat(m):
        V = np.eye(3) - m * np.outer(e, e)
        om = np.sqrt(m) * x[:, None] * e[None, :]
        tot = 0.0
        for lab in labels:
            logZ, mean, _ = channel.posterior(np.full(len(x), lab), om, V)
            g = (mean - om) @ np.linalg.inv(V).T
            tot += np.sum(w * np.exp(logZ) * (g @ e) ** 2)
        return alpha * tot

    def h(m):
        mh = mhat(m)
        return mh / (1 + mh)

    m, prev = m0, None
    for _ in range(max_iter):
        new = h(m)
        if abs(new - m) < tol:
            m = new
            break
        r = new - m
        if prev is not None and prev[1] != r:
            cand = m - r * (m - prev[0]) / (r - prev[1])  # secant on h(m) - m
            prev = (m, r)
            m = cand if 0.0 < cand < 1.0 and abs(cand - new) < 10 * abs(r) else new
        else:
            prev = (m, r)
            m = new
    cache[alpha] = m
    return m


def committee_lambda_perp(channel, m, n_gh=40):
    """lambda_perp(m) = E_{xi,y}[(c - 1)^2], c = E[|z_perp|^2 | y, omega] / 2 (G_perp = (c-1) P_perp)."""
    e = E_COMMITTEE
    Pp = np.eye(3) - np.outer(e, e)
    x, w = gauss_hermite(n_gh)
    V = np.eye(3) - m * np.outer(e, e)
    om = np.sqrt(m) * x[:, None] * e[None, :]
    tot = 0.0
    for lab in channel.label_values().astype(float):
        logZ, _, second = channel.posterior(np.full(len(x), lab), om, V)
        c = 0.5 * np.einsum("ij,nji->n", Pp, second)
        tot += np.sum(w * np.exp(logZ) * (c - 1) ** 2)
    return tot


def committee_stability(channel, alpha_hi=40.0):
    """(alpha_spec by stability, the lower end 1 / lambda_perp(0) of its search): root of
    alpha lambda_perp(m_par(alpha)) = 1 (brentq on [lo / 2, alpha_hi]; inf if none up to alpha_hi)."""
    def f(a):
        return a * committee_lambda_perp(channel, committee_branch_m(channel, a)) - 1.0

    lo = 1.0 / committee_lambda_perp(channel, 0.0)
    if f(alpha_hi) < 0:
        return np.inf, lo
    return optimize.brentq(f, 0.5 * lo, alpha_hi, xtol=1e-6, rtol=1e-8), lo


def committee_grows(channel, a, delta=1e-5, steps=3):
    """The specialisation bisection's predicate at one alpha: SE on the permutation-invariant family
    Q = m e e^T + delta Pp (closed under the SE map), from the branch fixed point m_par(a): learned iff
    the perp block grows over `steps` steps. Rotated rule: 40 GH nodes along e (the branch rule), the
    2-point rule (+-1, weight 1/4) in the perp plane, exact to O(delta) for the perp block (odd terms
    cancel)."""
    e = E_COMMITTEE
    Pp = np.eye(3) - np.outer(e, e)
    x, w = gauss_hermite(40)
    F = np.linalg.svd(Pp)[0][:, :2]  # orthonormal basis of the perp plane
    pm = np.array([1.0, -1.0])
    nodes = [(xi, a1, a2, wi / 4) for xi, wi in zip(x, w) for a1 in pm for a2 in pm]
    X3 = np.array([[n[0], n[1], n[2]] for n in nodes])
    Wn = np.array([n[3] for n in nodes])
    m = committee_branch_m(channel, a)
    d = delta
    tops = [d]
    for _ in range(steps):
        Q = m * np.outer(e, e) + d * Pp
        V = np.eye(3) - Q
        om = np.sqrt(m) * X3[:, :1] * e[None, :] + np.sqrt(d) * X3[:, 1:] @ F.T
        Vi = np.linalg.inv(V)
        Qh = np.zeros((3, 3))
        for lab in channel.label_values().astype(float):
            logZ, mean, _ = channel.posterior(np.full(len(Wn), lab), om, V)
            g = (mean - om) @ Vi.T
            Qh += np.einsum("n,ni,nj->ij", Wn * np.exp(logZ), g, g)
        Qh *= a
        Qn = Qh @ np.linalg.inv(np.eye(3) + Qh)
        m = float(e @ Qn @ e)
        d = 0.5 * np.trace(Pp @ Qn @ Pp)
        tops.append(d)
    return bool(np.all(np.diff(tops) > 0))


# ---------------------------------------------------------------------------------------------
# the staircase as a graph of tasks (threshold method version 2)
def stage_work(channel, what, *, alpha=None, alpha_hi=20.0, side_info=1e-12):
    """One work of a threshold point. "stability": every stability value of the staircase (the trivial
    subspace; then the committee's specialisation root, or F's top eigenvalue and easy subspace, and for
    z1^2 + sign(z1 z2 z3) the sign(z2 z3) threshold). A probe at `alpha`: "easy", "sign2" (the easy
    bisection's predicate of the channel, of sign(z2 z3)), "m1" (z1's perfect recovery), "committee"
    (growth of the perp block). The committee's branch solver warm-starts from its per-process cache, so
    the works that use it start from an empty cache: a work's result does not depend on what ran before
    it in the same process (version 1 warm-started the bisection from the stability root's evaluations;
    the fixed points agree to the solver's tol, 1e-10)."""
    if what in ("stability", "committee"):
        _BRANCH_CACHE.clear()
    if what == "easy":
        return easy_learned(channel, alpha, side_info)
    if what == "sign2":
        return easy_learned(SignZ1Z2(), alpha, side_info)
    if what == "m1":
        return m1_perfect(channel, alpha)
    if what == "committee":
        return committee_grows(channel, alpha)
    if what != "stability":
        raise ValueError(f"unknown threshold work {what!r}")
    P_T, _ = trivial_subspace(channel)
    if np.trace(P_T) > 0.5:
        out = {"trivial": P_T}
        if channel.name == "committee3":
            out["committee"] = committee_stability(channel, max(alpha_hi, 40.0))
        return out
    a_c, P_easy, _ = easy_threshold(channel)
    out = {"trivial": None, "easy": (a_c, P_easy)}
    if channel.name == "staircase" and np.isfinite(a_c):
        out["a_perp"] = easy_threshold(SignZ1Z2())[0]
    return out


def staircase_route(channel, make, *, alpha_lo=0.05, alpha_hi=20.0, rtol=1e-3, side_info=1e-12, bisection=True,
                    k=4):
    """The stages of the grand staircase (a route, core/search.py): the "stability" work, then the SE
    bisections side by side, each a k-section (`section_search`) started near its stability value when
    there is one (probes at the guess and guess (1 + 5%), (1 - 5%), (1 + 10%)), valued lo if learned at lo
    and inf if not at hi. `make(what, **kwargs)` -> (fn, kwargs) of the work computing
    `stage_work(channel, what, **kwargs)`. Returns the list of `Stage`s.

    The stages: the trivial subspace (learned at alpha = 0); for committee3 then the specialisation,
    alpha lambda_perp(m_par(alpha)) = 1 by stability (`committee_stability`) and by the growth of the perp
    block from the branch fixed point (`committee_grows`). Otherwise the easy stage (or a hard one); for
    z1^2 + sign(z1 z2 z3) then z1's first-order jump to perfect recovery at alpha_perf (the 1-D SE,
    `m1_perfect`), after which (z2, z3) given z1 is exactly the sign(z2 z3) channel, alpha_perp = 1 /
    lambda_max(F_sign2) (= pi^2/4): the (z2, z3) block is learned at max(alpha_perf, alpha_perp). norm2 in
    p = 3 has no g_out within the quadrature budget: its bisection is left NaN."""
    p = channel.p
    st = yield from single(Work("stability", *make("stability", alpha_hi=alpha_hi)))

    def search(what, lo, hi, tol, guess=None):
        return section_search(what, lambda a: make(what, alpha=a, side_info=side_info), lo, hi, tol, k,
                              guess=guess, true_at_lo=lo, false_at_hi=np.inf)

    if st["trivial"] is not None:
        stages = [Stage(KIND_TRIVIAL, 0.0, 0.0, st["trivial"])]
        if "committee" in st:
            a_s, lo = st["committee"]
            a_b = np.nan
            if bisection and np.isfinite(a_s):
                a_b = (yield from search("committee", 0.5 * lo, max(alpha_hi, 40.0), rtol, guess=a_s))[0]
            stages.append(Stage(KIND_EASY, a_s, a_b, np.eye(3)))
        return stages
    a_c, P_easy = st["easy"]
    if not np.isfinite(a_c):
        return [Stage(KIND_HARD, np.inf, np.inf, np.zeros((p, p)))]
    can = bisection and not (channel.name == "norm2" and channel.p > 2)
    routes = {}
    if can:
        routes["easy"] = search("easy", alpha_lo, alpha_hi, rtol, guess=a_c)
    if channel.name == "staircase":
        routes["m1"] = search("m1", 0.5, alpha_hi, max(rtol, 2e-3))
        if bisection:
            routes["sign2"] = search("sign2", 0.5, alpha_hi, rtol, guess=st["a_perp"])
    found = dict(zip(routes, [value for value, _, _ in (yield from side_by_side(routes.values()))]))
    stages = [Stage(KIND_EASY, a_c, found.get("easy", np.nan), P_easy)]
    if channel.name == "staircase":
        a_perf, a_perp = found["m1"], st["a_perp"]
        a_perp_b = found.get("sign2", np.nan)
        kind = KIND_EASY if a_perp > a_perf else KIND_FIRST_ORDER
        stages += [Stage(KIND_FIRST_ORDER, a_perf, a_perf, P_easy),
                   Stage(kind, max(a_perf, a_perp), max(a_perf, a_perp_b), np.eye(3))]
    elif np.trace(P_easy) < p - 0.5:
        stages.append(Stage(KIND_HARD, np.inf, np.inf, P_easy))
    return stages
