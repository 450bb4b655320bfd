"""Figures a physicist expects from a stored sweep, as PNG.

- SE sweeps: overlap and test error versus alpha, Bayes-optimal branch solid, AMP branch dashed where
  it differs (a first-order transition shows as the gap between them); one line per value of every
  other swept parameter.
- GAMP sweeps: final-iteration mean +- standard error over seeds (markers with error bars) on the SE
  line of the same point, and the mean overlap versus iteration for each alpha.
- Threshold sweeps: the critical alphas by linear stability (line), by SE bisection (crosses) and the
  information-theoretic one (squares), versus the swept parameter (or per transition).

A model whose variables differ from these gets its own figures through `FIGURES`, keyed by
(model, method); deep tied attention ("smi") has them in `plot_smi.py`.
"""

from __future__ import annotations

import importlib
import itertools
import textwrap

import numpy as np

from seqphase.core.errors import SeqphaseError
from seqphase.results.store import DONE, STATUS_NAMES

# (model, method) -> "module:function"; the function takes (pyplot, ds masked to the done points,
# companions) and returns the Figure. Everything else gets the generic figures of this module.
FIGURES = {
    ("smi", "se"): "seqphase.results.plot_smi:plot_se",
    ("smi", "threshold"): "seqphase.results.plot_smi:plot_thresholds",
    ("smi", "gamp"): "seqphase.results.plot_smi:plot_gamp",
    ("smi", "sgd"): "seqphase.results.plot_smi:plot_sgd",
}


def plot_sweep(ds, path, companions=None):
    """Draw `ds` to `path`. `companions` maps a role to another sweep's Dataset: the `[plot]` table of
    a spec may name `se_sweep` (a GAMP spec: its dense SE curve is drawn under the GAMP points) and, for
    the models that use them, other `*_sweep` roles (see `plot_smi.py`)."""
    plt = _pyplot()
    fig = make_figure(ds, companions)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def make_figure(ds, companions=None):
    """The Figure of a stored sweep (not saved). A sweep with no finished point is a SeqphaseError."""
    plt = _pyplot()
    _require_done(ds)
    model, method = ds.attrs.get("model"), ds.attrs.get("method")
    ds = ds.where(ds["status"] == DONE)
    if (model, method) in FIGURES:
        module, _, function = FIGURES[model, method].partition(":")
        fig = getattr(importlib.import_module(module), function)(plt, ds, companions or {})
    elif method == "se":
        fig = _plot_se(plt, ds)
    elif method == "gamp":
        fig = _plot_gamp(plt, ds, (companions or {}).get("se_sweep"))
    else:
        fig = _plot_threshold(plt, ds)
    title = ds.attrs.get("title", ds.attrs.get("seqphase_sweep", ""))
    width = fig.get_size_inches()[0]
    fig.suptitle(textwrap.fill(title, max(40, int(width * 13))), fontsize=10)
    fig.tight_layout()
    return fig


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _require_done(ds):
    status = np.asarray(ds["status"].values)
    if (status == DONE).any():
        return
    name = ds.attrs.get("seqphase_sweep", "SWEEP")
    counts = ", ".join(f"{int((status == code).sum())} {STATUS_NAMES[code]}"
                       for code in sorted(STATUS_NAMES) if (status == code).any())
    raise SeqphaseError(name, f"no finished point to plot ({counts})",
                        f"run it first (seqphase run {name}), then plot")


def _swept(ds, exclude=()):
    return [d for d in ds.attrs["point_dims"] if ds.sizes[d] > 1 and d not in exclude]


def _x_dim(ds):
    dims = ds.attrs["point_dims"]
    if "alpha" in dims:
        return "alpha"
    numeric = [d for d in _swept(ds) if ds[d].dtype.kind == "f"]
    return numeric[0] if numeric else None


def _series(ds, x):
    """Yield (label, selection dict) for each combination of the other swept dims."""
    others = _swept(ds, exclude=(x,))
    for values in itertools.product(*(ds[d].values for d in others)):
        sel = dict(zip(others, values))
        label = ", ".join(f"{d}={_fmt(v)}" for d, v in sel.items())
        yield label, sel


def _fmt(value):
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)


def _squeeze(da):
    return da.squeeze(drop=True)


def _diag(ds, name):
    """Diagonal entries overlap_i_i of a (row, col) variable: [(i, DataArray)]."""
    var = ds[name]
    return [(int(i), var.sel(row=i, col=i, drop=True)) for i in ds["row"].values]


