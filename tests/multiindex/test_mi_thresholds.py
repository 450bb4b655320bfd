"""Closed-form thresholds of the multi-index spec (§2.2, §4) and stability-versus-bisection."""

import numpy as np
import pytest
from scipy import special

from seqphase.core.errors import ParameterError
from seqphase.core.models import drive
from seqphase.core.multiindex import se as mse
from seqphase.core.multiindex import thresholds as mth
from seqphase.core.multiindex.channels import make_channel
from seqphase.core.search import section_search


def staircase(channel, **settings):
    """The threshold point's graph (`mth.staircase_route`) run in this process on a channel object, at k = 2
    unless told (the fewest probes a round; the values agree with any k within rtol, tests/core/test_search.py)."""
    return drive(mth.staircase_route(channel, lambda what, **kw: (mth.stage_work, dict(kw, channel=channel, what=what)),
                                     **({"k": 2} | settings)))


def test_z1z2_threshold_closed_form():
    ch = make_channel("z1z2")
    a_c, P, K = mth.easy_threshold(ch)
    assert abs(a_c - 0.593751) < 1e-5
    assert np.allclose(P, np.eye(2), atol=1e-8)
    # spec: E a^2 with a = |y| K1/K0 - 1, p(y) = K0(|y|)/pi, by an independent 1-D log-quadrature
    s, w = np.polynomial.legendre.leggauss(400)
    s = -40 + (s + 1) * 22.5
    y = np.exp(s)
    a = y * special.k1(y) / special.k0(y) - 1
    Ea2 = 2 * np.sum(22.5 * w * y * special.k0(y) / np.pi * a**2)
    assert abs(1 / (1 + Ea2) - a_c) < 1e-7


def test_sign_z1z2_pi2_over_4():
    ch = make_channel("sign-z1z2")
    a_c, P, K = mth.easy_threshold(ch)
    assert abs(a_c - np.pi**2 / 4) < 1e-6
    eps = 0.01
    F = (K @ (eps * np.eye(2)).ravel()).reshape(2, 2)  # F(eps I) = (4/pi^2) eps I
    assert np.allclose(F, 4 / np.pi**2 * eps * np.eye(2), atol=1e-12)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_norm2_p_over_2(p):
    a_c, P, _ = mth.easy_threshold(make_channel("norm2", p))
    assert abs(a_c - p / 2) < 1e-10
    assert np.allclose(P, np.eye(p))


@pytest.mark.parametrize("name", ["square", "abs"])
def test_phase_retrieval_half(name):
    assert abs(mth.easy_threshold(make_channel(name))[0] - 0.5) < 1e-10


def test_sign_z1z2z3_hard():
    ch = make_channel("sign-z1z2z3")
    K = mth.k_matrix(ch, *ch.base_law())
    assert np.abs(K).max() < 1e-10
    stages = staircase(ch, bisection=False)
    assert stages[0].alpha_stability == np.inf and stages[0].kind == mth.KIND_HARD


def test_z1z2z3_two_methods():
    """alpha_c = 1/E[a^2], G = a(y) I: generic nested quadrature against a log-domain FFT of the
    product law (density of log|z| convolved three times)."""
    ch = make_channel("z1z2z3")
    a_c, P, K = mth.easy_threshold(ch)
    assert np.allclose(P, np.eye(3), atol=1e-8)
    h = 0.01
    s = np.arange(-40, 6, h)
    f = 2 * np.exp(s) * np.exp(-0.5 * np.exp(2 * s)) / np.sqrt(2 * np.pi)  # density of log|z|
    f2 = np.exp(2 * s) * f
    N = 4 * s.size

    def conv(a, b, c):
        return np.fft.irfft(np.fft.rfft(a, N) * np.fft.rfft(b, N) * np.fft.rfft(c, N), N) * h * h

    dens = conv(f, f, f)[: 3 * s.size]
    num = conv(f2, f, f)[: 3 * s.size]
    mask = dens > 1e-300
    Ea2 = np.sum(h * (num[mask] ** 2 / dens[mask] - 2 * num[mask] + dens[mask]))
    assert abs(1 / Ea2 - a_c) < 1e-5 * a_c


def test_one_step_trivial_values():
    sign = make_channel("committee3")
    T = mth.trivial_matrix(sign)
    e = np.ones(3) / np.sqrt(3)
    assert np.allclose(T, 2 / np.pi * np.outer(e, e), atol=1e-12)
    P, _ = mth.trivial_subspace(sign)
    assert np.allclose(P, np.outer(e, e), atol=1e-10)
    for name in ("z1z2", "sign-z1z2", "sign-z1z2z3", "staircase"):
        assert np.abs(mth.trivial_matrix(make_channel(name))).max() < 1e-10


