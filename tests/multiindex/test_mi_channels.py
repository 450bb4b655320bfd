"""g_out of the multi-index channels: against brute-force Monte Carlo of the posterior, dg against
finite differences of g, Nishimori, batch = per-sample, small V; the p = 1 channels are the scalar
closed forms of core/channel.py, and norm2 at p = 1 agrees with them to rounding."""

import numpy as np
import pytest

from seqphase.core.channel import AbsChannel, SquareChannel
from seqphase.core.multiindex.channels import make_channel

NAMES = ["z1z2", "sign-z1z2", "norm2", "z1z2z3", "sign-z1z2z3", "committee3", "staircase", "square", "abs"]


def _random_point(ch, rng):
    p = ch.p
    om = 0.6 * rng.standard_normal(p)
    A = 0.3 * rng.standard_normal((p, p))
    V = 0.5 * np.eye(p) + A @ A.T
    z = om + np.linalg.cholesky(V) @ rng.standard_normal(p)
    return ch.sample(z[None], rng), om, V


@pytest.mark.parametrize("name", ["sign-z1z2", "sign-z1z2z3", "committee3"])
def test_posterior_against_monte_carlo(name):
    """Discrete labels: the posterior is N(omega, V) conditioned on the label: rejection sampling."""
    rng = np.random.default_rng(11)
    ch = make_channel(name)
    y, om, V = _random_point(ch, rng)
    logZ, mean, second = ch.posterior(y, om[None], V)
    n = 400_000
    z = om + rng.standard_normal((n, ch.p)) @ np.linalg.cholesky(V).T
    keep = ch.sample(z, rng) == y[0]
    zk = z[keep]
    assert abs(np.exp(logZ[0]) - keep.mean()) < 5 * np.sqrt(keep.mean() * (1 - keep.mean()) / n)
    se_mean = zk.std(0) / np.sqrt(zk.shape[0])
    assert np.all(np.abs(mean[0] - zk.mean(0)) < 5 * se_mean)
    zz = zk[:, :, None] * zk[:, None, :]
    se_sec = zz.std(0) / np.sqrt(zk.shape[0])
    assert np.all(np.abs(second[0] - zz.mean(0)) < 5 * se_sec)


@pytest.mark.parametrize("name", ["z1z2", "norm2", "z1z2z3", "staircase", "square"])
def test_posterior_continuous_importance(name):
    """Continuous labels: E[f(z) | y] against self-normalised importance sampling on the level set is
    awkward; instead check the density: E_y[1] = 1 and E_y[E[z z^T|y]] = V + omega omega^T (tower rule)
    with y integrated by the channel's own y-rule, which is exact up to quadrature."""
    rng = np.random.default_rng(3)
    ch = make_channel(name)
    _, om, V = _random_point(ch, rng)
    y, w = ch.y_rule(True)
    logZ, mean, second = ch.posterior(y, np.repeat(om[None], y.size, 0), V)
    pz = w * np.exp(logZ)
    assert abs(pz.sum() - 1) < 1e-6
    assert np.allclose(np.einsum("n,ni->i", pz, mean), om, atol=1e-6)
    assert np.allclose(np.einsum("n,nij->ij", pz, second), V + np.outer(om, om), atol=1e-6)


@pytest.mark.parametrize("name", NAMES)
def test_dg_against_finite_differences(name):
    rng = np.random.default_rng(5)
    ch = make_channel(name)
    y, om, V = _random_point(ch, rng)
    g, dg = ch.g_out(y, om[None], V)
    h = 1e-5
    for k in range(ch.p):
        e = np.zeros(ch.p)
        e[k] = h
        gp, _ = ch.g_out(y, (om + e)[None], V)
        gm, _ = ch.g_out(y, (om - e)[None], V)
        assert np.allclose((gp - gm)[0] / (2 * h), dg[0][:, k], atol=1e-5)
    # g = grad log Z
    for k in range(ch.p):
        e = np.zeros(ch.p)
        e[k] = h
        lp = ch.posterior(y, (om + e)[None], V)[0]
        lm = ch.posterior(y, (om - e)[None], V)[0]
        assert abs((lp - lm)[0] / (2 * h) - g[0, k]) < 1e-5


@pytest.mark.parametrize("name", NAMES)
def test_batch_equals_per_sample(name):
    rng = np.random.default_rng(7)
    ch = make_channel(name)
    pts = [_random_point(ch, rng) for _ in range(4)]
    y = np.concatenate([p[0] for p in pts])
    om = np.stack([p[1] for p in pts])
    V = np.stack([p[2] for p in pts])
    g, dg = ch.g_out(y, om, V)
    for i, (yi, oi, Vi) in enumerate(pts):
        gi, dgi = ch.g_out(yi, oi[None], Vi)
        assert np.allclose(g[i], gi[0], atol=1e-12) and np.allclose(dg[i], dgi[0], atol=1e-12)


