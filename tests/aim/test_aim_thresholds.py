"""AIM thresholds (core/aim/thresholds.py): the counting alpha_c table of spec §2.4 and the small-width
hardmax weak-recovery thresholds, each two ways within 1%."""

import pytest

from seqphase.core.aim import thresholds as th
from seqphase.core.models import drive
from seqphase.core.search import relative_gap

# spec §2.4, softmax alpha_c, columns T = 2..6 (as printed: 3-5 significant digits)
TABLE = {
    0.1: ("0.0475", "0.019", "0.01056", "0.00679", "0.00475"),
    0.2: ("0.09", "0.036", "0.02", "0.01286", "0.009"),
    0.3: ("0.1275", "0.051", "0.02833", "0.01821", "0.01275"),
    0.5: ("0.1875", "0.075", "0.04167", "0.02679", "0.01875"),
    1.0: ("0.25", "0.1", "0.05556", "0.03571", "0.025"),
    2.0: ("0.25", "0.1", "0.05556", "0.03571", "0.025"),
}


@pytest.mark.parametrize("rho", sorted(TABLE))
def test_softmax_alpha_c_table(rho):
    for T, value in zip(range(2, 7), TABLE[rho]):
        half_unit = 0.5 * 10.0 ** -len(value.split(".")[1])  # the table's rounding
        assert abs(th.counting_threshold(rho, T, "softmax") - float(value)) <= half_unit * (1 + 1e-9)


def test_linear_alpha_c():
    assert th.counting_threshold(0.5, 2, "linear") == 0.125
    assert abs(th.counting_threshold(1.0, 2, "linear") - 1 / 6) < 1e-15


@pytest.mark.parametrize("channel", ["softmax", "linear"])
@pytest.mark.parametrize("rho, T", [(0.1, 2), (0.5, 3), (1.0, 2), (2.0, 6)])
def test_counting_threshold_two_ways(channel, rho, T):
    """Bisection on the SE error < 1e-4 sits below alpha_c by 1 - mmse(Delta)/(slope Delta) at mmse = 1e-4:
    3e-5 (rho = 0.1) ... 2.7e-3 (rho = 1, where mmse ~ Delta - c Delta^{3/2}); within 1% everywhere."""
    closed = th.counting_threshold(rho, T, channel)
    bis = drive(th.counting_bisection_route(rho, T, channel, rtol=1e-8))[0]
    assert bis <= closed * (1 + 1e-7)
    assert relative_gap(closed, bis) < 0.01


def test_weak_recovery_closed_forms():
    assert abs(th.weak_recovery_closed_form("paper") - 0.563267) < 5e-7
    assert abs(th.weak_recovery_closed_form("exact") - 0.403411) < 5e-7


@pytest.mark.parametrize("gout", ["exact", "paper"])
def test_weak_recovery_two_ways(gout):
    """Closed form = stability (the SE bracket at q = 0) to rounding; the bisection of the small-width fixed
    point at q > 1e-10 sits above by ~sqrt(1e-10) relative (q ~ (alpha_bar/alpha_bar_WR - 1)^2)."""
    closed = th.weak_recovery_closed_form(gout)
    assert abs(th.weak_recovery_stability(gout) / closed - 1) < 1e-12
    bis = drive(th.weak_recovery_bisection_route(gout, rtol=1e-4, lo=0.3, hi=0.7))[0]
    assert relative_gap(closed, bis) < 0.01
    assert bis >= closed * (1 - 1e-4)


def test_small_width_softmax_thresholds():
    assert th.small_width_softmax_thresholds(2) == (0.25, 0.5)
