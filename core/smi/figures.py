"""Figures of the deep tied attention sweeps (`model = "smi"`), after the paper's Figs. 1-3.

- `plot_se` (Fig. 1 left, Fig. 3 left for 3 layers): the SE overlaps Q_ll versus alpha (left axis) and,
  on a twin log axis, the plug-in error (solid), the Bayes-optimal error (dotted) and the plug-in error
  with only the last layer learned (dashed). Beside them: the published curves of the 2-layer c = 1 SE
  (`BO_2w.csv` markers, `gen_error_BO_2w*.csv` thin grey lines); the final-iteration |M_ll| and
  plug-in error of a GAMP companion (`gamp_sweep`, mean +- s.e. over seeds); background bands split at
  alpha_2 and alpha_1 of a threshold companion (`thresholds_sweep`). With eps as a grid axis
  (`smi-2layer-se-noiseless`) a first panel per skip overlays Q_ll of every eps (colour: eps; line style:
  layer), the approach to the noiseless model; the per-eps panels follow.
- `plot_thresholds` (Fig. 1 right): alpha_2(c) and alpha_1(c) versus the skip c, by stability (line,
  +- s.e.) and SE bisection (crosses); the regions where nothing, the last layer, both layers are
  learned; the published `alpha_critical.csv` curves dashed; the same thresholds at another eps dotted (the
  noiseless model, `noiseless_sweep`, beside the reference code's eps = 1e-3, `reference_code_sweep`); the
  onsets located by GAMP (`onset_sweep`) as hollow squares.
- `plot_gamp` (Fig. 2 top): the cosine |M_ll| / sqrt(Q_ll) and |M_ll| versus iteration at the alpha
  nearest 1.2, one thin line per seed and the mean; the final |M_ll| and plug-in error versus alpha on
  the SE curves of the `se_sweep` companion.
- `plot_sgd` (Fig. 2 bottom): the cosine of each layer versus epoch (each run's sign set by its final
  value, as in the paper's figure), runs thin and their mean thick; the test MSE the same way.

Companions are other stored sweeps named in the spec's `[plot]` table (`seqphase plot` opens them);
each is matched to a panel by the values of the parameters they share (skip, depth). The sweep and every
companion arrive masked to their done points (`status` is NaN elsewhere), so "done" is `status.notnull()`
here and nothing of `seqphase.results` is needed. Each function has the signature (plt, ds, companions)
and is called by the matching method of `core/smi/model.py`. The published
data ship in `core/smi/reference/` (provenance in its README.md) and arrive in `companions[REFERENCE]`.
"""

from __future__ import annotations

import itertools
import json
import warnings

import numpy as np

from seqphase.core.figures import published

LAYER_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")
EPS_COLORS = ("tab:red", "tab:olive", "tab:cyan", "tab:blue", "tab:purple", "tab:gray")  # the eps overlay
REGION_COLORS = {"none": "0.55", "last": "tab:red", "both": "tab:blue"}
ALPHA2_COLOR, ALPHA1_COLOR = "darkred", "navy"
PUBLISHED_SKIP, PUBLISHED_DEPTH = 1.0, 2  # the published SE curves are those of the 2-layer, c = 1 model
GAMP_FIGURE_ALPHA = 1.2                    # the alpha of the paper's Fig. 2 (top)


# -- selection helpers ----------------------------------------------------------------------------
def _cells(ds, keep=()):
    """(label, sub, fixed) per combination of the swept point dims not in `keep`, with a done point.

    `sub` has every point dim but those in `keep` selected away; `fixed` maps each of those dims to
    its value (used to match companions and the published data)."""
    dims = list(ds.attrs["point_dims"])
    swept = [d for d in dims if ds.sizes[d] > 1 and d not in keep]
    for values in itertools.product(*(ds[d].values for d in swept)):
        sel = dict(zip(swept, values))
        sub = ds.sel(sel).isel({d: 0 for d in dims if d not in keep and d not in sel})
        if not sub["status"].notnull().any():
            continue
        fixed = {d: sub[d].values.item() for d in dims if d not in keep}
        yield ", ".join(f"{d} = {_fmt(v)}" for d, v in sel.items()), sub, fixed