def _plot_se(plt, ds):
    x = _x_dim(ds)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    for label, sel in _series(ds, x):
        color = next(colors)
        sub = ds.sel(sel)
        xs = sub[x].values
        for i, bo in _diag(sub, "overlap"):
            name = f"$m_{{{i}{i}}}$" if sub.sizes["row"] > 1 else "overlap"
            axes[0].plot(xs, _squeeze(bo).values, color=color, label=f"{name} BO {label}".strip())
            if "overlap_amp" in sub:
                amp = _squeeze(sub["overlap_amp"].sel(row=i, col=i, drop=True)).values
                if np.any(np.abs(amp - _squeeze(bo).values) > 1e-6):
                    axes[0].plot(xs, amp, "--", color=color, label=f"{name} AMP {label}".strip())
        if "gen_error" in sub:
            bo_err = _squeeze(sub["gen_error"]).values
            axes[1].plot(xs, bo_err, color=color, label=f"BO {label}".strip())
            if "gen_error_amp" in sub:
                amp_err = _squeeze(sub["gen_error_amp"]).values
                if np.any(np.abs(amp_err - bo_err) > 1e-6):
                    axes[1].plot(xs, amp_err, "--", color=color, label=f"AMP {label}".strip())
    axes[0].set_ylabel("overlap m")
    axes[1].set_ylabel("generalisation error")
    for ax in axes:
        ax.set_xlabel(x)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def _plot_gamp(plt, ds, se_ds=None):
    x = _x_dim(ds)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    if se_ds is not None:
        _overlay_se(se_ds, ds, x, axes)
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    n_seeds = ds.sizes["seed"]
    for label, sel in _series(ds, x):
        color = next(colors)
        sub = ds.sel(sel)
        xs = sub[x].values
        for i, final in _diag(sub.isel(iteration=-1), "overlap"):
            mean = _squeeze(final.mean("seed")).values
            err = _squeeze(final.std("seed", ddof=1)).values / np.sqrt(n_seeds) if n_seeds > 1 else None
            axes[0].errorbar(xs, mean, yerr=err, fmt="o", ms=4, color=color, capsize=2,
                             label=f"GAMP {label}".strip())
            se = _squeeze(sub["overlap_se"].sel(row=i, col=i, drop=True)).values
            order = np.argsort(xs)
            axes[0].plot(xs[order], se[order], "-", color=color, label=f"SE {label}".strip())
        gen = _squeeze(sub["gen_error"].isel(iteration=-1))
        err = gen.std("seed", ddof=1) / np.sqrt(n_seeds) if n_seeds > 1 else None
        axes[1].errorbar(xs, gen.mean("seed").values, yerr=None if err is None else err.values, fmt="o", ms=4,
                         color=color, capsize=2, label=f"GAMP {label}".strip())
        se_err = _squeeze(sub["gen_error_se"]).values
        order = np.argsort(xs)
        axes[1].plot(xs[order], se_err[order], "-", color=color, label=f"SE {label}".strip())
    first = next(iter(_series(ds, x)))[1]
    sub = ds.sel(first)
    for k, alpha in enumerate(sub[x].values):
        trace = _squeeze(sub["overlap"].isel(row=0, col=0).sel({x: alpha}).mean("seed"))
        axes[2].plot(sub["iteration"].values, trace.values, label=f"{x}={alpha:g}")
    axes[0].set_ylabel("overlap m (final iteration)")
    axes[1].set_ylabel("generalisation error")
    axes[2].set_ylabel("mean overlap")
    axes[2].set_xlabel("iteration")
    for ax in axes[:2]:
        ax.set_xlabel(x)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return fig


def _overlay_se(se_ds, ds, x, axes):
    """Dense SE curve of a companion SE sweep at the GAMP sweep's fixed parameters (grey)."""
    se_ds = se_ds.where(se_ds["status"] == DONE)
    sel = {d: ds[d].values[0] for d in ds.attrs["point_dims"]
           if d != x and d in se_ds.dims and ds.sizes[d] == 1 and ds[d].values[0] in se_ds[d].values}
    sub = se_ds.sel(sel)
    if x not in sub.dims:
        return
    xs = sub[x].values
    axes[0].plot(xs, _squeeze(sub["overlap"].isel(row=0, col=0)).values, color="0.6", lw=1, zorder=0,
                 label=f"SE ({se_ds.attrs.get('seqphase_sweep')})")
    if "gen_error" in sub:
        axes[1].plot(xs, _squeeze(sub["gen_error"]).values, color="0.6", lw=1, zorder=0, label="SE (dense)")


def _plot_threshold(plt, ds):
    x = _x_dim(ds)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    if x is None:
        # Nothing numeric is swept: one group of markers per cell (transition, channel, ...).
        flat = ds[["alpha_stability", "alpha_bisection", "alpha_it"]].to_dataframe().reset_index()
        dims = list(ds.attrs["point_dims"])
        labels = [", ".join(str(r[d]) for d in dims if ds.sizes[d] > 1) or ds.attrs.get("seqphase_sweep", "")
                  for _, r in flat.iterrows()]
        pos = np.arange(len(flat))
        ax.plot(pos, flat["alpha_stability"], "o", ms=9, mfc="none", label="linear stability / spinodal")
        ax.plot(pos, flat["alpha_bisection"], "x", ms=9, label="SE bisection")
        if np.isfinite(flat["alpha_it"].to_numpy(dtype=float)).any():
            ax.plot(pos, flat["alpha_it"], "s", ms=7, mfc="none", label="information-theoretic")
        ax.set_xticks(pos, labels, rotation=30, fontsize=8)
        for p, value in zip(pos, flat["alpha_stability"]):
            ax.annotate(f"{value:.4f}", (p, value), textcoords="offset points", xytext=(8, 4), fontsize=7)
    else:
        for label, sel in _series(ds, x):
            color = next(colors)
            sub = ds.sel(sel)
            xs = sub[x].values
            order = np.argsort(xs)
            ax.plot(xs[order], _squeeze(sub["alpha_stability"]).values[order], "-", color=color,
                    label=f"stability {label}".strip())
            ax.plot(xs, _squeeze(sub["alpha_bisection"]).values, "x", color=color, ms=8,
                    label=f"bisection {label}".strip())
            it = _squeeze(sub["alpha_it"]).values
            if np.isfinite(it).any():
                ax.plot(xs[order], it[order], "s--", color=color, mfc="none", label=f"IT {label}".strip())
        ax.set_xlabel(x)
    ax.set_ylabel(r"critical $\alpha$")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig
