"""The tied-attention channel: link and inversion, the compiled posterior against a dense numpy grid,
the Nishimori identity E[g g^T] = -E[dg] of the SE expectation, and the Q = 0 linearisation against
the spec's independent numbers."""

import numpy as np
import pytest

from seqphase.core.errors import ParameterError
from seqphase.core.smi import link
from seqphase.core.smi import se as sse
from seqphase.core.smi import thresholds as sth
from seqphase.core.smi.channels import AttentionChannel

from smi_checks import assert_nishimori


def _reference_A(z1, c):
    return link.softmax_rows(np.outer(z1, z1)) + c * np.eye(2)


def test_link_matches_the_reference_form_and_inverts():
    rng = np.random.default_rng(0)
    for depth in (2, 3):
        z = rng.standard_normal((20, depth, 2))
        y = link.link(z, 0.7)
        for k in range(20):
            B = _reference_A(z[k, 0], 0.7)
            if depth == 3:
                B = _reference_A(B @ z[k, 1], 0.7) @ B
            h = B @ z[k, -1]
            assert np.allclose(link.softmax_rows(np.outer(h, h)), y[k], atol=1e-14)
            u = link.invert_t2(y[k])
            assert np.allclose(u, h, atol=1e-8) or np.allclose(u, -h, atol=1e-8)


def _sheets(X0, X1, u, om, V, c):
    """log-weights (2, ...) and points vec Z (2, ..., 4) of both sheets z2 = A(z1)^-1(+-u) at the grid
    points z1 = (X0, X1); A from `link.attention`, explicit 2 x 2 algebra."""
    P = np.linalg.inv(V)
    A = link.attention(np.stack([X0, X1], -1)) + c * np.eye(2)
    det = A[..., 0, 0] * A[..., 1, 1] - A[..., 0, 1] * A[..., 1, 0]
    h0 = (A[..., 1, 1] * u[0] - A[..., 0, 1] * u[1]) / det
    h1 = (A[..., 0, 0] * u[1] - A[..., 1, 0] * u[0]) / det
    lw, Z = [], []
    for sign in (1.0, -1.0):
        Zs = np.stack([X0, X1, sign * h0, sign * h1], -1)
        D = Zs - om.reshape(4)
        q = (P[0, 0] * (D[..., 0] ** 2 + D[..., 1] ** 2) + 2 * P[0, 1] * (D[..., 0] * D[..., 2] + D[..., 1] * D[..., 3])
             + P[1, 1] * (D[..., 2] ** 2 + D[..., 3] ** 2))
        lw.append(-0.5 * q - np.log(np.abs(det)))
        Z.append(Zs)
    return np.stack(lw), np.stack(Z)


def _dense(u, om, V, c, n=500, box=7.0):
    """Brute force: the same integral on a dense n x n midpoint grid over omega1 +- box sqrt(V11) (step
    0.028 sd(z1), about the narrowest posterior width 0.02 below: the midpoint rule's error on a smooth
    peak of width w at step h is ~exp(-2 pi^2 w^2 / h^2); measured, g at n = 500 and n = 1500 agree to 1e-11
    of max |g| on every sample of test_g_out_matches_dense_grid)."""
    sd = np.sqrt(V[0, 0])
    x0 = om[0, 0] - box * sd + (np.arange(n) + 0.5) * 2 * box * sd / n
    x1 = om[0, 1] - box * sd + (np.arange(n) + 0.5) * 2 * box * sd / n
    X0, X1 = np.meshgrid(x0, x1, indexing="ij")
    lw, Z = _sheets(X0, X1, u, om, V, c)
    w = np.exp(lw - lw.max())
    return np.einsum("sij,sijk->k", w, Z) / w.sum()


@pytest.mark.parametrize("q11,q22,c", [(0.0, 0.0, 1.0), (0.05, 0.05, 0.3), (0.0, 0.95, 1.0), (0.7, 0.98, 2.0),
                                       (0.5, 0.9, 1.0)])