def _describe(fixed):
    """'skip c = 1, 2 layers' for a panel title."""
    parts = [f"skip c = {_fmt(fixed['skip'])}"] if "skip" in fixed else []
    if "depth" in fixed:
        parts.append(f"{_fmt(fixed['depth'])} layers")
    parts += [f"{d} = {_fmt(v)}" for d, v in fixed.items() if d not in ("skip", "depth")]
    return ", ".join(parts)


def _companion(comp, fixed, keep=()):
    """The part of a companion sweep at this panel's parameter values, or None if it has none done."""
    if comp is None:
        return None
    sel = {}
    for d in comp.attrs["point_dims"]:
        if d in keep:
            continue
        values = comp[d].values
        if d in fixed:
            hits = [v for v in values if _same(v, fixed[d])]
            if not hits:
                return None
            sel[d] = hits[0]
        elif comp.sizes[d] == 1:
            sel[d] = values[0]
        else:
            return None
    sub = comp.sel(sel)
    return sub if sub["status"].notnull().any() else None


def _same(a, b):
    if isinstance(a, (str, np.str_)) or isinstance(b, (str, np.str_)):
        return str(a) == str(b)
    return bool(np.isclose(float(a), float(b), rtol=1e-9, atol=0.0))


def _fmt(value):
    return f"{value:g}" if isinstance(value, (float, np.floating, int, np.integer)) else str(value)


def _diag(var, layer):
    return var.sel(row=layer, col=layer, drop=True)


def _layers(overlap):
    """The layers (row values) whose diagonal overlap has a finite value: the depth of the panel."""
    return [int(r) for r in overlap["row"].values if np.isfinite(_diag(overlap, r).values).any()]


def _is_published_model(fixed, layers):
    return (len(layers) == PUBLISHED_DEPTH and _same(fixed.get("skip", PUBLISHED_SKIP), PUBLISHED_SKIP)
            and _same(fixed.get("depth", PUBLISHED_DEPTH), PUBLISHED_DEPTH))


def _finite(*arrays):
    mask = np.all([np.isfinite(a) for a in arrays], axis=0)
    return [np.asarray(a)[mask] for a in arrays]


def _final(values):
    """The last finite entry along the last axis (a run that stopped early is NaN-padded)."""
    values = np.asarray(values, dtype=float)
    finite = np.isfinite(values)
    last = values.shape[-1] - 1 - np.argmax(finite[..., ::-1], axis=-1)
    out = np.take_along_axis(values, last[..., None], axis=-1)[..., 0]
    return np.where(finite.any(axis=-1), out, np.nan)



def _runs_and_mean(ax, x, runs, color, name, unit):
    """Each run as a thin line and their mean as a thick one (the paper's Figure 2 style)."""
    for r, run in enumerate(runs):
        ax.plot(x, run, "-", lw=0.6, alpha=0.45, color=color, label=f"{name}, each {unit[:-1]}" if r == 0 else None)
    mean, _ = _mean_se(runs, axis=0)
    ax.plot(x, mean, "-", lw=2.2, color=color, label=f"{name}, mean of {len(runs)} {unit}")

def _mean_se(values, axis=0):
    """Mean and standard error over `axis`, ignoring NaN (s.e. NaN with fewer than 2 values)."""
    values = np.asarray(values, dtype=float)
    n = np.isfinite(values).sum(axis=axis)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mean = np.nanmean(values, axis=axis)
        sd = np.nanstd(values, axis=axis, ddof=1)
    return mean, np.where(n > 1, sd / np.sqrt(np.maximum(n, 1)), np.nan)


def _sign_by_final(values):
    """Each run (row) times the sign of its last finite value, as the paper's Fig. 2 does."""
    sign = np.sign(_final(values))
    return values * np.where(sign == 0, 1.0, sign)[:, None]


def _grid(plt, n, width, height):
    ncols = min(n, 3)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, list(axes.flat[:n])


def _settings(ds):
    try:
        return json.loads(ds.attrs.get("settings", "{}"))
    except (TypeError, ValueError):
        return {}


