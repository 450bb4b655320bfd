"""Figures of the quadratic-network sweeps (`model = "quadratic"`), after the paper's MMSE figures, with the
published kappa = 0.5 theory lines (`core/quadratic/reference/`, provenance in its README.md; given in
`companions[REFERENCE]`) drawn beside ours.

- `plot_se`: (1) MMSE versus alpha, one line per kappa, noiseless, the perfect-recovery thresholds
  alpha_PR(kappa) as short ticks, the published noiseless kappa = 0.5 line (markers); (2) the same for the
  noisy values of delta of the sweep, with the published delta = 0.25 line; (3) the collapse versus
  alpha/kappa with the kappa -> 0 curve 4 abar (1 - abar) (the authors' plotter_extra red curve).
- `plot_thresholds`: alpha_PR(kappa), closed form (line) and SE bisection (crosses).
- `plot_gamp`: GAMP-RIE final error (mean +- s.e. over seeds) on the SE, one panel per delta, and the
  per-iteration traces; `plot_gd`: GD and averaged GD against BO and 2 BO, and the traces. Both draw the dense
  `se_sweep` companion (quadratic-se) when it is stored.
- `plot_erm_experiment`: the finite-d ERM (L-BFGS) test error, training loss and rank fraction, mean +- s.e. over
  seeds, on the ERM SE (the quadratic-erm-se companion, else the SE stored per point).

The sweep arrives masked to the done points (`status` NaN elsewhere).
"""

from __future__ import annotations

import itertools
import json

import numpy as np

from seqphase.core.figures import published

PUBLISHED_KAPPA = 0.5
NOISELESS_CSV = "line_no_noise_0.5.csv"
NOISY_CSV = "line_noise_0.5_0.25.csv"
NOISY_DELTA = 0.25  # label-noise variance of NOISY_CSV (theory scripts' Delta_th = 0.5)

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def _values(ds, dim, default):
    """The values of a point dim (a scalar coordinate or the default if it is not one)."""
    if dim in ds.coords:
        return [float(v) for v in np.atleast_1d(ds[dim].values)]
    return [default]


def _sel(ds, **fixed):
    return ds.sel({d: v for d, v in fixed.items() if d in ds.dims})


def _curve(sub, var="mse"):
    """(alpha, values) of a 1-d (alpha) selection at its done points, sorted."""
    drop = {d: 0 for d in sub.dims if d != "alpha" and d in sub.coords and sub[d].size > 1}
    sub = sub.isel(drop) if drop else sub
    x = np.atleast_1d(sub["alpha"].values)
    y = np.atleast_1d(sub[var].values.astype(float))
    keep = np.atleast_1d(sub["status"].notnull().values) & np.isfinite(y)
    order = np.argsort(x[keep])
    return x[keep][order], y[keep][order]


def alpha_pr(kappa):
    return kappa - kappa * kappa / 2.0 if kappa < 1.0 else 0.5


