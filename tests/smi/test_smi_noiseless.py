"""The noiseless limit of the SMI SE (core/smi/noiseless.py): the eps -> 0 extrapolation on series
with known limits, the counting identity m_1 + ... + m_p = T of the linearised SE at Q = I (the channel's
posterior at a small V against the closed-form tangent-plane limit), the perfect-recovery threshold from
it at 2 and 3 layers, and the full eps = 0 SE map against its linearisation."""

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
    """alpha_PR = 1/m_1(v*) within 3 s.e. of p/T = 1 (the counting identity); the full eps = 0 SE map started
    at Q = I - v (v at the proportions v*) contracts 1 - Q11 by 1/(alpha m_1(v*)) per step, to 1e-3 relative
    (same draws; the map's v/(v + alpha m) differs from v/(alpha m) by O(v) = 1e-5)."""
    ch, draws = ch_draws
    pr = nl.perfect_recovery(ch, draws)
    assert abs(pr.alpha - 1.0) < 3 * pr.alpha_se, pr
    assert abs(pr.m[0] - pr.m[1]) < 0.01 * pr.m[0]
    for alpha in (0.9, 1.2):
        f = nl.contraction(ch, alpha, draws, pr.v)
        assert abs(f[0] * alpha * pr.m[0] - 1.0) < 1e-3, (alpha, f, pr.m)


def test_link_jacobian_against_the_chain_rule():
    """J = dh/dz by central differences against the 2-layer link differentiated by hand: h = A(z1) z2,
    A = c I + softmax(z1 z1^T), dA_ts/dz1_k = A'_ts (delta_tk z1_s + delta_sk z1_t - sum_r A'_tr (delta_tk z1_r
    + delta_rk z1_t)), A' the softmax part."""
    rng = np.random.default_rng(3)
    z, c = rng.standard_normal((64, 2, 2)), 0.7
    J = nl.link_jacobian(z, c)
    z1, z2 = z[:, 0], z[:, 1]
    S = np.exp(z1[:, :, None] * z1[:, None, :])
    S /= S.sum(axis=2, keepdims=True)
    eye = np.eye(2)
    for k in range(2):
        dlogit = eye[k][None, :, None] * z1[:, None, :] + eye[k][None, None, :] * z1[:, :, None]  # d(z1_t z1_s)
        dS = S * (dlogit - np.einsum("nts,nts->nt", S, dlogit)[:, :, None])
        np.testing.assert_allclose(J[:, :, 0, k], np.einsum("nts,ns->nt", dS, z2), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(J[:, :, 1, :], c * eye + S, rtol=1e-7, atol=1e-8)


@pytest.mark.parametrize("depth", [2, 3])
def test_tangent_response_sums_to_t_on_every_draw(depth):
    """The closed form: sum_a m_a = T = 2 on each draw (a projection's trace), whatever the proportions of V;
    a layer's share grows as its v grows relative to the others."""
    ch = AttentionChannel(depth, 0.5)
    draws = sse.Draws(depth, 2, 256, np.random.default_rng(8))
    shares = []
    for r in (1e-2, 1.0, 1e2):
        v = np.ones(depth)
        v[0] = r
        m, _ = nl.tangent_response(ch, 1e-6 * np.diag(v), draws)
        assert abs(m.sum() - 2.0) < 1e-9, (r, m)
        shares.append(m[0])
    assert np.all(np.diff(shares) > 0), shares


def test_tangent_response_is_the_channels_limit(ch_draws):
    """The channel's posterior at V = 1e-6 (the z2 chart) against the closed form on the same draws, at the
    proportions of V where layer 1 is 100x less precise and at equal V: within 4 s.e. of the channel's m."""
    ch, draws = ch_draws
    for r in (1.0, 1e2):
        V = 1e-6 * np.diag([np.sqrt(r), 1 / np.sqrt(r)])
        m, se = nl.linear_response(ch, V, draws)
        mt, _ = nl.tangent_response(ch, V, draws)
        assert np.all(np.abs(m - mt) < 4 * se), (r, m, mt, se)


def _three_layers_closed_form_flow():
    ch = AttentionChannel(3, 1.0)
    draws = sse.Draws(3, 2, 512, np.random.default_rng(5))
    closed = nl.perfect_recovery(ch, draws, response=nl.tangent_response)
    assert abs(closed.alpha - 1.5) < 1e-3 and np.all(np.abs(closed.m - 2.0 / 3.0) < 1e-3), closed
    assert closed.v[0] > 10 and closed.v[1] > 10  # layers 1 and 2 end ~100x less precise than layer 3
    return ch, draws, closed


def test_three_layers_closed_form_flow():
    """Three layers (c = 1): the closed-form flow reaches v* with m_a = T/p = 2/3 (alpha_PR = 3/2, the counting
    bound p/T)."""
    _three_layers_closed_form_flow()


# 30 s; the default suite checks the sampler flow and the SE map's contraction through the same code at depth
# 2 (test_perfect_recovery_threshold_and_the_se_map), the 3-layer closed-form flow
# (test_three_layers_closed_form_flow) and the 3-layer posterior against brute force (test_smi3.py)
@pytest.mark.slow
def test_three_layers_perfect_recovery_two_ways():
    """Three layers (c = 1): the closed-form flow reaches v* with m_a = T/p = 2/3 (alpha_PR = 3/2, the counting
    bound p/T). The same flow through the 3-layer sampler (started at that v*) settles at its own v*, with
    alpha_PR = 1/m_1 within 3 s.e. of 3/2; there the full eps = 0 SE map through the sampler contracts every
    1 - Q_aa by 1/(alpha m_a) per step, to 2e-3 relative (measured: 6e-4 at 1024 draws), so the map's growth
    crosses 1 at alpha = 1/m_1."""
    ch, draws, closed = _three_layers_closed_form_flow()
    pr = nl.perfect_recovery(ch, draws, start=closed.v, tol=1e-3)
    assert abs(pr.alpha - 1.5) < 3 * pr.alpha_se, pr
    for alpha in (1.2, 1.8):
        f = nl.contraction(ch, alpha, draws, pr.v, n_steps=2)
        assert np.all(np.abs(f * alpha * pr.m - 1.0) < 2e-3), (alpha, f, pr.m)
