"""The `aim` model: points through the registry, and bad input through the CLI (one line naming the field,
exit 2, store untouched)."""

import math

import pytest

from seqphase.core.models import get_model, run_point
from test_store import tree_digest
from cli_run import cli_here, on_cluster


def _settings(method, **over):
    model = get_model("aim")
    return model.check_settings(method, over)


def test_se_points_through_the_registry():
    out = run_point("aim", "se", {"alpha": 0.1, "rho": 0.5, "T": 2, "channel": "softmax", "hardmax_gout": "exact"},
                    _settings("se"), 1, [0])
    assert abs(out["mse"] - 0.3922) < 5e-5 and out["n_iter"] == 0 and out["converged"] == 1
    assert abs(out["q"] + out["mse"] - 1.5) < 1e-12 and math.isnan(out["mse_general"])
    out = run_point("aim", "se", {"alpha": 1.0, "rho": 0.5, "T": 2, "channel": "hardmax", "hardmax_gout": "paper"},
                    _settings("se"), 1, [0])
    assert abs(out["mse"] - 0.3156) < 5e-5 and out["converged"] == 1 and out["n_iter"] > 0


def test_threshold_points_carry_a_reason_where_a_route_is_undefined():
    out = run_point("aim", "threshold", {"rho": 0.5, "T": 3, "channel": "softmax", "hardmax_gout": "exact"},
                    _settings("threshold", rtol=1e-6), 1, [0])
    assert str(out["quantity"]) == "alpha_c" and abs(out["alpha_closed_form"] - 0.075) < 1e-15
    assert out["relative_gap"] < 0.01 and math.isnan(out["alpha_stability"]) and "no stability route" in str(out["note"])


def test_small_width_points():
    base = {"T": 2, "hardmax_gout": "exact"}
    out = run_point("aim", "small_width", dict(base, alpha_bar=0.375, channel="softmax"), _settings("small_width"), 1, [0])
    assert abs(out["mse"] - 0.75) < 1e-15
    out = run_point("aim", "small_width", dict(base, alpha_bar=0.3, channel="hardmax"), _settings("small_width"), 1, [0])
    assert out["mse"] == 1.0



@pytest.fixture(scope="module")
def aim_store(tmp_path_factory, client):
    folder = tmp_path_factory.mktemp("aimcli")
    store = folder / "s.zarr"
    code, _, err = cli_here("run", "aim-linear-se", "--set", "rho=0.5", "--set", "alpha=0.05,0.1", "--store", store,
                            *on_cluster(client), "--no-progress")
    assert code == 0, err
    return store


@pytest.mark.parametrize("args, words", [
    (["aim-softmax-se", "--set", "rho=0,0.5"], "params.rho"),
    (["aim-softmax-se", "--set", "T=1,2"], "params.T"),
    (["aim-hardmax-se", "--set", "T=3"], "params.T: the hardmax channel is implemented for T = 2"),
    (["aim-hardmax-se", "--set", "hardmax_gout=pdf"], "params.hardmax_gout"),
    (["aim-softmax-se", "--set", "hardmax_gout=paper"], "params.hardmax_gout: hardmax_gout = 'paper' is only used"),
    (["aim-linear-se", "--set", "channel=relu"], "params.channel"),
    (["aim-small-width", "--set", "alpha_bar=-1"], "params.alpha_bar"),
])
def test_bad_input_one_line_exit_2_store_untouched(aim_store, args, words):
    before = tree_digest(aim_store)
    code, out, err = cli_here("run", *args, "--store", aim_store, "--workers", "1", "--no-progress")
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err
    assert tree_digest(aim_store) == before
