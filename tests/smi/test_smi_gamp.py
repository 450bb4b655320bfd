"""GAMP for deep tied attention (core/smi/gamp.py, the "gamp" method of the "smi" model): it lands on the
SE fixed point at finite d, learns nothing below alpha_2, and its results go through the model API, the
CLI and `query` under the names the issue asks for; bad settings are one-line ParameterErrors."""

import csv
import io

import numpy as np
import pytest

from seqphase.core import gamp
from seqphase.core.errors import ParameterError
from seqphase.core.models import get_model, run_point
from seqphase.core.smi import gamp as sgamp
from seqphase.core.smi import se as sse
from seqphase.core.smi.channels import AttentionChannel
from seqphase.sweeps.planner import plan_sweep
from seqphase.sweeps.spec import load_sweep

from cli_run import cli_here, on_cluster

EPS = 1e-3


def _normalised_final_overlap(alpha, d, seed, **kw):
    """|M_ll| / (|w*_l|^2 / d) at the last iteration: the overlap per unit teacher norm, which estimates
    the SE's Q_ll without the O(d^-1/2) scatter of the teacher's norm."""
    ch = AttentionChannel()
    rng = np.random.default_rng(seed)
    X, W, _, u = sgamp.sample_instance(ch, alpha, d, rng, noise=kw.pop("noise", 0.0))
    loop = {"max_iter": kw.pop("max_iter"), "damping": kw.pop("damping", 0.2)}
    tr = gamp.iterate(sgamp.AttentionSteps(ch, X, u, W, rng, **kw), tol=0.0, **loop)
    return np.abs(np.diag(tr.overlap[-1])) / np.diag(W @ W.T / d), tr


def test_gamp_lands_on_the_se_fixed_point():
    """alpha = 1.2, both layers learned. The labels carry index noise of variance eps = 1e-3, the teacher
    the SE with the same eps describes (z = omega + (I - Q + eps I)^{1/2} u), so the SE is GAMP's exact
    d -> infinity prediction (in the noiseless model GAMP goes beyond the eps-regularised SE, docs/validation/smi.md).

    Tolerances: layer 1, mean of 3 seeds at d = 300 within 0.08 of the SE Q11 = 0.86: the seed-to-seed sd
    measured at d = 300 is 0.035 (0.02 of the mean of 3, times 3 = 0.06), plus the SE's own quasi-Monte
    Carlo scatter at 512 points (sd 0.006 over scrambles). Layer 2 within 0.01 (seeds 0.993-1.001 against
    0.9978). Checked by hand: with the reference code's reaction term (damped C_hat g, inconsistent with
    the damped estimate) one seed of three stays at M11 = 0.002 (mean 0.55); with no Onsager term GAMP
    blows up (|M22| / teacher ~ 10-300)."""
    ch = AttentionChannel()
    se = sse.smi_se(ch, 1.2, sse.Draws(ch.p, ch.T, 512, np.random.default_rng(0)), Q0=np.diag([0.5, 0.99]),
                    max_iter=100, tol=1e-4, eps=EPS)
    q11, q22 = se.Q[0, 0], se.Q[1, 1]
    assert 0.8 < q11 < 0.92 and q22 > 0.995  # the SE itself (docs/validation/smi.md: 0.860, 0.9978 at 2048 points)
    finals = []
    for seed in (1, 2, 3):
        m, tr = _normalised_final_overlap(1.2, 300, seed, noise=EPS, eps=EPS, max_iter=50, damping=0.2)
        assert not tr.diverged and tr.n_iter == 50
        # layer 2 is learned first (the paper's Fig. 2 top): by iteration 15 |M22| is near 1, |M11| small
        assert abs(tr.overlap[15, 1, 1]) > 0.8 > 0.3 > abs(tr.overlap[15, 0, 0])
        finals.append(m)
    m11, m22 = np.mean(finals, axis=0)
    assert abs(m11 - q11) < 0.08
    assert abs(m22 - q22) < 0.01


def test_nothing_learned_below_alpha2():
    """alpha = 0.1 < 1/6 <= alpha_2: the overlaps stay at the O(d^-1/2) of the random start (3 / sqrt(d))
    and the plug-in error stays at its Q = 0 value 0.386 (spec §3.3) within the test set's scatter."""
    d = 400
    for seed in (1, 2):
        m, tr = _normalised_final_overlap(0.1, d, seed, max_iter=30)
        assert np.all(np.abs(tr.overlap[-1]) < 3 / np.sqrt(d))
        assert abs(tr.gen_error[-1] - 0.386) < 0.05


def test_side_information_matches_the_se():
    """Side information lambda = 0.5 at alpha = 0.1 (spec §4.3: S = sqrt(lambda) W* + Xi in the denoiser, the
    SE's prior step Q = (Qhat + lambda)(I + Qhat + lambda)^-1): normalised M_ll, mean of 3 seeds at d = 600,
    within 0.04 of the SE (0.336, 0.405 at 512 points; seed-to-seed sd measured ~0.02 at d = 1000)."""
    ch = AttentionChannel()
    se = sse.smi_se(ch, 0.1, sse.Draws(ch.p, ch.T, 512, np.random.default_rng(0)), side_info=0.5, max_iter=100,
                    tol=1e-5)
    m = np.mean([_normalised_final_overlap(0.1, 600, seed, side_info=0.5, max_iter=30)[0] for seed in (1, 2, 3)],
                axis=0)
    assert np.all(np.abs(m - np.diag(se.Q)) < 0.04)


def _settings(**over):
    model = get_model("smi")
    return model.check_settings("gamp", dict(over))


