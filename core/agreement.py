"""The building blocks of the agreement table of `seqphase reproduce`: a `Row` compares one stored value with
a published one within a tolerance that says where it comes from, and the rows are built from stored curves
(`curve_rows`, at their common x, no interpolation) and from seed means against the SE (`seed_mean_rows`,
allowing a finite-d bias the docs measured, `FiniteDBias`).

Each family's checks (core/<family>/checks.py, `Family.checks`) build their rows from these, from the
stored results (`results`: a run's name -> its Dataset, masked to the done points) and the family's published
data (`reference`: a file's name -> its columns, read by `seqphase.sweeps.families`); nothing here reads a
file. Nothing is fitted and no "ours" is written down: every row reads a stored value. A row whose deviation
exceeds its tolerance is `differs (explained)` when a docs/ section explains it (the report shows that
section), else `differs`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize

AGREES, EXPLAINED, DIFFERS = "agrees", "differs (explained)", "differs"
COLUMNS = ("figure", "curve", "quantity", "ours", "published", "deviation", "tolerance", "verdict", "explanation",
           "tolerance_from")


@dataclass
class Row:
    """One row of the agreement table: a stored value (`ours`) against a published one, within `tolerance`
    (whose origin `tolerance_from` states); the verdict follows unless given."""

    figure: str
    curve: str
    quantity: str
    ours: float
    published: float
    tolerance: float
    tolerance_from: str
    explanation: tuple = ()   # (docs page, section title) that explains a difference, if any
    verdict: str = ""

    def __post_init__(self):
        if not self.verdict:
            if abs(self.deviation) <= self.tolerance:
                self.verdict = AGREES
            else:
                self.verdict = EXPLAINED if self.explanation else DIFFERS

    @property
    def deviation(self):
        return float(self.ours) - float(self.published)

    def record(self):
        return {"figure": self.figure, "curve": self.curve, "quantity": self.quantity, "ours": _num(self.ours),
                "published": _num(self.published), "deviation": _num(self.deviation),
                "tolerance": _num(self.tolerance), "verdict": self.verdict,
                "explanation": f"{self.explanation[0]}, section {self.explanation[1]}" if self.explanation and
                self.verdict != AGREES else "", "tolerance_from": self.tolerance_from}


def _num(x):
    return f"{float(x):.7g}"


# -- building blocks ----------------------------------------------------------------------------------
def match_key(x):
    """x to 9 significant digits: a stored and a published alpha that are one grid point match."""
    return float(f"{float(x):.9g}")


def curve_rows(figure, curve, quantity, ours_x, ours_y, pub_x, pub_y, tolerance, tolerance_from,
               special=None, explanation=()):
    """Compare a stored curve with a published one at their common x (no interpolation). One row for the
    regular points (the worst of them), one per special point (`special(x)` True: rows a docs section
    documents) that exceeds its tolerance. `tolerance` is a number or a function of x."""
    published = {match_key(x): y for x, y in zip(pub_x, pub_y) if np.isfinite(y)}
    tol = tolerance if callable(tolerance) else (lambda x, t=tolerance: t)
    regular, rows = [], []
    for x, y in zip(ours_x, ours_y):
        k = match_key(x)
        if k not in published or not np.isfinite(y):
            continue
        row = Row(figure, f"{curve}, alpha = {x:.6g}", quantity, y, published[k], tol(x), tolerance_from,
                  explanation)
        if special is not None and special(x):
            if row.verdict != AGREES:
                rows.append(row)
                continue
        regular.append(row)
    if regular:
        worst = max(regular, key=lambda r: abs(r.deviation) / r.tolerance if r.tolerance > 0 else math.inf)
        worst.curve = f"{curve}: worst of {len(regular)} common points (alpha = {worst.curve.split('= ')[-1]})"
        worst.explanation = ()
        worst.verdict = AGREES if abs(worst.deviation) <= worst.tolerance else DIFFERS
        rows.insert(0, worst)
    return rows


@dataclass(frozen=True)
class FiniteDBias:
    """A finite-d bias of an algorithm's fixed point that a docs section measured: |mean - SE| <= b/d, with b
    = (the largest documented |mean - SE|) x (the d it was measured at), the O(1/d) scaling of the docs. It
    is read from the docs, never from the row it is applied to."""

    b: float
    source: str   # the docs page and section, and the measurement b comes from
    relative: bool = False  # b/d relative to the SE value (the docs measured a relative excess)

    def allowance(self, d, target):
        if self.relative:
            return self.b / d * abs(target), f" + (b/d) |SE| = ({self.b:g}/{d}) |SE| (finite-d bias, {self.source})"
        return self.b / d, f" + b/d = {self.b:g}/{d} (finite-d bias, {self.source})"


def seed_mean_rows(figure, curve, ds, var, se_var, label, bias=None):
    """GAMP / finite-d final values against the SE, per point: mean over seeds of the last iteration;
    tolerance 3 standard errors of that mean, plus the documented finite-d bias b/d where the docs measured
    one (`bias`: a FiniteDBias, or a function of the point giving one or None)."""
    rows = []
    final = ds[var]
    for d in ("iteration", "epoch", "step"):
        if d in final.dims:
            final = final.isel({d: -1})
    size = setting(ds, "d")
    for point in grid_points(final, ("seed",)):
        values = final.sel(point).values.astype(float).ravel()
        values = values[np.isfinite(values)]
        if values.size < 2:
            continue
        se = float(values.std(ddof=1) / math.sqrt(values.size))
        target = scalar(ds[se_var].sel(point))
        if not np.isfinite(target):
            continue
        known = bias(point) if callable(bias) else bias
        extra, extra_from = known.allowance(int(size), target) if known is not None and size else (0.0, "")
        where = ", ".join(f"{k} = {v}" for k, v in point.items())
        rows.append(Row(figure, f"{curve}, {where}", label, float(values.mean()), target,
                        3 * se + extra, f"3 s.e. of the mean over {values.size} seeds{extra_from}"))
    return rows


def grid_points(da, keep):
    """Every combination of the grid dims of `da` (all dims but `keep`) with at least one finite value."""
    dims = [d for d in da.dims if d not in keep]
    out = []
    for index in np.ndindex(*[da.sizes[d] for d in dims]):
        point = {d: da[d].values[i].item() for d, i in zip(dims, index)}
        if np.isfinite(da.sel(point).values.astype(float)).any():
            out.append(point)
    return out


def scalar(da):
    """The one value of a selection (grid dims of length 1 may remain)."""
    return float(np.asarray(da.values).ravel()[0])


def select(ds, **fixed):
    """`ds` at the fixed values of those of `fixed` that are dims of it."""
    return ds.sel({k: v for k, v in fixed.items() if k in ds.dims})


def curve_xy(ds, var, x="alpha", **fixed):
    """(x values, values of `var`) of the curve of `ds` at `fixed`, as float arrays."""
    sub = select(ds, **fixed)
    return np.atleast_1d(sub[x].values).astype(float), np.atleast_1d(sub[var].values).astype(float).ravel()


def setting(ds, key):
    """A method setting of the stored run (its `settings` attribute), or None."""
    return json.loads(ds.attrs.get("settings", "{}")).get(key)


def quadratic_cut_offset(value, alpha_b, cut, side, step=2e-3):
    """How far from a threshold a bisection on `value(alpha) < cut` (side -1: the threshold is above alpha_b,
    value vanishing like (threshold - alpha)^2 below it) or `> cut` (side +1: value growing like
    (alpha - threshold)^2 beyond it, the threshold below alpha_b) stops. sqrt(value) is linear in alpha there;
    its slope from alpha_b and alpha_b (1 + side step) gives offset = sqrt(cut)/slope, and from the pair one
    step further the same offset again: their difference is returned as the linearisation error."""
    a0, a1, a2 = alpha_b, alpha_b * (1 + side * step), alpha_b * (1 + 2 * side * step)
    r0, r1, r2 = (math.sqrt(max(float(value(a)), 0.0)) for a in (a0, a1, a2))
    slope_near = abs(r1 - r0) / abs(a1 - a0)
    slope_far = abs(r2 - r1) / abs(a2 - a1)
    if slope_near <= 0 or slope_far <= 0:
        return math.inf, math.inf
    near, far = math.sqrt(cut) / slope_near, math.sqrt(cut) / slope_far
    return near, abs(near - far)


def parametric_cut_offset(mmse, slope, mse_cut):
    """How far below alpha_c a bisection on `mse < mse_cut` stops, relative, on a parametric SE curve
    alpha(D) = mmse(D)/(k D) (the AIM counting curve; the quadratic network's with k = 2/kappa): the error
    mmse(D) reaches mse_cut at alpha_cut = mse_cut/(k D_cut), and alpha_c = mmse'(0)/k, so 1 - alpha_cut/alpha_c
    = 1 - mse_cut/(D_cut mmse'(0)) whatever k. `mmse`: D -> the denoising error (vectorised); `slope`:
    mmse'(0)."""
    log_d = optimize.brentq(lambda v: math.log(float(mmse(np.array([math.exp(v)]))[0]) / mse_cut),
                            math.log(mse_cut / slope) - 5.0, math.log(mse_cut / slope) + 5.0, xtol=1e-13)
    return 1.0 - mse_cut / (math.exp(log_d) * slope)
