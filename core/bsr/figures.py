"""Figures of the BSR sweeps (`model = "bsr"`), after the paper's Fig. 1 and its beta / noise panels, with the
published beta = 1 noiseless theory curves (`core/bsr/reference/`, provenance in its README.md; given in
`companions[REFERENCE]`) drawn beside ours as grey markers.

- `plot_se` (method "se"), four panels:
  (1) noiseless MMSE versus alpha at beta = 1, one line per rho, alpha_PR ticks, the published curves of the
      same rho, and the ridge line max(0, 1 - alpha) (the rho -> inf limit);
  (2) the same versus alpha_bar = n / (r (d + L)), with the rank-O(1) limit (se.low_rank_mse, solid red) and the
      published rho = 0 rows;
  (3) versus beta: noiseless MMSE versus alpha at the middle rho of the sweep, one line per beta, and the
      beta = inf closed form (1 - alpha)(1 - alpha/rho) (dashed);
  (4) label noise: MMSE versus alpha for the noisy deltas of the sweep at beta = 1 (or the smallest beta), one
      line per rho, with the optimal ridge error at the same delta (dotted); a sweep without a noisy delta
      has no such panel.
- `plot_thresholds` (method "threshold"): alpha_PR versus rho per beta, closed form (lines), SE bisection
  (crosses), alpha_MNNE (squares) and the beta = inf line min(rho, 1).
- `plot_gamp` (method "gamp"): GAMP-RIE final error, mean +- s.e. over seeds, on the SE curve per (rho, beta,
  delta), and the seed-mean error per iteration.
- `plot_gd` (method "gd"): GD and averaged GD final errors (mean +- s.e. over datasets) against the
  Bayes-optimal error and twice it, and their mean error per logged step.
- `plot_baselines` (method "baselines"): finite-d minimal nuclear-norm and ridge errors versus alpha with the
  asymptotic ridge curve, the Bayes-optimal curve and alpha_PR / alpha_MNNE markers.

The sweep arrives masked to the done points (`status` NaN elsewhere).
"""

from __future__ import annotations

import itertools

import numpy as np

from seqphase.core.bsr import baselines, se
from seqphase.core.figures import published

#: the published noiseless beta = 1 curves (alpha grid 0.005 and, for rho = 0.05, 0.001; alpha_bar grid files)
ALPHA_CSV = "Fig1_delta_0.0_beta_1.0_rho_0.1-0.2-0.5-1.0-2.0_alpha_0.0_0.005_1.0.csv"
ALPHA_CSV_RHO_005 = "Fig1_delta_0.0_beta_1.0_rho_0.05_alpha_0.0_0.005_1.0.csv"
ALPHA_BAR_CSV = "Fig1_LR_delta_0.0_beta_1.0_rho_0.1-0.2-0.5-1.0-2.0_alphaLR_0.0_0.005_1.0.csv"
ALPHA_BAR_CSV_LOW_RANK = "Fig1_LR_delta_0.0_beta_1.0_rho_0.0-0.05_alphaLR_0.0_0.001_1.0.csv"

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def published_rows(cols, rho):
    """The rows at one rho of a published file's columns, as a dict of columns."""
    keep = np.isclose(cols["rho"], rho, rtol=0, atol=1e-12)
    return {k: v[keep] for k, v in cols.items()}


def _values(ds, dim, default):
    """The values of a point dim (the default if the sweep does not have it)."""
    if dim in ds.coords:
        return [float(v) for v in np.atleast_1d(ds[dim].values)]
    return [default]


def _select(ds, **fixed):
    return ds.sel({d: v for d, v in fixed.items() if d in ds.dims})


def _curve(sub, var="mse"):
    """(alpha, values) of a 1-d (alpha) selection at its done points, sorted."""
    x = np.atleast_1d(sub["alpha"].values)
    y = np.atleast_1d(sub[var].values.astype(float))
    keep = np.atleast_1d(sub["status"].notnull().values) & np.isfinite(y)
    order = np.argsort(x[keep])
    return x[keep][order], y[keep][order]


def _published_curve(companions, rho, x, names):
    """The published beta = 1 noiseless curve at rho as (x column, mmse) from the first of `names` holding it,
    or None (x = "alpha" or "alpha_LR")."""
    for name in names:
        rows = published_rows(published(companions, name), rho)
        if rows[x].size:
            return rows[x], rows["mmse"]
    return None


