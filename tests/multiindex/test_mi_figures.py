"""`seqphase plot` for the multi-index sweeps (core/multiindex/figures.py, called by the model's methods):
each figure carries the dataset's own numbers. Tiny real runs of the shipped specs, computed point by point
without a cluster and written through the store."""

import matplotlib
import numpy as np
import pytest

from seqphase.cluster.tasks import execute_point
from seqphase.core.multiindex.figures import _singular_values
from seqphase.results.plot import make_figure
from seqphase.results.query import open_results
from seqphase.results.store import DONE, Store
from seqphase.sweeps.planner import payload, plan_sweep
from seqphase.sweeps.spec import load_sweep, shipped_specs

matplotlib.use("Agg")


def _run(store, spec, name, overrides):
    """Compute every point of a sweep in this process and store it (the driver's writes, no Dask)."""
    plan = plan_sweep(load_sweep(str(spec), overrides, rename=name))
    group = Store(store).prepare(plan)
    for point in plan.points:
        result = execute_point(payload(plan, point))
        group.write_point(group.index_of(point), point.hash, result["data"], result["meta"])
    return plan.sweep.name


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """multiindex-gamp (abs, z1z2 at two alphas), an SE sweep of the same channels and the norm2
    thresholds (p = 1, 2), all with tiny settings."""
    path = tmp_path_factory.mktemp("plot_mi") / "mi.zarr"
    specs = shipped_specs()
    _run(path, specs["multiindex-gamp"], "mi-gamp", ["channel=abs,sign-z1z2", "alpha=1.5,3", "method.d=60",
                                                     "method.n_seeds=3", "method.max_iter=4"])
    _run(path, specs["multiindex-staircase-se"], "mi-se", ["channel=abs,sign-z1z2", "alpha=1,2,3",
                                                           "method.n_mc=200", "method.max_iter=5"])
    _run(path, specs["multiindex-norm2-thresholds"], "mi-thr", ["p=1,2", "method.rtol=0.01"])
    return path


def _done(ds):
    return ds.where(ds["status"] == DONE)


def test_singular_values_of_padded_blocks():
    M = np.full((2, 3, 3), np.nan)
    M[0, :2, :2] = [[0.0, 2.0], [-1.0, 0.0]]
    M[1, :1, :1] = -0.5
    sv = _singular_values(M)
    assert np.allclose(sv[0], [2.0, 1.0, np.nan], equal_nan=True)
    assert np.allclose(sv[1], [0.5, np.nan, np.nan], equal_nan=True)
    assert np.isnan(_singular_values(np.full((3, 3), np.nan))).all()


def test_gamp_figure(store):
    ds, se = open_results("mi-gamp", store), open_results("mi-se", store)
    fig = make_figure(ds, {"se_sweep": se})
    sv_ax, it_ax = fig.axes
    done = _done(ds)
    for channel, p in (("abs", 1), ("sign-z1z2", 2)):
        cell = done.sel(channel=channel).squeeze(drop=True)
        final = _singular_values(cell["overlap"].isel(iteration=-1).transpose("alpha", "seed", "row", "col").values)
        for k in range(p):
            (bars,) = [c for c in sv_ax.containers if c.get_label() == f"GAMP $s_{k + 1}(M)$ channel={channel}"]
            points = bars.lines[0].get_ydata()
            assert np.allclose(points, final[:, :, k].mean(1))
            (se_line,) = [ln for ln in sv_ax.get_lines() if ln.get_label() == f"SE $\\lambda_{k + 1}(Q)$ channel={channel}"]
            q = _singular_values(cell["overlap_se"].transpose("alpha", "row", "col").values)[:, k]
            assert np.allclose(se_line.get_ydata(), q)
        assert not [c for c in sv_ax.containers if c.get_label() == f"GAMP $s_{p + 1}(M)$ channel={channel}"]
        for alpha in (1.5, 3.0):
            (trace,) = [ln for ln in it_ax.get_lines() if ln.get_label() == f"channel={channel} alpha={alpha:g}"]
            tops = _singular_values(cell["overlap"].sel(alpha=alpha).transpose("seed", "iteration", "row", "col")
                                    .values)[..., 0]
            assert np.allclose(trace.get_ydata(), tops.mean(0))
    grey = [ln for ln in sv_ax.get_lines() if ln.get_label().startswith("SE (")]
    assert len(grey) == 1  # the companion's lines share one legend entry


def test_se_figure_drops_padding(store):
    fig = make_figure(open_results("mi-se", store))
    labels = [ln.get_label() for ln in fig.axes[0].get_lines()]
    assert any("m_{22}" in s and "sign-z1z2" in s for s in labels)
    assert not any("m_{22}" in s and "abs" in s for s in labels)  # abs has p = 1: its row 2 is NaN
    assert not any("m_{33}" in s for s in labels)


def test_threshold_figure(store):
    thr = open_results("mi-thr", store)
    fig = make_figure(thr)
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == ["p=1", "p=2"]
    circles = [ln for ln in ax.get_lines() if ln.get_marker() == "o" and len(ln.get_xdata())]
    assert np.allclose(sorted(ln.get_ydata()[0] for ln in circles), [0.5, 1.0])
