"""Generic figures of a stored sweep, drawn from the variable conventions every family shares
(`overlap` (row, col), `overlap_amp`, `gen_error`, `overlap_se`, `alpha_stability`, ...); a family's
figures.py uses them for the methods whose variables follow the conventions and draws its own
otherwise. Pure drawing: the caller passes pyplot, a Dataset masked to the done points and the
companion sweeps (also masked) and, under `REFERENCE`, the family's published data; `results/plot.py` opens,
masks and saves. Nothing here reads a file.

- SE sweeps: overlap and test error versus alpha, Bayes-optimal branch solid, AMP branch dashed where
  it differs (a first-order transition shows as the gap between them); one line per value of every
  other swept parameter.
- GAMP sweeps: final-iteration mean +- standard error over seeds (markers with error bars) on the SE
  line of the same point, and the mean overlap versus iteration for each alpha; a companion SE sweep
  (`se_sweep` in the spec's `[plot]` table) is drawn under them.
- Threshold sweeps: the critical alphas by linear stability (line), by SE bisection (crosses) and the
  information-theoretic one (squares), versus the swept parameter (or per transition).
"""

from __future__ import annotations

import itertools

import numpy as np

from seqphase.core.errors import SeqphaseError

#: the key under which a figure's `companions` carry the published data of the sweep's family: a mapping
#: {file name: {column: float array}} given by the caller (`results/plot.py`, from the loader
#: `seqphase.sweeps.families`), beside the companion sweeps (roles ending in `_sweep`)
REFERENCE = "reference"


def published(companions, name):
    """The columns of the published file `name` of the sweep's family, from `companions[REFERENCE]`."""
    reference = (companions or {}).get(REFERENCE)
    if reference is None:
        raise SeqphaseError(name, "this figure draws published data and was given none",
                            "draw it with seqphase plot (seqphase.results.plot.make_figure), which passes it")
    return reference[name]


def generic(plt, ds, method, companions=None):
    """The generic Figure of a sweep of `method` ("se", "gamp", anything else: thresholds)."""
    if method == "se":
        return plot_se(plt, ds)
    if method == "gamp":
        return plot_gamp(plt, ds, (companions or {}).get("se_sweep"))
    return plot_threshold(plt, ds)


def swept(ds, exclude=()):
    return [d for d in ds.attrs["point_dims"] if ds.sizes[d] > 1 and d not in exclude]


def x_dim(ds):
    dims = ds.attrs["point_dims"]
    if "alpha" in dims:
        return "alpha"
    numeric = [d for d in swept(ds) if ds[d].dtype.kind == "f"]
    return numeric[0] if numeric else None


def series(ds, x):
    """Yield (label, selection dict) for each combination of the other swept dims."""
    others = swept(ds, exclude=(x,))
    for values in itertools.product(*(ds[d].values for d in others)):
        sel = dict(zip(others, values))
        label = ", ".join(f"{d}={fmt(v)}" for d, v in sel.items())
        yield label, sel


def fmt(value):
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)


def squeeze(da):
    return da.squeeze(drop=True)


def diag(ds, name):
    """Diagonal entries overlap_i_i of a (row, col) variable: [(i, DataArray)]."""
    var = ds[name]
    return [(int(i), var.sel(row=i, col=i, drop=True)) for i in ds["row"].values]


