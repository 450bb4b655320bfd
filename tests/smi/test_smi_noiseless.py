"""The noiseless limit of the 2-layer SE (core/smi/noiseless.py): the eps -> 0 extrapolation on series
with known limits, the counting identity m_1 + m_2 = T of the linearised SE at Q = I, the
perfect-recovery threshold from it, and the full eps = 0 SE map against its linearisation."""

import numpy as np
import pytest

from seqphase.core.smi import noiseless as nl
from seqphase.core.smi import se as sse
from seqphase.core.smi.channels import AttentionChannel


def test_extrapolate_power_law_goes_to_one():
    eps = np.array([1e-3, 1e-4, 1e-5, 1e-6])
    q = 1.0 - 40.0 * eps ** 0.85
    ex = nl.extrapolate(eps, q)
    assert ex.form == "power" and ex.q0 == 1.0
    assert abs(ex.gamma - 0.85) < 1e-10 and abs(ex.a - 40.0) < 1e-8


def test_extrapolate_plateau_is_linear_in_eps():
    """A plateau below 1 (1 - q does not vanish: gamma ~ 0) is extrapolated linearly; with a quadratic term
    the error bar (the last step) covers the true limit."""
    eps = np.array([1e-3, 1e-4, 1e-5, 1e-6])
    q = 0.7 - 30.0 * eps + 2e4 * eps ** 2
    ex = nl.extrapolate(eps, q)
    assert ex.form == "linear"
    assert abs(ex.q0 - 0.7) <= ex.q0_err + 1e-12


def test_extrapolate_refuses_a_creeping_series():
    """Q11 rising by a constant step per decade of eps (the SE at alpha = 0.9: 0.392, 0.489, 0.593, 0.705 for
    eps = 1e-3 .. 1e-6) is neither a power law to 1 nor linear in eps: no limit is claimed."""
    eps = np.array([1e-3, 1e-4, 1e-5, 1e-6])
    ex = nl.extrapolate(eps, 0.39 - 0.105 * np.log10(eps / 1e-3))
    assert ex.form == "none" and np.isnan(ex.q0)


@pytest.fixture(scope="module")
def ch_draws():
    return AttentionChannel(2, 1.0), sse.Draws(2, 2, 512, np.random.default_rng(5))


def test_counting_identity(ch_draws):
    """m_1 + m_2 = T = 2 (the posterior given h fixes 2 of the 4 directions of Z) at V -> 0, for ratios
    V11 / V22 from 1e-2 to 1e2; each m_a -> T as its layer becomes the less precise one. 4 s.e."""
    ch, draws = ch_draws
    m1 = []
    for r in (1e-2, 1.0, 1e2, 1e4):
        m, se = nl.linear_response(ch, 1e-6 * np.diag([np.sqrt(r), 1 / np.sqrt(r)]), draws)
        assert abs(m.sum() - 2.0) < 4 * np.hypot(*se), (r, m, se)
        m1.append(m[0])
    assert np.all(np.diff(m1) > 0) and m1[0] < 0.01 and m1[-1] > 1.5  # layer 1 takes more as it gets less precise


def test_perfect_recovery_threshold_and_the_se_map(ch_draws):
    """alpha_PR = 1/m_1(r*) within 3 s.e. of p/T = 1 (the counting identity); the full eps = 0 SE map started
    at Q = I - v (v at the ratio r*) contracts 1 - Q11 by 1/(alpha m_1(r*)) per step, to 1e-3 relative
    (same draws; the map's v/(v + alpha m) differs from v/(alpha m) by O(v) = 1e-5)."""
    ch, draws = ch_draws
    pr = nl.perfect_recovery(ch, draws)
    assert abs(pr.alpha - 1.0) < 3 * pr.alpha_se, pr
    assert abs(pr.m[0] - pr.m[1]) < 0.01 * pr.m[0]
    for alpha in (0.9, 1.2):
        f = nl.contraction(ch, alpha, draws, pr.ratio)
        assert abs(f[0] * alpha * pr.m[0] - 1.0) < 1e-3, (alpha, f, pr.m)
