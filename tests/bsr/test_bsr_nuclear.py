"""Finite-d baselines of BSR (core/bsr/nuclear.py): the minimal nuclear-norm estimator (ADMM) and ridge.

Checks: exact recovery by the MNNE well above alpha_MNNE at tiny d; optimality below it through the duality
gap, dual feasibility and random feasible directions (KKT); ridge = the minimum-norm interpolator at
delta = 0, its finite-d error against the closed form (tolerance 4 s.e. over seeds + a finite-d allowance);
the method's layout; a bad `d` through the CLI.
"""

import math

import numpy as np
import pytest

from seqphase.core.bsr import baselines, nuclear
from seqphase.core.bsr.channels import BSRChannel
from seqphase.core.bsr.gamp import sample_instance
from seqphase.core.bsr.model import _BASELINES_SETTINGS, Baselines
from seqphase.core.models import get_model
from cli_run import cli


def _instance(alpha, rho, d, seed, delta=0.0, beta=1.0):
    X, S, y = sample_instance(BSRChannel(delta), alpha, rho, beta, d, np.random.SeedSequence(seed), "float64")
    L = S.shape[1]
    return nuclear.measurement(X, d, L), S, y, L


def test_measurement_is_the_label_map():
    """A vec(S*) is the noiseless label <X_mu, S*>/sqrt(dL)."""
    A, S, y, _ = _instance(0.5, 0.5, 8, 1)
    np.testing.assert_allclose(A @ S.reshape(-1), y, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_mnne_recovers_exactly_well_above_alpha_mnne(seed):
    """d = L = 10, rho = 0.2 (r = 2): alpha = 0.9 > alpha_MNNE = 0.572 (well above at this d): the MNNE is S*
    up to the solver's tolerance (error ~ tol^2 scale), feasible to rounding, with a certified gap."""
    A, S, y, L = _instance(0.9, 0.2, 10, seed)
    res = nuclear.min_nuclear_norm(A, y, 10, L, tol=1e-8)
    assert res.converged and 0 <= res.gap <= 1e-8
    assert res.residual < 1e-12
    assert nuclear.per_entry_error(res.S, S) < 1e-10


def test_mnne_kkt_below_threshold():
    """alpha = 0.3 < alpha_MNNE (no exact recovery): the returned S is feasible, the dual point certifies
    ||S||_* - y^T lam <= 1e-7 ||S||_*, and no feasible direction (random null-space perturbations of A at
    two scales) lowers the nuclear norm by more than that gap."""
    A, S_true, y, L = _instance(0.3, 0.2, 12, 4)
    res = nuclear.min_nuclear_norm(A, y, 12, L, tol=1e-7)
    assert res.converged and res.gap <= 1e-7 and res.residual < 1e-12
    assert nuclear.per_entry_error(res.S, S_true) > 1e-3  # not recovered: the check below is not trivial
    _, _, Vt = np.linalg.svd(A)
    null = Vt[A.shape[0]:]                              # orthonormal basis of null(A)
    rng = np.random.default_rng(0)
    norm = res.nuclear_norm
    for scale in (1e-3, 1e-1):
        for _ in range(20):
            step = (rng.standard_normal(null.shape[0]) @ null).reshape(12, L)
            step *= scale * np.linalg.norm(res.S) / np.linalg.norm(step)
            moved = np.sum(np.linalg.svd(res.S + step, compute_uv=False))
            assert moved >= norm * (1 - 1e-7)
            np.testing.assert_allclose(A @ (res.S + step).reshape(-1), y, atol=1e-10)


def test_svt_is_the_prox_of_the_nuclear_norm():
    """SVT(M, t) minimises t ||Z||_* + ||Z - M||^2 / 2: lower than at random nearby points."""
    rng = np.random.default_rng(2)
    M = rng.standard_normal((6, 9))
    Z, shrunk = nuclear.singular_value_threshold(M, 1.5)

    def objective(W):
        return 1.5 * np.sum(np.linalg.svd(W, compute_uv=False)) + 0.5 * np.sum((W - M) ** 2)

    best = objective(Z)
    assert np.all(shrunk >= 0) and np.count_nonzero(shrunk) < 6
    for _ in range(50):
        assert objective(Z + 1e-3 * rng.standard_normal(M.shape)) >= best


def test_ridge_noiseless_is_the_minimum_norm_interpolator():
    A, S, y, L = _instance(0.4, 0.5, 10, 3)
    S_hat = nuclear.ridge(A, y, 0.0, 10, L)
    np.testing.assert_allclose(A @ S_hat.reshape(-1), y, atol=1e-10)
    np.testing.assert_allclose(S_hat.reshape(-1), np.linalg.pinv(A) @ y, atol=1e-10)


@pytest.mark.parametrize("alpha, delta", [(0.5, 0.0), (0.3, 0.5)])
def test_ridge_finite_d_matches_closed_form(alpha, delta):
    """Mean over 24 seeds at d = L = 20 (rho = 0.5) against baselines.mse_ridge: |mean - closed form| < 4 s.e.
    + 0.01. The allowance: ridge is linear, so its error depends on S* only through ||S*||^2 (rotation
    invariance of X) and on the spectrum of A A^T, whose finite-size corrections are O(1/sqrt(n dL)) ~ 0.3%
    at n = 200, dL = 400 (measured bias over 96 seeds: < 0.004)."""
    errors = []
    for seed in range(24):
        A, S, y, L = _instance(alpha, 0.5, 20, 100 + seed, delta=delta)
        errors.append(nuclear.per_entry_error(nuclear.ridge(A, y, delta, 20, L), S))
    errors = np.array(errors)
    sem = errors.std(ddof=1) / math.sqrt(len(errors))
    assert abs(errors.mean() - float(baselines.mse_ridge(alpha, delta))) < 4 * sem + 0.01


def test_baselines_method_layout_and_values():
    """A small point through the method: every declared variable with its declared shape, certificates met,
    the asymptotic curves filled in from baselines.py."""
    settings = {name: p.default for name, p in _BASELINES_SETTINGS.items()}
    settings.update(d=10, n_seeds=3)
    method = Baselines(_BASELINES_SETTINGS, version=1, doc="")
    layout = method.layout(settings)
    out = method.run({"alpha": 0.9, "rho": 0.2, "beta": 1.0, "delta": 0.0}, settings, np.random.SeedSequence(5))
    assert set(out) == set(layout.variables)
    for name, var in layout.variables.items():
        assert np.shape(out[name]) == tuple(len(layout.extra_dims[dim]) for dim in var.dims), name
    assert np.all(out["mnne_converged"] == 1) and np.all(out["mnne_gap"] <= 1e-6)
    assert np.all(out["mse_mnne"] < 1e-8)
    assert out["alpha_mnne"] == pytest.approx(0.5716899, abs=1e-6)
    assert out["alpha_pr"] == pytest.approx(0.36)
    assert out["mse_ridge"] == pytest.approx(0.1)
    assert get_model("bsr").method("baselines") is not None


def test_too_small_d_is_a_parameter_error_through_the_cli(tmp_path):
    """rho d rounding to rank 0: one line naming method.d, exit 2, nothing stored."""
    store = tmp_path / "s.zarr"
    code, out, err = cli("run", "bsr-baselines", "--set", "rho=0.01", "--set", "alpha=0.5", "--store", store,
                         "--workers", "1", "--no-progress")
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "method.d" in lines[0], err
