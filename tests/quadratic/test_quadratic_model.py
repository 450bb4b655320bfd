"""The `quadratic` model: points through the registry, the shipped sweeps through the CLI (run, plot), and
bad input (one line naming the field, exit 2, store untouched)."""

import math

import pytest

from seqphase.core.models import get_model, run_point
from test_store import tree_digest
from cli_run import cli_here, on_cluster


def _settings(method, **over):
    return get_model("quadratic").check_settings(method, over)


def test_se_points_through_the_registry():
    out = run_point("quadratic", "se", {"alpha": 0.2, "kappa": 0.5, "delta": 0.0}, _settings("se"), 1, [0])
    assert abs(out["mse"] - 0.3921960) < 8e-8 and out["alpha_pr"] == 0.375
    out = run_point("quadratic", "se", {"alpha": 0.5, "kappa": 0.5, "delta": 0.25}, _settings("se"), 1, [0])
    assert abs(out["mse"] - 0.1638916) < 8e-8 and math.isnan(out["alpha_pr"])


def test_threshold_point():
    out = run_point("quadratic", "threshold", {"kappa": 0.5}, _settings("threshold", rtol=1e-6), 1, [0])
    assert out["alpha_closed_form"] == 0.375 and out["relative_gap"] < 0.01



@pytest.fixture(scope="module")
def quad_store(tmp_path_factory, client):
    folder = tmp_path_factory.mktemp("quadcli")
    store = folder / "s.zarr"
    code, _, err = cli_here("run", "quadratic-se", "--set", "kappa=0.5", "--set", "alpha=0.1,0.2,0.4", "--store",
                            store, *on_cluster(client), "--no-progress")
    assert code == 0, err
    return store


def test_shipped_sweep_runs_and_plots(quad_store, tmp_path):
    code, out, err = cli_here("query", "quadratic-se", "--store", quad_store)
    assert code == 0, err
    rows = out.strip().splitlines()
    assert len(rows) == 1 + 6 and rows[0].startswith("alpha,kappa,delta,mse,qhat,alpha_pr")
    code, _, err = cli_here("plot", "quadratic-se", "-o", tmp_path / "se.png", "--store", quad_store)
    assert code == 0 and (tmp_path / "se.png").stat().st_size > 10000, err


@pytest.mark.parametrize("args, words", [
    (["quadratic-se", "--set", "kappa=0,0.5"], "params.kappa"),
    (["quadratic-se", "--set", "kappa=-1"], "params.kappa"),
    (["quadratic-se", "--set", "delta=-0.1"], "params.delta"),
    (["quadratic-thresholds", "--set", "kappa=0"], "params.kappa"),
    (["quadratic-thresholds", "--set", "delta=0.1"], "params.delta"),
    (["quadratic-se", "--set", "alpha=1e-15"], "params.alpha"),
])
def test_bad_input_one_line_exit_2_store_untouched(quad_store, args, words):
    before = tree_digest(quad_store)
    code, out, err = cli_here("run", *args, "--store", quad_store, "--workers", "1", "--no-progress")
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert tree_digest(quad_store) == before
