import math

import numpy as np
import pytest

from seqphase.core.glm.channels import AbsChannel, LinearChannel, SignChannel, SquareChannel
from seqphase.core.glm.priors import GaussianPrior, RademacherPrior
from seqphase.core.glm.se import glm_se, glm_se_branches
from seqphase.core.numerics import fixed_point


def test_fixed_point_generic_shapes():
    # x <- cos(x) elementwise on a 2x2 array (p x p SE will reuse it), with damping
    fp = fixed_point(np.cos, np.zeros((2, 2)), damping=0.3, tol=1e-13, max_iter=500)
    assert fp.converged and fp.x.shape == (2, 2)
    np.testing.assert_allclose(fp.x, 0.7390851332151607, rtol=1e-12)
    assert fp.residuals.shape == (fp.n_iter,)


@pytest.mark.parametrize("alpha,delta,expected", [(0.5, 0.1, 0.574166), (2.0, 0.1, 0.084429),
                                                  (1.0, 0.01, 0.095125)])
def test_linear_gaussian_closed_form(alpha, delta, expected):
    E = (-(delta + alpha - 1) + math.sqrt((delta + alpha - 1) ** 2 + 4 * delta)) / 2
    st = glm_se(GaussianPrior(), LinearChannel(delta), alpha, tol=1e-14)
    assert st.converged
    assert st.mse == pytest.approx(E, abs=1e-8)  # SE is exact here: only the fixed-point tolerance
    assert st.mse == pytest.approx(expected, abs=1e-6)  # spec value rounded to 6 digits


@pytest.mark.parametrize("alpha,m", [(0.5, 0.28033), (1.0, 0.48626), (2.0, 0.72830), (5.0, 0.93206),
                                     (10.0, 0.98135)])
def test_gaussian_perceptron(alpha, m):
    st = glm_se(GaussianPrior(), SignChannel(), alpha)
    assert st.overlap == pytest.approx(m, abs=1e-4)  # the spec table is rounded to 5 digits
    # Bayes-optimal test error = arccos(sqrt m)/pi, through the channel's prediction_error
    assert st.gen_error == pytest.approx(math.acos(math.sqrt(st.overlap)) / math.pi, abs=1e-10)
    if alpha == 1.0:
        assert st.gen_error == pytest.approx(0.25437, abs=1e-4)


@pytest.mark.parametrize("alpha,m", [(0.5, 0.29309), (1.0, 0.56072)])
def test_binary_perceptron_low_branch(alpha, m):
    st = glm_se(RademacherPrior(), SignChannel(), alpha)
    assert st.overlap == pytest.approx(m, abs=1e-3)


def test_binary_perceptron_branches():
    b = glm_se_branches(RademacherPrior(), SignChannel(), 1.4)
    assert b["amp"].overlap == pytest.approx(0.78970, abs=1e-3)
    assert b["informed"].mse < 1e-10
    # perfect branch: Phi -> -log 2 (entropy of the binary prior), up to O(sqrt(v_min)) terms
    assert b["informed"].free_entropy == pytest.approx(-math.log(2), abs=1e-5)
    assert b["bayes"] is b["informed"]  # 1.4 > alpha_IT = 1.2447
    b1 = glm_se_branches(RademacherPrior(), SignChannel(), 1.0)
    assert b1["bayes"] is b1["amp"]


@pytest.mark.parametrize("phase_channel", [AbsChannel(), SquareChannel()], ids=repr)
def test_phase_retrieval_se(phase_channel):
    channel = phase_channel
    # only the m=0.55 / 1.0 points: both channels carry the same information, hence equal SE
    for alpha, m in ((0.55, 0.0231), (1.0, 0.4763)):
        st = glm_se(GaussianPrior(), channel, alpha)
        assert st.overlap == pytest.approx(m, abs=1e-3)
    # m = 0 is an exact fixed point of even channels
    st0 = glm_se(GaussianPrior(), channel, 1.0, start=1.0)
    assert st0.overlap == 0.0


def test_v_clamped_perfect_recovery():
    st = glm_se(RademacherPrior(), SignChannel(), 2.0, start="informed")
    assert st.mse == pytest.approx(1e-12) and np.isfinite(st.free_entropy)