def test_committee_perp_and_branch():
    ch = make_channel("committee3")
    assert abs(mth.committee_lambda_perp(ch, 0.0) - 0.13510) < 1e-3
    assert abs(mth.committee_lambda_perp(ch, 0.0) - 4 / (3 * np.pi**2)) < 1e-8
    assert abs(mth.committee_branch_m(ch, 1.0) - 0.4787) < 2e-3
    assert abs(mth.committee_branch_m(ch, 5.0) - 0.8838) < 2e-3


@pytest.mark.parametrize("name,lo,hi", [("sign-z1z2", 1.0, 5.0), ("z1z2", 0.2, 2.0), ("square", 0.1, 2.0)])
def test_stability_vs_bisection(name, lo, hi):
    ch = make_channel(name)
    a_c = mth.easy_threshold(ch)[0]
    a_b = staircase(ch, alpha_lo=lo, alpha_hi=hi, rtol=1e-3, side_info=1e-12)[0].alpha_bisection
    assert abs(a_b - a_c) / a_c < 1e-2


def test_staircase_first_stage():
    ch = make_channel("staircase")
    a_c, P, _ = mth.easy_threshold(ch)
    assert np.allclose(P, np.diag([1.0, 0, 0]), atol=1e-8)
    # independent: E[a^2] with a = E[z1^2 | y] - 1 from the 4 roots, 1-D quadrature over r
    r, w = np.polynomial.legendre.leggauss(300)
    tot = 0.0
    for eps, (lo, hi) in ((-1.0, (0.0, np.sqrt(2.0))), (1.0, (0.0, 14.0))):
        rr = lo + (r + 1) * (hi - lo) / 2
        y = eps + rr**2
        ww = w * (hi - lo) / 2 * 2 * rr
        num = den = 0.0
        for e2 in (1.0, -1.0):
            ok = y - e2 > 0
            root = np.sqrt(np.where(ok, y - e2, 1.0))
            wt = np.where(ok, np.exp(-root**2 / 2) / np.sqrt(2 * np.pi) / root / 2, 0.0)  # both signs, x 1/2
            num = num + wt * root**2
            den = den + wt
        tot += np.sum(ww * den * (num / den - 1) ** 2)
    assert abs(1 / tot - a_c) < 1e-4 * a_c


def test_bad_input():
    with pytest.raises(ParameterError):
        make_channel("nope")
    with pytest.raises(ParameterError):
        make_channel("norm2", 7)
    ch = make_channel("z1z2")
    with pytest.raises(ParameterError):
        ch.g_out(np.array([0.3]), np.zeros((1, 2)), np.array([[1.0, 1.0], [1.0, 1.0]]))
    with pytest.raises(ParameterError):
        make_channel("norm2", 3).g_out(np.array([1.0]), np.zeros((1, 3)), np.eye(3))
    with pytest.raises(ParameterError):
        mse.Expectation(ch, "nope")


def test_z1z2z3_bisection_isotropic():
    """The scalar SE bisection on Q = q I agrees with the stability value 1/E[a^2] (2.565180) to < 1%."""
    ch = make_channel("z1z2z3")
    a_c = mth.easy_threshold(ch)[0]
    assert abs(a_c - 2.565180) < 1e-5
    a_b = staircase(ch, alpha_lo=0.05, alpha_hi=20.0, rtol=1e-3, side_info=1e-12)[0].alpha_bisection
    assert abs(a_b - a_c) / a_c < 1e-2


def learned_from(alpha, true):
    return alpha >= true


@pytest.mark.parametrize("true", [0.01, 0.03, 0.1, 0.17, 0.1768, 0.1857, 0.19, 0.2, 0.5, 3.9, 4.0, 5.0])
def test_a_search_started_at_a_guess_finds_any_transition(true):
    """The staircase's searches start at the stability value (`section_search` with a guess): the guess
    only saves rounds. Wherever the transition lies in [lo, hi] the answer is within rtol, lo below it, inf
    beyond hi; a transition up to 5% off the guess (0.1768 against 0.1857) is bracketed in round one, 4
    rounds in all at rtol 2e-3 (up to 7 otherwise)."""
    rounds = set()

    def execute(work):  # a probe's key is "easy-<round>-<j>"
        rounds.add(work.key.split("-")[1])
        return work.fn(**work.kwargs)

    got = drive(section_search("easy", lambda a: (learned_from, {"alpha": a, "true": true}), 0.02, 4.0, 2e-3, 4,
                               guess=0.1857, true_at_lo=0.02, false_at_hi=np.inf), execute)[0]
    if true > 4.0:
        assert got == np.inf
    elif true <= 0.02:
        assert got == 0.02
    else:
        assert abs(got - true) <= 2e-3 * max(true, got)
    assert len(rounds) <= (4 if abs(true / 0.1857 - 1) <= 0.05 else 7)
