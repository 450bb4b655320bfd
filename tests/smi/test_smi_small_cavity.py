"""The 2-layer channel at a narrow last-layer cavity (V22 down to 1e-6: the SE and GAMP with eps -> 0):
the z2 chart (`posterior_z2.py`) against an independent dense grid, the Nishimori identity on the SE's own
draws (which the z1 grid violates there), and the closed form of the noiseless limit."""

import numpy as np
import pytest

from seqphase.core.numerics import psd_sqrt
from seqphase.core.smi import se as sse
from seqphase.core.smi.channels import AttentionChannel, Resolution


def _dense_z2(u, om, V, c, n, width=10.0):
    """Brute force over z2 on a uniform n x n midpoint grid, omega2 +- width sqrt(V22) (numpy, no adaptivity):
    for each sheet h = s u, A(z1) z2 = h gives s00, s11 (linear in them), z1 = r (a, -b) / sqrt(a + b) with
    a, b their logits, weight N(Z; omega, V) / |det d(A(z1) z2)/dz1|, the determinant written out as
    (w0 - w1)^2 s00 (1 - s00) s11 (1 - s11) 2 (a + b). Returns the posterior mean of vec Z and its covariance."""
    P = np.linalg.inv(V)
    sd2 = np.sqrt(V[1, 1])
    x = (np.arange(n) + 0.5) / n * 2 - 1
    W0, W1 = np.meshgrid(om[1, 0] + width * sd2 * x, om[1, 1] + width * sd2 * x, indexing="ij")
    lws, Zs = [], []
    with np.errstate(all="ignore"):
        for s in (1.0, -1.0):
            dw = W0 - W1
            s00 = (s * u[0] - c * W0 - W1) / dw
            s11 = (s * u[1] - c * W1 - W0) / (-dw)
            ok = (s00 > 0) & (s00 < 1) & (s11 > 0) & (s11 < 1)
            a, b = np.log(s00 / (1 - s00)), np.log(s11 / (1 - s11))
            ok &= a + b > 0
            e = np.sqrt(np.where(ok, a + b, 1.0))
            log_det = np.log(dw ** 2 * s00 * (1 - s00) * s11 * (1 - s11) * 2 * e ** 2)
            for r in (1.0, -1.0):
                Z = np.stack([r * a / e, -r * b / e, W0, W1], -1)
                D = Z - om.reshape(4)
                d1, d2 = Z[..., :2] - om[0], Z[..., 2:] - om[1]
                q = (P[0, 0] * (d1 ** 2).sum(-1) + 2 * P[0, 1] * (d1 * d2).sum(-1) + P[1, 1] * (d2 ** 2).sum(-1))
                lws.append(np.where(ok, -0.5 * q - log_det, -np.inf))
                Zs.append(np.where(ok[..., None], Z, 0.0))
    lw, Z = np.stack(lws), np.stack(Zs)
    w = np.exp(lw - lw.max())
    w /= w.sum()
    mean = np.einsum("sij,sijk->k", w, Z)
    return mean, np.einsum("sij,sijk,sijl->kl", w, Z, Z) - np.outer(mean, mean)


