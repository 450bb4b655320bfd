"""GAMP-RIE of the quadratic network (core/quadratic/gamp.py): the factorised projections against dense formulas,
the per-sample cavity against Monte Carlo, the error against the SE, undamped versus damped, and the method
(layout, seed reproducibility, bad input through the CLI).

Tolerance for GAMP against SE: |mean over seeds - SE| < 3 standard errors (over the seeds) + a finite-d
allowance. The allowance is measured on OTHER seeds (rng [7, 80, s], s < 12, d = 80, damping 0.5 of the
estimate, gram cavity; docs/validation/quadratic.md "GAMP-RIE"): mean bias +0.006 +- 0.012 (alpha = 0.15), +0.007 +- 0.004
(alpha = 0.3), +0.029 +- 0.007 (alpha = 0.25, delta = 0.25); ALLOWANCE is that bias plus one of its standard
errors, rounded up to 0.01. The authors' own AMP data sit +0.013 (noiseless) and +0.024 (noisy) above BO at
d = 100 (spec §B3).
"""

import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from seqphase.core.errors import ParameterError
from seqphase.core.models import get_model, run_point
from seqphase.core.quadratic import gamp
from seqphase.core.quadratic.channels import QuadraticChannel
from test_store import tree_digest
from cli_run import cli

KAPPA = 0.5


def test_projection_and_back_projection_match_dense_formulas():
    """omega_mu = Tr[(x x^T - I) S]/sqrt(d) and B = sum_mu g_mu (x_mu x_mu^T - I), per sample with dense d x d
    matrices, at a size where the (n, d, d) tensor is small."""
    rng = np.random.default_rng(0)
    n, d = 9, 7
    x = rng.standard_normal((n, d))
    A = rng.standard_normal((d, d))
    S = A + A.T
    g = rng.standard_normal(n)
    X = np.einsum("ni,nj->nij", x, x) - np.eye(d)
    np.testing.assert_allclose(QuadraticChannel.preactivation(x, S), np.einsum("nij,ij->n", X, S) / math.sqrt(d),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gamp.back_projection(x, g), np.einsum("n,nij->ij", g, X), rtol=1e-12, atol=1e-12)


def test_cavity_shape_is_the_variance_of_the_preactivation_under_goe_error():
    """c M_mu = Var[(x^T E x - Tr E)/sqrt(d)] for E = sqrt(c) Z, Z GOE (off-diagonal variance 1/d, diagonal
    2/d), at fixed x: Monte Carlo over 20000 Z (relative s.e. sqrt(2/20000) = 1 %); mean over samples ~ 2."""
    rng = np.random.default_rng(1)
    n, d, draws = 4, 10, 20000
    x = rng.standard_normal((n, d)) * np.array([0.5, 1.0, 1.5, 1.0])[:, None]  # spread the norms ||x||^2
    Z = rng.standard_normal((draws, d, d)) / math.sqrt(d)
    Z = (Z + np.swapaxes(Z, 1, 2)) / math.sqrt(2)
    h = (np.einsum("mi,kij,mj->km", x, Z, x) - np.trace(Z, axis1=1, axis2=2)[:, None]) / math.sqrt(d)
    np.testing.assert_allclose(h.var(axis=0), gamp.cavity_shape(x), rtol=6 * math.sqrt(2 / draws))
    big = gamp.cavity_shape(rng.standard_normal((20000, 100)))
    assert big.mean() == pytest.approx(2.0, abs=0.05)


def test_instance_units():
    """n = round(alpha d^2), m = round(kappa d); the labels are the channel's measurement of S* with the
    label-noise variance delta; too small a d names the setting."""
    x, W, y = gamp.sample_instance(0.2, KAPPA, 0.0, 40, np.random.default_rng(2))
    assert x.shape == (320, 40) and W.shape == (20, 40) and y.shape == (320,)
    S_star = W.T @ W / math.sqrt(20)
    np.testing.assert_allclose(y, np.einsum("ni,ij,nj->n", x, S_star, x) / 40 - np.trace(S_star) / 40, rtol=1e-10)
    _, _, y_noisy = gamp.sample_instance(0.2, KAPPA, 0.25, 40, np.random.default_rng(2))
    assert np.var(y_noisy - y) == pytest.approx(0.25, rel=0.25)  # 320 draws: relative s.e. 8 %
    with pytest.raises(Exception, match="method.d"):
        gamp.teacher_width(0.1, 4)


#: (alpha, delta, d, seeds): GAMP-vs-SE cases (SE 0.1281309 and 0.4164120, spec §8b)
CASES = {"noiseless": (0.3, 0.0, 80, 4), "noisy": (0.25, 0.25, 80, 4)}
ALLOWANCE = {"noiseless": 0.02, "noisy": 0.04}

