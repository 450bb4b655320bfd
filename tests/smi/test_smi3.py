"""The 3-layer tied-attention channel (T = 2, rank 1): the importance sampler of `posterior3.py` against an
independent brute-force Monte Carlo of the same posterior, the Nishimori identity E[g g^T] = -E[dg] of the
SE expectation, the symmetries of the posterior (g even in each layer alone), and the plug-in error at
Q = 0 against a direct evaluation of the reference form B = A(A(z1) z2) A(z1)."""

import math

import numpy as np
import pytest

from seqphase.core.errors import ParameterError
from seqphase.core.smi import link
from seqphase.core.smi import se as sse
from seqphase.core.smi.channels import AttentionChannel, Resolution, Resolution3

from smi_checks import assert_nishimori


def _attention(x, c):
    """c I + row-softmax of x x^T for a stack of 2-token vectors x (n, 2) -> (n, 2, 2)."""
    S = np.exp(x[:, :, None] * x[:, None, :])
    return S / S.sum(2, keepdims=True) + c * np.eye(2)


def _brute(u, om, V, c, seed, nb, per):
    """Plain Monte Carlo written independently of posterior3.py: (z1, z2) per token from their cavity
    marginal, z3 = B^-1(+-u) with B = A(A(z1) z2) A(z1) built as a stack of 2 x 2 products and inverted by
    np.linalg.solve, weight = N(z3 | z1, z2) / |det B| (normalised conditional, so that the mean weight is
    the integral of N(Z; omega, V) / |det B| over (z1, z2)). Returns per-batch sums of w, w Z, w Z Z^T;
    each batch of `per` draws is one vectorised pass."""
    L = np.linalg.cholesky(V[:2, :2])
    kv = np.linalg.solve(V[:2, :2], V[:2, 2])
    v3 = V[2, 2] - kv[0] * V[0, 2] - kv[1] * V[1, 2]
    W = np.zeros(nb)
    F1 = np.zeros((nb, 6))
    F2 = np.zeros((nb, 6, 6))
    rng = np.random.default_rng(seed)
    for b in range(nb):
        x = rng.standard_normal((per, 4))
        z1 = om[0] + L[0, 0] * x[:, :2]
        z2 = om[1] + L[1, 0] * x[:, :2] + L[1, 1] * x[:, 2:]
        A1 = _attention(z1, c)
        B = _attention(np.einsum("nij,nj->ni", A1, z2), c) @ A1
        z3 = np.linalg.solve(B, np.broadcast_to(u, (per, 2))[..., None])[..., 0]
        det_b = np.abs(np.linalg.det(B))
        m3 = om[2] + kv[0] * (z1 - om[0]) + kv[1] * (z2 - om[1])
        for sg in (1.0, -1.0):
            w = np.exp(-0.5 * ((sg * z3 - m3) ** 2).sum(1) / v3) / (2.0 * math.pi * v3) / det_b
            Z = np.concatenate([z1, z2, sg * z3], axis=1)
            W[b] += w.sum()
            F1[b] += w @ Z
            F2[b] += (w[:, None] * Z).T @ Z
    return W, F1, F2


