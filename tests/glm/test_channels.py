"""One battery every registered channel must pass (the scikit-learn "estimator checks" habit)."""

import math

import numpy as np
import pytest

from seqphase.core.glm.channels import CHANNELS
from seqphase.core.glm.se import _outer_expect

from conftest import CHANNEL_INSTANCES, PRIOR_INSTANCES


def test_registry_covered(registries):
    channels, priors = registries
    assert {type(c) for c in CHANNEL_INSTANCES} == set(channels.values())
    assert {type(p) for p in PRIOR_INSTANCES} == set(priors.values())


def _typical_points(channel, seed=0, n=200):
    """(y, omega, V) at the Bayes-optimal point: z ~ N(omega, V), y ~ P(y|z)."""
    rng = np.random.default_rng(seed)
    V = rng.uniform(0.2, 1.0, n)
    omega = rng.normal(0, 1, n)
    z = omega + np.sqrt(V) * rng.standard_normal(n)
    return channel.sample(z, rng), omega, V


def test_dg_is_derivative_of_g(channel):
    y, omega, V = _typical_points(channel)
    g, dg = channel.g_out_scalar(y, omega, V)
    h = 1e-5
    fd = (channel.g_out_scalar(y, omega + h, V)[0] - channel.g_out_scalar(y, omega - h, V)[0]) / (2 * h)
    # central differences: truncation h^2 g''' ~ 1e-10, rounding 1e-16/h ~ 1e-11 -> rtol 1e-5 ample
    np.testing.assert_allclose(dg, fd, rtol=1e-5, atol=1e-7)


def test_g_is_derivative_of_log_partition(channel):
    y, omega, V = _typical_points(channel, seed=1)
    g, _ = channel.g_out_scalar(y, omega, V)
    h = 1e-5
    fd = (channel.log_partition(y, omega + h, V) - channel.log_partition(y, omega - h, V)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5, atol=1e-7)


def test_batch_equals_elementwise(channel):
    y, omega, V = _typical_points(channel, seed=2, n=20)
    g, dg = channel.g_out_scalar(y, omega, V)
    lz = channel.log_partition(y, omega, V)
    for i in range(0, 20, 3):
        gi, dgi = channel.g_out_scalar(y[i], omega[i], V[i])
        assert float(gi) == pytest.approx(g[i], rel=1e-14, abs=1e-300)
        assert float(dgi) == pytest.approx(dg[i], rel=1e-14, abs=1e-300)
        assert float(channel.log_partition(y[i], omega[i], V[i])) == pytest.approx(lz[i], rel=1e-14)
    # expect_y on an array equals expect_y per element
    func = lambda yy, o, v: channel.g_out_scalar(yy, o, v)[0] ** 2
    batch = channel.expect_y(func, omega, 0.7)
    for i in (0, 5):
        assert float(channel.expect_y(func, omega[i:i + 1], 0.7)[0]) == pytest.approx(batch[i],
                                                                                    rel=1e-13)


def test_no_nan_at_edges(channel):
    omega = np.array([-50.0, -5.0, -1e-3, 0.0, 1e-3, 5.0, 50.0])
    ys = {"sign": [-1.0, 1.0], "abs": [1e-8, 0.5, 3.0, 50.0], "square": [1e-8, 0.25, 9.0, 2500.0]}
    for V in (1e-12, 1e-6, 1.0):
        for y in ys.get(channel.name, [-50.0, 0.0, 0.3, 50.0]):
            g, dg = channel.g_out_scalar(y, omega, V)
            lz = channel.log_partition(y, omega, V)
            assert np.all(np.isfinite(g)) and np.all(np.isfinite(dg)) and np.all(np.isfinite(lz))
        e = channel.expect_y(lambda yy, o, v: channel.g_out_scalar(yy, o, v)[0] ** 2, omega, V)
        assert np.all(np.isfinite(e))
        assert np.all(np.isfinite(channel.prediction_error(omega, V)))


@pytest.mark.parametrize("m", [0.1, 0.5, 0.9, 0.999])
def test_nishimori_quadrature(channel, m):
    # E[g^2] = -E[dg] at the BO point (rho = 1, V = 1 - m). Quadrature: inner GH error ~1e-8
    # relative for |z| channels (documented in phase.py), smaller elsewhere.
    V = 1.0 - m
    eg2 = _outer_expect(channel, lambda y, o, v: channel.g_out_scalar(y, o, v)[0] ** 2, m, V)
    edg = _outer_expect(channel, lambda y, o, v: channel.g_out_scalar(y, o, v)[1], m, V)
    assert eg2 == pytest.approx(-edg, rel=1e-7)


def test_nishimori_monte_carlo(channel):
    rng = np.random.default_rng(3)
    m, n = 0.6, 400_000
    V = 1 - m
    omega = math.sqrt(m) * rng.standard_normal(n)
    y = channel.sample(omega + math.sqrt(V) * rng.standard_normal(n), rng)
    g, dg = channel.g_out_scalar(y, omega, V)
    s = g**2 + dg
    assert abs(s.mean()) < 4 * s.std() / math.sqrt(n) + 1e-12


def test_trivial_step_and_closed_forms():
    # spec §4 #4: one step from Q = 0 for sign: E g^2 = 2/pi at V = 1
    sign = CHANNELS["sign"]()
    assert _outer_expect(sign, lambda y, o, v: sign.g_out_scalar(y, o, v)[0] ** 2, 0.0, 1.0) == \
        pytest.approx(2 / math.pi, rel=1e-13)
    lin = CHANNELS["linear"](0.1)
    assert _outer_expect(lin, lambda y, o, v: lin.g_out_scalar(y, o, v)[0] ** 2, 0.3, 0.7) == \
        pytest.approx(1 / 0.8, rel=1e-13)


def test_plugin_errors_monte_carlo(channel):
    # the closed-form plug-in errors against Monte Carlo, (z, w) ~ N(0, [[rho, m], [m, q]])
    rng = np.random.default_rng(4)
    rho, m, q, n = 1.0, 0.6, 0.8, 400_000
    L = np.linalg.cholesky(np.array([[rho, m], [m, q]]))
    z, w = L @ rng.standard_normal((2, n))
    y = channel.sample(z, rng)
    if channel.name == "sign":
        err = (np.sign(w) != y).astype(float)
    elif channel.name == "linear":
        err = (y - w) ** 2
    elif channel.name == "abs":
        err = (y - np.abs(w)) ** 2
    else:
        err = (y - w**2) ** 2
    assert abs(err.mean() - channel.plugin_error(rho, m, q)) < 4 * err.std() / math.sqrt(n)


def test_prediction_error_monte_carlo(channel):
    rng = np.random.default_rng(5)
    omega, V, n = 0.7, 0.4, 400_000
    z = omega + math.sqrt(V) * rng.standard_normal(n)
    y = channel.sample(z, rng)
    if channel.name == "sign":
        err = (y != np.sign(omega)).astype(float)
    else:
        err = (y - y.mean()) ** 2
    assert abs(err.mean() - float(channel.prediction_error(omega, V))) < 4 * err.std() / math.sqrt(n)
