"""Perfect-recovery threshold alpha_PR(kappa) two ways (closed form, bisection on the SE error), within 1%."""

import pytest

from seqphase.core.models import drive
from seqphase.core.quadratic import thresholds as th
from seqphase.core.search import relative_gap


def test_closed_form():
    assert th.alpha_pr(0.5) == 0.375 and th.alpha_pr(0.2) == 0.18
    assert th.alpha_pr(1.0) == 0.5 and th.alpha_pr(5.0) == 0.5


@pytest.mark.parametrize("kappa", [0.1, 0.5, 1.0, 2.0])
def test_two_ways_within_one_percent(kappa):
    """The SE error near alpha_PR is ~ (alpha_PR - alpha) (kappa != 1) or ~ (alpha_PR - alpha)^{3/2} (kappa = 1,
    hard edge), so the bisection at error < 1e-4 sits just below the closed form: measured 3.4e-5 (0.1),
    1.3e-4 (0.5), 2.7e-3 (1), 2.0e-4 (2) relative."""
    closed = th.alpha_pr(kappa)
    bis = drive(th.alpha_pr_bisection_route(kappa, rtol=1e-7))[0]
    assert bis <= closed * (1 + 1e-7)
    assert relative_gap(closed, bis) < 0.01