# -- SE: Fig. 1 left / Fig. 3 left ----------------------------------------------------------------
def plot_se(plt, ds, companions):
    """One panel per point of the swept dims but alpha; with eps as a grid axis (smi-2layer-se-noiseless)
    first one panel per skip with every eps overlaid, the approach to the noiseless model."""
    cells = list(_cells(ds, keep=("alpha",)))
    overlays = list(_cells(ds, keep=("alpha", "eps"))) if ds.sizes.get("eps", 1) > 1 else []
    fig, axes = _grid(plt, len(overlays) + len(cells), 7.5, 7.0)
    for ax, (_, sub, fixed) in zip(axes, overlays):
        _eps_panel(ax, sub)
        ax.set_title(f"{_describe(fixed)}: every eps (eps -> 0: the noiseless model)", fontsize=9)
    for ax, (_, sub, fixed) in zip(axes[len(overlays):], cells):
        _se_panel(ax, sub, fixed, companions)
        ax.set_title(_describe(fixed), fontsize=9)
    return fig


def _eps_panel(ax, sub):
    """Q_ll against alpha for every eps of `sub` (dims eps, alpha): colour by eps, line style by layer."""
    alphas = sub["alpha"].values
    layers = _layers(sub["overlap"])
    styles = ("-", "--", ":", "-.")
    for k_eps, eps in enumerate(sub["eps"].values):
        colour = EPS_COLORS[k_eps % len(EPS_COLORS)]
        one = sub.sel(eps=eps)
        if not one["status"].notnull().any():
            continue
        note = " (reference code)" if np.isclose(eps, 1e-3) else ""
        for k, layer in enumerate(layers):
            ax.plot(*_finite(alphas, _diag(one["overlap"], layer).values), styles[k % len(styles)], lw=1.6,
                    marker="o", ms=3, color=colour, label=f"$Q_{{{layer}{layer}}}$, eps = {eps:g}{note}")
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel(r"$\alpha = n/d$")
    ax.set_ylabel(r"overlap $Q_{\ell\ell}$, every eps")
    ax.legend(fontsize=6.5, ncol=2)
    ax.grid(alpha=0.3)


def _se_panel(ax, sub, fixed, companions):
    alphas = sub["alpha"].values
    layers = _layers(sub["overlap"])
    show_published = _is_published_model(fixed, layers)
    x_hi = float(np.nanmax(alphas))
    for k, layer in enumerate(layers):
        q = _diag(sub["overlap"], layer).values
        ax.plot(*_finite(alphas, q), "-", lw=2, color=LAYER_COLORS[k], label=f"$Q_{{{layer}{layer}}}$ (SE)")
    err_ax = ax.twinx()
    err_ax.set_yscale("log")
    for name, style, label in (("gen_error_plugin", "-", "plug-in error (SE)"),
                               ("gen_error_bayes", ":", "Bayes-optimal error (SE)"),
                               ("gen_error_plugin_last_layer", "--", "plug-in error, last layer only (SE)")):
        if name not in sub:
            continue
        xs, err = _finite(alphas, sub[name].values)
        if not len(xs):
            continue
        err_ax.plot(xs, err, style, color="k", lw=1.4, label=label)
        if f"{name}_se" in sub:
            xs_, err_, se_ = _finite(alphas, sub[name].values, sub[f"{name}_se"].values)
            err_ax.fill_between(xs_, np.maximum(err_ - se_, 1e-12), err_ + se_, color="k", alpha=0.12, lw=0)
    if show_published:
        ref = published(companions, "BO_2w.csv")
        for k, layer in enumerate(layers):
            ax.plot(ref["alpha"], ref[f"Q{layer}{layer}"], "o", ms=3.5, mfc="none", mew=0.8, color=LAYER_COLORS[k],
                    label=f"published $Q_{{{layer}{layer}}}$ (BO_2w.csv)")
        for name, style, label in (("gen_error_BO_2w.csv", "-", "published plug-in error (gen_error_BO_2w.csv)"),
                                   ("gen_error_BO_2w_one_layer.csv", "--",
                                    "published, last layer only (gen_error_BO_2w_one_layer.csv)")):
            ref = published(companions, name)
            err_ax.plot(ref["alpha"], ref["gen_error"], style, color="0.6", lw=0.9, label=label)
            x_hi = max(x_hi, float(ref["alpha"].max()))
    gamp = _companion(companions.get("gamp_sweep"), fixed, keep=("alpha",))
    if gamp is not None:
        _gamp_points(ax, err_ax, gamp, layers)
    thresholds = _companion(companions.get("thresholds_sweep"), fixed)
    if thresholds is not None:
        _bands(ax, thresholds, x_hi)
    ax.set_xlim(0.0, x_hi)
    ax.set_ylim(-0.03, 1.05)
    ax.set_xlabel(r"$\alpha = n/d$")
    ax.set_ylabel(r"overlap $Q_{\ell\ell}$")
    err_ax.set_ylabel("test error (log scale)")
    handles, labels = ax.get_legend_handles_labels()
    more, more_labels = err_ax.get_legend_handles_labels()
    err_ax.legend(handles + more, labels + more_labels, fontsize=6.5, loc="upper center",
                  bbox_to_anchor=(0.5, -0.13), ncol=2)
    ax.grid(alpha=0.3)