def _brute_gout(u, om, V, c, n=1_200_000, seed=0, nb=40):
    """g, the token-diagonal dg, log Z and their standard errors (batch means over nb batches)."""
    W, F1, F2 = _brute(u, om, V, c, seed, nb, n // nb)
    Vi = np.linalg.inv(V)

    def stats(w, f1, f2):
        m = f1 / w
        C = (f2 / w - np.outer(m, m)).reshape(3, 2, 3, 2)
        g = Vi @ (m.reshape(3, 2) - om)
        dg = np.stack([Vi @ C[:, t, :, t] @ Vi - Vi for t in range(2)])
        return g, dg

    g, dg = stats(W.sum(), F1.sum(0), F2.sum(0))
    # jackknife over batches
    jk = [stats(W.sum() - W[b], F1.sum(0) - F1[b], F2.sum(0) - F2[b]) for b in range(nb)]
    g_se = np.sqrt((nb - 1) * np.var([j[0] for j in jk], axis=0))
    dg_se = np.sqrt((nb - 1) * np.var([j[1] for j in jk], axis=0))
    logZ = math.log(W.mean() / (n // nb)) + 3 * math.log(2 * math.pi) + math.log(np.linalg.det(V))
    logZ_se = W.std(ddof=1) / W.mean() / math.sqrt(nb)
    return g, dg, logZ, g_se, dg_se, logZ_se


def _model_sample(Q, V, c, rng):
    om = np.sqrt(np.diag(Q))[:, None] * rng.standard_normal((3, 2))  # Q diagonal here
    z = om + np.linalg.cholesky(V) @ rng.standard_normal((3, 2))
    h = link.last_h(z[None], c)[0]
    ab = link.log_ratios(h)
    return link.u_from_ratios(ab[0], ab[1]), om


CASES = [  # (Q diagonal, cavity correlation, skip)
    ((0.05, 0.05, 0.05), 0.0, 1.0),
    ((0.0, 0.0, 0.95), 0.0, 1.0),
    ((0.0, 0.0, 0.99), 0.0, 1.0),
    ((0.5, 0.5, 0.99), 0.0, 1.0),
    ((0.3, 0.2, 0.9), 0.15, 0.5),
]


@pytest.mark.parametrize("q,rho,c", CASES)
def test_g_out_matches_brute_force(q, rho, c):
    """g_out, dg and log Z of the sampler (8192 points, three scrambles: their scatter is our error bar)
    against plain Monte Carlo (1.2e6 draws, jackknife error bar) on one label drawn from the model, incl.
    small V33 and a correlated cavity: every entry within 4 combined standard errors plus 1e-3 |g|_max."""
    rng = np.random.default_rng(11)
    Q = np.diag(q)
    V = np.eye(3) - Q + 1e-3 * np.eye(3)
    d = np.sqrt(np.diag(V))
    V = V + rho * np.outer(d, d) * (1 - np.eye(3))
    u, om = _model_sample(Q, V, c, rng)
    g_bf, dg_bf, lz_bf, g_se, dg_se, lz_se = _brute_gout(u, om, V, c)
    ours = []
    for seed in (1, 2, 3):
        ch = AttentionChannel(3, c, Resolution3(n_points=8192, seed=seed))
        g, dg = ch.g_out_tokens(u[None], om[None], V)
        lz = ch.posterior(u[None], om[None], V)[0]
        ours.append((g[0], dg[0], lz[0]))
    g = np.mean([o[0] for o in ours], 0)
    dg = np.mean([o[1] for o in ours], 0)
    lz = np.mean([o[2] for o in ours])
    g_our_se = np.std([o[0] for o in ours], 0, ddof=1) / np.sqrt(3)
    dg_our_se = np.std([o[1] for o in ours], 0, ddof=1) / np.sqrt(3)
    floor = 1e-3 * np.abs(g_bf).max()
    assert np.all(np.abs(g - g_bf) <= 4 * np.hypot(g_se, g_our_se) + floor), (g, g_bf, g_se, g_our_se)
    assert np.all(np.abs(dg - dg_bf) <= 4 * np.hypot(dg_se, dg_our_se) + 1e-3 * np.abs(dg_bf).max()), (dg, dg_bf)
    assert abs(lz - lz_bf) <= 4 * np.hypot(lz_se, np.std([o[2] for o in ours], ddof=1)) + 1e-3


@pytest.mark.parametrize("q", [(0.0, 0.0, 0.95), (0.5, 0.5, 0.99)])
def test_nishimori_identity(q):
    """E[sum_t g_t g_t^T] = -E[sum_t dg_tt] on the SE's own draws with the default point set (the
    identity holds for the exact posterior; the sampler's noise adds to the left side only its variance,
    ~1e-3 relative): within 4 standard errors of the difference, per layer."""
    assert_nishimori(AttentionChannel(3, 1.0), np.diag(q), sse.Draws(3, 2, 512, np.random.default_rng(5), qmc=False))


def test_link_is_even_in_each_layer():
    """y(z1, z2, z3) is unchanged by flipping any one layer: B depends on z1, z2 through softmax of outer
    products only, and y on h through h h^T (spec §1.4 / §5.4 for 3 layers)."""
    rng = np.random.default_rng(2)
    z = rng.standard_normal((200, 3, 2)) * 1.5
    y = link.link(z, 1.0)
    for layer in range(3):
        zf = z.copy()
        zf[:, layer] *= -1
        assert np.allclose(link.link(zf, 1.0), y, atol=1e-13)


def test_posterior_symmetries_are_exact():
    """The sampler keeps the symmetries of the exact posterior: with a diagonal cavity, flipping omega_l
    flips g_l and leaves the other layers (the point set is mirrored with it), and omega_l = 0 gives g_l = 0
    exactly (no Monte Carlo floor in a layer that has not been learned)."""
    ch = AttentionChannel(3, 1.0, Resolution3(n_points=256))
    rng = np.random.default_rng(4)
    V = np.diag([0.6, 0.4, 0.02])
    u, om = _model_sample(np.diag([0.4, 0.6, 0.98]), V, 1.0, rng)
    g, dg = ch.g_out_tokens(u[None], om[None], V)
    for layer in range(3):
        omf = om.copy()
        omf[layer] *= -1
        gf, dgf = ch.g_out_tokens(u[None], omf[None], V)
        sign = np.ones((3, 1))
        sign[layer] = -1
        assert np.allclose(gf, sign * g, atol=1e-9 * np.abs(g).max())
        assert np.allclose(np.abs(dgf), np.abs(dg), atol=1e-9 * np.abs(dg).max())
    om0 = om.copy()
    om0[:2] = 0.0
    g0, _ = ch.g_out_tokens(u[None], om0[None], V)
    assert np.all(g0[0, :2] == 0.0) or np.abs(g0[0, :2]).max() < 1e-12 * np.abs(g0).max()


def _reference_link3(z, c):
    def A(x):
        S = np.exp(np.outer(x, x))
        return S / S.sum(1, keepdims=True) + c * np.eye(2)

    A1 = A(z[0])
    B = A(A1 @ z[1]) @ A1
    h = B @ z[2]
    S = np.exp(np.outer(h, h))
    return S / S.sum(1, keepdims=True)


def test_plugin_error_at_q_zero_matches_direct_mc():
    """e_plug(Q = 0) = E||y - 1/2||_F^2 for 3 layers (the student's omega = 0 gives the uniform matrix):
    the SE's error function against a direct loop over the reference form, 4 combined standard errors."""
    ch = AttentionChannel(3, 1.0)
    e, s = sse.gen_error_plugin(ch, np.zeros((3, 3)), 100_000, np.random.default_rng(1))
    rng = np.random.default_rng(9)
    vals = np.array([np.sum((_reference_link3(rng.standard_normal((3, 2)), 1.0) - 0.5) ** 2) for _ in range(20_000)])
    assert abs(e - vals.mean()) < 4 * np.hypot(s, vals.std() / np.sqrt(vals.size))


def test_bad_depth_and_resolution():
    with pytest.raises(ParameterError, match="depth"):
        AttentionChannel(4, 1.0)
    with pytest.raises(ValueError, match="Resolution3"):
        AttentionChannel(3, 1.0, Resolution())
    AttentionChannel(2, 1.0, Resolution())  # the 2-layer path is unchanged
