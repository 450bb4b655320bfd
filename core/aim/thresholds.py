"""Thresholds of the attention-indexed model, each computed two independent ways (spec aim.md §2.4).

* Counting (perfect-recovery) threshold of softmax and linear:
  - closed form: degrees of freedom of S per d^2 (2 rho - rho^2 for rho < 1, 1 for rho >= 1) over the
    independent scalar observations per sample k (T^2 + T - 2 softmax, T(T + 1) linear);
  - bisection: the smallest alpha at which the SE error (the parametric curve solved by root-finding,
    `se.closed_form_se`) falls below `mse_cut`. The SE error near alpha_c is ~ (alpha_c - alpha) (rho != 1)
    or ~ (alpha_c - alpha)^{3/2} (rho = 1), so the bisection sits below alpha_c by the relative amount
    1 - mmse(Delta_cut)/(slope Delta_cut) at mmse(Delta_cut) = mse_cut: ~1e-4 (rho = 0.5) to ~3e-3 (rho = 1)
    at the default cut 1e-4 (measured with the RIE quadrature). The cut is kept above the range
    Delta <~ 1e-4 where an RIE may switch to its small-noise asymptote (which is the closed form itself).
* Small-width weak recovery of hardmax (T = 2), alpha_bar = alpha/rho at rho -> 0:
  - closed form (spec §2.4): a = arcsin(1/3), B = 2/(pi + 2a) + 1/(pi - 2a); "paper" g_out
    alpha_bar_WR = pi/(6B) = 0.563267, "exact" 3/(8B) = 0.403411;
  - stability: 1/(2 E0) with E0 the SE bracket at q = 0, V = 1 by the SE's own quadrature;
  - bisection: the smallest alpha_bar at which the small-width fixed point (`se.small_width_hardmax`)
    has q > `overlap_cut`. Near the threshold q ~ (alpha_bar/alpha_bar_WR - 1)^2, so the bisection sits
    above it by ~ sqrt(overlap_cut) relative (1e-5 at the default 1e-10).
* Small-width softmax/linear: weak recovery at alpha_bar = 1/k and perfect recovery at 2/k (closed form).
"""

from __future__ import annotations

import math

from seqphase.core.aim import se
from seqphase.core.search import section_search


def counting_threshold(rho, T, channel):
    """alpha_c(rho, T) of softmax or linear (closed form)."""
    dof = 2.0 * rho - rho * rho if rho < 1.0 else 1.0
    return dof / se.counting_k(channel, T)


def counting_learned(alpha, rho, k, mse_cut):
    """The counting bisection's predicate at one alpha (one probe): the closed-form SE error (k observations
    a sample) is below mse_cut."""
    return bool(se.closed_form_se(alpha, rho, k).mse < mse_cut)


def counting_bisection_route(rho, T, channel, *, mse_cut=1e-4, rtol=1e-9, k=1):
    """Smallest alpha with SE error < mse_cut, by bisection on the closed-form SE over [1e-3/k_T, 2/k_T]
    (k_T observations a sample): a route of rounds of k probes (core/search.py, the bisection placement:
    the serial bisection's value whatever k). Returns (value, bracket ends); NaN outside the bracket."""
    k_t = se.counting_k(channel, T)
    return section_search("bisection", lambda a: (counting_learned, {"alpha": a, "rho": rho, "k": k_t,
                                                                    "mse_cut": mse_cut}),
                          1e-3 / k_t, 2.0 / k_t, rtol, k, placement="bisection")


def _hardmax_b():
    a = math.asin(1.0 / 3.0)
    return 2.0 / (math.pi + 2.0 * a) + 1.0 / (math.pi - 2.0 * a)


def weak_recovery_closed_form(gout):
    """Small-width hardmax alpha_bar_WR: pi/(6B) ("paper"), 3/(8B) ("exact")."""
    B = _hardmax_b()
    if gout == "paper":
        return math.pi / (6.0 * B)
    if gout == "exact":
        return 3.0 / (8.0 * B)
    raise ValueError(f"unknown hardmax_gout {gout!r}")


def weak_recovery_stability(gout):
    """1/(2 E0), E0 = the SE bracket at q = 0, V = 1 (the SE's quadrature)."""
    return 1.0 / (2.0 * se.hardmax_bracket(0.0, 1.0, gout))


def weak_recovered(alpha_bar, gout, overlap_cut):
    """The hardmax bisection's predicate at one alpha_bar (one probe): the small-width fixed point has
    q > overlap_cut."""
    return bool(se.small_width_hardmax(alpha_bar, gout)[1] > overlap_cut)


def weak_recovery_bisection_route(gout, *, overlap_cut=1e-10, rtol=1e-7, lo=0.05, hi=5.0, k=1):
    """Smallest alpha_bar at which the small-width hardmax fixed point has q > overlap_cut, by bisection
    on [lo, hi]: a route of rounds of k probes (as `counting_bisection_route`)."""
    return section_search("bisection", lambda a: (weak_recovered, {"alpha_bar": a, "gout": gout,
                                                                  "overlap_cut": overlap_cut}),
                          lo, hi, rtol, k, placement="bisection")


def small_width_softmax_thresholds(T, channel="softmax"):
    """(weak, perfect) recovery alpha_bar of the small-width softmax/linear: 1/k and 2/k."""
    k = se.counting_k(channel, T)
    return 1.0 / k, 2.0 / k
