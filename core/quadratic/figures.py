"""Figures of the quadratic-network sweeps (`model = "quadratic"`), after the paper's MMSE figures, with the
published kappa = 0.5 theory lines (`sweeps/reference/quadratic/`, provenance in its README.md) drawn beside ours.

- `plot_se`: (1) MMSE versus alpha, one line per kappa, noiseless, the perfect-recovery thresholds
  alpha_PR(kappa) as short ticks, the published noiseless kappa = 0.5 line (markers); (2) the same for the
  noisy values of delta of the sweep, with the published delta = 0.25 line; (3) the collapse versus
  alpha/kappa with the kappa -> 0 curve 4 abar (1 - abar) (the authors' plotter_extra red curve).
- `plot_thresholds`: alpha_PR(kappa), closed form (line) and SE bisection (crosses).

The sweep arrives masked to the done points (`status` NaN elsewhere).
"""

from __future__ import annotations

import itertools

import numpy as np

from seqphase.core.figures import published_columns

PUBLISHED_KAPPA = 0.5
NOISELESS_CSV = "line_no_noise_0.5.csv"
NOISY_CSV = "line_noise_0.5_0.25.csv"
NOISY_DELTA = 0.25  # label-noise variance of NOISY_CSV (theory scripts' Delta_th = 0.5)

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


def published(name):
    """The columns of a shipped published file (`sweeps/reference/quadratic/NAME`) as float arrays."""
    return published_columns("quadratic", name)


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
        ref = published(NOISELESS_CSV if ax is noiseless_ax else NOISY_CSV)
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