def plot_se(plt, ds, companions=None):
    deltas = _values(ds, "delta", 0.0)
    noisy = [d for d in deltas if d > 0]
    fig, axes = plt.subplots(1, 3, figsize=(18.0, 5.0))
    noiseless_ax, noisy_ax, collapse_ax = axes
    kappas = _values(ds, "kappa", PUBLISHED_KAPPA)
    for ax, delta_list, title in ((noiseless_ax, [0.0] if 0.0 in deltas else [], "noiseless"),
                                  (noisy_ax, noisy, "label noise")):
        colors = itertools.cycle(COLORS)
        styles = itertools.cycle(("-", "--", "-.", ":"))
        for delta in delta_list:
            style = next(styles)
            for kappa in kappas:
                color = next(colors)
                x, y = _curve(_sel(ds, kappa=kappa, delta=delta))
                if not len(x):
                    continue
                label = rf"$\kappa$ = {kappa:g}" + (rf", $\Delta$ = {delta:g}" if delta > 0 else "")
                ax.plot(x, y, style, color=color, lw=1.6, label=label)
                if delta == 0:
                    a = alpha_pr(kappa)
                    ax.plot([a, a], [0, 0.08], "-", color=color, lw=2.0)
            colors = itertools.cycle(COLORS)
        ref = published(companions, NOISELESS_CSV if ax is noiseless_ax else NOISY_CSV)
        what = "noiseless" if ax is noiseless_ax else rf"$\Delta$ = {NOISY_DELTA:g} (label-noise variance)"
        ax.plot(ref["alpha"][::4], ref["gen_error"][::4], "s", ms=3.5, color="0.4", mfc="none",
                label=rf"published $\kappa$ = 0.5, {what}")
        ax.set_xlim(0, 0.6)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel(r"$\alpha = n/d^2$")
        ax.set_ylabel(r"MMSE $= \|\hat S - S^*\|_F^2/d^2$")
        ax.set_title(f"Bayes-optimal error, {title}" + (r" (ticks: $\alpha_{PR}$)" if ax is noiseless_ax else
                                                         r" ($y = \mathrm{Tr}[(xx^T - I)S^*]/d + \sqrt{\Delta}z$)"),
                     fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    abar = np.linspace(0, 1.5, 301)
    collapse_ax.plot(abar, np.where(abar <= 0.5, 1.0, np.where(abar >= 1, 0.0, 4 * abar * (1 - abar))), "-",
                     color="tab:red", lw=2.2, label=r"$\kappa \to 0$: $4\bar\alpha(1 - \bar\alpha)$")
    colors = itertools.cycle(COLORS)
    if 0.0 in deltas:
        for kappa in kappas:
            x, y = _curve(_sel(ds, kappa=kappa, delta=0.0))
            if len(x):
                collapse_ax.plot(x / kappa, y, "-", color=next(colors), lw=1.2, label=rf"$\kappa$ = {kappa:g}")
    collapse_ax.set_xlim(0, 1.5)
    collapse_ax.set_ylim(0, 1.05)
    collapse_ax.set_xlabel(r"$\bar\alpha = \alpha/\kappa$")
    collapse_ax.set_ylabel("MMSE")
    collapse_ax.set_title(r"noiseless, versus $\alpha/\kappa$: small-width limit", fontsize=9)
    collapse_ax.grid(alpha=0.3)
    collapse_ax.legend(fontsize=7)
    return fig


def _companion_curve(companions, kappa, delta):
    """(alpha, mse) of the `se_sweep` companion (a stored quadratic-se sweep) at (kappa, delta), or None."""
    comp = (companions or {}).get("se_sweep")
    if comp is None or "alpha" not in comp.dims:
        return None
    for dim, value in (("kappa", kappa), ("delta", delta)):
        if dim in comp.dims:
            if not np.any(np.isclose(comp[dim].values, value)):
                return None
            comp = comp.sel({dim: value}, method="nearest")
    x, y = _curve(comp)
    return (x, y) if len(x) else None


def _reference_lines(ax, companions, kappa, delta, scale=1.0, label_scale=""):
    """The SE under the points: the companion sweep (line) and the published kappa = 0.5 file (markers)."""
    curve = _companion_curve(companions, kappa, delta)
    if curve is not None:
        ax.plot(curve[0], scale * curve[1], "-", color="0.55", lw=1.2, zorder=0,
                label=f"{label_scale}SE (quadratic-se), $\\kappa$ = {kappa:g}")
    name = {0.0: NOISELESS_CSV, NOISY_DELTA: NOISY_CSV}.get(delta)
    if name is not None and kappa == PUBLISHED_KAPPA:
        ref = published(companions, name)
        ax.plot(ref["alpha"][::3], scale * ref["gen_error"][::3], "s", ms=3, color="0.45", mfc="none", zorder=0,
                label=f"{label_scale}published SE line")


def _setting(ds, key):
    """A method setting of the stored sweep (attrs["settings"], JSON), or None."""
    settings = ds.attrs.get("settings", "{}")
    return (json.loads(settings) if isinstance(settings, str) else dict(settings)).get(key)


def _final_points(ax, sub, var, last, **style):
    """Error bars of the last logged value of `var` (mean +- standard error over seeds) versus alpha at the
    done points of a (kappa, delta) selection; returns the done alphas (empty: nothing drawn)."""
    done = np.atleast_1d(sub["status"].notnull().values)
    alpha = np.atleast_1d(sub["alpha"].values)[done]
    if not len(alpha):
        return alpha
    final = sub[var].isel({last: -1})
    n = final.sizes["seed"]
    mean = np.atleast_1d(final.mean("seed").values)[done]
    sem = np.atleast_1d(final.std("seed", ddof=1).values)[done] / np.sqrt(n) if n > 1 else None
    ax.errorbar(alpha, mean, yerr=sem, capsize=2, **style)
    return alpha


def plot_gamp(plt, ds, companions=None):
    """GAMP-RIE (the paper's AMP points): final error, mean +- standard error over seeds, on the SE curve, one
    panel per delta (lines per kappa: the point's own SE `mse_se`, the `se_sweep` companion and the published
    kappa = 0.5 line when present); last panel: mean error (solid) and GAMP's own prediction (dotted) versus
    iteration, one line per alpha."""
    deltas = _values(ds, "delta", 0.0)
    kappas = _values(ds, "kappa", PUBLISHED_KAPPA)
    fig, axes = plt.subplots(1, len(deltas) + 1, figsize=(6.0 * (len(deltas) + 1), 5.0))
    trace_ax = axes[-1]
    cmap = plt.get_cmap("viridis")
    d = _setting(ds, "d")
    for ax, delta in zip(axes[:-1], deltas):
        colors = itertools.cycle(COLORS)
        for kappa in kappas:
            color = next(colors)
            sub = _sel(ds, kappa=kappa, delta=delta)
            alpha = _final_points(ax, sub, "mse", "iteration", fmt="o", ms=4, color=color,
                                  label=rf"GAMP-RIE, $\kappa$ = {kappa:g} (mean $\pm$ s.e.)")
            if not len(alpha):
                continue
            x, y = _curve(sub, "mse_se")
            ax.plot(x, y, "-", color=color, lw=1.0, label=rf"SE at the points, $\kappa$ = {kappa:g}")
            _reference_lines(ax, companions, kappa, delta)
            if delta == 0.0:
                a = alpha_pr(kappa)
                ax.axvline(a, color=color, ls=":", lw=1)
            for k, a in enumerate(alpha):
                cell = sub.sel(alpha=a)
                shade = cmap(k / max(1, len(alpha) - 1))
                trace_ax.plot(cell["iteration"].values, cell["mse"].mean("seed").values, "-", color=shade, lw=1)
                trace_ax.plot(cell["iteration"].values, cell["mse_predicted"].mean("seed").values, ":",
                              color=shade, lw=1)
        ax.set_xlabel(r"$\alpha = n/d^2$")
        ax.set_ylabel(r"$\|\hat S - S^*\|_F^2/d^2$ (last iteration)")
        title = "noiseless" if delta == 0 else rf"$\Delta$ = {delta:g} (label-noise variance)"
        ax.set_title(f"GAMP-RIE vs SE, {title}" + (f", d = {d}" if d is not None else ""), fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    trace_ax.set_xlabel("iteration")
    trace_ax.set_ylabel("mean error over seeds (solid), GAMP's prediction (dotted)")
    trace_ax.set_yscale("log")
    trace_ax.set_title("per-iteration error, one colour per alpha (dark: small alpha)", fontsize=9)
    trace_ax.grid(alpha=0.3)
    return fig


def plot_gd(plt, ds, companions=None):
    """GD and averaged GD (the paper's GD figure): final single-student error ('+') and error of the students'
    average ('x'), mean +- standard error over seeds, against the SE (BO, solid) and twice the SE (dashed: GD
    samples the posterior, so its error is ~ 2 BO); then the mean errors versus the step."""
    fig, (ax, trace_ax) = plt.subplots(1, 2, figsize=(12.4, 5.0))
    colors = itertools.cycle(COLORS)
    n_students = _setting(ds, "n_students")
    for kappa in _values(ds, "kappa", PUBLISHED_KAPPA):
        for delta in _values(ds, "delta", 0.0):
            color = next(colors)
            sub = _sel(ds, kappa=kappa, delta=delta)
            what = rf"$\kappa$ = {kappa:g}" + (rf", $\Delta$ = {delta:g}" if delta > 0 else "")
            alpha = []
            for var, marker, name in (("mse_gd", "+", "GD"), ("mse_agd", "x", "AGD")):
                alpha = _final_points(ax, sub, var, "step", fmt=marker, ms=8, color=color, label=f"{name}, {what}")
                for a in alpha:
                    trace_ax.plot(sub["step"].values, sub[var].sel(alpha=a).mean("seed").values,
                                  "-" if name == "GD" else "--", color=color, lw=1, alpha=0.8)
            if not len(alpha):
                continue
            x, y = _curve(sub, "mse_se")
            ax.plot(x, y, "-", color=color, lw=1.2, label=f"BO (SE), {what}")
            ax.plot(x, 2 * y, "--", color=color, lw=1.0, label=f"2 BO, {what}")
            _reference_lines(ax, companions, kappa, delta)
            _reference_lines(ax, companions, kappa, delta, scale=2.0, label_scale="2 x ")
    ax.set_xlabel(r"$\alpha = n/d^2$")
    ax.set_ylabel(r"$\|\hat S - S^*\|_F^2/d^2$ (last step; MMSE units)")
    ax.set_title("GD (+) ~ 2 BO and averaged GD (x) ~ BO" + (f" ({n_students} students)" if n_students else ""),
                 fontsize=9)
    ax.set_ylim(bottom=0)
    trace_ax.set_xlabel("step")
    trace_ax.set_ylabel("mean error over seeds: GD (solid), AGD (dashed)")
    trace_ax.set_yscale("log")
    for a in (ax, trace_ax):
        a.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def plot_thresholds(plt, ds, companions=None):
    fig, ax = plt.subplots(1, 1, figsize=(6.4, 5.0))
    kappa = np.atleast_1d(ds["kappa"].values).astype(float)
    ok = np.atleast_1d(ds["status"].notnull().values)
    grid = np.linspace(1e-3, max(2.0, float(kappa.max()) if kappa.size else 2.0), 400)
    ax.plot(grid, [alpha_pr(k) for k in grid], "-", color="tab:red", lw=1.5,
            label=r"closed form $\kappa - \kappa^2/2$ ($\kappa < 1$), 1/2")
    ax.plot(kappa[ok], np.atleast_1d(ds["alpha_bisection"].values.astype(float))[ok], "x", color="k", ms=7,
            label="bisection on the SE error < mse_cut")
    ax.set_xlabel(r"$\kappa = m/d$")
    ax.set_ylabel(r"perfect recovery $\alpha_{PR}$")
    ax.set_title(r"noiseless perfect-recovery threshold $\alpha_{PR}(\kappa)$", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


# ----------------------------------------------------------------------------------------------------
# ERM with weight decay (model "quadratic-erm"): the joint BO / ERM figure and the thresholds
# ----------------------------------------------------------------------------------------------------


def _erm_series(ds):
    """(label, selection) for each combination of the swept non-alpha dims of an ERM sweep."""
    dims = [d for d in ("kappa_star", "kappa", "delta", "lam") if d in ds.dims and ds.sizes[d] > 1]
    for values in itertools.product(*(np.atleast_1d(ds[d].values) for d in dims)):
        sel = dict(zip(dims, values))
        label = ", ".join({"kappa_star": r"$\kappa^*$", "kappa": r"$\kappa$", "delta": r"$\Delta$",
                           "lam": r"$\lambda$"}[d] + f" = {float(v):g}" for d, v in sel.items())
        yield label, sel


def plot_erm_se(plt, ds, companions=None):
    """(1) ERM test error in the BO units (1/d^2)||S_hat - S*||^2 versus alpha with the Bayes-optimal error of the
    same teacher (black, model quadratic's mse; the published kappa = 0.5 noiseless BO line as markers where
    kappa_star = 0.5 is swept); (2) training loss; (3) rank fraction."""
    fig, axes = plt.subplots(1, 3, figsize=(18.0, 5.0))
    err_ax, train_ax, rank_ax = axes
    colors = itertools.cycle(COLORS)
    bo_drawn = set()
    for label, sel in _erm_series(ds):
        color = next(colors)
        sub = ds.sel(sel)
        sub = sub.isel({d: 0 for d in sub.dims if d != "alpha"})  # size-1 dims of the unswept parameters
        x, y = _curve(sub, "test_error_bo")
        if not len(x):
            continue
        err_ax.plot(x, y, "-", color=color, lw=1.5, label="ERM " + label)
        for ax, var in ((train_ax, "train_loss"), (rank_ax, "rank_fraction")):
            xv, yv = _curve(sub, var)
            ax.plot(xv, yv, "-", color=color, lw=1.5, label=label)
        ks = float(sub["kappa_star"].values) if "kappa_star" in sub.coords and sub["kappa_star"].size == 1 else None
        delta = float(sub["delta"].values) if "delta" in sub.coords and sub["delta"].size == 1 else 0.0
        key = (ks, delta)
        if "bo_mse" in sub and key not in bo_drawn:
            xb, yb = _curve(sub, "bo_mse")
            if len(xb):
                bo_drawn.add(key)
                what = (rf"$\kappa^*$ = {ks:g}" if ks is not None else "") + (rf", $\Delta$ = {delta:g}" if delta else "")
                err_ax.plot(xb, yb, "--", color="k", lw=1.2 + 0.6 * len(bo_drawn), alpha=0.8,
                            label="Bayes-optimal " + what)
    if PUBLISHED_KAPPA in [float(v) for v in np.atleast_1d(ds["kappa_star"].values)] if "kappa_star" in ds.coords else False:
        ref = published(companions, NOISELESS_CSV)
        err_ax.plot(ref["alpha"][::4], ref["gen_error"][::4], "s", ms=3.5, color="0.4", mfc="none",
                    label=r"published BO $\kappa$ = 0.5, noiseless")
    err_ax.set_xlabel(r"$\alpha = n/d^2$")
    err_ax.set_ylabel(r"$\|\hat S - S^*\|_F^2/d^2$,  $S^* = W^{*T}W^*/\sqrt{m^*}$")
    err_ax.set_title("test error: ERM with weight decay (solid) and Bayes-optimal (dashed)", fontsize=9)
    train_ax.set_ylabel(r"training loss $\frac{1}{4n}\sum_\mu (y_\mu - \langle X_\mu, \hat S\rangle)^2$")
    train_ax.set_title("training loss (0: interpolation)", fontsize=9)
    rank_ax.set_ylabel(r"rank$(\hat S)/d$")
    rank_ax.set_title("rank of the learned matrix", fontsize=9)
    for ax in axes:
        ax.set_xlabel(r"$\alpha = n/d^2$")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return fig


def plot_erm_thresholds(plt, ds, companions=None):
    """alpha_SR(kappa_star) (statistical dimension line, bisection crosses, the BO alpha_PR and the spec's sanity
    targets) and alpha_interp(kappa_star) per (kappa, delta) (equation line, bisection crosses)."""
    fig, (sr_ax, int_ax) = plt.subplots(1, 2, figsize=(12.0, 5.0))
    ks = np.atleast_1d(ds["kappa_star"].values).astype(float)
    first = {d: 0 for d in ds.dims if d != "kappa_star"}
    sub = ds.isel(first) if first else ds
    ok = np.atleast_1d(sub["status"].notnull().values)
    sr_ax.plot(ks[ok], np.atleast_1d(sub["alpha_sr_equation"].values.astype(float))[ok], "-o", ms=3, color="tab:red",
               label="statistical dimension (dedicated equation)")
    sr_ax.plot(ks[ok], np.atleast_1d(sub["alpha_sr_bisection"].values.astype(float))[ok], "x", ms=8, color="k",
               label="bisection on the SE error")
    grid = np.linspace(1e-3, max(2.0, float(ks.max())), 300)
    sr_ax.plot(grid, [alpha_pr(k) for k in grid], ":", color="0.4", label=r"BO $\alpha_{PR} = \kappa^* - \kappa^{*2}/2$")
    targets = ((0.1, 0.30), (0.25, 0.358), (0.5, 0.435), (0.75, 0.48), (1.0, 0.5), (2.0, 0.5))
    sr_ax.plot(*zip(*targets), "D", mfc="none", color="tab:purple", label="spec §2 sanity targets")
    sr_ax.set_xlabel(r"$\kappa^* = m^*/d$")
    sr_ax.set_ylabel(r"$\alpha_{SR}$")
    sr_ax.set_title(r"noiseless strong recovery, $\lambda \to 0^+$, convex student", fontsize=9)
    colors = itertools.cycle(COLORS)
    for label, sel in [(lab, s) for lab, s in _erm_series(ds) if "kappa_star" not in s] or [("", {})]:
        color = next(colors)
        part = ds.sel(sel) if sel else ds
        part = part.isel({d: 0 for d in part.dims if d != "kappa_star"})
        okp = np.atleast_1d(part["status"].notnull().values)
        eq = np.atleast_1d(part["alpha_interp_equation"].values.astype(float))
        bis = np.atleast_1d(part["alpha_interp_bisection"].values.astype(float))
        keep = okp & np.isfinite(eq)
        int_ax.plot(ks[keep], eq[keep], "-", color=color, label="equation " + label)
        int_ax.plot(ks[okp & np.isfinite(bis)], bis[okp & np.isfinite(bis)], "x", color=color, ms=7)
    int_ax.set_xlabel(r"$\kappa^* = m^*/d$")
    int_ax.set_ylabel(r"$\alpha_{interp}$")
    int_ax.set_title(r"interpolation threshold ($\lambda \to 0^+$; crosses: bisection at small $\lambda$)", fontsize=9)
    for ax in (sr_ax, int_ax):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return fig


def _erm_companion_curve(companions, point, var):
    """(alpha, var) of the `se_sweep` companion (a stored quadratic-erm-se sweep) at the point's fixed
    (kappa_star, kappa, delta, lam), or None when the companion is absent or lacks those values."""
    comp = (companions or {}).get("se_sweep")
    if comp is None or "alpha" not in comp.dims or var not in comp:
        return None
    for dim, value in point.items():
        if dim in comp.dims:
            if not np.any(np.isclose(comp[dim].values, value)):
                return None
            comp = comp.sel({dim: value}, method="nearest")
        elif dim in comp.coords and not np.isclose(float(comp[dim].values), value):
            return None
    x, y = _curve(comp, var)
    return (x, y) if len(x) else None


def plot_erm_experiment(plt, ds, companions=None):
    """The finite-d ERM check (method "experiment"): test error (the BO paper's unit), training loss and rank
    fraction, mean +- standard error over seeds (points), on the SE: the dense `se_sweep` companion
    (quadratic-erm-se, line) when stored at the same (kappa_star, kappa, delta, lam), else the SE stored at each
    point (line through the points' SE values)."""
    fig, axes = plt.subplots(1, 3, figsize=(18.0, 5.0))
    panels = (("test_error_bo", r"$\kappa^*\|\hat S - S^*\|_F^2/d$ (BO paper's unit)", "test error"),
              ("train_loss", r"$\frac{1}{4n}\sum_\mu (y_\mu - \langle X_\mu, \hat S\rangle)^2$", "training loss"),
              ("rank_fraction", r"rank$(\hat S)/d$", "rank fraction"))
    d = _setting(ds, "d")
    colors = itertools.cycle(COLORS)
    fixed = {dim: float(np.atleast_1d(ds[dim].values)[0]) for dim in ("kappa_star", "kappa", "delta", "lam")
             if dim in ds.coords and ds[dim].size == 1}
    for label, sel in list(_erm_series(ds)) or [("", {})]:
        color = next(colors)
        sub = ds.sel(sel) if sel else ds
        sub = sub.isel({dim: 0 for dim in sub.dims if dim not in ("alpha", "seed") and sub.sizes[dim] == 1})
        point = {**fixed, **{k: float(v) for k, v in sel.items()}}
        done = np.atleast_1d(sub["status"].notnull().values)
        if not done.any():
            continue
        alpha = np.atleast_1d(sub["alpha"].values)
        for ax, (var, _, _) in zip(axes, panels):
            values = sub[var].transpose("alpha", "seed").values.astype(float)
            mean = values.mean(axis=1)
            sem = values.std(axis=1, ddof=1) / np.sqrt(values.shape[1]) if values.shape[1] > 1 else None
            ax.errorbar(alpha[done], mean[done], yerr=None if sem is None else sem[done], fmt="o", ms=4,
                        capsize=2, color=color, label=f"L-BFGS, {label}" if label else "L-BFGS")
            curve = _erm_companion_curve(companions, point, var)
            if curve is not None:
                ax.plot(curve[0], curve[1], "-", color=color, lw=1.2, label=f"SE (quadratic-erm-se) {label}")
            else:
                x, y = _curve(sub, var + "_se")
                ax.plot(x, y, "-", color=color, lw=1.0, label=f"SE at the points {label}")
    for ax, (_, ylabel, title) in zip(axes, panels):
        ax.set_xlabel(r"$\alpha = n/d^2$")
        ax.set_ylabel(ylabel)
        ax.set_title(f"ERM {title}: mean $\\pm$ s.e. over seeds on the SE" + (f", d = {d}" if d else ""), fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return fig