def test_g_out_matches_dense_grid(q11, q22, c):
    """g_out of the adaptive grid within 0.5% (relative to max |g|) of a 500^2 dense grid, on labels drawn
    from the model; the dense grid resolves posteriors of width >= 0.02 (V22 >= 0.02 here)."""
    ch = AttentionChannel(2, c)
    rng = np.random.default_rng(7)
    Q = np.diag([q11, q22])
    V = np.eye(2) - Q
    V[0, 1] = V[1, 0] = 0.1 * np.sqrt(V[0, 0] * V[1, 1])  # a correlated cavity too
    for _ in range(3):
        om = np.sqrt(np.diag(Q))[:, None] * rng.standard_normal((2, 2))
        z = om + np.linalg.cholesky(V) @ rng.standard_normal((2, 2))
        u = ch.labels_of_z(z[None])
        g, _ = ch.g_out_tokens(u, om[None], V)
        g_ref = np.linalg.inv(V) @ (_dense(u[0], om, V, c).reshape(2, 2) - om)
        assert np.abs(g[0] - g_ref).max() < 5e-3 * max(np.abs(g_ref).max(), 1e-2)


def test_nishimori_identity():
    """E[sum_t g_t g_t^T] = -E[sum_t dg_tt] on the SE's own draws (the posterior is the true one): equal
    within 4 Monte Carlo standard errors of the difference."""
    ch = AttentionChannel(2, 1.0)
    draws = sse.Draws(2, 2, 4096, np.random.default_rng(3), qmc=False)
    for Q in (np.diag([0.3, 0.6]), np.diag([0.0, 0.9])):
        assert_nishimori(ch, Q, draws)


def test_k22_and_alpha2_at_c1():
    """K22 at c = 1 against the spec's independent grid computation 5.35 +- 0.13 (8000 draws); ours with 8192
    draws has its own s.e.; the difference must be within 3 combined standard errors. The layer-cross
    moments vanish (evenness in each layer), so F = K o M and alpha_2 = 1 / K22."""
    ch = AttentionChannel(2, 1.0)
    k = sth.k_at_zero(ch, sse.Draws(2, 2, 8192, np.random.default_rng(11)))
    assert k.cross < 1e-10
    assert abs(k.K[1, 1] - 5.35) < 3 * np.hypot(0.13, k.K_se[1, 1])
    assert abs(k.perron - k.K[1, 1]) < 1e-6 * k.K[1, 1]
    assert k.K[1, 1] < 6.0  # Jensen: K_aa <= T (T + 1) = 6, so alpha_2 >= 1/6


def test_k11_matches_spec_table():
    """K11(q) at c = 1: spec 0.70 +- 0.04 (q = 0.9), 3.37 +- 0.15 (q = 0.999); 3 combined s.e."""
    ch = AttentionChannel(2, 1.0)
    draws = sse.Draws(2, 2, 2048, np.random.default_rng(5))
    for q, ref, ref_se in ((0.9, 0.70, 0.04), (0.999, 3.37, 0.15)):
        k, k_se = sth.k11(ch, q, draws, eps=0.0)
        assert abs(k - ref) < 3 * np.hypot(ref_se, k_se), (q, k, k_se)


def test_errors_at_q_zero_match_spec():
    """Spec §3.3 (2e6 draws): e_plug(0) = 0.3864, e_BO(0) = 0.3021; 4 s.e. of ours."""
    ch = AttentionChannel(2, 1.0)
    e, s = sse.gen_error_plugin(ch, np.zeros((2, 2)), 100_000, np.random.default_rng(1))
    assert abs(e - 0.3864) < 4 * s
    e, s = sse.gen_error_bayes(ch, np.zeros((2, 2)), 10_000, rng=np.random.default_rng(2))
    assert abs(e - 0.3021) < 4 * s


def test_bad_skip():
    with pytest.raises(ParameterError, match="skip"):
        AttentionChannel(2, 0.0)


