"""Figures of the AIM sweeps (`model = "aim"`), after the paper's Figs. 1-3 and 5, with the published curves
(`core/aim/reference/`, provenance in its README.md; given in `companions[REFERENCE]`) drawn beside ours.

- `plot_se`: one panel per (channel, hardmax_gout) of the sweep.
  softmax (Fig. 2): error versus alpha, one line per rho (the smallest T of the sweep), the dashed
  rho = inf line 1 - k_T alpha, the published rho = 0.5, T = 2 curve (grey markers); a second panel
  collapses every T onto x = k_T alpha (Fig. 2 right; perfect recovery at 2 rho - rho^2).
  hardmax (Fig. 1 left): log-log error versus alpha per rho, "exact" and "paper" panels side by side,
  the published rho = 0.5 curve (made with the paper g_out) in both.
  linear (Fig. 3): error versus alpha per rho with short vertical lines at the counting thresholds.
  The general (Monte Carlo) channel step, where computed (`mse_general`), is drawn as open markers.
- `plot_small_width` (Fig. 1 right / Fig. 5): the rho -> 0 error versus alpha_bar (log x) per channel and
  g_out, the weak-recovery lines (closed forms), the published rescaled rho = 0.5 curve versus alpha/rho
  and, with an `se_sweep` companion (a hardmax SE sweep), its finite-rho curves versus alpha/rho.
- `plot_thresholds`: alpha_c(rho) per (channel, T), closed form (line) and SE bisection (crosses); the
  hardmax alpha_bar_WR per g_out, closed form, stability and bisection.

The sweep and its companions arrive masked to the done points (`status` NaN elsewhere).
"""

from __future__ import annotations

import itertools

import numpy as np

from seqphase.core.aim.se import counting_k
from seqphase.core.figures import published

PUBLISHED_RHO = 0.5
SOFTMAX_CSV = "SE_softmax_T=2_rho=0.5.csv"
HARDMAX_CSV = "SE_hardmax_rho=0.5.csv"
RESCALED_CSV = "SE_hardmax_rescaled_rho=0.5.csv"


def _values(ds, dim):
    return list(ds[dim].values) if dim in ds.dims else []


def _str(v):
    return str(v)


def _done(sub):
    return sub["status"].notnull().values


def _curve(sub, var="mse"):
    """(alpha, values) of a 1-d (alpha) selection at its done points, sorted."""
    x = sub["alpha"].values
    y = sub[var].values.astype(float)
    keep = _done(sub) & np.isfinite(y)
    order = np.argsort(x[keep])
    return x[keep][order], y[keep][order]


def _pick(ds, **fixed):
    """ds at the given point-dim values (those that are dims of ds), other non-alpha dims kept."""
    sel = {d: v for d, v in fixed.items() if d in ds.dims}
    return ds.sel(sel)


def _holds(values, value):
    """Whether a coordinate's values contain `value` (strings exactly, numbers to float rounding)."""
    if isinstance(value, str):
        return value in [str(v) for v in values]
    return bool(np.isclose(np.asarray(values, dtype=float), float(value), rtol=1e-12, atol=0).any())


def _one(sub, keep=("alpha",)):
    """Drop every remaining point dim but `keep` by taking its first value."""
    drop = {d: 0 for d in sub.attrs.get("point_dims", sub.dims) if d in sub.dims and d not in keep}
    return sub.isel(drop)


def _panels(ds):
    channels = _values(ds, "channel") or ["softmax"]
    gouts = _values(ds, "hardmax_gout") or ["exact"]
    out = []
    for channel in channels:
        for gout in (gouts if _str(channel) == "hardmax" else gouts[:1]):
            sub = _pick(ds, channel=channel, hardmax_gout=gout)
            if _done(sub).any():
                out.append((_str(channel), _str(gout), sub))
    return out


def plot_se(plt, ds, companions=None):
    panels = _panels(ds)
    n_axes = sum(2 if channel == "softmax" else 1 for channel, _, _ in panels)
    fig, axes = plt.subplots(1, max(n_axes, 1), figsize=(6.2 * max(n_axes, 1), 5.0), squeeze=False)
    axes = list(axes.flat)
    for channel, gout, sub in panels:
        if channel == "softmax":
            _softmax_panels(axes.pop(0), axes.pop(0), sub, companions)
        elif channel == "hardmax":
            _hardmax_panel(axes.pop(0), sub, gout, companions)
        else:
            _linear_panel(axes.pop(0), sub)
    return fig


def _general(ax, sub, x_scale, color):
    if "mse_general" not in sub:
        return
    x, y = _curve(sub, "mse_general")
    if len(x):
        ax.plot(x * x_scale, y, "o", mfc="none", ms=5, color=color)


