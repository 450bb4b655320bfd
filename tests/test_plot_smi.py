"""`seqphase plot` for the deep tied attention sweeps (core/smi/figures.py, called by the smi model's methods): each figure carries the
dataset's own numbers, the published curves read from the shipped CSVs, the companion sweeps named in
the spec's [plot] table; a sweep with nothing finished is a one-line error.

The SE, threshold and SGD sweeps are real, tiny runs of the shipped specs, computed point by point
without a cluster and written through the store; the GAMP and 3-layer SE datasets are built by hand in
the layout those methods store (dims seed, iteration, row, col)."""

import csv
import hashlib
from importlib import resources

import numpy as np
import pytest
import xarray as xr

import seqphase
from seqphase.cli import main
from seqphase.cluster.tasks import execute_point
from seqphase.core.errors import SeqphaseError
from seqphase.results import plot as plot_module
from seqphase.results.plot import make_figure
from seqphase.results.query import open_results
from seqphase.results.store import DONE, Store
from seqphase.sweeps.planner import payload, plan_sweep
from seqphase.sweeps.families import reference
from seqphase.sweeps.spec import load_sweep, shipped_specs

SHIPPED = resources.files("seqphase.core.smi").joinpath("reference")  # the family's published data
#: SHA-256 of the authors' files as shipped (core/smi/reference/README.md gives their provenance)
PUBLISHED = {
    "BO_2w.csv": "2b1d6e18724a362e6b91e51dfc8ace5e04140cafc76fa1cb975c8cc67d7fcb8e",
    "gen_error_BO_2w.csv": "612670ebeed7fbdf08fad618738f14e844a8783e6b85e6ed3816304710c96122",
    "gen_error_BO_2w_one_layer.csv": "ec90d1d477270ab45b11e33e590814ebffcc180d0ac9d7b9c8bc377b9f13b541",
    "alpha_critical.csv": "8dc3aa6e23113e099a3b8224b90ad6f23cf48f0b2e11d1fa770c530b1379aa9e",
}


def _run(store, spec, overrides):
    """Compute every point of a sweep in this process and store it (the driver's writes, no Dask)."""
    plan = plan_sweep(load_sweep(str(spec), overrides))
    group = Store(store).prepare(plan)
    for point in plan.points:
        result = execute_point(payload(plan, point))
        group.write_point(group.index_of(point), point.hash, result["data"], result["meta"])
    return plan.sweep.name