def _gamp_points(ax, err_ax, gamp, layers):
    """Final-iteration |M_ll| and plug-in error of a GAMP companion, mean +- s.e. over seeds."""
    alphas = gamp["alpha"].values
    n_seeds = gamp.sizes.get("seed", 1)
    for k, layer in enumerate(layers):
        if layer not in gamp["row"].values:
            continue
        m = np.abs(_diag(gamp["overlap"], layer).transpose("alpha", "seed", "iteration").values)
        mean, se = _mean_se(_final(m), axis=1)
        xs, mean, se = _finite(alphas, mean, np.nan_to_num(se))
        ax.errorbar(xs, mean, yerr=se, fmt="s", ms=4, capsize=2, color=LAYER_COLORS[k],
                    label=f"GAMP $|M_{{{layer}{layer}}}|$, final ({n_seeds} seeds)")
    if "gen_error_plugin" in gamp:
        err = gamp["gen_error_plugin"].transpose("alpha", "seed", "iteration").values
        mean, se = _mean_se(_final(err), axis=1)
        xs, mean, se = _finite(alphas, mean, np.nan_to_num(se))
        err_ax.errorbar(xs, mean, yerr=se, fmt="^", ms=4, capsize=2, color="k", mfc="none",
                        label="GAMP plug-in error, final")


def _threshold_values(thr):
    """(alpha_2, alpha_1) of one threshold cell: stability, else bisection."""
    out = []
    for layer in (2, 1):
        value = np.nan
        for how in ("stability", "bisection"):
            name = f"alpha{layer}_{how}"
            if name in thr and np.isfinite(float(thr[name].values)):
                value = float(thr[name].values)
                break
        out.append(value)
    return out


def _bands(ax, thr, x_hi):
    a2, a1 = _threshold_values(thr)
    if not np.isfinite(a2):
        return
    ax.axvspan(0.0, a2, color=REGION_COLORS["none"], alpha=0.12, lw=0, zorder=0,
               label=rf"nothing learned ($\alpha < \alpha_2$ = {a2:.3f})")
    top = a1 if np.isfinite(a1) else x_hi
    ax.axvspan(a2, top, color=REGION_COLORS["last"], alpha=0.10, lw=0, zorder=0, label="last layer learned")
    if np.isfinite(a1):
        ax.axvspan(a1, max(x_hi, a1), color=REGION_COLORS["both"], alpha=0.10, lw=0, zorder=0,
                   label=rf"both layers learned ($\alpha > \alpha_1$ = {a1:.3f})")


