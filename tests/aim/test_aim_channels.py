"""AIM channels (core/aim/channels.py): the bivariate normal, the hardmax derivative (spec §2.5), softmax
labels from logits, the paper variant's Jacobian. The protocol identities (Nishimori, finite-difference
Jacobian, batches, edges) are in tests/core/test_channel_battery.py."""

import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from seqphase.core.aim import channels as ch
from seqphase.core.aim import se


@pytest.mark.parametrize("r", [1 / 3, -1 / 3, 0.7])
def test_plackett_bvn_matches_scipy(r):
    rng = np.random.default_rng(1)
    pts = rng.uniform(-6, 4, (300, 2))
    ref = multivariate_normal(cov=[[1, r], [r, 1]]).cdf(pts)
    # Genz's bivariate algorithm in scipy is ~1e-15 accurate; our 40-node rule to ~1e-13 (module docstring)
    np.testing.assert_allclose(ch.bvn_cdf(pts[:, 0], pts[:, 1], r), ref, rtol=0, atol=1e-12)


def test_hardmax_derivative_is_phi_Phi_not_the_joint_density():
    """Spec §2.5: at (0.3, -0.7; 1/3) the finite difference of Phi2 is 0.075542, the joint pdf 0.112592."""
    k1, k2, r, h = 0.3, -0.7, 1 / 3, 1e-6
    fd = (ch.bvn_cdf(k1 + h, k2, r) - ch.bvn_cdf(k1 - h, k2, r)) / (2 * h)
    _, d1, _, pdf = ch.hardmax_kernel(k1, k2, r, "exact")
    assert abs(fd - 0.075542) < 5e-7 and abs(d1 - fd) < 1e-8
    assert abs(pdf - 0.112592) < 5e-7
    _, p1, p2, _ = ch.hardmax_kernel(k1, k2, r, "paper")
    assert p1 == pdf and p2 == pdf


def test_paper_gout_jacobian_is_finite_difference_of_its_g():
    channel = ch.HardmaxChannel(2, "paper")
    rng = np.random.default_rng(2)
    V = ch.cavity_variance(2, 0.4)
    omega = rng.standard_normal((50, 3)) * np.sqrt(np.diag(ch.cavity_variance(2, 0.6)))
    y = channel.sample(omega + rng.standard_normal((50, 3)) * np.sqrt(np.diag(V)), rng)
    g, dg = channel.g_out(y, omega, V)
    h = 1e-6
    for j in range(3):
        step = np.zeros(3)
        step[j] = h
        fd = (channel.g_out(y, omega + step, V)[0] - channel.g_out(y, omega - step, V)[0]) / (2 * h)
        np.testing.assert_allclose(dg[:, :, j], fd, rtol=1e-6, atol=1e-7)


def test_softmax_gout_is_the_spec_formula_and_beta_independent():
    """Diagonal cavity: c* = sum w (omega - Phi)/(T^2/2), g = w (Phi + c* - omega)/V (spec §2.3), for the
    labels of any beta (made from the logits: beta = 200 would underflow probabilities)."""
    T, V = 4, 0.3
    rng = np.random.default_rng(3)
    p = ch.n_entries(T)
    w = 1.0 / ch.entry_weights(T)
    omega = rng.standard_normal((20, p))
    z = omega + rng.standard_normal((20, p)) * np.sqrt(V / w)
    Phi = z - z[:, [p - 1]]  # h_ab - h_TT, the last folded entry is (T, T)
    c = ((omega - Phi) * w).sum(1) / (T * T / 2)
    expected = w * (Phi + c[:, None] - omega) / V
    for beta in (1.0, 200.0):
        channel = ch.SoftmaxChannel(T, beta)
        y = channel.sample(z, rng)
        g, dg = channel.g_out(y, omega, ch.cavity_variance(T, V))
        np.testing.assert_allclose(g, expected, rtol=1e-9, atol=1e-9 * beta)
        # E[sum (1 + delta) g^2] = -E[sum (1 + delta) dg_aa] = (T(T+1)/2 - 1)/V exactly (the closed form)
        assert np.allclose(-np.einsum("npp,p->n", dg, ch.entry_weights(T)), (p - 1) / V)


def test_fold_unfold_round_trip():
    rng = np.random.default_rng(4)
    A = rng.standard_normal((5, 3, 3))
    S = A + A.transpose(0, 2, 1)
    assert np.array_equal(ch.unfold(ch.fold(S), 3), S)
    assert list(zip(*ch.pairs(2))) == [(0, 0), (0, 1), (1, 1)]


def test_hardmax_bracket_at_q0_is_the_closed_form():
    """E0 = (4/3) B (exact) and (3/pi) B (paper), B = 2/(pi + 2a) + 1/(pi - 2a), a = arcsin(1/3)."""
    a = math.asin(1 / 3)
    B = 2 / (math.pi + 2 * a) + 1 / (math.pi - 2 * a)
    assert abs(se.hardmax_bracket(0.0, 1.0, "exact") - 4 / 3 * B) < 1e-13
    assert abs(se.hardmax_bracket(0.0, 1.0, "paper") - 3 / math.pi * B) < 1e-13


@pytest.mark.parametrize("gout", ["exact", "paper"])
def test_hardmax_bracket_quadrature_against_monte_carlo_of_the_channel(gout):
    """The k-space / Gauss-Hermite bracket equals E[sum (1 + delta) g^2] of the channel's own g_out (Monte
    Carlo over omega and y, 4 standard errors), on both sides of the rule switch q/V = GH_RATIO."""
    channel = ch.HardmaxChannel(2, gout)
    for q, V in ((0.8, 0.7), (1.4, 0.1)):
        mc, sem = se.general_bracket(channel, q, V, 200_000, seed=5)
        assert abs(se.hardmax_bracket(q, V, gout) - mc) < 4 * sem, (q, V, mc, sem)


def test_hardmax_rules_agree_at_the_switch():
    """Gauss-Hermite (q/V < 2) and the k-space grid give the same bracket at q/V = 2 (measured 1.4e-9
    exact, 1.8e-7 paper: the paper integrand is less smooth for GH)."""
    for gout, tol in (("exact", 1e-8), ("paper", 1e-6)):
        q, V = 1.0, 0.5
        grid = se.hardmax_bracket(q * (1 + 1e-12), V, gout)  # just above the switch: the grid
        gh = se._bracket_hermite(q, V, gout)
        assert abs(grid / gh - 1) < tol
