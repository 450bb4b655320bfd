"""Perfect-recovery thresholds of noiseless bilinear sequence regression (spec rie_bsr_quadratic.md §A5, §A4).

* Closed form (counting): a rank-r d x L matrix has r (d + L - r) degrees of freedom, one equation per sample:
  alpha_PR = rho (1 + beta - rho) / beta for rho < min(1, beta), else 1 (full rank: no gain over least squares).
  In the SE it is the limit alpha(zeta -> 0) of the parametric curve (se.py), the small-noise slope of mmse_den.
  beta = inf: min(rho, 1). In alpha_bar = n / (r (d + L)) units: 1 - rho / (1 + beta) (rho <= 1).
* Bisection: the smallest alpha at which the Bayes-optimal SE error (`se.bo_state`, root-finding on the curve
  with the rectangular RIE) falls below `mse_cut`. The error vanishes linearly at alpha_PR, so the bisection
  sits below the closed form by ~ mse_cut / |dMMSE/dalpha| (measured: tests/bsr/test_bsr_thresholds.py).
* Minimal nuclear norm: alpha_MNNE(rho, beta), the Donoho-Gavish-Montanari transition (baselines.py).
There is no perfect recovery with label noise (delta > 0).
"""

from __future__ import annotations

from seqphase.core.bsr import baselines, se
from seqphase.core.bsr.channels import check_rho
from seqphase.core.search import section_search


def alpha_pr(rho, beta):
    """alpha_PR(rho, beta) in closed form (se.alpha_pr: one definition)."""
    return se.alpha_pr(rho, beta)


def alpha_pr_large_beta(rho):
    """beta = inf: alpha_PR = min(rho, 1)."""
    return min(check_rho(rho), 1.0)


def alpha_bar_pr(rho, beta):
    """alpha_PR in alpha_bar = n / (r (d + L)) units: alpha_PR beta / ((1 + beta) rho)."""
    return alpha_pr(rho, beta) * beta / ((1.0 + beta) * rho)


def recovered(alpha, rho, beta, mse_cut):
    """The bisection's predicate at one alpha (one probe): noiseless SE error < mse_cut."""
    return bool(se.bo_state(alpha, rho, beta, 0.0).mmse < mse_cut)


def alpha_pr_bisection_route(rho, beta, *, mse_cut=1e-4, rtol=1e-9, k=1):
    """Smallest alpha with noiseless SE error < mse_cut, by bisection on [1e-3 alpha_PR, 1.5]: a route of
    rounds of k probes (core/search.py, the bisection placement: the serial bisection's value whatever k).
    Returns (value, bracket ends); NaN if the bracket holds no transition."""
    return section_search("bisection", lambda a: (recovered, {"alpha": a, "rho": rho, "beta": beta,
                                                            "mse_cut": mse_cut}),
                          1e-3 * alpha_pr(rho, beta), 1.5, rtol, k, placement="bisection")


def alpha_mnne(rho, beta):
    """Minimal nuclear-norm perfect-recovery threshold (baselines.alpha_mnne)."""
    return baselines.alpha_mnne(rho, beta)
