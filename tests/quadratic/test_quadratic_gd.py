"""GD and averaged GD on the quadratic network (core/quadratic/gd.py, spec §B4), and the shared optimisers
(core/optim.py).

Thresholds of the training tests were measured at d = 30, kappa = 0.5 (m = 15), alpha = 0.2 (SE 0.392),
plain GD lr 0.1, 400 steps, 6 students, SeedSequence(2024) children 0-3, and are set with margin:
- start (random N(0, 1) students): 1.93 ... 2.47 -> assert > 1.5;
- single-student GD error 0.86 ... 1.31 per seed (2 SE = 0.78: GD samples the posterior, plus finite d)
  -> assert > 1.5 SE;
- AGD / GD 0.52 ... 0.65 per seed (6 independent posterior samples would give (1 + 1/6) / 2 = 0.58)
  -> assert < 0.75. What holds exactly is Jensen: GD - AGD = the students' spread, checked to rounding;
- training loss at step 400 / at step 0: 6.6e-7 ... 4.6e-6 (interpolation, noiseless) -> assert < 1e-4;
- Adam lr 0.01, 200 steps, 2 students: loss ratio 0.009 and 0.010 -> assert < 0.05.
"""

import math

import numpy as np
import pytest

from seqphase.core import optim
from seqphase.core.errors import ParameterError
from seqphase.core.models import get_model, run_point
from seqphase.core.quadratic import gamp, gd
from seqphase.core.quadratic.channels import QuadraticChannel
from test_store import tree_digest
from cli_run import cli_here, on_cluster

KAPPA = 0.5


def test_prediction_is_the_channel_measurement_of_the_student():
    """y_hat = Tr[(x x^T - I) S_hat]/d with S_hat = W^T W / sqrt(m): the teacher's noiseless label map."""
    rng = np.random.default_rng(0)
    x, W = rng.standard_normal((6, 9)), rng.standard_normal((4, 9))
    labels = QuadraticChannel(0.0, 4 / 9).labels(x, W, rng)
    np.testing.assert_allclose(gd.predict(x, W), labels, rtol=1e-12, atol=1e-12)


def test_gradient_matches_central_differences():
    rng = np.random.default_rng(5)
    n, d, m, s = 11, 6, 3, 2
    x, y = rng.standard_normal((n, d)), rng.standard_normal(n)
    W = rng.standard_normal((s, m, d))
    loss, grad = gd.loss_and_gradient(x, y, W)
    for i in range(s):  # the stacked students' losses are each student's own objective
        assert loss[i] == pytest.approx(np.sum((gd.predict(x, W[i]) - y) ** 2) / 4, rel=1e-13)
    eps = 1e-6
    numeric = np.empty_like(W)
    for index in np.ndindex(W.shape):
        plus, minus = W.copy(), W.copy()
        plus[index] += eps
        minus[index] -= eps
        numeric[index] = (gd.loss_and_gradient(x, y, plus)[0][index[0]]
                          - gd.loss_and_gradient(x, y, minus)[0][index[0]]) / (2 * eps)
    # central differences: O(eps^2 |L'''|) truncation + O(1e-16 |L| / eps) rounding, ~1e-9 here
    assert np.max(np.abs(numeric - grad)) < 1e-7 * np.max(np.abs(grad))


def test_optimisers():
    """Adam's first step is lr * sign(g) (m_hat = g, sqrt(v_hat) = |g|); plain GD is W - lr g."""
    grad = np.array([[0.5, -1e-3, 40.0]])
    W = np.array([[1.0, -2.0, 3.0]])
    optim.Adam(W, 0.1).step(W, grad)
    np.testing.assert_allclose(W, [[1.0, -2.0, 3.0]] - 0.1 * grad / (np.abs(grad) + 1e-8), rtol=1e-12)
    W = np.array([[1.0, -2.0, 3.0]])
    optim.GradientDescent(W, 0.1).step(W, grad)
    np.testing.assert_allclose(W, [[1.0, -2.0, 3.0]] - 0.1 * grad, rtol=1e-15)


def _seeds(n_seeds, **kw):
    args = dict(alpha=0.2, kappa=KAPPA, delta=0.0, d=30, n_students=6, steps=400, lr=0.1, log_every=100,
                optimiser="gd")
    args.update(kw)
    return [gd.run_seed(seed_sequence=child, **args) for child in np.random.SeedSequence(2024).spawn(n_seeds)]


def test_gd_samples_the_posterior_and_agd_halves_its_error():
    se = 0.3921960  # spec §8b, alpha = 0.2, kappa = 0.5
    for run in _seeds(2):
        assert run["train_loss"][-1] < 1e-4 * run["train_loss"][0]
        assert run["mse_gd"][0] > 1.5  # random N(0, 1) students: error ~ 2
        assert run["mse_gd"][-1] > 1.5 * se
        assert run["mse_agd"][-1] < 0.75 * run["mse_gd"][-1]
        np.testing.assert_allclose(run["mse_gd"], run["mse_students"].mean(axis=0), rtol=1e-14)