@pytest.mark.parametrize("name", ["z1z2", "sign-z1z2", "committee3", "staircase"])
def test_nishimori(name):
    """E[g g^T] = -E[dg] over (xi, u) at Q = 0.4 I, by Monte Carlo (3 standard errors)."""
    rng = np.random.default_rng(9)
    ch = make_channel(name)
    p, n = ch.p, 3000
    Q = 0.4 * np.eye(p)
    om = np.sqrt(0.4) * rng.standard_normal((n, p))
    y = ch.sample(om + np.sqrt(0.6) * rng.standard_normal((n, p)), rng)
    g, dg = ch.g_out(y, om, np.eye(p) - Q)
    diff = np.einsum("ni,nj->nij", g, g) + dg
    se = diff.std(0) / np.sqrt(n)
    assert np.all(np.abs(diff.mean(0)) < 4 * se + 1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_small_V_no_nan(name):
    rng = np.random.default_rng(13)
    ch = make_channel(name)
    om = rng.standard_normal((5, ch.p))
    V = 1e-6 * np.eye(ch.p)
    z = om + 1e-3 * rng.standard_normal((5, ch.p))
    y = ch.sample(z, rng)
    g, dg = ch.g_out(y, om, V)
    assert np.all(np.isfinite(g)) and np.all(np.isfinite(dg))


def _p1_batch(rng, n=2000):
    """Cavity points of a p = 1 channel: omega (n, 1), V (n, 1, 1) over six decades, y ~ z^2."""
    om = 3 * rng.standard_normal((n, 1))
    V = np.exp(rng.uniform(np.log(1e-6), np.log(10.0), n))[:, None, None]
    z = om + np.sqrt(V[:, 0]) * rng.standard_normal((n, 1))
    return z, om, V


@pytest.mark.parametrize("name,scalar", [("abs", AbsChannel), ("square", SquareChannel)])
def test_p1_channels_are_the_scalar_closed_forms(name, scalar):
    """The channels "abs" and "square" evaluate the kernel of core/channel.py: g_out (batched V and one shared V),
    posterior and sample are bit-identical to the scalar channel's."""
    rng = np.random.default_rng(17)
    ch, ref = make_channel(name), scalar()
    z, om, V = _p1_batch(rng)
    y = ch.sample(z, rng)
    assert y.shape == (z.shape[0],) and np.array_equal(y, ref.sample(z[:, 0], rng))
    for cov in (V, V[0]):
        for mine, theirs in zip(ch.g_out(y, om, cov), ref.g_out(y, om, cov)):
            assert mine.shape == theirs.shape and np.array_equal(mine, theirs)
        for mine, theirs in zip(ch.posterior(y, om, cov), ref.posterior(y, om, cov)):
            assert np.array_equal(mine, theirs)


def test_norm2_p1_agrees_with_square():
    """norm2 at p = 1 (logsumexp over the two roots z = +-sqrt(y), g_out from the posterior moments)
    against the closed form of "square" (tanh / sech^2 of x = sqrt(y) omega / V). Both are exact, so
    they differ by rounding only. Bounds, with eps the machine epsilon and r = sqrt(y): each moment
    carries a few eps relative to the scale of its terms, E[z|y] ~ (r + |omega|) (the closed form
    computes omega + V g), E[z^2|y] ~ (r + |omega|)^2 + V; g = (E[z|y] - omega) / V inherits
    eps (r + |omega|) / V; dg = (E[z^2|y] - E[z|y]^2) / V^2 - 1 / V cancels at the scale
    y / V^2 + 1 / V; log Z sums terms of size (r + |omega|)^2 / V, |log V|, |log y| and 1. A factor 16
    covers the operation counts (measured worst case over 150000 points: 4.9)."""
    rng = np.random.default_rng(19)
    square, norm2 = make_channel("square"), make_channel("norm2", 1)
    z, om, V = _p1_batch(rng, n=20000)
    y = square.sample(z, rng)
    eps = 16 * np.finfo(float).eps
    r, a, v = np.sqrt(y), np.abs(om[:, 0]), V[:, 0, 0]
    (l1, m1, s1), (l2, m2, s2) = square.posterior(y, om, V), norm2.posterior(y, om, V)
    assert np.all(np.abs(l1 - l2) <= eps * ((r + a) ** 2 / v + np.abs(np.log(v)) + np.abs(np.log(y)) + 1))
    assert np.all(np.abs(m1 - m2)[:, 0] <= eps * (r + a))
    assert np.all(np.abs(s1 - s2)[:, 0, 0] <= eps * ((r + a) ** 2 + v))
    (g1, dg1), (g2, dg2) = square.g_out(y, om, V), norm2.g_out(y, om, V)
    assert np.all(np.abs(g1 - g2)[:, 0] <= eps * (r + a) / v)
    assert np.all(np.abs(dg1 - dg2)[:, 0, 0] <= eps * (y / v**2 + 1 / v))