# -- thresholds: Fig. 1 right ---------------------------------------------------------------------
def plot_thresholds(plt, ds, companions):
    # the legend goes right of the axes: inside it hid the alpha_1 curve and points at large skips
    fig, ax = plt.subplots(figsize=(10.0, 5.5), layout="constrained")
    cells = list(_cells(ds, keep=("skip",)))
    ref = published(companions, "alpha_critical.csv")
    order = np.argsort(ref["skip"])
    y_hi = max(1.0, float(np.nanmax(ref["alpha1"])))
    x_hi = float(ref["skip"].max())
    markers = itertools.cycle("osD^v")
    eps = _settings(ds).get("eps")
    for label, sub, _ in cells:
        skips = sub["skip"].values
        suffix = f" ({label})" if label else (f", eps = {eps:g}" if eps is not None else "")
        marker = next(markers)
        for layer, color in ((2, ALPHA2_COLOR), (1, ALPHA1_COLOR)):
            stab = sub[f"alpha{layer}_stability"].values
            se = sub[f"alpha{layer}_stability_se"].values if f"alpha{layer}_stability_se" in sub else 0 * stab
            xs, ys, es = _finite(skips, stab, np.nan_to_num(se))
            ax.errorbar(xs, ys, yerr=es, fmt=f"-{marker}", ms=3.5, lw=1.6, capsize=2, color=color,
                        label=rf"$\alpha_{layer}$ stability $\pm$ s.e.{suffix}")
            bis = sub[f"alpha{layer}_bisection"].values
            xs_b, ys_b = _finite(skips, bis)
            if len(xs_b):
                ax.plot(xs_b, ys_b, "x", ms=7, mew=1.4, color=color, label=rf"$\alpha_{layer}$ SE bisection{suffix}")
            if len(ys):
                y_hi = max(y_hi, 1.08 * float(np.max(ys + es)))
        x_hi = max(x_hi, float(np.nanmax(skips)))
    for role in ("noiseless_sweep", "reference_code_sweep"):
        # the same thresholds at another eps (the noiseless model beside the reference code's eps = 1e-3)
        y_hi = _other_eps_thresholds(ax, companions.get(role), y_hi)
    onset = companions.get("onset_sweep")
    if onset is not None:
        # the third route: the onsets located by GAMP on finite instances, extrapolated d -> infinity
        for layer, color in ((2, ALPHA2_COLOR), (1, ALPHA1_COLOR)):
            if f"alpha{layer}_gamp" not in onset:
                continue
            xs, ys, es = _finite(*_over_skip(onset, f"alpha{layer}_gamp", f"alpha{layer}_gamp_se"))
            if len(xs):
                ax.errorbar(xs, ys, yerr=es, fmt="s", ms=5, mfc="white", mew=1.4, capsize=3, color=color,
                            label=rf"$\alpha_{layer}$ GAMP, $d \to \infty$ $\pm$ s.e.")
                y_hi = max(y_hi, 1.08 * float(np.max(ys + es)))
                x_hi = max(x_hi, float(np.max(xs)))  # its skips need not be the SE sweep's
    if len(cells) == 1:
        _regions(ax, cells[0][1], y_hi)
    ax.plot(ref["skip"][order], ref["alpha2"][order], "--", lw=1.2, color=ALPHA2_COLOR, alpha=0.75,
            label=r"published $\alpha_2$ (alpha_critical.csv)")
    ax.plot(ref["skip"][order], ref["alpha1"][order], "--", lw=1.2, color=ALPHA1_COLOR, alpha=0.75,
            label=r"published $\alpha_1$ (alpha_critical.csv)")
    ax.set_xlim(0.0, 1.03 * x_hi)  # a margin: the points at the largest skip are drawn whole
    ax.set_ylim(0.0, y_hi)
    ax.set_xlabel("skip strength $c$")
    ax.set_ylabel(r"sample complexity $\alpha = n/d$")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(alpha=0.3)
    return fig


def _over_skip(ds, name, se_name):
    """(skip, values, s.e.) of a companion's per-point variable as 1-d arrays over its skips: the other grid
    dims (depth) have one value in these sweeps and are dropped; a missing s.e. is 0."""
    skips = np.atleast_1d(ds["skip"].values).astype(float)
    values = np.asarray(ds[name].values, dtype=float).reshape(skips.size)
    se = np.asarray(ds[se_name].values, dtype=float).reshape(skips.size) if se_name in ds else 0 * values
    return skips, values, se


def _other_eps_thresholds(ax, other, y_hi):
    """alpha_2(c), alpha_1(c) (stability) of a companion threshold sweep run at another eps (its settings), as
    dotted lines with hollow markers; returns the new upper y limit."""
    if other is None:
        return y_hi
    eps = _settings(other).get("eps")
    tag = f"eps = {eps:g}" if eps is not None else other.attrs.get("seqphase_sweep", "companion")
    for layer, color in ((2, ALPHA2_COLOR), (1, ALPHA1_COLOR)):
        name = f"alpha{layer}_stability"
        if name not in other:
            continue
        skips, ys, se = _over_skip(other, name, f"{name}_se")
        xs, ys, es = _finite(skips, ys, np.nan_to_num(se))
        if len(xs):
            ax.errorbar(xs, ys, yerr=es, fmt=":^", ms=4, mfc="white", lw=1.2, capsize=2, color=color,
                        label=rf"$\alpha_{layer}$ stability, {tag}")
            y_hi = max(y_hi, 1.08 * float(np.max(ys + es)))
    return y_hi


def _regions(ax, sub, y_hi):
    """Shade nothing / last layer / both layers learned between our alpha_2(c) and alpha_1(c)."""
    values = np.array([_threshold_values(sub.sel(skip=s)) for s in sub["skip"].values]).reshape(-1, 2)
    skips, a2, a1 = _finite(sub["skip"].values, values[:, 0], values[:, 1])
    if len(skips) < 2:
        return
    ax.fill_between(skips, 0.0, a2, color=REGION_COLORS["none"], alpha=0.25, lw=0, label="nothing learned")
    ax.fill_between(skips, a2, a1, color=REGION_COLORS["last"], alpha=0.15, lw=0, label="last layer learned")
    ax.fill_between(skips, a1, y_hi, color=REGION_COLORS["both"], alpha=0.12, lw=0, label="both layers learned")


# -- GAMP: Fig. 2 top -----------------------------------------------------------------------------
def plot_gamp(plt, ds, companions):
    fig, axes = plt.subplots(2, 2, figsize=(12.5, 9.0))
    cells = list(_cells(ds, keep=("alpha",)))
    _, sub0, fixed0 = cells[0]
    _gamp_iterations(axes[0, 0], axes[0, 1], sub0, _describe(fixed0))
    for (label, sub, fixed), marker in zip(cells, itertools.cycle("osD^v")):
        _gamp_versus_alpha(axes[1, 0], axes[1, 1], sub, fixed, label, marker, companions.get("se_sweep"))
    axes[1, 1].set_yscale("log")
    for ax in axes[1]:
        ax.set_xlabel(r"$\alpha = n/d$")
    axes[1, 0].set_ylabel(r"$|M_{\ell\ell}|$ (final iteration) and SE $Q_{\ell\ell}$")
    axes[1, 1].set_ylabel("plug-in test error (final iteration)")
    for ax in axes.flat:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def _gamp_iterations(cos_ax, m_ax, sub, where):
    done = [a for a in sub["alpha"].values if sub["status"].sel(alpha=a).notnull().any()]
    alpha = min(done, key=lambda a: abs(a - GAMP_FIGURE_ALPHA))
    at = sub.sel(alpha=alpha)
    iterations = at["iteration"].values
    for k, layer in enumerate(_layers(at["overlap"])):
        m = np.abs(_diag(at["overlap"], layer).transpose("seed", "iteration").values)
        q = _diag(at["self_overlap"], layer).transpose("seed", "iteration").values
        with np.errstate(invalid="ignore", divide="ignore"):
            cosine = m / np.sqrt(q)
        for ax, values, name in ((cos_ax, cosine, "C"), (m_ax, m, "|M|")):
            _runs_and_mean(ax, iterations, values, LAYER_COLORS[k], f"layer {layer}", "seeds")
    where = f"$\\alpha$ = {alpha:g}" + (f", {where}" if where else "")
    cos_ax.set_title(rf"cosine $|M_{{\ell\ell}}|/\sqrt{{Q_{{\ell\ell}}}}$ at {where}", fontsize=9)
    m_ax.set_title(rf"overlap with the teacher $|M_{{\ell\ell}}|$ at {where}", fontsize=9)
    cos_ax.set_ylabel(r"$|M_{\ell\ell}|/\sqrt{Q_{\ell\ell}}$")
    m_ax.set_ylabel(r"$|M_{\ell\ell}|$")
    for ax in (cos_ax, m_ax):
        ax.set_xlabel("GAMP iteration")