def _csv(name):
    with SHIPPED.joinpath(name).open("r", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {key: np.array([float(r[key]) for r in rows]) for key in rows[0]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """smi-2layer-se (alpha 0.3, 1.3; its [plot] naming a threshold and a GAMP companion), smi-thresholds
    (skips 0.5, 1) and smi-sgd, all with tiny settings; a few seconds each."""
    root = tmp_path_factory.mktemp("plot_smi")
    path = root / "smi.zarr"
    spec = shipped_specs()["smi-2layer-se"]
    assert 'thresholds_sweep = "smi-thresholds"' in spec.read_text()
    _run(path, spec, ["alpha=0.3,1.3", "method.n_mc=64", "method.max_iter=3", "method.n_error=1000"])
    _run(path, shipped_specs()["smi-thresholds"], ["skip=0.5,1", "method.n_k=256", "method.n_mc=64",
                                                   "method.rtol=0.05", "method.bisection=false"])
    _run(path, shipped_specs()["smi-sgd"], ["method.d=40", "method.epochs=4", "method.n_runs=3",
                                            "method.log_every=2", "method.test_every=2"])
    return path


def _by_label(ax, text):
    return [line for line in ax.get_lines() if text in line.get_label()]


def _errorbars(ax, text):
    return [c for c in ax.containers if text in str(c.get_label())]


def _axis(fig, ylabel, exact=False):
    (ax,) = [a for a in fig.axes if (ylabel == a.get_ylabel() if exact else ylabel in a.get_ylabel())]
    return ax


def _done(ds):
    return ds.where(ds["status"] == DONE)


def test_published_files_ship_unchanged():
    """The authors' files ship byte for byte, and the loader reads every column of them."""
    for name, digest in PUBLISHED.items():
        assert hashlib.sha256(SHIPPED.joinpath(name).read_bytes()).hexdigest() == digest, name
        table = reference("smi")[name]
        assert all(np.array_equal(table[k], v) for k, v in _csv(name).items())
    assert sorted(reference("smi")) == sorted(PUBLISHED)
    assert SHIPPED.joinpath("README.md").is_file()


def test_se_figure(store):
    se = open_results("smi-2layer-se", store)
    thr = open_results("smi-thresholds", store)
    fig = make_figure(se, {"thresholds_sweep": thr})
    ax, err_ax = _axis(fig, "overlap"), _axis(fig, "test error")
    assert err_ax.get_yscale() == "log"
    cell = se.sel(skip=1.0, depth=2.0)
    alphas = cell["alpha"].values
    for layer in (1, 2):
        (line,) = _by_label(ax, f"$Q_{{{layer}{layer}}}$ (SE)")
        assert np.array_equal(line.get_xdata(), alphas)
        assert np.array_equal(line.get_ydata(), cell["overlap"].sel(row=layer, col=layer).values)
    for name, style, label in (("gen_error_plugin", "-", "plug-in error (SE)"),
                               ("gen_error_bayes", ":", "Bayes-optimal error (SE)"),
                               ("gen_error_plugin_last_layer", "--", "plug-in error, last layer only (SE)")):
        (line,) = _by_label(err_ax, label)
        assert line.get_linestyle() == style
        assert np.array_equal(line.get_ydata(), cell[name].values)
    # the published 2-layer c = 1 curves, read from the shipped CSVs
    ref = _csv("BO_2w.csv")
    for layer in (1, 2):
        (line,) = _by_label(ax, f"published $Q_{{{layer}{layer}}}$ (BO_2w.csv)")
        assert np.array_equal(line.get_xdata(), ref["alpha"])
        assert np.array_equal(line.get_ydata(), ref[f"Q{layer}{layer}"])
    for name in ("gen_error_BO_2w.csv", "gen_error_BO_2w_one_layer.csv"):
        (line,) = _by_label(err_ax, f"({name})")
        assert "published" in line.get_label()
        assert np.array_equal(line.get_ydata(), _csv(name)["gen_error"])
    # the bands split at our own alpha_2 and alpha_1 (threshold companion at the same skip)
    t = thr.sel(skip=1.0, depth=2.0)
    a2, a1 = float(t["alpha2_stability"]), float(t["alpha1_stability"])
    spans = {p.get_label().split(" (")[0]: p for p in ax.patches if "learned" in p.get_label()}
    assert spans["nothing learned"].get_x() + spans["nothing learned"].get_width() == pytest.approx(a2)
    assert spans["last layer learned"].get_x() == pytest.approx(a2)
    assert spans["both layers learned"].get_x() == pytest.approx(a1)


def _gamp_dataset():
    """A GAMP sweep as stored: point dims alpha, skip, depth; M = W^ W*^T / d and Q = W^ W^T / d per
    seed and iteration; the third seed stopped after iteration 3 (NaN after)."""
    rng = np.random.default_rng(0)
    alphas, seeds, its, rc = [0.6, 1.25], np.arange(3), np.arange(6), np.arange(1, 3)
    shape = (2, 1, 1, 3, 6, 2, 2)
    growth = np.linspace(0.05, 0.9, 6)[None, None, None, None, :, None, None]
    m = growth * rng.choice([-1.0, 1.0], size=shape) * (1 + 0.1 * rng.random(shape))
    q = np.abs(m) + 0.1 * rng.random(shape)
    err = 0.4 - 0.3 * growth[..., 0, 0] + 0.01 * rng.random(shape[:5])
    m[:, :, :, 2, 4:] = q[:, :, :, 2, 4:] = err[:, :, :, 2, 4:] = np.nan
    dims = ("alpha", "skip", "depth", "seed", "iteration")
    ds = xr.Dataset({"overlap": (dims + ("row", "col"), m), "self_overlap": (dims + ("row", "col"), q),
                     "gen_error_plugin": (dims, err),
                     "status": (("alpha", "skip", "depth"), np.full((2, 1, 1), DONE, dtype="i1"))},
                    coords={"alpha": alphas, "skip": [1.0], "depth": [2.0], "seed": seeds, "iteration": its,
                            "row": rc, "col": rc})
    ds.attrs.update(model="smi", method="gamp", point_dims=["alpha", "skip", "depth"],
                    seqphase_sweep="smi-2layer-gamp", title="GAMP")
    return ds


def test_gamp_figure(store):
    ds = _gamp_dataset()
    se = open_results("smi-2layer-se", store)
    fig = make_figure(ds, {"se_sweep": se})
    cos_ax, m_ax = _axis(fig, r"/\sqrt"), _axis(fig, r"$|M_{\ell\ell}|$", exact=True)
    assert "1.25" in cos_ax.get_title()          # the alpha nearest 1.2
    at = ds.sel(alpha=1.25, skip=1.0, depth=2.0)
    for layer in (1, 2):
        m = np.abs(at["overlap"].sel(row=layer, col=layer).values)
        q = at["self_overlap"].sel(row=layer, col=layer).values
        (mean,) = _by_label(cos_ax, f"layer {layer}, mean of 3 seeds")
        assert np.allclose(mean.get_ydata(), np.nanmean(m / np.sqrt(q), axis=0))
        assert len([l for l in cos_ax.get_lines() if l.get_color() == mean.get_color()]) == 4  # 3 seeds + mean
        (mean,) = _by_label(m_ax, f"layer {layer}, mean of 3 seeds")
        assert np.allclose(mean.get_ydata(), np.nanmean(m, axis=0))
    # final |M_ll| (last finite iteration of each seed) against alpha, on the SE companion's Q_ll
    final_ax = _axis(fig, "final iteration) and SE")
    for layer in (1, 2):
        m = np.abs(ds["overlap"].sel(row=layer, col=layer).isel(skip=0, depth=0).values)
        final = np.concatenate([m[:, :2, -1], m[:, 2:, 3]], axis=1)     # seed 2 stopped at iteration 3
        (bars,) = _errorbars(final_ax, f"GAMP $|M_{{{layer}{layer}}}|$")
        x, y = bars.lines[0].get_xdata(), bars.lines[0].get_ydata()
        assert np.array_equal(x, ds["alpha"].values)
        assert np.allclose(y, final.mean(axis=1))
        (line,) = _by_label(final_ax, f"SE $Q_{{{layer}{layer}}}$")
        assert np.array_equal(line.get_ydata(), se.sel(skip=1.0, depth=2.0)["overlap"].sel(row=layer, col=layer).values)
    err_ax = _axis(fig, "plug-in test error")
    assert err_ax.get_yscale() == "log" and _by_label(err_ax, "SE (smi-2layer-se)")
    # the same GAMP sweep as the companion of the SE figure: its final |M_ll| beside the SE curves
    fig = make_figure(se, {"gamp_sweep": ds})
    ax = _axis(fig, "overlap")
    for layer in (1, 2):
        m = np.abs(ds["overlap"].sel(row=layer, col=layer).isel(skip=0, depth=0).values)
        (bars,) = _errorbars(ax, f"GAMP $|M_{{{layer}{layer}}}|$, final (3 seeds)")
        assert np.allclose(bars.lines[0].get_ydata(), np.concatenate([m[:, :2, -1], m[:, 2:, 3]], axis=1).mean(axis=1))
    assert _errorbars(_axis(fig, "test error"), "GAMP plug-in error")


def test_se_figure_three_layers():
    """Any depth: one Q_ll per layer; the published 2-layer curves are not drawn."""
    alphas, rc = [0.5, 1.0, 2.0], np.arange(1, 4)
    q = np.zeros((3, 1, 1, 3, 3))
    q[:, 0, 0, [0, 1, 2], [0, 1, 2]] = [[0, 0, 0.3], [0.1, 0.1, 0.9], [0.5, 0.55, 0.99]]
    errs = {name: (("alpha", "skip", "depth"), np.array([0.3, 0.1, 0.01])[:, None, None] * f)
            for name, f in (("gen_error_plugin", 1.0), ("gen_error_bayes", 0.8), ("gen_error_plugin_last_layer", 1.5))}
    ds = xr.Dataset({"overlap": (("alpha", "skip", "depth", "row", "col"), q), **errs,
                     "status": (("alpha", "skip", "depth"), np.full((3, 1, 1), DONE, dtype="i1"))},
                    coords={"alpha": alphas, "skip": [1.0], "depth": [3.0], "row": rc, "col": rc})
    ds.attrs.update(model="smi", method="se", point_dims=["alpha", "skip", "depth"], seqphase_sweep="smi-3layer-se")
    fig = make_figure(ds)
    ax = _axis(fig, "overlap")
    for layer in (1, 2, 3):
        (line,) = _by_label(ax, f"$Q_{{{layer}{layer}}}$ (SE)")
        assert np.array_equal(line.get_ydata(), q[:, 0, 0, layer - 1, layer - 1])
    assert not [l for a in fig.axes for l in a.get_lines() if "published" in l.get_label()]
    assert "3 layers" in ax.get_title()


@pytest.mark.filterwarnings("error:The figure layout has changed")  # the figure keeps its constrained layout
def test_threshold_figure(store):
    thr = open_results("smi-thresholds", store)
    # The shipped bisection runs ~20 s a point; put values in the stored layout to check their crosses.
    thr["alpha2_bisection"] = thr["alpha2_stability"] * 1.05
    thr["alpha1_bisection"] = thr["alpha1_stability"] * 0.95
    fig = make_figure(thr)
    (ax,) = fig.axes
    cell = thr.isel(depth=0)
    skips = cell["skip"].values
    for layer in (2, 1):
        (bars,) = _errorbars(ax, rf"$\alpha_{layer}$ stability")
        assert np.array_equal(bars.lines[0].get_xdata(), skips)
        assert np.array_equal(bars.lines[0].get_ydata(), cell[f"alpha{layer}_stability"].values)
        (cross,) = _by_label(ax, rf"$\alpha_{layer}$ SE bisection")
        assert np.allclose(cross.get_ydata(), cell[f"alpha{layer}_bisection"].values)
        (ref,) = _by_label(ax, rf"published $\alpha_{layer}$ (alpha_critical.csv)")
        table = _csv("alpha_critical.csv")
        order = np.argsort(table["skip"])
        assert np.array_equal(ref.get_xdata(), table["skip"][order])
        assert np.array_equal(ref.get_ydata(), table[f"alpha{layer}"][order])
        assert ref.get_linestyle() == "--"
    regions = {c.get_label() for c in ax.collections}
    assert {"nothing learned", "last layer learned", "both layers learned"} <= regions
    assert ax.get_xlim()[0] == 0 and ax.get_xlim()[1] >= 4 and ax.get_ylim() == (0.0, pytest.approx(ax.get_ylim()[1]))


def test_sgd_figure(store):
    sgd = open_results("smi-sgd", store)
    fig = make_figure(sgd)
    cos_ax, mse_ax = _axis(fig, "C_\\ell"), _axis(fig, "test mean squared error")
    cell = sgd.isel(skip=0, depth=0)
    epochs = cell["log_epoch"].values
    for layer in (1, 2):
        runs = cell["cosine"].sel(layer=layer).values                  # (seed, log)
        flipped = runs * np.sign(runs[:, -1])[:, None]
        (mean,) = _by_label(cos_ax, f"$C_{layer}$, mean of 3 runs")
        assert np.array_equal(mean.get_xdata(), epochs)
        assert np.allclose(mean.get_ydata(), flipped.mean(axis=0))
        thin = [l for l in cos_ax.get_lines() if l.get_color() == mean.get_color() and l is not mean]
        assert sorted(tuple(l.get_ydata()) for l in thin) == sorted(tuple(r) for r in flipped)
    (mean,) = _by_label(mse_ax, "mean of 3 runs")
    assert np.allclose(mean.get_ydata(), cell["test_mse"].values.mean(axis=0))
    assert mse_ax.get_yscale() == "log"


def test_cli_plot_opens_companions(store, tmp_path, monkeypatch, capsys):
    seen = {}
    real = plot_module.plot_sweep

    def spy(ds, path, companions=None, **options):
        seen.update(companions or {})
        return real(ds, path, companions, **options)

    monkeypatch.setattr(plot_module, "plot_sweep", spy)
    png = tmp_path / "se.png"
    assert main(["plot", "smi-2layer-se", "--store", str(store), "-o", str(png)]) == 0
    assert set(seen) == {"thresholds_sweep"}
    assert "smi-2layer-gamp is not in the store" in capsys.readouterr().err
    assert png.stat().st_size > 10_000
    png = tmp_path / "thr.png"
    assert main(["plot", "smi-thresholds", "--store", str(store), "-o", str(png)]) == 0
    assert png.stat().st_size > 10_000


def test_plot_of_a_sweep_with_nothing_done(tmp_path, capsys):
    store = tmp_path / "pending.zarr"
    plan = plan_sweep(load_sweep("smi-sgd", ["method.d=40", "method.epochs=2", "method.n_runs=2"]))
    group = Store(store).prepare(plan)
    group.mark_pending([(group.index_of(p), p.hash) for p in plan.points])
    with pytest.raises(SeqphaseError, match="no finished point to plot"):
        make_figure(open_results("smi-sgd", store))
    png = tmp_path / "x.png"
    assert main(["plot", "smi-sgd", "--store", str(store), "-o", str(png)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "smi-sgd: no finished point to plot (1 pending)" in err[0]
    assert not png.exists()


def test_se_figure_overlays_every_eps_of_the_noiseless_sweep(tmp_path):
    """smi-2layer-se-noiseless stores eps as a grid axis: its figure opens with one panel holding Q_11 and
    Q_22 of every eps (each curve the dataset's own values), then one panel per eps as for any SE sweep."""
    path = tmp_path / "noiseless.zarr"
    name = _run(path, shipped_specs()["smi-2layer-se-noiseless"],
                ["alpha=0.8,1.2", "method.eps=1e-3,1e-4", "method.n_mc=64", "method.max_iter=3",
                 "method.n_error=1000"])
    ds = open_results(name, path)
    fig = make_figure(ds)
    overlay = _axis(fig, "every eps")
    for eps in (1e-3, 1e-4):
        cell = ds.sel(eps=eps, skip=1.0, depth=2.0)
        for layer in (1, 2):
            (line,) = _by_label(overlay, f"$Q_{{{layer}{layer}}}$, eps = {eps:g}")
            assert np.array_equal(line.get_xdata(), cell["alpha"].values)
            assert np.array_equal(line.get_ydata(), cell["overlap"].sel(row=layer, col=layer).values)
    assert "reference code" in _by_label(overlay, "eps = 0.001")[0].get_label()
    assert len([a for a in fig.axes if a.get_ylabel() == r"overlap $Q_{\ell\ell}$"]) == 2  # the per-eps panels
