"""The "smi" model through the CLI: an SE sweep that lands on the published SE curve away from the
thresholds, a threshold point, an SGD point, and bad input."""

import numpy as np
import pytest

from seqphase.core.models import get_model, run_point
from seqphase.sweeps.families import reference

from cli_run import cli_here

# the authors' data/BO_2w.csv, shipped as the smi family's published data (core/smi/reference/BO_2w.csv)
BO_2W = reference("smi")["BO_2w.csv"]


def _defaults(method, **over):
    model = get_model("smi")
    s = {k: p.default for k, p in model.methods[method].settings.items()}
    s.update(over)
    return s


def test_se_point_on_the_published_curve():
    """alpha = 0.4333 (only layer 2 learned) and 1.2 (both): the fixed point with 2048 Sobol points lands on
    BO_2w.csv. Tolerance: the scatter of the fixed point over scrambles measured at 2048 points (sd 0.007 at
    alpha = 0.4333, docs/validation/smi.md) times 3, plus the reference's own Monte Carlo noise (~0.01, the spread of
    its Q22 around a smooth curve), i.e. 0.03; Q11 at 1.2 (steep in alpha, MC-limited in the reference:
    its +-0.005 plateau noise and the documented upward bias of the onset) within 0.06."""
    out = run_point("smi", "se", {"alpha": 0.4333333329, "skip": 1.0, "depth": 2}, _defaults("se", n_error=5000),
                    41, [1])
    rows = {round(float(alpha), 4): {key: BO_2W[key][i] for key in BO_2W} for i, alpha in enumerate(BO_2W["alpha"])}
    assert abs(out["overlap"][1, 1] - float(rows[0.4333]["Q22"])) < 0.03 and abs(out["overlap"][0, 0]) < 1e-6
    out = run_point("smi", "se", {"alpha": 1.1999999988, "skip": 1.0, "depth": 2}, _defaults("se", n_error=5000),
                    41, [2])
    q11_ref = float(rows[1.2]["Q11"])
    assert abs(out["overlap"][0, 0] - q11_ref) < 0.06
    assert out["overlap"][1, 1] > 0.99
    assert abs(out["overlap"][0, 1]) < 0.01  # off-diagonals vanish (paper §3.1)
    assert out["gen_error_plugin"] < out["gen_error_plugin_last_layer"]


def test_threshold_point_small():
    """A cheap threshold point: alpha_2 by stability and bisection on the same draws agree within the
    bisection's own Monte Carlo scatter, alpha_1 lies above alpha_2 and below 2."""
    out = run_point("smi", "threshold", {"skip": 1.0, "depth": 2},
                    _defaults("threshold", n_k=4096, n_mc=512, rtol=0.01), 43, [1])
    a2 = out["alpha2_stability"]
    assert 1 / 6 <= a2 < 0.21
    assert abs(out["alpha2_bisection"] - a2) < 0.25 * a2
    assert a2 < out["alpha1_stability"] < 2.0
    assert abs(out["alpha1_bisection"] - out["alpha1_stability"]) < 0.1 * out["alpha1_stability"]


def test_sgd_point_shapes():
    s = _defaults("sgd", d=40, epochs=4, n_runs=2, log_every=3, test_every=2)
    out = run_point("smi", "sgd", {"skip": 1.0, "depth": 2}, s, 47, [1])
    assert out["cosine"].shape[0] == 2 and out["cosine"].shape[2] == 2
    assert np.all(np.isfinite(out["cosine"]))


def test_bad_skip_is_one_line(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text('name = "x"\nmodel = "smi"\nseed = 1\n[params]\nalpha = 0.5\nskip = -1.0\n[method]\nname = "se"\n')
    code, _, err = cli_here("run", spec, "--store", tmp_path / "st.zarr")
    assert code == 2
    assert "skip" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "st.zarr").exists()


@pytest.mark.parametrize("method", ["threshold", "sgd", "gamp"])
def test_depth3_is_refused_before_anything_is_written(tmp_path, method):
    spec = tmp_path / "s.toml"
    alpha = "alpha = 0.5\n" if method == "gamp" else ""  # alpha is a grid parameter of gamp only
    spec.write_text(f'name = "x"\nmodel = "smi"\nseed = 1\n[params]\n{alpha}skip = 1.0\ndepth = 3\n[method]\nname = "{method}"\n')
    code, _, err = cli_here("run", spec, "--store", tmp_path / "st.zarr")
    assert code == 2
    assert "params.depth" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "st.zarr").exists()


def test_two_layer_results_are_padded_to_three_rows():
    s = _defaults("se", n_mc=64, max_iter=2, n_error=1000)
    out = run_point("smi", "se", {"alpha": 0.5, "skip": 1.0, "depth": 2}, s, 47, [1])
    assert out["overlap"].shape == (3, 3)
    assert np.all(np.isfinite(out["overlap"][:2, :2])) and np.all(np.isnan(out["overlap"][2]))


def test_three_layer_se_point_learns_the_last_layer_first():
    """depth = 3 through the model: 3 x 3 results, and from Q0 = 0.05 I at alpha = 1 (above alpha_3 = 0.21,
    next to the layer-1/2 onset ~1.0-1.25, docs/validation/smi.md) the last layer's overlap grows while the two
    shallower ones decay: after 6 iterations Q33 > 0.5 and Q11, Q22 < 0.05 (the 48-alpha SE has Q33 = 0.976
    and Q11, Q22 < 1e-3 at the fixed point)."""
    s = _defaults("se", n_mc=256, max_iter=6, n_error=2000)
    out = run_point("smi", "se", {"alpha": 1.0, "skip": 1.0, "depth": 3}, s, 43, [1])
    Q = out["overlap"]
    assert Q.shape == (3, 3) and np.all(np.isfinite(Q))
    assert Q[2, 2] > 0.5 and Q[0, 0] < 0.05 and Q[1, 1] < 0.05, np.diag(Q)
    assert 0 < out["gen_error_plugin"] < out["gen_error_plugin_last_layer"] + 5 * out["gen_error_plugin_se"]