def _style(ax, xlabel, title, xlim=(0, 1.0)):
    ax.set_xlim(*xlim)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(r"MMSE $= \|\hat S - S^*\|_F^2/(dL)$")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def plot_se(plt, ds, companions=None):
    rhos = _values(ds, "rho", 0.5)
    betas = sorted(_values(ds, "beta", 1.0))
    deltas = _values(ds, "delta", 0.0)
    beta0 = 1.0 if 1.0 in betas else betas[0]
    noisy = [d for d in deltas if d > 0]
    fig, axes = plt.subplots(1, 4 if noisy else 3, figsize=(23.0 if noisy else 17.25, 5.0))
    alpha_ax, bar_ax, beta_ax = axes[:3]
    grid = np.linspace(0, 1.0, 401)

    noiseless = 0.0 in deltas
    for color, rho in zip(itertools.cycle(COLORS), rhos):
        if not noiseless:
            break
        x, y = _curve(_select(ds, rho=rho, beta=beta0, delta=0.0))
        if len(x):
            alpha_ax.plot(x, y, "-", color=color, lw=1.6, label=rf"$\rho$ = {rho:g}")
            bar_ax.plot(x * beta0 / ((1 + beta0) * rho), y, "-", color=color, lw=1.4, label=rf"$\rho$ = {rho:g}")
            a = se.alpha_pr(rho, beta0)
            alpha_ax.plot([a, a], [0, 0.08], "-", color=color, lw=2.0)
        if beta0 == 1.0:
            ref = _published_curve(companions, rho, "alpha", (ALPHA_CSV, ALPHA_CSV_RHO_005))
            if ref is not None:
                alpha_ax.plot(ref[0][::4], ref[1][::4], "s", ms=3, color=color, mfc="none", alpha=0.7)
            ref = _published_curve(companions, rho, "alpha_LR", (ALPHA_BAR_CSV, ALPHA_BAR_CSV_LOW_RANK))
            if ref is not None:
                bar_ax.plot(ref[0][::4], ref[1][::4], "s", ms=3, color=color, mfc="none", alpha=0.7)
    alpha_ax.plot(grid, baselines.mse_ridge(grid, 0.0), ":", color="k", lw=1.3,
                  label=r"ridge / $\rho\to\infty$: $1 - \alpha$")
    alpha_ax.plot([], [], "s", ms=3, color="0.4", mfc="none", label=r"published, $\beta$ = 1")
    _style(alpha_ax, r"$\alpha = n/(dL)$", rf"noiseless, $\beta$ = {beta0:g} (ticks: $\alpha_{{PR}}$)")

    abar = np.linspace(0, 1.2, 481)
    bar_ax.plot(abar, se.low_rank_mse(abar, beta0, 0.0), "-", color="k", lw=2.4, alpha=0.45,
                label=r"rank $O(1)$ limit $\rho \to 0$")
    if beta0 == 1.0:
        ref = _published_curve(companions, 0.0, "alpha_LR", (ALPHA_BAR_CSV_LOW_RANK,))
        if ref is not None:
            bar_ax.plot(ref[0][::20], ref[1][::20], "s", ms=3, color="0.4", mfc="none",
                        label=r"published $\rho$ = 0, and per $\rho$")
    _style(bar_ax, r"$\bar\alpha = n/(r(d+L))$", rf"noiseless, $\beta$ = {beta0:g}, versus $\bar\alpha$",
           xlim=(0, 1.2))

    rho_mid = rhos[len(rhos) // 2] if rhos else 0.5
    for color, beta in zip(itertools.cycle(COLORS), betas):
        if not noiseless:
            break
        x, y = _curve(_select(ds, rho=rho_mid, beta=beta, delta=0.0))
        if len(x):
            beta_ax.plot(x, y, "-", color=color, lw=1.6, label=rf"$\beta$ = {beta:g}")
    beta_ax.plot(grid, se.large_beta_noiseless_mmse(grid, rho_mid), "--", color="k", lw=1.4,
                 label=r"$\beta = \infty$: $(1-\alpha)(1-\alpha/\rho)$")
    _style(beta_ax, r"$\alpha = n/(dL)$", rf"noiseless, $\rho$ = {rho_mid:g}, versus $\beta = L/d$")

    if not noisy:
        return fig
    noise_ax = axes[3]
    styles = itertools.cycle(("-", "--", "-."))
    for delta in noisy:
        style = next(styles)
        for color, rho in zip(itertools.cycle(COLORS), rhos):
            x, y = _curve(_select(ds, rho=rho, beta=beta0, delta=delta))
            if len(x):
                noise_ax.plot(x, y, style, color=color, lw=1.5, label=rf"$\rho$ = {rho:g}, $\Delta$ = {delta:g}")
        noise_ax.plot(grid, baselines.mse_ridge(grid, delta), ":", color="k", lw=1.3,
                      label=rf"ridge ($\lambda = \Delta$ = {delta:g})")
    _style(noise_ax, r"$\alpha = n/(dL)$", rf"label noise $\Delta$ (variance), $\beta$ = {beta0:g}: MMSE = "
           r"test error $- \Delta$")
    return fig


def plot_thresholds(plt, ds, companions=None):
    fig, ax = plt.subplots(1, 1, figsize=(7.0, 5.0))
    ok_all = ds["status"].notnull()
    rho_grid = np.linspace(1e-3, 2.0, 400)
    for color, beta in zip(itertools.cycle(COLORS), sorted(_values(ds, "beta", 1.0))):
        sub = _select(ds, beta=beta)
        rho = np.atleast_1d(sub["rho"].values).astype(float)
        ok = np.atleast_1d(_select(ok_all, beta=beta).values)
        ax.plot(rho_grid, [se.alpha_pr(r, beta) for r in rho_grid], "-", color=color, lw=1.4,
                label=rf"$\alpha_{{PR}}$, $\beta$ = {beta:g}")
        ax.plot(rho[ok], np.atleast_1d(sub["alpha_bisection"].values.astype(float))[ok], "x", color=color, ms=7)
        ax.plot(rho[ok], np.atleast_1d(sub["alpha_mnne"].values.astype(float))[ok], "s", color=color, ms=5,
                mfc="none")
    ax.plot(rho_grid, np.minimum(rho_grid, 1.0), ":", color="k", lw=1.2, label=r"$\beta = \infty$: min($\rho$, 1)")
    ax.plot([], [], "x", color="0.3", label="bisection on the SE error < mse_cut")
    ax.plot([], [], "s", color="0.3", mfc="none", label=r"minimal nuclear norm $\alpha_{MNNE}$")
    ax.set_xlabel(r"$\rho = r/d$")
    ax.set_ylabel(r"perfect recovery threshold $\alpha = n/(dL)$")
    ax.set_ylim(0, 1.05)
    ax.set_title(r"noiseless perfect recovery: Bayes-optimal $\alpha_{PR}(\rho, \beta)$ and nuclear norm", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def _cells(ds, dims=("rho", "beta", "delta")):
    """(label, sub) per combination of the swept (rho, beta, delta) values, each a 1-d alpha selection."""
    values = [[(dim, v) for v in _values(ds, dim, None)] for dim in dims if dim in ds.coords]
    for combo in itertools.product(*values):
        fixed = {dim: v for dim, v in combo}
        label = ", ".join({"rho": r"$\rho$", "beta": r"$\beta$", "delta": r"$\Delta$"}[k] + f" = {v:g}"
                          for k, v in fixed.items())
        yield label, fixed, _select(ds, **fixed)


def _seed_mean(sub, var, *, last=None):
    """(alpha, mean, s.e.) over seeds of `var` (at the last logged step of `last` if given), done points."""
    values = sub[var]
    if last is not None:
        values = values.isel({last: -1})
    x = np.atleast_1d(sub["alpha"].values)
    arr = np.atleast_2d(values.transpose("alpha", "seed").values.astype(float)) if "alpha" in values.dims \
        else np.atleast_2d(values.values.astype(float))
    keep = np.atleast_1d(sub["status"].notnull().values) & np.isfinite(arr).any(axis=1)
    n = np.isfinite(arr).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.nanmean(np.where(np.isfinite(arr), arr, np.nan), axis=1)
        sem = np.nanstd(arr, axis=1, ddof=1) / np.sqrt(n)
    order = np.argsort(x[keep])
    return x[keep][order], mean[keep][order], sem[keep][order]


def _se_line(ax, fixed, color, alpha_max, label):
    grid = np.linspace(0.0, alpha_max, 201)
    ax.plot(grid, se.bo_mmse(grid, fixed.get("rho", 0.5), fixed.get("beta", 1.0), fixed.get("delta", 0.0)), "-",
            color=color, lw=1.2, label=label)


def plot_gamp(plt, ds, companions=None):
    """GAMP-RIE (method "gamp"): final error, mean +- s.e. over seeds, on the SE curve of the same (rho, beta,
    delta); and the seed-mean error versus iteration, one line per point."""
    fig, (ax, trace_ax) = plt.subplots(1, 2, figsize=(12.4, 5.0))
    alpha_max = float(np.max(ds["alpha"].values)) * 1.05
    for color, (label, fixed, sub) in zip(itertools.cycle(COLORS), _cells(ds)):
        x, mean, sem = _seed_mean(sub, "mse", last="iteration")
        if not len(x):
            continue
        ax.errorbar(x, mean, yerr=sem, fmt="o", ms=4, capsize=2, color=color, label=f"GAMP-RIE, {label}")
        _se_line(ax, fixed, color, alpha_max, f"SE, {label}")
        for a in x:
            trace = sub["mse"].sel(alpha=a).mean("seed")
            trace_ax.plot(sub["iteration"].values, trace.values, color=color, alpha=0.7, lw=1)
    d = ds.attrs.get("method.d", None)
    _style(ax, r"$\alpha = n/(dL)$", "GAMP-RIE (mean $\\pm$ s.e. over seeds, final iteration) on the SE"
           + (f", d = {d}" if d is not None else ""), xlim=(0, alpha_max))
    trace_ax.set_xlabel("iteration")
    trace_ax.set_ylabel(r"mean $\|\hat S - S^*\|_F^2/(dL)$ over seeds (one line per point)")
    trace_ax.set_yscale("log")
    trace_ax.grid(alpha=0.3)
    return fig


def plot_gd(plt, ds, companions=None):
    """GD and averaged GD (method "gd"): final errors (mean +- s.e. over datasets) against the SE error and
    twice it (GD from the prior initialisation ~ a posterior sample: 2 BO when noiseless)."""
    fig, (ax, trace_ax) = plt.subplots(1, 2, figsize=(12.4, 5.0))
    alpha_max = float(np.max(ds["alpha"].values)) * 1.05
    grid = np.linspace(0.0, alpha_max, 201)
    for color, (label, fixed, sub) in zip(itertools.cycle(COLORS), _cells(ds)):
        x, gd_mean, gd_sem = _seed_mean(sub, "mse_gd", last="epoch")
        if not len(x):
            continue
        _, agd_mean, agd_sem = _seed_mean(sub, "mse_agd", last="epoch")
        bo = se.bo_mmse(grid, fixed.get("rho", 0.5), fixed.get("beta", 1.0), fixed.get("delta", 0.0))
        ax.errorbar(x, gd_mean, yerr=gd_sem, fmt="o", ms=4, capsize=2, color=color, label=f"GD, {label}")
        ax.errorbar(x, agd_mean, yerr=agd_sem, fmt="s", ms=4, capsize=2, color=color, mfc="none",
                    label=f"averaged GD, {label}")
        ax.plot(grid, bo, "-", color=color, lw=1.2, label="Bayes-optimal")
        ax.plot(grid, 2 * bo, "--", color=color, lw=1.0, label="2 x Bayes-optimal")
        for a in x:
            cell = sub.sel(alpha=a)
            trace_ax.plot(cell["epoch"].values, cell["mse_gd"].mean("seed").values, "-", color=color, lw=1)
            trace_ax.plot(cell["epoch"].values, cell["mse_agd"].mean("seed").values, ":", color=color, lw=1)
    _style(ax, r"$\alpha = n/(dL)$", "full-batch GD (prior init) and averaged GD, mean $\\pm$ s.e. over datasets",
           xlim=(0, alpha_max))
    ax.set_ylim(0, 2.2)
    trace_ax.set_xlabel("GD step")
    trace_ax.set_ylabel("error (solid GD, dotted AGD), mean over datasets")
    trace_ax.grid(alpha=0.3)
    return fig


def plot_baselines(plt, ds, companions=None):
    """Baselines (method "baselines"): the finite-d minimal nuclear-norm error and finite-d ridge (mean +- s.e.
    over seeds) against alpha, with the asymptotic ridge curve, the Bayes-optimal curve and vertical markers at
    alpha_PR (dotted) and alpha_MNNE (dashed)."""
    fig, ax = plt.subplots(1, 1, figsize=(7.4, 5.0))
    alpha_max = float(np.max(ds["alpha"].values)) * 1.05
    grid = np.linspace(0.0, alpha_max, 201)
    for color, (label, fixed, sub) in zip(itertools.cycle(COLORS), _cells(ds)):
        x, mean, sem = _seed_mean(sub, "mse_mnne")
        if not len(x):
            continue
        ax.errorbar(x, mean, yerr=sem, fmt="o-", ms=4, lw=1, capsize=2, color=color, label=f"MNNE, {label}")
        _, r_mean, r_sem = _seed_mean(sub, "mse_ridge_finite")
        ax.errorbar(x, r_mean, yerr=r_sem, fmt="^", ms=4, capsize=2, color=color, mfc="none",
                    label=f"ridge finite d, {label}")
        _se_line(ax, fixed, color, alpha_max, f"Bayes-optimal, {label}")
        rho, beta = fixed.get("rho", 0.5), fixed.get("beta", 1.0)
        ax.axvline(baselines.alpha_mnne(rho, beta), color=color, ls="--", lw=1)
        ax.axvline(se.alpha_pr(rho, beta), color=color, ls=":", lw=1)
    delta0 = _values(ds, "delta", 0.0)[0]
    ax.plot(grid, baselines.mse_ridge(grid, delta0), "-", color="k", lw=1, alpha=0.6,
            label=rf"ridge, asymptotic ($\Delta$ = {delta0:g})")
    ax.plot([], [], "--", color="0.4", label=r"$\alpha_{MNNE}$")
    ax.plot([], [], ":", color="0.4", label=r"$\alpha_{PR}$")
    _style(ax, r"$\alpha = n/(dL)$", "finite-d baselines: minimal nuclear norm (ADMM) and ridge", xlim=(0, alpha_max))
    return fig
