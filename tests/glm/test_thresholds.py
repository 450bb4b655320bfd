import math

import pytest

from seqphase.core.glm.channels import AbsChannel, LinearChannel, SignChannel, SquareChannel
from seqphase.core.glm.priors import GaussBernoulliPrior, GaussianPrior, RademacherPrior
from seqphase.core.glm.thresholds import perfect_recovery_spinodal, weak_recovery_stability
from seqphase.core.models import get_model


def threshold(prior, channel, transition, rho=1.0, **settings):
    """One point of the threshold method (its graph run in this process): the stability value, the SE
    bisection (a k-section of probes) and the information-theoretic crossing."""
    method = get_model("glm").methods["threshold"]
    # k = 2: the fewest probes a round (the values agree with any k within rtol, tests/core/test_search.py)
    settings = {name: param.default for name, param in method.settings.items()} | {"k": 2} | settings
    params = {"prior": prior, "channel": channel, "rho": rho, "delta": 0.0, "transition": transition}
    return method.run(params, settings, None)


@pytest.mark.parametrize("phase_channel", [AbsChannel(), SquareChannel()], ids=repr)
def test_phase_retrieval_weak_recovery_stability(phase_channel):
    channel = phase_channel
    assert weak_recovery_stability(GaussianPrior(), channel) == pytest.approx(0.5, abs=1e-6)


def test_weak_recovery_trivial():
    assert weak_recovery_stability(GaussianPrior(), SignChannel()) == 0.0
    assert weak_recovery_stability(GaussianPrior(), LinearChannel(0.1)) == 0.0


def test_phase_retrieval_weak_recovery_bisection():
    # < 1%: the criterion's bias is ~ alpha_c log(cut/lambda)/max_iter = 0.5*13.8/3000 = 0.23%
    # upward (see `weak_recovered`), plus half the final bracket (the midpoint is returned): rtol 7e-3 gives
    # <= 0.35%, 0.6% in all (the probes nearest alpha_c crawl for ~3000 iterations each; rtol 2e-3 costs
    # a round more of them).
    a = threshold("gaussian", "abs", "weak", alpha_lo=0.4, alpha_hi=0.6, rtol=7e-3)["alpha_bisection"]
    assert a == pytest.approx(0.5, rel=1e-2)
    assert a >= 0.499  # the bias is upward


def test_phase_retrieval_perfect_recovery_spinodal():
    assert perfect_recovery_spinodal(GaussianPrior(), AbsChannel()) == pytest.approx(1.1288, abs=2e-3)


def test_binary_perceptron_thresholds():
    prior, ch = RademacherPrior(), SignChannel()
    # 1e-3: spec table precision (1.4926 / 1.2447)
    assert perfect_recovery_spinodal(prior, ch) == pytest.approx(1.4926, abs=1e-3)
    perfect = threshold("rademacher", "sign", "perfect", alpha_lo=1.4, alpha_hi=1.6, rtol=1e-4, it_threshold=False)
    assert perfect["alpha_bisection"] == pytest.approx(1.4926, abs=1e-3)
    crossing = threshold("rademacher", "sign", "perfect", alpha_lo=1.0, alpha_hi=1.45, it_rtol=1e-4)
    assert crossing["alpha_it"] == pytest.approx(1.2447, abs=1e-3)


@pytest.mark.parametrize("rho,alpha", [
    (0.5, 0.6857),
    # 14 s; the same prior/channel route (spinodal and bisection against the spec) is checked at rho = 0.5
    pytest.param(0.25, 0.4205, marks=pytest.mark.slow),
])
def test_compressed_sensing_bp_threshold(rho, alpha):
    spin = perfect_recovery_spinodal(GaussBernoulliPrior(rho), LinearChannel(0.0))
    assert spin == pytest.approx(alpha, abs=2e-3)
    out = threshold("gauss-bernoulli", "linear", "perfect", rho=rho, alpha_lo=alpha - 0.05, alpha_hi=alpha + 0.05,
                    rtol=2e-4, it_threshold=False)
    bis = out["alpha_bisection"]
    assert out["alpha_stability"] == spin  # the point's stability route is the spinodal
    assert bis == pytest.approx(alpha, abs=2e-3)
    assert bis == pytest.approx(spin, abs=5e-4)  # the two methods agree beyond the spec's rounding


def test_no_crossing_gives_nan():
    assert math.isnan(threshold("gaussian", "sign", "perfect", alpha_lo=0.5, alpha_hi=1.0)["alpha_it"])