def _dense_strip(u, om, V, c, n=400, box=7.0):
    """Brute force for small skips, independent of the channel's grading: an n x n midpoint grid in (m, s),
    z1 = (m + e/2, m - e/2), e = a sinh(s) with a = sqrt(c)/2 (cells ~ sqrt(c)/2 * step on the strip where
    det A ~ c + e^2/4 nearly vanishes), Jacobian a cosh(s). Returns the posterior mean of vec Z and its
    covariance."""
    sd = np.sqrt(V[0, 0])
    a = np.sqrt(c) / 2
    m = 0.5 * (om[0, 0] + om[0, 1]) + box * sd * ((np.arange(n) + 0.5) / n * 2 - 1)
    e_mid, e_half = om[0, 0] - om[0, 1], box * np.sqrt(2) * sd
    s_lo, s_hi = np.arcsinh((e_mid - e_half) / a), np.arcsinh((e_mid + e_half) / a)
    s = s_lo + (np.arange(n) + 0.5) * (s_hi - s_lo) / n
    M, S = np.meshgrid(m, s, indexing="ij")
    E = a * np.sinh(S)
    lw, Z = _sheets(M + E / 2, M - E / 2, u, om, V, c)
    lw = lw + np.log(a * np.cosh(S))
    w = np.exp(lw - lw.max())
    w /= w.sum()
    mean = np.einsum("sij,sijk->k", w, Z)
    cov = np.einsum("sij,sijk,sijl->kl", w, Z, Z) - np.outer(mean, mean)
    return mean, cov


@pytest.mark.parametrize("c", [0.1, 0.01, 1e-4])
def test_small_skip_posterior_resolves_the_singular_strip(c):
    """For c <~ 0.3, det A(z1) ~ c + e^2/4 nearly vanishes on a strip |z1_0 - z1_1| ~ 2 sqrt(c); the plain
    40 x 40 grid missed it (g off by 12% at c = 0.1, 42% at c = 0.01). Against an independently graded
    dense grid (400^2, e = sqrt(c)/2 sinh(s)), on labels from the model at Q = diag(0, 0.9) (the layer-2
    fixed point where alpha_1 is decided): g and the z1 block of the posterior covariance (what K11 is
    made of) within 1e-3 of their largest entry (the issue's per-sample budget is 1%; the reference itself
    is converged to 1e-11, checked against 1000^2 and 2000^2; measured worst of these 12 samples 3e-4, at c = 1e-4)."""
    ch = AttentionChannel(2, c)
    rng = np.random.default_rng(7)
    Q = np.diag([0.0, 0.9])
    V = np.eye(2) - Q + 1e-3 * np.eye(2)
    for _ in range(4):
        om = np.zeros((2, 2))
        om[1] = np.sqrt(0.9) * rng.standard_normal(2)
        z = om + np.sqrt(np.diag(V))[:, None] * rng.standard_normal((2, 2))
        _assert_matches_dense_strip(ch, om, z, V, c, 2)


def _assert_matches_dense_strip(ch, om, z, V, c, block, tol=1e-3):
    """The channel's posterior for the label of z against `_dense_strip`: g and the leading block x block
    of the posterior covariance within `tol` of their largest entry."""
    u = ch.labels_of_z(z[None])
    _, mean, second = ch.posterior(u, om[None], V)
    m = mean.reshape(-1)
    cov = (second[0] - np.outer(m, m))[:block, :block]
    mean_ref, cov_ref = _dense_strip(u[0], om, V, c)
    cov_ref = cov_ref[:block, :block]
    g, g_ref = np.linalg.inv(V) @ (m.reshape(2, 2) - om), np.linalg.inv(V) @ (mean_ref.reshape(2, 2) - om)
    assert np.abs(g - g_ref).max() < tol * np.abs(g_ref).max(), (g, g_ref)
    assert np.abs(cov - cov_ref).max() < tol * np.abs(cov_ref).max()


def _gamp_cavities(seed):
    """(omega, z, V) on the cavities GAMP meets at small skips (d = 1000, alpha = 0.9: V ~ I early, V ~
    diag(0.6, 0.1) after 30 iterations), omega drawn at the matching overlap, two draws each."""
    rng = np.random.default_rng(seed)
    for v11, v22 in ((0.95, 0.65), (0.6, 0.1)):
        V = np.diag([v11, v22])
        for _ in range(2):
            om = np.sqrt(1 - np.diag(V))[:, None] * rng.standard_normal((2, 2))
            yield om, om + np.sqrt(np.diag(V))[:, None] * rng.standard_normal((2, 2)), V


def test_roughness_estimate_matches_the_midpoint_error_on_a_gaussian():
    """`posterior._roughness_axes` (its total) models each cell as a Gaussian of the curvature its second differences show and
    charges it the midpoint rule's error on that Gaussian, 2 exp(-2 pi^2 s^2) per axis (Poisson summation, s
    the sd in cells). On an isotropic Gaussian centred on a cell the true relative error of the summed weight
    against the exact integral 2 pi s^2 is 2 x 2 exp(-2 pi^2 s^2) to leading order (two axes), so the estimate
    (one axis' worth per cell) must be half of it; and it must grow as s shrinks (narrow peaks refine)."""
    from seqphase.core.smi.posterior import _roughness_axes, _weigh

    n = 41
    ests = []
    for s in (0.45, 0.55, 0.7):
        i = np.arange(n) - n // 2
        lw = -(i[:, None] ** 2 + i[None, :] ** 2) / (2 * s * s)
        buf = np.stack([lw, lw], -1)
        bad = _roughness_axes(buf, n, n, 0.0, np.empty(3))
        _, tot = _weigh(buf, n, n, 0.0, -708.0)
        true = abs(tot / 2 - 2 * np.pi * s * s) / (2 * np.pi * s * s)
        assert 0.4 < (bad / tot) / true < 0.6, (s, bad / tot, true)
        ests.append(bad / tot)
    assert ests[0] > ests[1] > ests[2]


def test_roughness_per_axis_names_the_axis_to_refine():
    """`_roughness_axes` splits the estimate by direction: on a Gaussian 0.45 cells wide along one axis and 3
    cells along the other the narrow axis carries the error (the wide one's terms are < 1e-17 of a cell's
    weight), the total (per cell the largest of the three terms) lies between the largest direction's sum
    and the sum of all three, and transposing the grid swaps the two. `_next_sizes` then halves
    the step of the rough axis alone, keeps the other's on the shrunk box, and never goes below n0 cells
    or above the caps (the strip refinement of posterior.py)."""
    from seqphase.core.smi.posterior import _next_sizes, _roughness_axes, _weigh

    n = 41
    i = np.arange(n) - n // 2
    lw = -(i[:, None] ** 2 / (2 * 3.0 ** 2) + i[None, :] ** 2 / (2 * 0.45 ** 2))
    for buf, rough in ((np.stack([lw, lw], -1), 1), (np.stack([lw.T, lw.T], -1), 0)):
        axes = np.empty(3)
        total = _roughness_axes(buf.copy(), n, n, 0.0, axes)
        assert axes.max() <= total <= axes.sum()
        assert axes[rough] > 0 and axes[1 - rough] < 1e-12 * axes[rough] and axes[2] < 1e-12 * axes[rough]
        _, tot = _weigh(buf.copy(), n, n, 0.0, -708.0)
        tol = 0.1 * total / tot
        sizes = _next_sizes(40, 100, 1.0, 0.5, axes, tot, tol, 40, 160, 640)
        assert sizes == ((40, 100) if rough else (80, 50))
    assert _next_sizes(40, 400, 1.0, 1.0, np.array([0.0, 1.0, 0.0]), 1.0, 1e-4, 40, 160, 640) == (40, 640)
    assert _next_sizes(40, 100, 0.1, 0.1, np.array([1.0, 1.0, 0.0]), 1.0, 1e-4, 40, 160, 640) == (40, 40)


