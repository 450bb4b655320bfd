"""GAMP-RIE of the AIM (core/aim/gamp.py): the factorised projections against dense per-sample formulas,
the memory scaling (no n x d x d array), the error against the SE, and the method's layout.

Tolerances for GAMP against SE: |mean - SE| < 3 standard errors (over the seeds) + a finite-d allowance.
The allowance is measured, not guessed: the mean bias of GAMP over 3-8 other seeds at d = 40 ... 200
(docs/benchmarks.md "AIM GAMP-RIE", core/aim/gamp.py docstring) decays with d (softmax +0.020 at d = 100,
+0.008 at d = 200; linear +0.048 at d = 80, +0.005 at d = 160); ALLOWANCE is that bias at the d used here
plus one of its standard errors, rounded up.
"""

import json
import math
import os
import subprocess
import sys
import textwrap
import tracemalloc

import numpy as np
import pytest

from seqphase.core import gamp as loop
from seqphase.core.aim import gamp
from seqphase.core.aim.channels import make_channel, pairs, unfold
from seqphase.core.aim.model import _GAMP_SETTINGS, GAMP, se_error
from seqphase.core.errors import ParameterError

RHO = 0.5


def test_attention_index_and_back_projection_match_dense_formulas():
    """h_ab = (x_a^T S x_b - delta_ab Tr S)/sqrt(d) and B = sum_mu sum_{a<=b} g_ab dh_ab/dS * sqrt(d), per
    sample with explicit loops, at a size small enough for the dense (n, d, d) gradients; chunked with a
    chunk of 2 samples so the chunk boundaries are exercised."""
    rng = np.random.default_rng(0)
    n, T, d = 7, 3, 6
    X = rng.standard_normal((n, T, d))
    A = rng.standard_normal((d, d))
    S = A + A.T
    g = rng.standard_normal((n, T * (T + 1) // 2))
    rows, cols = pairs(T)
    h_dense = np.array([[(X[m, a] @ S @ X[m, b] - (a == b) * np.trace(S)) / math.sqrt(d)
                         for a, b in zip(rows, cols)] for m in range(n)])
    B_dense = np.zeros((d, d))
    for m in range(n):
        for k, (a, b) in enumerate(zip(rows, cols)):
            grad = (np.outer(X[m, a], X[m, b]) + np.outer(X[m, b], X[m, a])) / 2 - (a == b) * np.eye(d)
            B_dense += g[m, k] * grad
    saved = gamp.CHUNK_ELEMENTS
    try:
        gamp.CHUNK_ELEMENTS = 2 * T * d
        np.testing.assert_allclose(gamp.attention_index(X, S), h_dense, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(gamp.back_projection(X, g), B_dense, rtol=1e-12, atol=1e-12)
    finally:
        gamp.CHUNK_ELEMENTS = saved


def test_cavity_shape_is_the_covariance_of_the_index_under_goe_error():
    """c M_mu = Cov(h_mu) when S_hat - S = sqrt(c) Z, Z GOE: Monte Carlo over Z at fixed X (20000 draws),
    and its average over samples tends to diag(1 + delta_ab)."""
    rng = np.random.default_rng(1)
    n, T, d = 3, 3, 8
    X = rng.standard_normal((n, T, d))
    M = gamp.cavity_shape(X)
    draws = 20000
    Z = rng.standard_normal((draws, d, d)) / math.sqrt(d)
    Z = (Z + np.swapaxes(Z, 1, 2)) / math.sqrt(2)  # off-diagonal variance 1/d, diagonal 2/d
    rows, cols = pairs(T)
    for m in range(n):
        h = np.stack([(np.einsum("i,kij,j->k", X[m, a], Z, X[m, b]) - (a == b) * np.trace(Z, axis1=1, axis2=2))
                      / math.sqrt(d) for a, b in zip(rows, cols)], axis=1)
        cov = np.cov(h.T)
        scale = np.sqrt(np.outer(np.diag(M[m]), np.diag(M[m])))
        assert np.max(np.abs(cov - M[m]) / scale) < 6 * math.sqrt(2 / draws)
    big = gamp.cavity_shape(rng.standard_normal((4000, 2, 200)))
    np.testing.assert_allclose(big.mean(0), np.diag([2.0, 1.0, 2.0]), atol=0.03)


def test_instance():
    """n = round(alpha d^2), r = round(rho d), S = W W^T / sqrt(r d): Tr S/d ~ sqrt(rho), Tr S^2/d ~ 1 + rho;
    labels of the channel's shape; too small a d names the setting."""
    channel = make_channel("softmax", 3)
    X, S, y = gamp.sample_instance(channel, 0.05, RHO, 60, np.random.default_rng(2))
    assert X.shape == (180, 3, 60) and y.shape == (180, 9)
    assert np.linalg.matrix_rank(S) == 30
    assert np.trace(S) / 60 == pytest.approx(math.sqrt(RHO), rel=0.05)
    assert np.sum(S * S) / 60 == pytest.approx(1 + RHO, rel=0.1)
    h = unfold(gamp.attention_index(X, S), 3)
    np.testing.assert_allclose(np.exp(y).reshape(-1, 3, 3).sum(-1), 1.0)
    np.testing.assert_allclose(y.reshape(-1, 3, 3)[:, :, 0] - y.reshape(-1, 3, 3)[:, :, 2], h[:, :, 0] - h[:, :, 2],
                               atol=1e-10)
    with pytest.raises(ParameterError, match="method.d"):
        gamp.sample_instance(channel, 0.05, 0.01, 20, np.random.default_rng(0))


#: (channel, alpha, d, seeds, max_iter): the GAMP-vs-SE checks, spec §5 / §2.5 points
CASES = {
    "softmax": ("softmax", 0.1, 100, 4, 60),   # SE 0.3922 (spec §5)
    "hardmax": ("hardmax", 0.5, 80, 3, 40),    # exact g_out, SE 0.2131 (spec: ~0.210, its GAMP 0.2134)
    "linear": ("linear", 0.06, 100, 4, 60),    # alpha_c = 0.125
}
#: finite-d allowance (module docstring): measured mean bias at that d, rounded up (softmax: +0.020 +- 0.006
#: at d = 100 and +0.008 +- 0.006 at d = 200; linear: +0.048 +- 0.009 at d = 80; hardmax (exact, per-sample
#: cavity): +0.0098 +- 0.0027 at alpha = 0.5, d = 100, 16 seeds, a 1/d bias: docs/validation/aim.md)
ALLOWANCE = {"softmax": 0.03, "hardmax": 0.01, "linear": 0.06}

_GAMP_PROBE = textwrap.dedent("""
    import json, math, sys, numpy as np
    from seqphase.core import gamp as loop
    from seqphase.core.aim import gamp
    from seqphase.core.aim.channels import make_channel
    from seqphase.core.aim.model import se_error
    out = {}
    for name, (ch, alpha, d, seeds, max_iter) in json.loads(sys.argv[1]).items():
        channel = make_channel(ch, 2)
        finals, starts = [], []
        for s in range(seeds):
            X, S, y = gamp.sample_instance(channel, alpha, 0.5, d, np.random.default_rng([7, d, s]))
            trace = loop.iterate(gamp.AIMSteps(channel, X, y, S, 0.5), max_iter=max_iter, damping=0.5, tol=1e-5)
            assert not trace.diverged
            finals.append(trace.mse[-1])
            starts.append(trace.mse[0])
        se = se_error({"channel": ch, "alpha": alpha, "rho": 0.5, "T": 2, "hardmax_gout": "exact"})
        f = np.array(finals)
        out[name] = [f.mean(), f.std(ddof=1) / math.sqrt(len(f)), se, max(abs(np.array(starts) - 1))]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def gamp_vs_se():
    """Every case in one subprocess with single-threaded BLAS (d x d eigh on a loaded 2-core machine is
    ~100x slower with 2 OpenBLAS threads than with 1; the cluster's workers also run with 1)."""
    out = subprocess.run([sys.executable, "-c", _GAMP_PROBE, json.dumps(CASES)], capture_output=True, text=True,
                         check=True, env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    return json.loads(out.stdout.split("\n")[-2])


@pytest.mark.parametrize("case", list(CASES))
def test_gamp_reaches_se(gamp_vs_se, case):
    """|mean over seeds - SE| < 3 s.e. + ALLOWANCE[case]; the start sqrt(rho) I has error 1 + O(1/sqrt d)."""
    mean, sem, se, start = gamp_vs_se[case]
    if case == "softmax":
        assert se == pytest.approx(0.3922, abs=1e-4)
    if case == "hardmax":
        assert se == pytest.approx(0.213, abs=3e-3)
    assert start < 0.25
    assert abs(mean - se) < 3 * sem + ALLOWANCE[case], (case, mean, sem, se)


def _traced_peak(d, n):
    """Peak traced memory of 2 GAMP iterations on an instance built (and the prior's table cached) before
    tracing starts. In this process: lazy imports or caches first touched by a run are traced in the first
    call, so the test measures the large instance first (that can only make its checks stricter)."""
    channel = make_channel("linear", 2)
    X, S, y = gamp.sample_instance(channel, n / d**2, 0.5, d, np.random.default_rng(0))
    gamp.mmse_table(0.5)
    tracemalloc.start()
    try:
        loop.iterate(gamp.AIMSteps(channel, X, y, S, 0.5, cavity="gram"), max_iter=2, damping=0.5, tol=1e-5)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_scales_like_n_d_not_n_d_squared():
    """Peak traced memory of 2 iterations (beyond the instance) at n = 4000: doubling d from 40 to 80
    must not quadruple it (an (n, d, d) array would: 51 MB -> 205 MB), and it stays well below one
    n x d x d array. Expected ~ chunk temporaries + O(n p^2) + O(d^2)."""
    n = 4000
    large = _traced_peak(80, n)
    small = _traced_peak(40, n)
    assert large < 0.25 * n * 80 * 80 * 8, large
    assert large / small < 2.5, (small, large)


def test_method_layout_and_run():
    """The method returns every layout variable with its shape; seed s is the same instance whatever
    n_seeds is; the trace is forward-filled."""
    settings = {"d": 20, "n_seeds": 2, "max_iter": 6, "damping": 0.5, "tol": 1e-5, "cavity": "auto"}
    method = GAMP(_GAMP_SETTINGS, version=1, doc="GAMP-RIE")
    layout = method.layout(settings)
    params = {"alpha": 0.1, "rho": RHO, "T": 2, "channel": "softmax", "hardmax_gout": "exact"}
    out = method.run(params, settings, np.random.SeedSequence(5))
    for name, var in layout.variables.items():
        shape = tuple(len(layout.extra_dims[dim]) for dim in var.dims)
        assert np.shape(out[name]) == shape, name
    assert np.all(np.isfinite(out["mse"]))
    one = method.run(params, {**settings, "n_seeds": 1}, np.random.SeedSequence(5))
    np.testing.assert_array_equal(one["mse"][0], out["mse"][0])
    assert out["mse_se"] == pytest.approx(se_error(params))
    for key in _GAMP_SETTINGS:
        assert key in settings
