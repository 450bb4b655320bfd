"""The agreement checks of the paper aim (`seqphase reproduce aim`): the SE beside the published curves
(reference/), the counting thresholds against the closed form, GAMP-RIE against the SE."""

from __future__ import annotations

import math

import numpy as np

from seqphase.core.agreement import (DIFFERS, EXPLAINED, FiniteDBias, Row, curve_rows, curve_xy, grid_points,
                                     match_key, parametric_cut_offset, scalar, select, seed_mean_rows, setting)
from seqphase.core.aim import se as aim_se

AIM_GAMP_BIAS = {  # the weighted fits mean = e_inf + b/d of docs/validation/aim.md, GAMP-RIE (benchmarks/aim_gamp_finite_d.py)
    ("softmax", 2): FiniteDBias(1.7, "docs/validation/aim.md, GAMP-RIE: fitted b of softmax T = 2"),
    ("softmax", 4): FiniteDBias(2.3, "docs/validation/aim.md, GAMP-RIE: fitted b of softmax T = 5, the larger T measured"),
    ("softmax", 5): FiniteDBias(2.3, "docs/validation/aim.md, GAMP-RIE: fitted b of softmax T = 5"),
    ("hardmax", 2): FiniteDBias(0.56, "docs/validation/aim.md, GAMP-RIE: fitted b of hardmax, exact g_out"),
}


def _aim_gamp_bias(point):
    if str(point.get("hardmax_gout", "exact")) != "exact":
        return None  # not measured for the paper's g_out
    return AIM_GAMP_BIAS.get((str(point.get("channel", "softmax")), int(point.get("T", 2))))


def aim_rows(results, reference):
    rows = []
    ds = results.get("aim-softmax-se-published")
    if ds is not None:
        pub = reference["SE_softmax_T=2_rho=0.5.csv"]
        mmse = aim_se.prior_mmse(0.5)
        sub = select(ds, rho=0.5, T=2, channel="softmax")
        qhat = dict(zip(map(match_key, sub["alpha"].values), np.atleast_1d(sub["qhat"].values).ravel()))

        def tolerance(alpha):
            delta = 1.0 / qhat[match_key(alpha)]
            if not np.isfinite(delta) or delta <= 0:
                return 1e-4
            s0 = (math.log(mmse(np.array([delta * 1.001]))[0]) - math.log(mmse(np.array([delta / 1.001]))[0])) \
                / (2 * math.log(1.001))
            s = min(0.5 + 0.5 * s0, 1 - 1e-12)
            return 1e-4 + 3 * 1e-5 * s / (1 - s)

        x, y = curve_xy(ds, "mse", rho=0.5, T=2, channel="softmax")
        last = pub["alpha"][-1]
        rows += curve_rows("Fig. 2 left", "softmax, T = 2, rho = 0.5", "Bayes-optimal mse", x, y, pub["alpha"],
                           pub["mmse"], tolerance, "the authors' stopping rule |dq| < 1e-5: 1e-4 + 3e-5 s/(1 - s), "
                           "s the contraction of their damped map (docs/validation/aim.md)",
                           special=lambda a: a < 1e-4 or abs(a - last) < 1e-9,
                           explanation=("docs/validation/aim.md", "Our ρ = 0.5 values beside the reference files"))
    ds = results.get("aim-hardmax-se-published")
    if ds is not None:
        pub = reference["SE_hardmax_rho=0.5.csv"]
        x, y = curve_xy(ds, "mse", rho=0.5, hardmax_gout="paper")
        rows += curve_rows("Fig. 1 left", "hardmax, published g_out, rho = 0.5", "mse", x, y, pub["alpha"],
                           pub["mmse"], lambda a: 0.03 * float(np.interp(a, pub["alpha"], pub["mmse"])),
                           "the file's Monte-Carlo noise (25 000 draws per iteration): 3 sd <= 3% relative "
                           "(docs/validation/aim.md)")
        x, y = curve_xy(ds, "mse", rho=0.5, hardmax_gout="exact")
        exact = curve_rows("Fig. 1 left", "hardmax, exact g_out, rho = 0.5", "Bayes-optimal mse", x, y, pub["alpha"],
                           pub["mmse"], lambda a: 0.03 * float(np.interp(a, pub["alpha"], pub["mmse"])),
                           "the file's Monte-Carlo noise (as above)")
        for row in exact:
            if row.verdict == DIFFERS:
                row.explanation = ("docs/validation/aim.md", "Exact versus paper hardmax g_out")
                row.verdict = EXPLAINED
        rows += exact
    ds = results.get("aim-thresholds")
    if ds is not None:
        for point in grid_points(ds["alpha_closed_form"], ()):
            sub = ds.sel(point)
            where = ", ".join(f"{k} = {v}" for k, v in point.items())
            closed = scalar(sub["alpha_closed_form"])
            mse_cut, rtol = setting(ds, "mse_cut"), setting(ds, "rtol")
            offset = closed * counting_cut_offset(float(point["rho"]), mse_cut)
            rows.append(Row("counting threshold", where, "alpha_c, SE bisection vs the paper's closed form",
                            scalar(sub["alpha_bisection"]), closed, offset + 2 * rtol * closed,
                            f"where the bisection stops: mse = mse_cut = {mse_cut:g} is reached "
                            f"{offset / closed:.2g} (relative) below alpha_c, 1 - mmse(D)/(D mmse'(0)) at "
                            f"mmse(D) = mse_cut (core/aim/thresholds.py), plus 2 rtol = {2 * rtol:g}"))
    for name in ("aim-gamp", "aim-gamp-tokens"):
        ds = results.get(name)
        if ds is not None:
            rows += seed_mean_rows("GAMP-RIE", f"{name}: GAMP final error vs SE", ds, "mse", "mse_se", "mse",
                                   _aim_gamp_bias)
    return rows


def counting_cut_offset(rho, mse_cut):
    """How far below alpha_c the counting bisection stops, relative, on the parametric curve
    alpha(D) = mmse(D)/(k D) of core/aim/se.py (`parametric_cut_offset`). The slope mmse'(0) is the RIE's
    small-noise slope (2 rho - rho^2 for rho < 1, else 1: the counting closed form's degrees of freedom)."""
    slope = 2.0 * rho - rho * rho if rho < 1.0 else 1.0
    return parametric_cut_offset(aim_se.prior_mmse(rho), slope, mse_cut)


CHECKS = {"aim": aim_rows}