@pytest.mark.parametrize("floor", [-708.0, -50.0])
def test_weigh_zeroes_only_weights_that_cannot_count(floor):
    """`posterior._weigh` writes 0 for a log-weight more than -floor below the peak instead of its exp: every
    weight above the cut is exp exactly. At the default floor, -708, the effective number of cells and the
    total weight equal, to the bit, the sums over every cell's exp in the same order (a narrow peak on a wide
    grid, the second sheet 711 lower: log-weights from 0 down to -2692, 113 of the 3200 in (-746, -708],
    where exp is subnormal); at the onset's -50 (2e-22 of the peak) they are those sums to 1e-15."""
    import math

    from seqphase.core.smi.posterior import _weigh

    n = 40
    i = np.arange(n) - 13.3
    lw = -(i[:, None] ** 2 + 0.5 * i[None, :] ** 2) * 2.0 - 3.0
    buf = np.stack([lw, lw - 711.0], -1)
    top = float(buf.max())
    x = buf - top
    assert np.any((x > -746.0) & (x <= -708.0)) and np.any(x < -746.0) and np.any(x > -708.0)
    s1 = s2 = 0.0
    for a in range(n):
        for b in range(n):
            w0, w1 = math.exp(x[a, b, 0]), math.exp(x[a, b, 1])
            s1 += w0 + w1
            s2 += (w0 + w1) ** 2
    ne, tot = _weigh(buf, n, n, top, floor)
    if floor == -708.0:
        assert tot == s1 and ne == s1 * s1 / s2
    else:
        assert np.any((x > -708.0) & (x <= floor))  # cells the higher floor drops
        assert abs(tot - s1) <= 1e-15 * s1 and abs(ne - s1 * s1 / s2) <= 1e-15 * ne
    kept = x > floor
    # libm's exp, as the kernel's (numpy's own SIMD exp differs from it by an ulp on some CPUs)
    assert np.array_equal(buf[kept], [math.exp(v) for v in x[kept]]) and np.all(buf[~kept] == 0.0)


def _direct_log_weights(xb, om, P, c, u, ljac):
    """The log-weights of both sheets, z2 on sheet +1 and det A written straight from the definitions (the two
    sigmoids by their own exps), in numpy: the reference of `_fill`."""
    x0, x1 = xb[..., 0], xb[..., 1]
    s00, s11 = 1 / (1 + np.exp(-x0 * (x0 - x1))), 1 / (1 + np.exp(-x1 * (x1 - x0)))
    A = np.stack([np.stack([s00 + c, 1 - s00], -1), np.stack([1 - s11, s11 + c], -1)], -2)
    det = np.linalg.det(A)
    z2 = np.linalg.solve(A, np.broadcast_to(u, A.shape[:-1])[..., None])[..., 0]
    lws = []
    for sign in (1.0, -1.0):
        d1, d2 = xb - om[0], sign * z2 - om[1]
        q = P[0, 0] * (d1 * d1).sum(-1) + 2 * P[0, 1] * (d1 * d2).sum(-1) + P[1, 1] * (d2 * d2).sum(-1)
        lws.append(-0.5 * q - np.log(np.abs(det)) + ljac)  # + log de/dt: the strip Jacobian
    return np.stack(lws, -1), z2


@pytest.mark.parametrize("c, strip, centre", [(1.0, False, 0.0), (0.1, True, 0.0), (0.1, True, 30.0),
                                              (1.0, False, 30.0), (0.1, True, 120.0)])
