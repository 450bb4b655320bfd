import math

import pytest

from seqphase.core.glm.channels import AbsChannel, LinearChannel, SignChannel, SquareChannel
from seqphase.core.glm.priors import GaussBernoulliPrior, GaussianPrior, RademacherPrior
from seqphase.core.glm.thresholds import (information_theoretic_threshold, perfect_recovery_bisection,
                                      perfect_recovery_spinodal, weak_recovery_bisection,
                                      weak_recovery_stability)


@pytest.mark.parametrize("phase_channel", [AbsChannel(), SquareChannel()], ids=repr)
def test_phase_retrieval_weak_recovery_stability(phase_channel):
    channel = phase_channel
    assert weak_recovery_stability(GaussianPrior(), channel) == pytest.approx(0.5, abs=1e-6)


def test_weak_recovery_trivial():
    assert weak_recovery_stability(GaussianPrior(), SignChannel()) == 0.0
    assert weak_recovery_stability(GaussianPrior(), LinearChannel(0.1)) == 0.0


def test_phase_retrieval_weak_recovery_bisection():
    # < 1%: the criterion's bias is ~ alpha_c log(cut/lambda)/max_iter = 0.5*13.8/2000 = 0.35%
    # upward (see the docstring), plus half the final bracket (the midpoint is returned): rtol 7e-3 gives
    # <= 0.35%, 0.7% in all (the probes nearest alpha_c crawl for ~2000 iterations each; rtol 2e-3 costs
    # two more of them).
    a = weak_recovery_bisection(GaussianPrior(), AbsChannel(), alpha_lo=0.4, alpha_hi=0.6, rtol=7e-3,
                                max_iter=2000)
    assert a == pytest.approx(0.5, rel=1e-2)
    assert a >= 0.499  # the bias is upward


def test_phase_retrieval_perfect_recovery_spinodal():
    assert perfect_recovery_spinodal(GaussianPrior(), AbsChannel()) == pytest.approx(1.1288, abs=2e-3)


def test_binary_perceptron_thresholds():
    prior, ch = RademacherPrior(), SignChannel()
    # 1e-3: spec table precision (1.4926 / 1.2447)
    assert perfect_recovery_spinodal(prior, ch) == pytest.approx(1.4926, abs=1e-3)
    assert perfect_recovery_bisection(prior, ch, alpha_lo=1.4, alpha_hi=1.6, rtol=1e-4) == \
        pytest.approx(1.4926, abs=1e-3)
    assert information_theoretic_threshold(prior, ch, alpha_lo=1.0, alpha_hi=1.45, rtol=1e-4) == \
        pytest.approx(1.2447, abs=1e-3)


@pytest.mark.parametrize("rho,alpha", [
    (0.5, 0.6857),
    # 14 s; the same prior/channel route (spinodal and bisection against the spec) is checked at rho = 0.5
    pytest.param(0.25, 0.4205, marks=pytest.mark.slow),
])
def test_compressed_sensing_bp_threshold(rho, alpha):
    prior, ch = GaussBernoulliPrior(rho), LinearChannel(0.0)
    spin = perfect_recovery_spinodal(prior, ch)
    assert spin == pytest.approx(alpha, abs=2e-3)
    bis = perfect_recovery_bisection(prior, ch, alpha_lo=alpha - 0.05, alpha_hi=alpha + 0.05,
                                     rtol=2e-4)
    assert bis == pytest.approx(alpha, abs=2e-3)
    assert bis == pytest.approx(spin, abs=5e-4)  # the two methods agree beyond the spec's rounding


def test_no_crossing_gives_nan():
    assert math.isnan(information_theoretic_threshold(GaussianPrior(), SignChannel(), alpha_lo=0.5,
                                                      alpha_hi=1.0))
