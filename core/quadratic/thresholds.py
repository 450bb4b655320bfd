"""Perfect-recovery threshold of the noiseless quadratic network, two independent ways (spec §B5).

* Closed form (counting): alpha_PR = kappa - kappa^2/2 (kappa < 1), 1/2 (kappa >= 1): the degrees of freedom
  per d^2 of a rank-m PSD d x d matrix (md - m(m - 1)/2) or of a full symmetric one (d^2/2), one equation per
  sample. In the SE it is the limit alpha(t -> 0) = slope / 2 of the parametric curve (se.py).
* Bisection: the smallest alpha at which the SE error (`se.bo_state`, root-finding on the curve with the RIE
  quadrature) falls below `mse_cut`. Near alpha_PR the error is ~ (alpha_PR - alpha) (kappa != 1) or
  ~ (alpha_PR - alpha)^{3/2} (kappa = 1, the hard edge of Marchenko-Pastur), so the bisection sits below the
  closed form by a small relative amount (measured: tests/quadratic/test_quadratic_thresholds.py).
There is no perfect recovery with label noise (delta > 0): the error stays > 0 for every alpha.
"""

from __future__ import annotations

import math

from seqphase.core.numerics import bisect_monotone
from seqphase.core.quadratic import se
from seqphase.core.quadratic.channels import check_kappa


def alpha_pr(kappa):
    """alpha_PR(kappa) in closed form."""
    kappa = check_kappa(kappa)
    return kappa - kappa * kappa / 2.0 if kappa < 1.0 else 0.5


def alpha_pr_bisection(kappa, *, mse_cut=1e-4, rtol=1e-9):
    """Smallest alpha with noiseless SE error < mse_cut (paper units), by bisection on [1e-3 alpha_PR, 2]."""
    kappa = check_kappa(kappa)

    def recovered(alpha):
        return se.bo_state(alpha, kappa, 0.0).mse < mse_cut

    return bisect_monotone(recovered, 1e-3 * alpha_pr(kappa), 2.0, rtol)


def relative_gap(a, b):
    if not (math.isfinite(a) and math.isfinite(b)) or a == 0:
        return math.nan
    return abs(a - b) / abs(a)