@pytest.mark.parametrize("c", [1.0, pytest.param(0.1, marks=pytest.mark.slow)])
def test_z2_chart_matches_dense_grid_at_v22_1e6(c):
    """V = diag(0.5, 1e-6) (layer 2 nearly known, layer 1 not: the SE and GAMP between alpha_1 and perfect
    recovery at eps = 1e-6). The channel uses the z2 chart there; on labels from the model, g and the
    posterior covariance within the channel's per-sample budget, 1% of their largest entry (docs/validation/smi.md;
    measured worst 1.6e-3 here, median 1e-7), against the dense z2 grid, on the draws where that reference
    is converged (its 400^2 and 500^2 grids agree within 1e-5, measured: all 6 draws at c = 1, the 500^2 grid
    within 7e-6 of a 1000^2 one; draws with z1 near the diagonal, which
    this chart maps to one point, may not). The old z1 grid was off by O(1) on 2 of 12 such draws at c = 1
    (docs/validation/smi.md)."""
    ch = AttentionChannel(2, c)
    rng = np.random.default_rng(7)
    V = np.diag([0.5, 1e-6])
    assert ch.uses_z2_chart(V)
    Vi = np.linalg.inv(V)
    checked = 0
    for _ in range(6):
        om = np.sqrt(np.diag(np.eye(2) - V))[:, None] * rng.standard_normal((2, 2))
        z = om + np.sqrt(np.diag(V))[:, None] * rng.standard_normal((2, 2))
        u = ch.labels_of_z(z[None])
        m1, c1 = _dense_z2(u[0], om, V, c, 400)
        m2, c2 = _dense_z2(u[0], om, V, c, 500)
        g1, g2 = Vi @ (m1.reshape(2, 2) - om), Vi @ (m2.reshape(2, 2) - om)
        if np.abs(g1 - g2).max() > 1e-5 * np.abs(g2).max():
            continue
        checked += 1
        _, mean, second = ch.posterior(u, om[None], V)
        m = mean.reshape(-1)
        g = Vi @ (m.reshape(2, 2) - om)
        assert np.abs(g - g2).max() < 1e-2 * np.abs(g2).max(), (g, g2)
        cov = second[0] - np.outer(m, m)
        assert np.abs(cov - c2).max() < 1e-2 * np.abs(c2).max()
    assert checked >= 4


def _g_on_model_draws(ch, V, n=512, seed=3):
    draws = sse.Draws(2, 2, n, np.random.default_rng(seed), qmc=False)
    Q = np.eye(2) - V
    om = np.einsum("ab,nbt->nat", psd_sqrt(Q), draws.xi)
    z = om + np.einsum("ab,nbt->nat", psd_sqrt(V), draws.u)
    return ch.g_out_tokens(ch.labels_of_z(z), om, V)


@pytest.mark.parametrize("c", [1.0, 0.1])
def test_nishimori_at_narrow_last_layer_cavity(c):
    """E[sum_t g g^T] = -E[sum_t dg] per layer (exact for the true posterior) at V = diag(0.5, 1e-6) and
    diag(0.05, 1e-6) on the model's own draws, within 4 s.e. With the z1 grid (z2_ratio = 0) layer 1 was off
    by 10 s.e. (c = 1) and 12 s.e. (c = 0.1) at diag(0.5, 1e-6), and E[g2^2] 4x too large (1024 draws)."""
    ch = AttentionChannel(2, c)
    for V in (np.diag([0.5, 1e-6]), np.diag([0.05, 1e-6])):
        g, dg = _g_on_model_draws(ch, V)
        diff = np.einsum("nat,nat->na", g, g) + np.einsum("ntaa->na", dg)
        assert np.all(np.abs(diff.mean(0)) < 4 * diff.std(0) / np.sqrt(len(diff))), (V, diff.mean(0))


@pytest.mark.parametrize("v", [(1e-4, 1e-6), (1e-6, 1e-6), (0.02, 1e-7)])
def test_noiseless_limit_closed_form(v):
    """For V -> 0 the posterior given h (2 equations on the 4 entries of Z) is the Gaussian prior restricted
    to the tangent plane of h(Z) = u: Cov = V - V J^T (J V J^T)^-1 J V per sample, so sum_t g_t^T V g_t has
    mean E[sum_t tr(V (-dg_t))] = p T - tr(Cov (V^-1 x I)) = 4 - 2 = 2 exactly, whatever the ratio V11 /
    V22 (the counting identity behind the perfect-recovery threshold, core/smi/noiseless.py). Within 4 s.e.
    (512 draws) at V = diag(1e-4, 1e-6), 1e-6 I (z1 grid) and diag(0.02, 1e-7) (z2 chart; layer 1 there
    is O(sqrt(0.02)) from linear, within the error bar)."""
    ch = AttentionChannel(2, 1.0)
    V = np.diag(v)
    g, _ = _g_on_model_draws(ch, V)
    x = np.einsum("nat,ab,nbt->n", g, V, g)
    assert abs(x.mean() - 2.0) < 4 * x.std() / np.sqrt(len(x)), (x.mean(), x.std() / np.sqrt(len(x)))
