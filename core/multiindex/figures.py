"""Figures of the multi-index family (pure drawing: pyplot, a Dataset masked to the done points, the
companion sweeps; `results/plot.py` opens, masks and saves).

- SE: the generic SE figure (`core.figures.plot_se`: diagonal overlaps Q_kk and test error versus
  alpha), on the rows/cols that some channel of the sweep fills (the p x p variables are NaN-padded
  to P_MAX).
- GAMP: multi-index GAMP stores the overlap M = W_hat W*^T / d, not a test error, and M is only
  defined up to the channel's symmetries (z1 z2 is invariant under (w1, w2) -> (c w1, w2 / c) and
  under swapping the indices), so the figure shows the singular values of M: the mean over seeds of
  each singular value of the final M (markers, standard errors) versus alpha, on the eigenvalues of
  the SE overlap `overlap_se` (lines; a companion SE sweep, `se_sweep` in the spec's `[plot]` table,
  is drawn under them in grey), and the mean top singular value versus iteration.
- Thresholds: per cell of the grid (channel, p) and per stage of the staircase, the alpha of linear
  stability (circles) and of the SE bisection (crosses); a hard stage (alpha = inf) is drawn as a
  triangle at the top of the axes, a trivial stage (alpha = 0) at zero.
"""

from __future__ import annotations

import itertools

import numpy as np

from seqphase.core import figures as generic_figures
from seqphase.core.figures import fmt, series  # one line per value of every other swept dim


def _fixed_dims_dropped(ds, keep):
    """Drop the point dims of size one (the parameters a sweep holds fixed) other than `keep`."""
    fixed = [d for d in ds.attrs["point_dims"] if d in ds.dims and ds.sizes[d] == 1 and d not in keep]
    return ds.isel({d: 0 for d in fixed}, drop=True)


def _filled(ds, name):
    """Indices of the rows (= cols) of a NaN-padded p x p variable that some point fills."""
    diag = np.stack([ds[name].isel(row=k, col=k).values for k in range(ds.sizes["row"])])
    return [k for k in range(diag.shape[0]) if np.isfinite(diag[k]).any()]


def _singular_values(M):
    """Singular values (descending) of the finite leading block of each NaN-padded (..., P, P) matrix,
    NaN-padded to P; all NaN where the point is not done."""
    M = np.asarray(M, float)
    P = M.shape[-1]
    flat = M.reshape(-1, P, P)
    out = np.full((flat.shape[0], P), np.nan)
    for i, A in enumerate(flat):
        p = int(np.sum(np.isfinite(np.diagonal(A))))
        if p and np.all(np.isfinite(A[:p, :p])):
            out[i, :p] = np.linalg.svd(A[:p, :p], compute_uv=False)
    return out.reshape(M.shape[:-2] + (P,))


def _mean_sem(values, axis):
    """Mean and standard error over `axis`, ignoring NaN (SEM NaN with fewer than two values)."""
    count = np.sum(np.isfinite(values), axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nansum(values, axis=axis) / count
        dev = np.where(np.isfinite(values), values - np.expand_dims(mean, axis), 0.0)
        sd = np.sqrt(np.sum(dev**2, axis=axis) / (count - 1))
    return mean, np.where(count > 1, sd / np.sqrt(np.maximum(count, 1)), np.nan)


def plot_se(plt, ds):
    """The generic SE figure on the filled rows/cols, without the empty lines of the rows a channel of
    smaller p leaves NaN."""
    keep = _filled(ds, "overlap")
    fig = generic_figures.plot_se(plt, ds.isel(row=keep, col=keep))
    for ax in fig.axes:
        for line in list(ax.get_lines()):
            if not np.isfinite(np.asarray(line.get_ydata(), float)).any():
                line.remove()
        ax.legend(fontsize=7)
    return fig


def plot_gamp(plt, ds, se_ds=None):
    """Singular values of the final M versus alpha (mean +- s.e. over seeds) on the SE eigenvalues, and
    the mean top singular value versus iteration (see the module docstring)."""
    x = "alpha"
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    colors = itertools.cycle(plt.rcParams["axes.prop_cycle"].by_key()["color"])
    markers = ("o", "s", "^")
    iterations = ds["iteration"].values
    se_labelled = False  # the companion's grey lines get one legend entry
    for label, sel in series(ds, x):
        color = next(colors)
        sub = _fixed_dims_dropped(ds.sel(sel), keep=(x,))
        order = np.argsort(sub[x].values)
        xs = sub[x].values[order]
        final = sub["overlap"].isel(iteration=-1).transpose(x, "seed", "row", "col").values[order]
        sv_mean, sv_sem = _mean_sem(_singular_values(final), axis=1)  # (alpha, k)
        se_sv = _singular_values(sub["overlap_se"].transpose(x, "row", "col").values[order])
        if se_ds is not None:
            se_labelled |= _overlay_se(axes[0], se_ds, sel, labelled=se_labelled)
        for k in range(sv_mean.shape[1]):
            if not np.isfinite(sv_mean[:, k]).any():
                continue
            axes[0].errorbar(xs, sv_mean[:, k], yerr=sv_sem[:, k], fmt=markers[k % len(markers)], ms=4,
                             color=color, capsize=2, label=f"GAMP $s_{k + 1}(M)$ {label}".strip())
            if np.isfinite(se_sv[:, k]).any():
                # the marker keeps a one-alpha SE value visible
                axes[0].plot(xs, se_sv[:, k], "-", marker="_", ms=14, color=color, lw=1,
                             label=f"SE $\\lambda_{k + 1}(Q)$ {label}".strip())
        traces = sub["overlap"].transpose(x, "seed", "iteration", "row", "col").values[order]
        top, _ = _mean_sem(_singular_values(traces)[..., 0], axis=1)  # (alpha, iteration)
        for j, alpha in enumerate(xs):
            if np.isfinite(top[j]).any():
                axes[1].plot(iterations, top[j], color=color, alpha=0.4 + 0.6 * (j + 1) / len(xs),
                             label=f"{label} {x}={alpha:g}".strip())
    axes[0].set_xlabel(x)
    axes[0].set_ylabel("singular values of M (final iteration)")
    axes[1].set_xlabel("iteration")
    axes[1].set_ylabel("mean top singular value of M")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return fig


def _overlay_se(ax, se_ds, sel, labelled):
    """Eigenvalues of the overlap of a companion SE sweep versus alpha at the series' parameters (grey);
    True if drawn."""
    pick = {d: v for d, v in sel.items() if d in se_ds.dims}
    if any(v not in se_ds[d].values for d, v in pick.items()):
        return False
    sub = _fixed_dims_dropped(se_ds.sel(pick), keep=("alpha",))
    if "alpha" not in sub.dims or any(d in sub.dims for d in sub.attrs["point_dims"] if d != "alpha"):
        return False  # the companion sweeps more than alpha at these parameters: no single SE line
    order = np.argsort(sub["alpha"].values)
    ev = _singular_values(sub["overlap"].transpose("alpha", "row", "col").values[order])
    for k in range(ev.shape[1]):
        if np.isfinite(ev[:, k]).any():
            ax.plot(sub["alpha"].values[order], ev[:, k], color="0.6", lw=1, zorder=0,
                    label=None if labelled else f"SE ({se_ds.attrs.get('seqphase_sweep', 'companion')})")
            labelled = True
    return True


def plot_threshold(plt, ds):
    """Stability and bisection alphas per (grid cell, stage); see the module docstring."""
    dims = list(ds.attrs["point_dims"])
    cells = []
    for values in itertools.product(*(ds[d].values for d in dims)):
        cell = ds.sel(dict(zip(dims, values)))
        stab, bis = cell["alpha_stability"].values, cell["alpha_bisection"].values
        stages = [s for s in range(stab.shape[0]) if not (np.isnan(stab[s]) and np.isnan(bis[s]))]
        if not stages:
            continue  # not done (or not a valid point, e.g. p != 0 for a channel other than norm2)
        label = ", ".join(_cell_label(d, v) for d, v in zip(dims, values) if ds.sizes[d] > 1)
        cells.append((label or ds.attrs.get("seqphase_sweep", ""), stab, bis, stages))
    finite = [v for _, st, bi, _ in cells for v in np.concatenate([st, bi]) if np.isfinite(v)]
    ceiling = 1.15 * max(finite) if finite else 1.0
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(cells) + 2), 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    width = 0.6 / ds.sizes["stage"]
    for pos, (_, stab, bis, stages) in enumerate(cells):
        for j, s in enumerate(stages):
            color = colors[s % len(colors)]
            at = pos + (j - (len(stages) - 1) / 2) * width  # the cell's stages side by side, centred
            for value, marker in ((stab[s], "o"), (bis[s], "x")):
                if np.isnan(value):
                    continue
                if np.isinf(value):  # hard: not learned at any finite alpha
                    ax.plot(at, ceiling, "^", ms=9, color=color, mfc="none")
                else:
                    ax.plot(at, value, marker, ms=9, color=color, mfc="none" if marker == "o" else color)
            if np.isfinite(stab[s]) and stab[s] > 0:
                ax.annotate(f"{stab[s]:.4g}", (at, stab[s]), textcoords="offset points", xytext=(6, 4), fontsize=7)
    drawn = sorted({s for *_, stages in cells for s in stages})
    handles = [ax.plot([], [], "o", color="0.3", mfc="none", label="linear stability")[0],
               ax.plot([], [], "x", color="0.3", label="SE bisection")[0]]
    if any(np.isinf(v) for _, st, bi, _ in cells for v in np.concatenate([st, bi])):
        handles.append(ax.plot([], [], "^", color="0.3", mfc="none", label=r"hard ($\alpha = \infty$)")[0])
    if len(drawn) > 1:
        handles += [ax.plot([], [], "s", color=colors[s % len(colors)], label=f"stage {s + 1}")[0] for s in drawn]
    ax.legend(handles=handles, fontsize=7)
    ax.set_xticks(np.arange(len(cells)), [c[0] for c in cells], rotation=30, fontsize=8)
    ax.set_xlim(-0.6, len(cells) - 0.4)
    ax.set_ylim(bottom=-0.05 * ceiling, top=1.08 * ceiling)
    ax.set_ylabel(r"critical $\alpha$")
    ax.grid(alpha=0.3)
    return fig


def _cell_label(dim, value):
    """A channel names itself; a number is labelled by its dim (p=2)."""
    return str(value) if isinstance(value, str) else f"{dim}={fmt(value)}"