def test_fill_running_products_equal_the_direct_sigmoids(c, strip, centre):
    """`posterior._fill` takes the sigmoids of A(z1) from running products along the rows (restarted every
    RESTART_ROWS rows) instead of two exps a cell; a box whose products could leave the normal range (plain grid
    around |z1| ~ 30, strip box around m ~ 120) takes the direct exps. Against the direct formulas on grids of
    100 rows (three restarts), plain and strip coordinates: log-weights within 1e-12 of their largest size and
    z2 within 1e-12 relative (each product adds <= 1 ulp, <= 32 ulp ~ 7e-15 relative in a sigmoid, which the
    1 / det of the sheets and the quadratic form amplify; measured: at most 2e-14 and 5e-14)."""
    from seqphase.core.smi.posterior import BOX_SIGMAS, _emap, _fill, strip_map

    rng = np.random.default_rng(5)
    V = np.array([[0.8, 0.1], [0.1, 0.4]])
    P = np.linalg.inv(V)
    na, nb = 100, 70
    for _ in range(3):
        om = centre + rng.standard_normal((2, 2))
        u = rng.uniform(-1.0, 1.0, 2)
        rho, B = strip_map(c, np.sqrt(V[0, 0]), 40) if strip else (1.0, 1.0)
        assert (rho < 0.5) == strip
        h = 2 * BOX_SIGMAS * np.sqrt(V[0, 0]) / na
        lo0, lo1 = om[0].mean() - BOX_SIGMAS, (-7.0 if strip else om[0, 1] - BOX_SIGMAS)
        h1 = 14.0 / nb if strip else h
        buf, zb, xb = (np.empty((na, nb, 2)) for _ in range(3))
        top = _fill(buf, zb, xb, lo0, lo1, h, h1, na, nb, u[0], u[1], om, P, c, rho, B)
        t = lo1 + (np.arange(nb) + 0.5) * h1
        ljac = np.log([_emap(v, rho, B)[1] for v in t]) if strip else np.zeros(nb)
        ref, z2 = _direct_log_weights(xb, om, P, c, u, ljac)
        assert np.all(np.isfinite(buf)) and top == buf.max()
        assert np.abs(buf - ref).max() < 1e-12 * np.abs(ref).max(), np.abs(buf - ref).max()
        assert np.abs(zb - z2).max() < 1e-12 * np.abs(z2).max()


@pytest.mark.parametrize("c", [0.01, 1e-4])
def test_small_skip_posterior_at_gamp_cavities(c):
    """The strip-coordinate grid and its acceptance rule (30 effective cells and the local error estimate
    <= 1e-4 of the weight) on the cavities GAMP meets at small skips (d = 1000, alpha = 0.9: V ~ I early,
    V ~ diag(0.6, 0.1) after 30 iterations), labels from the model with omega drawn at the matching
    overlap: g and the full posterior covariance within 1e-3 of their largest entry against the
    independently graded dense grid (`_dense_strip`, 400^2)."""
    ch = AttentionChannel(2, c)
    for om, z, V in _gamp_cavities(11):
        _assert_matches_dense_strip(ch, om, z, V, c, 4)


@pytest.mark.parametrize("c", [0.1, 0.01, 1e-4])
def test_the_onsets_coarse_grid_against_the_dense_grid(c):
    """The onset's 'coarse' posterior grid (`channels.RESOLUTIONS`: strip tolerance 1e-2, weights below e^-50
    of the peak dropped, level-0 strip cells 1.25 wide) on the cavities of `test_small_skip_posterior_at_gamp_cavities`
    against the dense strip grid: g and the posterior covariance within 2e-2 of their largest entry (its
    measured errors on GAMP's own calls: at most 2% of the posterior sd in the mean, docs/validation/smi.md;
    the 'fine' grid passes them at 1e-3 at c = 0.01 and 1e-4)."""
    from seqphase.core.smi.channels import RESOLUTIONS

    coarse = AttentionChannel(2, c, resolution=RESOLUTIONS["coarse"])
    for om, z, V in _gamp_cavities(11):
        _assert_matches_dense_strip(coarse, om, z, V, c, 4, tol=2e-2)


def test_plain_grid_with_an_error_tolerance_stays_in_its_buffers():
    """A caller may pass tol > 0 with the plain grid (rho >= RHO_MAX), which the channel never does: its
    refinement must stay within the plain grid's buffers (4 n0 columns, not the strip chart's 16 n0). This
    sample (a GAMP call at c = 0.1, d = 1000, evaluated at n0 = 80, where c = 0.1 takes the plain grid)
    wrote past them and aborted the process at exit; run in a subprocess, it must end cleanly, with a result
    close to the plain grid's own (tol = 0)."""
    import subprocess
    import sys

    code = """
import numpy as np
from seqphase.core.smi.posterior import posterior_2layer
u = np.array([[-0.94120574, 0.04692114]])
om = np.array([[[0.03964962, 0.12307822], [-1.95347784, 1.06915787]]])
P = np.array([[1.16019049, -0.03539384], [-0.03539384, 10.42709495]])
args = (0.928448539789372, 0.1, 80, 30.0)
tight = posterior_2layer(u, om, P, *args, 1e-7, 6, 1.0, 0.6034915508630918)
plain = posterior_2layer(u, om, P, *args, 0.0, 6, 1.0, 0.6034915508630918)
assert all(np.all(np.isfinite(a)) for a in tight)
assert np.abs(tight[1] - plain[1]).max() < 1e-2 and abs(tight[0][0] - plain[0][0]) < 1e-2
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", (out.returncode, out.stderr[-500:])


def test_strip_map_inverse_hits_its_target():
    """`posterior._tmap` inverts `_emap` (the strip box's ends in t): e(t(e)) = e within 1e-9 over targets
    spanning the boxes of V11 in [0.3, 1] and c in [1e-4, 0.3] (it once returned a bisection midpoint after
    an exact Newton hit: e = -6.0 came back as -2.70 at c = 1e-4, V11 = 0.93, truncating the box)."""
    from seqphase.core.smi.posterior import RHO_MAX, _emap, _tmap, strip_map

    for c in (1e-4, 0.01, 0.1, 0.3):
        for v11 in (0.3, 0.6, 0.9257394438186104, 1.0):
            rho, B = strip_map(c, np.sqrt(v11), 40)
            if rho >= RHO_MAX:
                continue  # the plain grid: no strip map
            for e in np.linspace(-11.0, 11.0, 441):
                assert abs(_emap(_tmap(e, rho, B), rho, B)[0] - e) < 1e-9, (c, v11, e)
    rho, B = strip_map(1e-4, np.sqrt(0.9257394438186104), 40)
    assert abs(_emap(_tmap(-6.0, rho, B), rho, B)[0] + 6.0) < 1e-9


@pytest.mark.parametrize("depth", [2, 3])
def test_output_diagonal_is_the_link_output(depth):
    """The written-out T = 2 output of the SE's error estimates against the generic link (rounding only)."""
    ch = AttentionChannel(depth, 0.7)
    z = 2.0 * np.random.default_rng(3).standard_normal((500, depth, 2))
    y = ch.output(z)
    d = sse.output_diagonal(ch, z)
    assert np.abs(d - np.stack([y[:, 0, 0], y[:, 1, 1]], axis=-1)).max() < 1e-13
    assert np.allclose(y[:, 0, 1], 1.0 - d[:, 0]) and np.allclose(y[:, 1, 0], 1.0 - d[:, 1])


def test_bayes_error_estimators_agree():
    """The per-omega sample variance (k = 4) and the reference form ||g(z) - mean of k others||^2 - var / k
    (k = 16, written here) estimate the same E tr Var(g | omega): within 4 combined s.e. at a learned Q."""
    ch = AttentionChannel(2, 1.0)
    Q = np.diag([0.6, 0.99])
    e, s = sse.gen_error_bayes(ch, Q, 20_000, rng=np.random.default_rng(4))
    rng = np.random.default_rng(5)
    omega, z, V = sse._indices(ch, Q, 10_000, rng)
    inner = omega[:, None] + np.einsum("ab,nkbt->nkat", sse.psd_sqrt(V), rng.standard_normal((10_000, 16, 2, 2)))
    y_in = ch.output(inner.reshape(-1, 2, 2)).reshape(10_000, 16, 2, 2)
    ref = np.sum((ch.output(z) - y_in.mean(1)) ** 2, axis=(1, 2)) - y_in.var(1, ddof=1).sum((1, 2)) / 16
    assert abs(e - ref.mean()) < 4 * np.hypot(s, ref.std() / np.sqrt(ref.size))