def test_model_api_layout_and_reproducibility():
    s = _settings(d=40, n_seeds=2, max_iter=4, n_gen=50)
    model = get_model("smi")
    layout = model.layout("gamp", s)
    assert set(layout.extra_dims) == {"seed", "iteration", "row", "col"}
    assert list(layout.extra_dims["iteration"]) == list(range(5))
    out = run_point("smi", "gamp", {"alpha": 0.8, "skip": 1.0, "depth": 2}, s, 5, [3])
    for name, var in layout.variables.items():
        assert out[name].shape == tuple(len(layout.extra_dims[d]) for d in var.dims), name
    # layer x layer results are NaN-padded to 3 rows (the layout serves depth 2 and 3)
    assert out["overlap"].shape == (2, 5, 3, 3) and out["gen_error_plugin"].shape == (2, 5)
    assert np.all(np.isnan(out["overlap"][:, :, 2])) and np.all(np.isfinite(out["overlap"][:, 0, :2, :2]))
    assert np.all(np.isfinite(out["overlap"][:, :, :2, :2])) and np.all(out["n_iter"] == 4)
    assert np.allclose(np.abs(np.diagonal(out["overlap"][:, -1, :2, :2], axis1=1, axis2=2)),
                       np.diagonal(out["overlap_final"][:, :2, :2], axis1=1, axis2=2))
    again = run_point("smi", "gamp", {"alpha": 0.8, "skip": 1.0, "depth": 2}, s, 5, [3])
    assert all(np.array_equal(out[k], again[k], equal_nan=True) for k in out)
    other = run_point("smi", "gamp", {"alpha": 0.8, "skip": 1.0, "depth": 2}, s, 5, [4])
    assert not np.array_equal(out["overlap"], other["overlap"])
    # a run that stops early (tol) is NaN after its last iteration; the *_final variables hold that iterate
    s = _settings(d=40, n_seeds=1, max_iter=30, n_gen=50, tol=0.05)
    out = run_point("smi", "gamp", {"alpha": 0.1, "skip": 1.0, "depth": 2}, s, 5, [3])
    k = int(out["n_iter"][0])
    assert out["converged"][0] == 1 and k < 30
    assert np.all(np.isnan(out["overlap"][0, k + 1:])) and np.all(np.isfinite(out["overlap"][0, : k + 1, :2, :2]))
    assert out["gen_error_plugin_final"][0] == out["gen_error_plugin"][0, k]


@pytest.mark.parametrize("over, field", [
    ({"d": 5}, "method.d"),
    ({"damping": 1.0}, "method.damping"),
    ({"damping": -0.1}, "method.damping"),
    ({"init": "zeros"}, "method.init"),
    ({"n_seeds": 0}, "method.n_seeds"),
])
def test_bad_settings(over, field):
    with pytest.raises(ParameterError) as info:
        _settings(**over)
    assert info.value.field == field and "\n" not in info.value.one_line()


def test_shipped_spec():
    """smi-2layer-gamp: the reference runs (d = 1000, 16 seeds, alpha = 0.1 .. 1.5, 50 iterations, delta = 0.8
    i.e. damping 0.2), with the SE sweep named as the plot companion."""
    sweep = load_sweep("smi-2layer-gamp")
    assert np.allclose(sweep.params["alpha"], np.arange(1, 16) / 10) and sweep.params["skip"] == [1.0]
    s = sweep.settings
    assert (s["d"], s["n_seeds"], s["max_iter"], s["damping"], s["init"]) == (1000, 16, 50, 0.2, "random")
    assert sweep.plot["se_sweep"] == "smi-2layer-se"
    assert len(plan_sweep(sweep).points) == 15


def test_cli_query_names(tmp_path, client):
    """A tiny GAMP sweep through `run` (on the session's cluster, by address) and `query --format csv`: one
    row per alpha, seed and iteration with the columns alpha, skip, seed, iteration, overlap_1_1,
    overlap_2_2, gen_error_plugin."""
    spec = tmp_path / "g.toml"
    spec.write_text('name = "smi-gamp-tiny"\nmodel = "smi"\nseed = 3\n[params]\nskip = 1.0\nalpha = [0.5, 1.2]\n'
                    '[method]\nname = "gamp"\nd = 30\nn_seeds = 2\nmax_iter = 3\nn_gen = 20\n')
    store = tmp_path / "st.zarr"
    code, _, err = cli_here("run", spec, "--store", store, *on_cluster(client),
                                  "--no-progress")
    assert code == 0, err
    code, out, err = cli_here("query", spec, "--store", store, "--format", "csv")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2 * 2 * 4  # alpha x seed x iteration (0 = initialisation)
    assert {"alpha", "skip", "seed", "iteration", "overlap_1_1", "overlap_2_2", "overlap_1_2", "self_overlap_2_2",
            "gen_error_plugin", "overlap_final_2_2", "n_iter"} <= set(rows[0])
    by = {(float(r["alpha"]), int(r["seed"]), int(r["iteration"])): r for r in rows}
    assert set(by) == {(a, s, i) for a in (0.5, 1.2) for s in (0, 1) for i in range(4)}
    assert all(np.isfinite(float(r["gen_error_plugin"])) for r in rows)
    # the same numbers as the model API for the same point
    assert len({by[(1.2, 0, 3)]["overlap_2_2"], by[(1.2, 1, 3)]["overlap_2_2"]}) == 2


def test_cli_bad_damping_is_one_line(tmp_path):
    spec = tmp_path / "b.toml"
    spec.write_text('name = "x"\nmodel = "smi"\nseed = 1\n[params]\nalpha = 0.5\n[method]\nname = "gamp"\n'
                    'damping = 1.0\n')
    code, _, err = cli_here("run", spec, "--store", tmp_path / "st.zarr")
    assert code == 2 and "damping" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "st.zarr").exists()