_PROBE = textwrap.dedent("""
    import json, math, sys, numpy as np
    from seqphase.core import gamp as loop
    from seqphase.core.quadratic import gamp
    from seqphase.core.quadratic.se import bo_state
    out = {}
    for name, (alpha, delta, d, seeds) in json.loads(sys.argv[1]).items():
        runs = []
        for s in range(seeds):
            x, W, y = gamp.sample_instance(alpha, 0.5, delta, d, np.random.default_rng([11, d, s]))
            trace = loop.iterate(gamp.QuadraticSteps(x, y, W, delta), max_iter=100, damping=0.5, tol=1e-5)
            assert not trace.diverged
            runs.append([trace.mse[0], trace.mse[-1], trace.mse_predicted[-1]])
            if name == "noiseless" and s < 2:  # the same instance undamped, with the spec's scalar cavity
                bare = loop.iterate(gamp.QuadraticSteps(x, y, W, 0.0, cavity="scalar"), max_iter=100, damping=0.0,
                                    tol=1e-5)
                out.setdefault("undamped", []).append([bare.mse[-1], bare.mse_predicted[-1]] + runs[-1][1:])
        f = np.array(runs)[:, 1]
        out[name] = [f.mean(), f.std(ddof=1) / math.sqrt(len(f)), bo_state(alpha, 0.5, delta).mse,
                     max(abs(np.array(runs)[:, 0] - 1))]
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def probe():
    """Every run in one subprocess with single-threaded BLAS (small eigh and products are much slower with
    2 OpenBLAS threads on a loaded 2-core machine; the cluster's workers also run with 1)."""
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(CASES)], capture_output=True, text=True,
                         check=True, env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", list(CASES))
def test_gamp_reaches_se(probe, case):
    """|mean - SE| < 3 s.e. + ALLOWANCE (module docstring); the start E[S*] has error 1 + O(1/sqrt d)."""
    mean, sem, se, start = probe[case]
    assert se == pytest.approx({"noiseless": 0.1281309, "noisy": 0.4164120}[case], abs=1e-6)
    assert start < 0.3
    assert abs(mean - se) < 3 * sem + ALLOWANCE[case], (case, mean, sem, se)


def test_undamped_scalar_cavity_collapses_damped_does_not(probe):
    """Spec §B3/pitfall 7: without damping (and with the spec's scalar cavity) the predicted error collapses
    towards 0 (measured on 8 seeds at d = 80, alpha = 0.3: every run below 5e-5 after 100 iterations, actual
    error 0.13-0.20), a spurious fixed point; damped, the prediction stays with the actual error (SE 0.128)."""
    for bare_mse, bare_pred, damped_mse, damped_pred in probe["undamped"]:
        assert bare_pred < 1e-3 and bare_mse > 0.1
        assert damped_pred > 0.05 and abs(damped_pred - damped_mse) < 0.05


def test_method_layout_seed_reproducibility_and_se():
    model = get_model("quadratic")
    settings = model.check_settings("gamp", {"d": 20, "n_seeds": 2, "max_iter": 5})
    params = {"alpha": 0.2, "kappa": KAPPA, "delta": 0.0}
    out = run_point("quadratic", "gamp", params, settings, 3, [0])
    layout = model.layout("gamp", settings)
    for name, var in layout.variables.items():
        assert np.shape(out[name]) == tuple(len(layout.extra_dims[dim]) for dim in var.dims), name
    assert np.all(np.isfinite(out["mse"])) and out["mse_se"] == pytest.approx(0.3921960, abs=1e-6)
    one = run_point("quadratic", "gamp", params, {**settings, "n_seeds": 1}, 3, [0])
    np.testing.assert_array_equal(one["mse"][0], out["mse"][0])
    again = run_point("quadratic", "gamp", params, settings, 3, [0])
    assert all(np.array_equal(out[k], again[k]) for k in out)
    assert model.check_settings("gamp", {})["n_seeds"] == 16


def test_bad_settings_name_the_field():
    model = get_model("quadratic")
    for bad, words in (({"damping": 1.0}, "damping"), ({"damp": "omega"}, "damp"), ({"cavity": "full"}, "cavity")):
        with pytest.raises(ParameterError, match=words):
            model.check_settings("gamp", bad)
    with pytest.raises(ParameterError, match="params.alpha"):
        model.method("gamp").check({"alpha": 1e-4, "kappa": KAPPA, "delta": 0.0},
                                   model.check_settings("gamp", {"d": 20}))


def test_bad_input_through_the_cli_one_line_exit_2_store_untouched(tmp_path):
    """kappa d rounds to no hidden unit: refused by the method's check before anything runs."""
    store = tmp_path / "s.zarr"
    store.mkdir()
    before = tree_digest(store)
    code, out, err = cli("run", "quadratic-gamp", "--set", "kappa=0.1", "--set", "d=4", "--store", store,
                         "--workers", "1", "--no-progress")
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "method.d" in lines[0], err
    assert tree_digest(store) == before
