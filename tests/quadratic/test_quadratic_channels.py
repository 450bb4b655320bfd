"""The quadratic network's output channel (core/quadratic/channels.py): the network's own labels against the
channel's units and cavity variance, the protocol identities (Nishimori, Jacobian), and the SE channel step."""

import math

import numpy as np
import pytest

from seqphase.core.errors import ParameterError
from seqphase.core.quadratic.channels import QuadraticChannel


def test_network_labels_are_the_channel_on_the_preactivation():
    """y / sqrt(kappa) - z is the label noise in S' units (variance delta / kappa), z the pre-activation of
    S' = W^T W / m: identical up to rounding for delta = 0, and the noise has the channel's variance."""
    rng = np.random.default_rng(0)
    d, kappa = 40, 0.5
    m = int(kappa * d)
    W = rng.standard_normal((m, d))
    x = rng.standard_normal((4000, d))
    S_prime = W.T @ W / m
    for delta in (0.0, 0.25):
        channel = QuadraticChannel(delta, kappa)
        y = channel.labels(x, W, np.random.default_rng(1))
        z = channel.preactivation(x, S_prime)
        noise = channel.to_theory_units(y) - z
        if delta == 0:
            assert np.max(np.abs(noise)) < 1e-10
        else:
            # sample variance of 4000 Gaussians: relative sd sqrt(2/4000) = 2.2%; 4 sd
            assert abs(noise.var() / channel.delta_th - 1) < 0.09
            assert channel.delta_th == delta / kappa


def test_preactivation_variance_is_the_cavity_factor():
    """Var z = 2 ||S||_F^2 / d (E[(x^T A x - Tr A)^2] = 2 ||A||_F^2): cavity_variance(mmse) = 2 mmse."""
    rng = np.random.default_rng(2)
    d = 30
    A = rng.standard_normal((d, d))
    A = (A + A.T) / 2
    z = QuadraticChannel().preactivation(rng.standard_normal((40000, d)), A)
    expected = float(QuadraticChannel.cavity_variance(np.sum(A * A) / d))
    # variance of x^T A x is 2||A||^2 exactly; its sample variance at n = 40000 has relative sd ~ 1.2%
    assert abs(z.var() / expected - 1) < 0.05


@pytest.mark.parametrize("delta", [0.0, 0.25])
def test_nishimori_and_jacobian(delta):
    """E[g^2] = -E[dg] under y ~ P(y | omega, V) and dg = d g / d omega (finite difference)."""
    channel = QuadraticChannel(delta, 0.5)
    rng = np.random.default_rng(3)
    n, V = 200000, 0.7
    omega = rng.standard_normal((n, 1))
    z = omega + math.sqrt(V) * rng.standard_normal((n, 1))
    y = channel.sample(z, rng)
    g, dg = channel.g_out(y, omega, np.array([[V]]))
    # g^2 (V + delta_th) is chi-square(1): relative sd sqrt(2/n) = 0.3%; 5 sd
    assert abs(np.mean(g**2) / np.mean(-dg) - 1) < 0.016
    h = 1e-6
    g_plus, _ = channel.g_out(y[:10], omega[:10] + h, np.array([[V]]))
    g_minus, _ = channel.g_out(y[:10], omega[:10] - h, np.array([[V]]))
    assert np.allclose((g_plus - g_minus) / (2 * h), dg[:10, :, 0], rtol=1e-7)


def test_channel_step_is_the_spec_equation():
    """qhat = 4 alpha / (delta_th + 2 mmse'): the spec's 2 alpha t = mmse_RIE(t) + delta_th / 2."""
    channel = QuadraticChannel(0.25, 0.5)
    alpha, mmse = 0.3, 0.8
    assert abs(channel.channel_step(alpha, mmse) - 4 * alpha / (0.5 + 2 * mmse)) < 1e-15


@pytest.mark.parametrize("args, field", [((-0.1, 0.5), "delta"), ((0.0, 0.0), "kappa"), ((0.0, -1.0), "kappa")])
def test_bad_parameters(args, field):
    with pytest.raises(ParameterError) as info:
        QuadraticChannel(*args)
    assert info.value.field == field