def _softmax_panels(ax, collapse_ax, sub, companions):
    Ts = sorted(int(t) for t in _values(sub, "T")) or [2]
    rhos = sorted(float(r) for r in _values(sub, "rho"))
    colors = itertools.cycle(plt_colors())
    T0 = Ts[0]
    for rho in rhos:
        color = next(colors)
        one = _one(_pick(sub, rho=rho, T=T0))
        x, y = _curve(one)
        ax.plot(x, y, "-", color=color, lw=1.6, label=rf"$\rho$ = {rho:g}")
        _general(ax, one, 1.0, color)
    k0 = counting_k("softmax", T0)
    ax.plot([0, 1.0 / k0], [1, 0], "--", color="k", lw=1.0, label=r"$\rho = \infty$: $1 - k_T\alpha$")
    if T0 == 2:
        ref = published(companions, SOFTMAX_CSV)
        ax.plot(ref["alpha"][::6], ref["mmse"][::6], "s", ms=3.5, color="0.5", mfc="none",
                label=rf"published $\rho$ = {PUBLISHED_RHO:g} ({SOFTMAX_CSV})")
    ax.set_xlim(0, 1.12 / k0)
    ax.set_ylim(0, 1.1)
    ax.set_xlabel(r"$\alpha = n/d^2$")
    ax.set_ylabel(r"Bayes-optimal error $\|\hat S - S\|_F^2/d$")
    ax.set_title(f"softmax, T = {T0} (paper Fig. 2 left; open circles: general MC SE)", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    rho_c = PUBLISHED_RHO if any(np.isclose(rhos, PUBLISHED_RHO)) else (rhos[0] if rhos else PUBLISHED_RHO)
    colors = itertools.cycle(plt_colors())
    for T in Ts:
        color = next(colors)
        one = _one(_pick(sub, rho=rho_c, T=T))
        x, y = _curve(one)
        k = counting_k("softmax", T)
        collapse_ax.plot(x * k, y, "-", color=color, lw=1.6, label=f"T = {T}")
        _general(collapse_ax, one, k, color)
    if any(T == 2 for T in Ts) and np.isclose(rho_c, PUBLISHED_RHO):
        ref = published(companions, SOFTMAX_CSV)
        collapse_ax.plot(4 * ref["alpha"][::6], ref["mmse"][::6], "s", ms=3.5, color="0.5", mfc="none",
                         label=f"published T = 2 ({SOFTMAX_CSV})")
    collapse_ax.axvline(2 * rho_c - rho_c**2 if rho_c < 1 else 1.0, color="0.3", ls=":", lw=1,
                        label=r"$k_T\alpha_c = 2\rho - \rho^2$")
    collapse_ax.set_xlim(0, 1.0)
    collapse_ax.set_ylim(0, 1.1)
    collapse_ax.set_xlabel(r"$k_T\,\alpha = (T^2 + T - 2)\,\alpha$")
    collapse_ax.set_ylabel("Bayes-optimal error")
    collapse_ax.set_title(rf"collapse over T, $\rho$ = {rho_c:g} (paper Fig. 2 right)", fontsize=9)
    collapse_ax.grid(alpha=0.3)
    collapse_ax.legend(fontsize=7)


def _hardmax_panel(ax, sub, gout, companions):
    colors = itertools.cycle(plt_colors())
    for rho in sorted(float(r) for r in _values(sub, "rho")):
        color = next(colors)
        one = _one(_pick(sub, rho=rho))
        x, y = _curve(one)
        ax.loglog(x, y, "-", color=color, lw=1.6, label=rf"$\rho$ = {rho:g}")
        _general(ax, one, 1.0, color)
    ref = published(companions, HARDMAX_CSV)
    ax.loglog(ref["alpha"][::3], ref["mmse"][::3], "s", ms=3.5, color="0.4", mfc="none",
              label=f"published $\\rho$ = 0.5, paper g_out ({HARDMAX_CSV})")
    ax.set_xlim(0.03, 10)
    ax.set_ylim(1e-3 if gout == "exact" else 0.03, 1.1)
    ax.set_xlabel(r"$\alpha = n/d^2$")
    ax.set_ylabel(r"Bayes-optimal error $\|\hat S - S\|_F^2/d$")
    what = "exact g_out (Bayes-optimal)" if gout == "exact" else "paper g_out (published variant)"
    ax.set_title(f"hardmax, T = 2, {what} (paper Fig. 1 left)", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)


def _linear_panel(ax, sub):
    colors = itertools.cycle(plt_colors())
    Ts = sorted(int(t) for t in _values(sub, "T")) or [2]
    T = Ts[0]
    for rho in sorted(float(r) for r in _values(sub, "rho")):
        color = next(colors)
        one = _one(_pick(sub, rho=rho, T=T))
        x, y = _curve(one)
        ax.plot(x, y, "-", color=color, lw=1.6, label=rf"$\rho$ = {rho:g}")
        _general(ax, one, 1.0, color)
        ac = (2 * rho - rho * rho if rho < 1 else 1.0) / (T * (T + 1))
        ax.plot([ac, ac], [0, 0.12], "-", color=color, lw=2.0)
    ax.set_xlim(0, 1.15 / (T * (T + 1)))
    ax.set_ylim(0, 1.1)
    ax.set_xlabel(r"$\alpha = n/d^2$")
    ax.set_ylabel("Bayes-optimal error")
    ax.set_title(rf"linear channel y = h, T = {T} (paper Fig. 3; ticks: $\alpha_c = (2\rho - \rho^2)/(T(T+1))$)",
                 fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)


def plt_colors():
    return ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink", "tab:olive")


# -- small width --------------------------------------------------------------------------------------
def plot_small_width(plt, ds, companions=None):
    from seqphase.core.aim import thresholds

    panels = _panels(ds)
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(6.4 * max(len(panels), 1), 5.0), squeeze=False)
    companion = (companions or {}).get("se_sweep")
    for ax, (channel, gout, sub) in zip(axes.flat, panels):
        colors = itertools.cycle(plt_colors())
        Ts = sorted(int(t) for t in _values(sub, "T")) or [2]
        for T in Ts:
            one = _one(_pick(sub, T=T), keep=("alpha_bar",))
            x = one["alpha_bar"].values
            y = one["mse"].values.astype(float)
            keep = one["status"].notnull().values & np.isfinite(y)
            order = np.argsort(x[keep])
            ax.semilogx(x[keep][order], y[keep][order], "-", color="k" if len(Ts) == 1 else next(colors), lw=2,
                        label=rf"$\rho \to 0$, T = {T}")
            if channel != "hardmax":
                k = counting_k(channel, T)
                ax.axvline(1.0 / k, color="0.5", lw=1, ls="--")
                ax.axvline(2.0 / k, color="0.5", lw=1, ls=":")
        if channel == "hardmax":
            for g, style in (("paper", "--"), ("exact", "-")):
                value = thresholds.weak_recovery_closed_form(g)
                ax.axvline(value, color="0.5", lw=1.2, ls=style,
                           label=rf"$\bar\alpha_{{WR}}$ {g} = {value:.6f}")
            if companion is not None:
                _finite_rho(ax, companion, gout)
            if gout == "paper":
                ref = published(companions, RESCALED_CSV)
                ax.semilogx(ref["alpha"] / PUBLISHED_RHO, ref["mmse"], "s", ms=3, color="0.4", mfc="none",
                            label=f"published $\\rho$ = 0.5 vs $\\alpha/\\rho$ ({RESCALED_CSV})")
        ax.set_xlim(0.1, 20)
        ax.set_ylim(0, 1.05)
        ax.set_xlabel(r"$\bar\alpha = \alpha/\rho$")
        ax.set_ylabel("error (small width)")
        title = f"{channel}" + (f", {gout} g_out" if channel == "hardmax" else "")
        ax.set_title(f"small-width limit, {title} (paper Fig. 1 right / Fig. 5)", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    return fig


def _finite_rho(ax, comp, gout):
    """Finite-rho hardmax SE curves of a companion sweep versus alpha/rho (thin lines)."""
    if "channel" in comp.dims and "hardmax" not in [str(v) for v in comp["channel"].values]:
        return
    comp = _pick(comp, channel="hardmax", hardmax_gout=gout)
    if "hardmax_gout" in comp.dims and gout not in [str(v) for v in comp["hardmax_gout"].values]:
        return
    colors = itertools.cycle(plt_colors())
    for rho in sorted(float(r) for r in _values(comp, "rho")):
        one = _one(_pick(comp, rho=rho))
        x, y = _curve(one)
        if len(x):
            ax.semilogx(x / rho, y, "-", lw=0.9, color=next(colors), alpha=0.8, label=rf"SE $\rho$ = {rho:g}")


# -- thresholds ---------------------------------------------------------------------------------------
def plot_thresholds(plt, ds, companions=None):
    fig, (ax, wr_ax) = plt.subplots(1, 2, figsize=(12.5, 5.0))
    colors = itertools.cycle(plt_colors())
    rhos_all = np.array(sorted(float(r) for r in _values(ds, "rho"))) if "rho" in ds.dims else np.array([])
    for channel in [c for c in _values(ds, "channel") if _str(c) != "hardmax"]:
        sub = _pick(ds, channel=channel)
        for T in sorted(int(t) for t in _values(sub, "T")):
            color = next(colors)
            one = _one(_pick(sub, T=T), keep=("rho",))
            rho = one["rho"].values
            ok = one["status"].notnull().values
            closed = one["alpha_closed_form"].values.astype(float)
            bis = one["alpha_bisection"].values.astype(float)
            order = np.argsort(rho[ok])
            ax.plot(rho[ok][order], closed[ok][order], "-", color=color, lw=1.5,
                    label=f"{channel}, T = {T}: closed form")
            ax.plot(rho[ok], bis[ok], "x", color=color, ms=7, label=f"{channel}, T = {T}: SE bisection")
    if rhos_all.size:
        ax.set_xscale("log")
    ax.set_xlabel(r"$\rho = r/d$")
    ax.set_ylabel(r"counting threshold $\alpha_c$")
    ax.set_yscale("log")
    ax.set_title(r"perfect recovery $\alpha_c(\rho, T)$", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, ncol=2)
    else:
        ax.text(0.5, 0.5, "no softmax / linear points in this sweep", transform=ax.transAxes, ha="center",
                color="0.4")
    gouts = []
    if "channel" in ds.dims and "hardmax" in [str(c) for c in ds["channel"].values]:
        hard = _pick(ds, channel="hardmax")
        for pos, gout in enumerate(_values(hard, "hardmax_gout")):
            one = _one(_pick(hard, hardmax_gout=gout), keep=())
            if not one["status"].notnull().item():
                continue
            gouts.append(str(gout))
            for name, marker, label in (("alpha_closed_form", "o", "closed form"),
                                        ("alpha_stability", "s", "stability (SE quadrature at q = 0)"),
                                        ("alpha_bisection", "x", "bisection (small-width fixed point)")):
                value = float(one[name].values)
                wr_ax.plot([len(gouts) - 1], [value], marker, ms=9, mfc="none", color="k",
                           label=label if len(gouts) == 1 else None)
            wr_ax.annotate(f"{float(one['alpha_closed_form'].values):.6f}", (len(gouts) - 1, float(one["alpha_closed_form"].values)),
                           textcoords="offset points", xytext=(10, 4), fontsize=8)
    if not gouts:  # no hardmax points in this sweep: the closed forms, so the panel still says what they are
        from seqphase.core.aim import thresholds

        for pos, gout in enumerate(("exact", "paper")):
            gouts.append(gout)
            value = thresholds.weak_recovery_closed_form(gout)
            wr_ax.plot([pos], [value], "o", ms=9, mfc="none", color="k",
                       label="closed form (no hardmax points in this sweep)" if pos == 0 else None)
            wr_ax.annotate(f"{value:.6f}", (pos, value), textcoords="offset points", xytext=(10, 4), fontsize=8)
    wr_ax.set_xticks(range(len(gouts)), [f"hardmax_gout = {g}" for g in gouts])
    wr_ax.set_xlim(-0.6, max(len(gouts), 1) - 0.4)
    wr_ax.set_ylabel(r"small-width weak recovery $\bar\alpha_{WR} = \alpha/\rho$")
    wr_ax.set_title("hardmax T = 2, small width (paper's grey line: 0.5634)", fontsize=9)
    wr_ax.grid(alpha=0.3)
    if gouts:
        wr_ax.legend(fontsize=7)
    return fig


def plot_gamp(plt, ds, companions=None):
    """GAMP-RIE: the final error (mean +- standard error over seeds) on the SE error of the same point,
    per channel (and hardmax g_out) and T; and the mean error versus iteration for each alpha. A companion
    SE sweep (`se_sweep` in the spec's [plot] table) is drawn under the points as a line."""
    fig, (ax, trace_ax) = plt.subplots(1, 2, figsize=(12.4, 5.0))
    colors = plt_colors()
    se_ds = (companions or {}).get("se_sweep")
    for k, (channel, gout, sub) in enumerate(_panels(ds)):
        for T in _values(sub, "T") or [None]:
            cell = _one(_pick(sub, T=T)) if T is not None else _one(sub)
            color = colors[k % len(colors)]
            label = channel + (f" ({gout})" if channel == "hardmax" else "") + (f", T = {int(T)}" if T is not None else "")
            final = cell["mse"].isel(iteration=-1)
            alpha = cell["alpha"].values
            keep = _done(cell)
            n = final.sizes["seed"]
            mean = final.mean("seed").values
            sem = final.std("seed", ddof=1).values / np.sqrt(n) if n > 1 else None
            ax.errorbar(alpha[keep], mean[keep], yerr=None if sem is None else sem[keep], fmt="o", ms=4,
                        capsize=2, color=color, label=f"GAMP-RIE {label}")
            order = np.argsort(alpha[keep])
            ax.plot(alpha[keep][order], cell["mse_se"].values[keep][order], "-", color=color, lw=1,
                    label=f"SE {label}")
            if se_ds is not None:
                fixed = {"channel": channel, "hardmax_gout": gout, "T": T,
                         "rho": float(cell["rho"].values) if "rho" in cell.coords else None}
                want = {d: v for d, v in fixed.items() if v is not None and d in se_ds.dims}
                # the companion may have no curve at this cell (e.g. hardmax beside the softmax SE)
                comp = _one(_pick(se_ds, **want)) if all(_holds(se_ds[d].values, v) for d, v in want.items()) \
                    else None
                if comp is not None and "alpha" in comp.dims and _done(comp).any():
                    x, y = _curve(comp)
                    ax.plot(x, y, color="0.6", lw=1, zorder=0)
            for a in alpha[keep]:
                trace = cell["mse"].sel(alpha=a).mean("seed")
                trace_ax.plot(cell["iteration"].values, trace.values, color=color, alpha=0.8, lw=1)
    ax.set_xlabel(r"$\alpha = n/d^2$")
    ax.set_ylabel(r"$\|\hat S - S\|_F^2 / d$ (final iteration)")
    trace_ax.set_xlabel("iteration")
    trace_ax.set_ylabel("mean error over seeds (one line per alpha)")
    trace_ax.set_yscale("log")
    for a in (ax, trace_ax):
        a.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return fig


def plot_gd(plt, ds, companions=None):
    """GD and averaged GD (the paper's Fig. 2 right): the final error, mean +- standard error over seeds,
    of single students ('+') and of their averaged S_hat ('x') versus k_T alpha, on the SE error of each
    point (and, when stored, the dense `se_sweep` companion); and the mean errors versus the step."""
    fig, (ax, trace_ax) = plt.subplots(1, 2, figsize=(12.4, 5.0))
    colors = plt_colors()
    for k, T in enumerate(_values(ds, "T") or [2]):
        cell = _one(_pick(ds, T=T))
        color = colors[k % len(colors)]
        kT = counting_k("softmax", int(T))
        alpha = cell["alpha"].values
        keep = _done(cell)
        x = kT * alpha
        for var, marker, what in (("mse_gd", "+", "GD"), ("mse_agd", "x", "AGD")):
            final = cell[var].isel(epoch=-1)
            n = final.sizes["seed"]
            sem = final.std("seed", ddof=1).values / np.sqrt(n) if n > 1 else None
            ax.errorbar(x[keep], final.mean("seed").values[keep], yerr=None if sem is None else sem[keep],
                        fmt=marker, ms=7, capsize=2, color=color, label=f"{what}, T = {int(T)}")
            for a in alpha[keep][-3:]:
                trace = cell[var].sel(alpha=a).mean("seed")
                trace_ax.plot(cell["epoch"].values, trace.values, "-" if what == "GD" else "--", color=color,
                              lw=1, label=f"{what}, k_T alpha = {kT * a:.2f}")
        order = np.argsort(x[keep])
        ax.plot(x[keep][order], cell["mse_se"].values[keep][order], "-", color=color, lw=1,
                label=f"SE, T = {int(T)}")
    rho = float(np.atleast_1d(ds["rho"].values)[0]) if "rho" in ds.coords else 0.5
    se_ds = (companions or {}).get("se_sweep")
    if se_ds is not None and "alpha" in se_ds.dims:
        comp = _one(_pick(se_ds, channel="softmax", T=2, rho=rho))
        if _done(comp).any():
            xs, ys = _curve(comp)
            ax.plot(counting_k("softmax", 2) * xs, ys, color="0.6", lw=1, zorder=0, label="SE, T = 2 (se_sweep)")
    ax.axvline(2 * rho - rho * rho if rho < 1 else 1.0, color="0.7", ls=":", lw=1)
    ax.set_xlabel(r"$k_T \alpha$ ($k_T = T^2 + T - 2$; Bayes-optimal perfect recovery at $2\rho - \rho^2$)")
    ax.set_ylabel(r"$\|\hat S - S^*\|_F^2 / d$ (last step)")
    trace_ax.set_xlabel("Adam step")
    trace_ax.set_ylabel("mean error over seeds")
    trace_ax.set_yscale("log")
    for a in (ax, trace_ax):
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    return fig