def _gamp_versus_alpha(m_ax, err_ax, sub, fixed, label, marker, se_sweep):
    alphas = sub["alpha"].values
    suffix = f" ({label})" if label else ""
    layers = _layers(sub["overlap"])
    se = _companion(se_sweep, fixed, keep=("alpha",))
    for k, layer in enumerate(layers):
        m = np.abs(_diag(sub["overlap"], layer).transpose("alpha", "seed", "iteration").values)
        mean, err = _mean_se(_final(m), axis=1)
        xs, mean, err = _finite(alphas, mean, np.nan_to_num(err))
        m_ax.errorbar(xs, mean, yerr=err, fmt=marker, ms=4, capsize=2, color=LAYER_COLORS[k],
                      label=f"GAMP $|M_{{{layer}{layer}}}|$, mean $\\pm$ s.e.{suffix}")
        if se is not None and layer in se["row"].values:
            m_ax.plot(*_finite(se["alpha"].values, _diag(se["overlap"], layer).values), "-", lw=1.4,
                      color=LAYER_COLORS[k], alpha=0.7, label=f"SE $Q_{{{layer}{layer}}}${suffix}")
    if "gen_error_plugin" in sub:
        mean, err = _mean_se(_final(sub["gen_error_plugin"].transpose("alpha", "seed", "iteration").values), axis=1)
        xs, mean, err = _finite(alphas, mean, np.nan_to_num(err))
        err_ax.errorbar(xs, mean, yerr=err, fmt=marker, ms=4, capsize=2, color="k", mfc="none",
                        label=f"GAMP, mean $\\pm$ s.e.{suffix}")
    if se is not None and "gen_error_plugin" in se:
        err_ax.plot(*_finite(se["alpha"].values, se["gen_error_plugin"].values), "-", color="0.4", lw=1.2,
                    label=f"SE ({se.attrs.get('seqphase_sweep', 'se_sweep')}){suffix}")


# -- SGD: Fig. 2 bottom ---------------------------------------------------------------------------
def plot_sgd(plt, ds, companions):
    cells = list(_cells(ds))
    fig, axes = plt.subplots(len(cells), 2, figsize=(13.0, 4.8 * len(cells)), squeeze=False)
    s = _settings(ds)
    setting = ", ".join(f"{k} = {_fmt(s[k])}" for k in ("alpha", "d") if k in s)
    for row, (_, sub, fixed) in enumerate(cells):
        cos_ax, mse_ax = axes[row]
        epochs = sub["log_epoch"].values
        for k, layer in enumerate(int(v) for v in sub["layer"].values):
            runs = _sign_by_final(sub["cosine"].sel(layer=layer).transpose("seed", "log").values)
            _runs_and_mean(cos_ax, epochs, runs, LAYER_COLORS[k], f"$C_{layer}$", "runs")
        test_epochs = sub["test_epoch"].values
        mse = sub["test_mse"].transpose("seed", "test").values
        for r, run in enumerate(mse):
            mse_ax.plot(test_epochs, run, "-", lw=0.6, alpha=0.45, color="k", label="each run" if r == 0 else None)
        mse_ax.plot(test_epochs, _mean_se(mse, axis=0)[0], "-", lw=2.2, color="k", label=f"mean of {len(mse)} runs")
        mse_ax.set_yscale("log")
        where = ", ".join(x for x in (setting, _describe(fixed)) if x)
        cos_ax.set_title(f"cosine similarity with the teacher ({where})", fontsize=9)
        mse_ax.set_title(f"test error ({where})", fontsize=9)
        cos_ax.set_ylabel(r"$C_\ell = M_\ell/\sqrt{q_\ell}$ (sign of the final value)")
        mse_ax.set_ylabel("test mean squared error")
        for ax in (cos_ax, mse_ax):
            ax.set_xlabel("epoch")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
    return fig