def test_agd_gap_is_the_students_spread_and_students_are_their_own_streams(monkeypatch):
    """GD - AGD = mean_i ||S_i - S_bar||^2 / d^2 (Jensen), with the students rebuilt from their own streams;
    a student is the same whatever n_students or the chunking."""
    kw = dict(alpha=0.15, kappa=KAPPA, delta=0.1, d=12, steps=30, lr=0.1, log_every=30, optimiser="gd")
    three = gd.run_seed(n_students=3, seed_sequence=np.random.SeedSequence(4), **kw)
    two = gd.run_seed(n_students=2, seed_sequence=np.random.SeedSequence(4), **kw)
    monkeypatch.setattr(gd, "WORK_ELEMENTS", 1)  # one student per chunk
    chunked = gd.run_seed(n_students=3, seed_sequence=np.random.SeedSequence(4), **kw)
    np.testing.assert_allclose(three["mse_students"][:2], two["mse_students"], rtol=1e-12)
    np.testing.assert_allclose(three["mse_students"], chunked["mse_students"], rtol=1e-12)
    data_seq, students_seq = np.random.SeedSequence(4).spawn(2)
    x, teacher, y = gamp.sample_instance(0.15, KAPPA, 0.1, 12, np.random.default_rng(data_seq))
    W = np.stack([np.random.default_rng(s).standard_normal((6, 12)) for s in students_seq.spawn(3)])
    gd.train(x, y, W, optimiser="gd", lr=0.1, steps=30, log_at=[30], on_log=lambda *a: None)
    S = np.swapaxes(W, 1, 2) @ W / math.sqrt(6)
    S_star = teacher.T @ teacher / math.sqrt(6)
    np.testing.assert_allclose(three["mse_students"][:, -1], np.sum((S - S_star) ** 2, axis=(1, 2)) / 144,
                               rtol=1e-12)
    spread = np.mean(np.sum((S - S.mean(axis=0)) ** 2, axis=(1, 2))) / 144
    assert three["mse_gd"][-1] - three["mse_agd"][-1] == pytest.approx(spread, rel=1e-10)


def test_adam_trains_too():
    run = _seeds(1, optimiser="adam", lr=0.01, steps=200, n_students=2)[0]
    assert run["train_loss"][-1] < 0.05 * run["train_loss"][0]


def test_method_through_run_point():
    model = get_model("quadratic")
    settings = model.check_settings("gd", {"d": 12, "n_seeds": 2, "n_students": 3, "steps": 20, "log_every": 7})
    params = {"alpha": 0.2, "kappa": KAPPA, "delta": 0.0}
    out = run_point("quadratic", "gd", params, settings, 11, [0])
    layout = model.layout("gd", settings)
    assert list(layout.extra_dims["step"]) == [0, 7, 14, 20]
    for name, var in layout.variables.items():
        assert np.shape(out[name]) == tuple(len(layout.extra_dims[dim]) for dim in var.dims), name
    assert out["mse_se"] == pytest.approx(0.3921960, abs=1e-6)
    assert np.all(out["mse_agd"] <= out["mse_gd"]) and np.all(np.isfinite(out["train_loss"]))
    again = run_point("quadratic", "gd", params, settings, 11, [0])
    assert all(np.array_equal(out[k], again[k]) for k in out)


def test_bad_input_one_line_exit_2_store_untouched(tmp_path):
    """An optimiser the method does not have: one line naming the setting, exit 2, store untouched (the
    method's own check, kappa d rounding to no hidden unit, is tested through the CLI for gamp)."""
    store = tmp_path / "s.zarr"
    store.mkdir()
    before = tree_digest(store)
    code, out, err = cli_here("run", "quadratic-gd", "--set", "optimiser=sgd", "--store", store, "--workers", "1",
                              "--no-progress")
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "optimiser" in lines[0], err
    assert tree_digest(store) == before
    with pytest.raises(ParameterError, match="method.d"):
        get_model("quadratic").method("gd").check({"alpha": 0.2, "kappa": 0.1, "delta": 0.0}, {"d": 4})


def test_shipped_sweeps_run_and_plot(tmp_path, client):
    """quadratic-gd and quadratic-gamp from their spec files, shrunk with --set, through run and plot."""
    store = tmp_path / "s.zarr"
    for name, sets in (("quadratic-gd", ["d=8", "n_seeds=2", "n_students=2", "steps=10", "log_every=5",
                                         "alpha=0.1,0.3"]),
                       ("quadratic-gamp", ["d=16", "n_seeds=2", "max_iter=4", "alpha=0.1,0.3"])):
        args = [a for s in sets for a in ("--set", s)]
        code, _, err = cli_here("run", name, *args, "--store", store, *on_cluster(client), "--no-progress")
        assert code == 0, err
        code, _, err = cli_here("plot", name, "-o", tmp_path / f"{name}.png", "--store", store)
        assert code == 0 and (tmp_path / f"{name}.png").stat().st_size > 10000, err
    # query: GD's logged steps are rows, like GAMP's iterations (alpha x seed x step)
    code, out, err = cli_here("query", "quadratic-gd", "--store", store)
    assert code == 0, err
    header, *lines = out.strip().splitlines()
    columns = header.split(",")
    assert {"seed", "step", "mse_gd", "mse_agd", "train_loss"} <= set(columns), columns
    steps = {line.split(",")[columns.index("step")] for line in lines}
    assert len(steps) > 1 and len(lines) == 2 * 2 * len(steps)
