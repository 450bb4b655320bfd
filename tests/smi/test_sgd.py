"""The layer-wise SGD experiment (spec smi.md §6.2): forward pass, hand-written gradient, learning, determinism."""

import math

import numpy as np
import pytest

from seqphase.core.errors import ParameterError
from seqphase.core.smi import sgd
from seqphase.core.smi.link import link


def _generators(seed):
    names = ("teacher", "data", "init")
    return {f"rng_{name}": np.random.default_rng([k, seed]) for k, name in enumerate(names, start=1)}


@pytest.mark.parametrize("skip", [1.0, 0.3, 0.0])
def test_forward_matches_link(skip):
    rng = np.random.default_rng(0)
    d = 40
    X = rng.standard_normal((50, 2, d))
    weights = 1.5 * rng.standard_normal((2, d))
    z = np.einsum("btk,lk->blt", X, weights) / math.sqrt(d)
    assert np.allclose(sgd.forward(X, weights, skip), link(z, skip), rtol=0, atol=1e-13)


@pytest.mark.parametrize("skip", [1.0, 0.3])
def test_gradient_matches_finite_differences(skip):
    rng = np.random.default_rng(1)
    d, batch, weight_decay, eps = 20, 9, 0.07, 1e-5
    X = rng.standard_normal((batch, 2, d))
    y = sgd.forward(X, rng.standard_normal((2, d)), skip)
    weights = 1.2 * rng.standard_normal((2, d))
    _, grad = sgd.loss_and_gradient(X, y, weights, skip, weight_decay)
    numeric = np.empty_like(weights)
    for index in np.ndindex(weights.shape):
        step = np.zeros_like(weights)
        step[index] = eps
        plus = sgd.loss_and_gradient(X, y, weights + step, skip, weight_decay)[0]
        minus = sgd.loss_and_gradient(X, y, weights - step, skip, weight_decay)[0]
        numeric[index] = (plus - minus) / (2 * eps)
    for layer in range(2):
        error = np.linalg.norm(grad[layer] - numeric[layer]) / np.linalg.norm(numeric[layer])
        assert error < 1e-6, (layer, error)


def test_loss_is_zero_at_the_teacher():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, 2, 25))
    teacher = rng.standard_normal((2, 25))
    loss, grad = sgd.loss_and_gradient(X, sgd.forward(X, teacher, 1.0), teacher, 1.0)
    assert loss == 0.0 and np.abs(grad).max() < 1e-15


def test_short_run_learns_both_layers():
    # d = 100, 40 epochs: layer 2 reaches |cos| ~ 0.998 within ~1 epoch, layer 1 ~ 0.98 by epoch ~10
    # (19 of 20 seeds checked by hand; seed 2 is a fast one). A sign error in one term of the
    # backward pass leaves layer 1 at <= 0.86 (or both layers < 0.12); the test MSE (0.004 here)
    # does not separate those cases, it is only a sanity check.
    out = sgd.run_sgd(d=100, alpha=15, skip=1.0, epochs=40, **_generators(2))
    final = np.abs(out["cosine_normalised"][-1])
    assert final[1] > 0.98 and final[0] > 0.93, final
    assert out["test_mse"][-1] < 0.01 and out["test_mse"][-1] <= out["test_mse"][0]


def test_output_shapes_and_logging_schedule():
    d, alpha, epochs, log_every, test_every = 30, 7.0, 5, 2, 2
    out = sgd.run_sgd(d=d, alpha=alpha, skip=0.5, epochs=epochs, batch_size=40, log_every=log_every,
                      test_every=test_every, n_test=50, **_generators(0))
    per_epoch = math.ceil(round(alpha * d) / 40)  # 210 samples: 6 batches, the last one of 10
    n_logs = sgd.n_logs(d, alpha, epochs, batch_size=40, log_every=log_every)
    assert per_epoch == 6 and n_logs == epochs * per_epoch // log_every
    for key in ("cosine", "cosine_normalised", "overlap", "self_overlap"):
        assert out[key].shape == (n_logs, 2)
    assert np.allclose(out["log_epoch"], np.arange(1, n_logs + 1) * log_every / per_epoch)
    assert out["test_mse"].shape == (sgd.n_tests(epochs, test_every),) == (2,)
    assert np.array_equal(out["test_epoch"], [2.0, 4.0])
    assert np.allclose(out["cosine"], out["overlap"] / np.sqrt(out["self_overlap"]))
    assert isinstance(out["teacher_overlap"], float)


def test_same_generators_give_identical_runs():
    kwargs = dict(d=40, alpha=5, skip=1.0, epochs=6, n_test=100, test_every=3)
    first = sgd.run_sgd(**kwargs, **_generators(5))
    second = sgd.run_sgd(**kwargs, **_generators(5))
    other = sgd.run_sgd(**kwargs, **_generators(6))
    assert first.keys() == second.keys()
    for key in first:
        assert np.array_equal(first[key], second[key]), key
    assert not np.array_equal(first["cosine"], other["cosine"])


@pytest.mark.parametrize("bad", [{"d": 0}, {"epochs": 2.5}, {"alpha": 0.0}, {"skip": -1.0}, {"lr": 0.0}])
def test_bad_parameters(bad):
    kwargs = dict(d=10, alpha=2.0, skip=1.0, epochs=1) | bad
    with pytest.raises(ParameterError):
        sgd.run_sgd(**kwargs, **_generators(0))
