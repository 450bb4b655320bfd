"""Thresholds of BSR: alpha_PR(rho, beta) two ways (closed form, bisection on the SE error, within 1%), and the
minimal nuclear-norm threshold alpha_MNNE against the spec's numbers (§A4, §8b)."""

import pytest

from seqphase.core.bsr import thresholds as th
from seqphase.core.errors import ParameterError
from seqphase.core.models import drive
from seqphase.core.search import relative_gap


def test_closed_form():
    assert th.alpha_pr(0.2, 1.0) == pytest.approx(0.36, abs=1e-15)  # spec §8b
    # the last alpha with MMSE > 0 in the beta = 1 Fig1 files (spec §A5 check 2)
    assert [round(th.alpha_pr(r, 1.0), 12) for r in (0.1, 0.2, 0.5)] == [0.19, 0.36, 0.75]
    assert th.alpha_pr(1.0, 1.0) == 1.0 and th.alpha_pr(2.0, 1.0) == 1.0 and th.alpha_pr(1.5, 2.0) == 1.0
    assert th.alpha_pr(0.5, 2.0) == pytest.approx(0.5 * 2.5 / 2.0, abs=1e-15)
    # beta < 1 is the same matrix transposed: (rho, beta) = (r/d, L/d) and (r/L, d/L) = (rho/beta, 1/beta)
    for rho, beta in [(0.1, 0.5), (0.3, 0.4), (0.05, 0.2)]:
        assert th.alpha_pr(rho, beta) == pytest.approx(th.alpha_pr(rho / beta, 1.0 / beta), rel=1e-14)
    # alpha_bar units: 1 - rho/(1 + beta) (rho <= 1); beta = inf: min(rho, 1)
    assert th.alpha_bar_pr(0.2, 2.0) == pytest.approx(1 - 0.2 / 3, rel=1e-14)
    assert th.alpha_pr_large_beta(0.3) == 0.3 and th.alpha_pr_large_beta(3.0) == 1.0
    with pytest.raises(ParameterError, match="rho"):
        th.alpha_pr(0.0, 1.0)
    with pytest.raises(ParameterError, match="beta"):
        th.alpha_pr(0.2, -1.0)


def test_mnne_spec_targets():
    """The notebook's markers (spec §A4, printed to 7 decimals: half a unit of the last digit) and the rho -> 0
    limit in alpha_bar units, 2 (1 + sqrt(beta)/(1 + beta)), approached slowly (spec: 2.77 at rho = 1e-3, 2.985
    at 1e-6, printed to 2-3 digits)."""
    assert abs(th.alpha_mnne(0.2, 1.0) - 0.5716899) < 5e-8
    assert abs(th.alpha_mnne(0.5, 1.0) - 0.9054173) < 5e-8
    for rho, bar in [(1e-3, 2.77), (1e-6, 2.985)]:
        assert abs(th.alpha_mnne(rho, 1.0) / (2 * rho) - bar) < 5e-3
    assert th.alpha_mnne(1.0, 1.0) == 1.0 and th.alpha_mnne(2.0, 3.0) == 1.0  # full rank: least squares


@pytest.mark.parametrize("rho, beta", [(0.05, 1.0), (0.2, 1.0), (0.5, 1.0), (0.9, 1.0), (0.2, 2.0), (0.5, 5.0),
                                       (0.1, 100.0)])
def test_mnne_above_bayes_and_below_least_squares(rho, beta):
    """alpha_PR < alpha_MNNE < 1 for 0 < rho < 1: the convex program is sub-optimal (spec §A4)."""
    assert th.alpha_pr(rho, beta) < th.alpha_mnne(rho, beta) < 1.0


def test_mnne_transpose_symmetry():
    """Swapping d and L is the same problem: (rho, beta) = (0.2, 2) is (r/L, d/L) = (0.1, 0.5)."""
    assert th.alpha_mnne(0.1, 0.5) == pytest.approx(th.alpha_mnne(0.2, 2.0), rel=1e-12)


@pytest.mark.parametrize("rho, beta", [pytest.param(0.1, 1.0, marks=pytest.mark.slow), (0.5, 1.0), (1.0, 1.0),
                                       pytest.param(2.0, 1.0, marks=pytest.mark.slow), (0.2, 2.0),
                                       pytest.param(0.5, 5.0, marks=pytest.mark.slow), (0.1, 0.5)])
def test_two_ways_within_one_percent(rho, beta):
    """The error vanishes linearly at alpha_PR (|dMMSE/dalpha| ~ 0.3-2 there), so the bisection at error < 1e-4 sits
    below the closed form by ~1e-4 (measured in docs/validation/bsr.md); the issue asks for 1%."""
    closed = th.alpha_pr(rho, beta)
    bisection = drive(th.alpha_pr_bisection_route(rho, beta, rtol=1e-7))[0]
    assert bisection <= closed * (1 + 1e-7)
    assert relative_gap(closed, bisection) < 0.01