def plot_se(plt, ds):
    x = x_dim(ds)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    for label, sel in series(ds, x):
        color = next(colors)
        sub = ds.sel(sel)
        xs = sub[x].values
        for i, bo in diag(sub, "overlap"):
            name = f"$m_{{{i}{i}}}$" if sub.sizes["row"] > 1 else "overlap"
            axes[0].plot(xs, squeeze(bo).values, color=color, label=f"{name} BO {label}".strip())
            if "overlap_amp" in sub:
                amp = squeeze(sub["overlap_amp"].sel(row=i, col=i, drop=True)).values
                if np.any(np.abs(amp - squeeze(bo).values) > 1e-6):
                    axes[0].plot(xs, amp, "--", color=color, label=f"{name} AMP {label}".strip())
        if "gen_error" in sub:
            bo_err = squeeze(sub["gen_error"]).values
            axes[1].plot(xs, bo_err, color=color, label=f"BO {label}".strip())
            if "gen_error_amp" in sub:
                amp_err = squeeze(sub["gen_error_amp"]).values
                if np.any(np.abs(amp_err - bo_err) > 1e-6):
                    axes[1].plot(xs, amp_err, "--", color=color, label=f"AMP {label}".strip())
    axes[0].set_ylabel("overlap m")
    axes[1].set_ylabel("generalisation error")
    for ax in axes:
        ax.set_xlabel(x)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def plot_gamp(plt, ds, se_ds=None):
    x = x_dim(ds)
    fig, axes = plt.subplots(1, 3, figsize=(14, 4))
    if se_ds is not None:
        _overlay_se(se_ds, ds, x, axes)
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    n_seeds = ds.sizes["seed"]
    for label, sel in series(ds, x):
        color = next(colors)
        sub = ds.sel(sel)
        xs = sub[x].values
        for i, final in diag(sub.isel(iteration=-1), "overlap"):
            mean = squeeze(final.mean("seed")).values
            err = squeeze(final.std("seed", ddof=1)).values / np.sqrt(n_seeds) if n_seeds > 1 else None
            axes[0].errorbar(xs, mean, yerr=err, fmt="o", ms=4, color=color, capsize=2,
                             label=f"GAMP {label}".strip())
            se = squeeze(sub["overlap_se"].sel(row=i, col=i, drop=True)).values
            order = np.argsort(xs)
            axes[0].plot(xs[order], se[order], "-", color=color, label=f"SE {label}".strip())
        gen = squeeze(sub["gen_error"].isel(iteration=-1))
        err = gen.std("seed", ddof=1) / np.sqrt(n_seeds) if n_seeds > 1 else None
        axes[1].errorbar(xs, gen.mean("seed").values, yerr=None if err is None else err.values, fmt="o", ms=4,
                         color=color, capsize=2, label=f"GAMP {label}".strip())
        se_err = squeeze(sub["gen_error_se"]).values
        order = np.argsort(xs)
        axes[1].plot(xs[order], se_err[order], "-", color=color, label=f"SE {label}".strip())
    first = next(iter(series(ds, x)))[1]
    sub = ds.sel(first)
    for k, alpha in enumerate(sub[x].values):
        trace = squeeze(sub["overlap"].isel(row=0, col=0).sel({x: alpha}).mean("seed"))
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
    sel = {d: ds[d].values[0] for d in ds.attrs["point_dims"]
           if d != x and d in se_ds.dims and ds.sizes[d] == 1 and ds[d].values[0] in se_ds[d].values}
    sub = se_ds.sel(sel)
    if x not in sub.dims:
        return
    xs = sub[x].values
    axes[0].plot(xs, squeeze(sub["overlap"].isel(row=0, col=0)).values, color="0.6", lw=1, zorder=0,
                 label=f"SE ({se_ds.attrs.get('seqphase_sweep')})")
    if "gen_error" in sub:
        axes[1].plot(xs, squeeze(sub["gen_error"]).values, color="0.6", lw=1, zorder=0, label="SE (dense)")


def plot_threshold(plt, ds):
    x = x_dim(ds)
    fig, ax = plt.subplots(figsize=(6, 4.5))
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    if x is None:
        # Nothing numeric is swept: one group of markers per cell (transition, channel, ...).
        names = [v for v in ("alpha_stability", "alpha_bisection", "alpha_it") if v in ds]
        flat = ds[names].to_dataframe().reset_index()
        dims = list(ds.attrs["point_dims"])
        labels = [", ".join(str(r[d]) for d in dims if ds.sizes[d] > 1) or ds.attrs.get("seqphase_sweep", "")
                  for _, r in flat.iterrows()]
        pos = np.arange(len(flat))
        ax.plot(pos, flat["alpha_stability"], "o", ms=9, mfc="none", label="linear stability / spinodal")
        ax.plot(pos, flat["alpha_bisection"], "x", ms=9, label="SE bisection")
        if "alpha_it" in flat and np.isfinite(flat["alpha_it"].to_numpy(dtype=float)).any():
            ax.plot(pos, flat["alpha_it"], "s", ms=7, mfc="none", label="information-theoretic")
        ax.set_xticks(pos, labels, rotation=30, fontsize=8)
        for p, value in zip(pos, flat["alpha_stability"]):
            ax.annotate(f"{value:.4f}", (p, value), textcoords="offset points", xytext=(8, 4), fontsize=7)
    else:
        for label, sel in series(ds, x):
            color = next(colors)
            sub = ds.sel(sel)
            xs = sub[x].values
            order = np.argsort(xs)
            ax.plot(xs[order], squeeze(sub["alpha_stability"]).values[order], "-", color=color,
                    label=f"stability {label}".strip())
            ax.plot(xs, squeeze(sub["alpha_bisection"]).values, "x", color=color, ms=8,
                    label=f"bisection {label}".strip())
            it = squeeze(sub["alpha_it"]).values if "alpha_it" in sub else np.array([np.nan])
            if np.isfinite(it).any():
                ax.plot(xs[order], it[order], "s--", color=color, mfc="none", label=f"IT {label}".strip())
        ax.set_xlabel(x)
    ax.set_ylabel(r"critical $\alpha$")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig
