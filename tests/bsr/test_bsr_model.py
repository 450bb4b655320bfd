"""The `bsr` model: points through the registry, the shipped sweeps through the CLI (run, query, plot), and bad
input (one line naming the field, exit 2, store untouched)."""

import math

import pytest

from seqphase.core.models import get_model, run_point
from test_store import tree_digest
from cli_run import cli_here, on_cluster


def _settings(method, **over):
    return get_model("bsr").check_settings(method, over)


def test_se_points_through_the_registry():
    """Spec §8b values (7 decimals; the RIE table adds < 1.5e-7, tests/bsr/test_bsr_se.py) and the ridge column."""
    out = run_point("bsr", "se", {"alpha": 0.5, "rho": 0.5, "beta": 1.0, "delta": 0.0}, _settings("se"), 1, [0])
    assert abs(out["mse"] - 0.3514552) < 2e-7 and out["alpha_pr"] == 0.75
    assert out["mse_ridge"] == pytest.approx(0.5, abs=1e-15)
    assert out["zeta"] == pytest.approx(out["mse"] / 0.5, rel=1e-12)
    out = run_point("bsr", "se", {"alpha": 0.5, "rho": 0.2, "beta": 1.0, "delta": 0.5}, _settings("se"), 1, [0])
    assert abs(out["mse"] - 0.5099198) < 2e-7 and math.isnan(out["alpha_pr"])
    out = run_point("bsr", "se", {"alpha": 0.0, "rho": 0.5, "beta": 1.0, "delta": 0.0}, _settings("se"), 1, [0])
    assert out["mse"] == 1.0 and out["zeta"] == math.inf and out["mse_ridge"] == 1.0


def test_threshold_point():
    out = run_point("bsr", "threshold", {"rho": 0.5, "beta": 1.0}, _settings("threshold", rtol=1e-6), 1, [0])
    assert out["alpha_closed_form"] == 0.75 and out["relative_gap"] < 0.01
    assert abs(out["alpha_mnne"] - 0.9054173) < 5e-8


@pytest.fixture(scope="module")
def bsr_store(tmp_path_factory, client):
    folder = tmp_path_factory.mktemp("bsrcli")
    store = folder / "s.zarr"
    code, _, err = cli_here("run", "bsr-se", "--set", "rho=0.5", "--set", "beta=1", "--set", "alpha=0,0.25,0.5,0.8",
                            "--store", store, *on_cluster(client), "--no-progress")
    assert code == 0, err
    return store


def test_shipped_sweep_runs_and_plots(bsr_store, tmp_path):
    code, out, err = cli_here("query", "bsr-se", "--store", bsr_store)
    assert code == 0, err
    rows = out.strip().splitlines()
    header = rows[0].split(",")
    assert len(rows) == 1 + 4 * 2 and header[:4] == ["alpha", "rho", "beta", "delta"]
    assert {"mse", "zeta", "mse_ridge", "alpha_pr"} <= set(header)
    values = [dict(zip(header, row.split(","))) for row in rows[1:]]
    point = next(v for v in values if float(v["alpha"]) == 0.5 and float(v["delta"]) == 0.0)
    assert abs(float(point["mse"]) - 0.3514552) < 2e-7
    code, _, err = cli_here("plot", "bsr-se", "-o", tmp_path / "se.png", "--store", bsr_store)
    assert code == 0 and (tmp_path / "se.png").stat().st_size > 10000, err


@pytest.mark.parametrize("args, words", [
    (["bsr-se", "--set", "rho=0,0.5"], "params.rho"),
    (["bsr-se", "--set", "beta=-2"], "params.beta"),
    (["bsr-se", "--set", "delta=-0.1"], "params.delta"),
    (["bsr-se", "--set", "alpha=-0.5"], "params.alpha"),
    (["bsr-thresholds", "--set", "beta=0"], "params.beta"),
    (["bsr-thresholds", "--set", "delta=0.1"], "params.delta"),
])
def test_bad_input_one_line_exit_2_store_untouched(bsr_store, args, words):
    before = tree_digest(bsr_store)
    code, out, err = cli_here("run", *args, "--store", bsr_store, "--workers", "1", "--no-progress")
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert tree_digest(bsr_store) == before
