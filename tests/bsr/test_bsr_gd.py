"""GD and averaged GD of BSR (core/bsr/gd.py): the analytic gradient against finite differences, the GD/AGD
identity (mse_gd - mse_agd = spread of the students >= 0, so AGD < GD), exact recovery above alpha_PR,
students independent of n_students, and the method's layout."""

import numpy as np
import pytest

from seqphase.core.bsr import gamp, gd
from seqphase.core.bsr.channels import BSRChannel
from seqphase.core.bsr.model import _GD_SETTINGS, GD


def test_gradient_matches_finite_differences():
    """Central differences (step 1e-6) of sum (y_hat - y)^2 / 4 in every entry of A and B, two students."""
    rng = np.random.default_rng(0)
    d, L, r, n = 4, 5, 2, 9
    M_f = rng.standard_normal((n, d * L)) / np.sqrt(d * L)
    y = rng.standard_normal(n)
    A = rng.standard_normal((2, d, r))
    B = rng.standard_normal((2, L, r))
    loss, dA, dB = gd.loss_and_gradient(M_f, y, A, B)
    S = gd.estimate(A, B)
    np.testing.assert_allclose(loss, 0.25 * np.sum((S.reshape(2, -1) @ M_f.T - y) ** 2, axis=1), rtol=1e-12)
    h = 1e-6
    for factor, grad in ((A, dA), (B, dB)):
        numeric = np.zeros_like(factor)
        for idx in np.ndindex(factor.shape):
            saved = factor[idx]
            factor[idx] = saved + h
            up = gd.loss_and_gradient(M_f, y, A, B)[0][idx[0]]
            factor[idx] = saved - h
            down = gd.loss_and_gradient(M_f, y, A, B)[0][idx[0]]
            factor[idx] = saved
            numeric[idx] = (up - down) / (2 * h)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-8)


def test_agd_below_gd_noiseless():
    """Noiseless, alpha = 0.2 < alpha_PR = 0.36, d = L = 20, 8 students, 800 steps: the averaged estimate is
    strictly better than single students (by Jensen, mse_gd - mse_agd = mean_i ||S_i - S_bar||^2 / (dL), the
    students' spread, which is O(1) here since the students interpolate at different points); the training
    loss is driven to ~0 (the students interpolate)."""
    out = gd.run_seed(BSRChannel(0.0), alpha=0.2, rho=0.2, beta=1.0, d=20, n_students=8, steps=800, lr=0.1,
                      log_every=100, seed_sequence=np.random.SeedSequence(1))
    assert out["n_diverged"] == 0
    assert out["mse_agd"][-1] < out["mse_gd"][-1] - 0.3
    assert out["train_loss"][-1] < 1e-4 * out["train_loss"][0]
    assert out["mse_gd"][0] == pytest.approx(2.0, abs=0.4)  # prior start: E||S0 - S*||^2/(dL) = 2


def test_gd_recovers_exactly_above_alpha_pr():
    """alpha = 0.7 > alpha_PR = 0.36 (and above the counting bound r(d+L)/(dL) = 0.4): GD interpolates the
    teacher, error < 1e-6 after 1500 steps at d = L = 20."""
    out = gd.run_seed(BSRChannel(0.0), alpha=0.7, rho=0.2, beta=1.0, d=20, n_students=2, steps=1500, lr=0.1,
                      log_every=1500, seed_sequence=np.random.SeedSequence(2))
    assert np.all(out["mse_gd"][-1] < 1e-6)


def test_students_do_not_depend_on_n_students_and_layout():
    """Student 0 of a seed trains the same way whether 1 or 3 students share the data (their errors enter
    the means only); the method returns every declared variable with its declared shape."""
    kwargs = dict(alpha=0.3, rho=0.25, beta=1.5, d=8, steps=20, lr=0.1, log_every=10)
    one = gd.run_seed(BSRChannel(0.1), n_students=1, seed_sequence=np.random.SeedSequence(4), **kwargs)
    instance, students = np.random.SeedSequence(4).spawn(2)
    three = gd.run_seed(BSRChannel(0.1), n_students=3, seed_sequence=np.random.SeedSequence(4), **kwargs)
    assert one["mse_gd"][0] != three["mse_gd"][0]  # the mean over 3 students differs ...
    # ... but the single student's trajectory is student 0's: recompute it alone from its own stream
    X, S_true, y = gamp.sample_instance(BSRChannel(0.1), 0.3, 0.25, 1.5, 8, instance, "float64")
    rng = np.random.default_rng(students.spawn(1)[0])
    A, B = rng.standard_normal((1, 8, 2)), rng.standard_normal((1, 12, 2))
    M_f = X / np.sqrt(96)
    for _ in range(20):
        _, dA, dB = gd.loss_and_gradient(M_f, y, A, B)
        A -= 0.1 * dA
        B -= 0.1 * dB
    assert one["mse_gd"][-1] == pytest.approx(np.sum((gd.estimate(A, B)[0] - S_true) ** 2) / 96, rel=1e-12)

    settings = {name: p.default for name, p in _GD_SETTINGS.items()}
    settings.update(d=8, n_seeds=2, n_students=2, steps=20, log_every=10)
    method = GD(_GD_SETTINGS, version=1, doc="")
    layout = method.layout(settings)
    out = method.run({"alpha": 0.3, "rho": 0.25, "beta": 1.0, "delta": 0.5}, settings, np.random.SeedSequence(5))
    assert set(out) == set(layout.variables)
    for name, var in layout.variables.items():
        assert np.shape(out[name]) == tuple(len(layout.extra_dims[dim]) for dim in var.dims), name


def test_interpolating_students_stop_so_more_steps_do_not_change_the_error():
    """Why the 3000-step default is enough (docs/validation/bsr.md, GD): below alpha_PR the published dynamics interpolates
    geometrically fast (d = L = 20, alpha = 0.2: training MSE < 1e-15 by step 3000, 1e-30 by 6000), after which GD
    no longer moves, so the errors logged at 3000 and 6000 steps agree to rounding. Hence running the spec's
    T = 50 000 steps cannot bring GD from ~1.8 down to the authors' stored ~2 BO."""
    out = gd.run_seed(BSRChannel(0.0), alpha=0.2, rho=0.2, beta=1.0, d=20, n_students=4, steps=6000, lr=0.1,
                      log_every=3000, seed_sequence=np.random.SeedSequence(11))
    assert out["n_diverged"] == 0
    assert out["train_loss"][1] < 1e-15
    np.testing.assert_allclose(out["mse_gd"][2], out["mse_gd"][1], rtol=1e-9)
    np.testing.assert_allclose(out["mse_agd"][2], out["mse_agd"][1], rtol=1e-9)
