"""State-evolution fixed points on a parametric curve, shared by the RIE families (aim, quadratic, bsr).

When the channel step of an SE is explicit in alpha, its fixed points lie on a curve alpha(x) of the effective
noise x of the prior step (aim's Delta, quadratic's t, bsr's zeta: 1/qhat), and the point at alpha is a root of
alpha(x) = alpha. A family declares its curve once (`ParametricCurve`: its alpha(x, *params), the log-spaced grid
of x, the rounding it tolerates) and this module does the rest:

* `table(*params)`: alpha on the grid, checked decreasing (`decreasing`: a rise of alpha(x) would mean several
  fixed points, so `ParametricCurveError` is raised rather than one of them returned), cached per parameter set;
* `solve(alpha, params, ...)`: (error, x) for an array of alpha, the root inside its bracketing grid cell; off
  the grid the family's closed forms: alpha >= alpha(x_min) (`small_noise`: perfect recovery, or the noisy
  small-x asymptote), alpha below alpha(x_max) (`large_noise`: a bracket beyond the grid, or a ValueError),
  alpha = 0 (`prior_error`, x = inf).

The root inside a cell is either brentq in log x, one alpha at a time (aim, quadratic), or a vectorised
bisection in log x of all the alphas of a call (bsr, `numerics.bisect_arrays`): each family keeps the root
finder its stored results were computed with (they agree to ~1e-15 relative, not bit for bit).

A module of its own because it is SE numerics on any curve: it knows no RIE (the families' alpha(x) evaluate
their own symmetric or rectangular RIE tables) and no family.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy import optimize

from seqphase.core.numerics import bisect_arrays


class ParametricCurveError(RuntimeError):
    """alpha(x) is not decreasing: the scalar SE equation has several fixed points."""


def decreasing(x, alpha, *, rtol=None, name="x", where=""):
    """(x, alpha) read-only, checked decreasing: strictly (rtol None), or with relative rises up to rtol taken as
    rounding and removed (np.minimum.accumulate: a monotone bracket table). ParametricCurveError otherwise,
    naming x and `where` (the parameters)."""
    step = np.diff(alpha)
    rise = step / alpha[:-1]
    bad = ~(step < 0) if rtol is None else rise > rtol
    if np.any(bad):
        k = int(np.argmax(bad))
        raise ParametricCurveError(
            f"alpha({name}) rises by {rise[k]:.2g} (relative) at {name} = {x[k]:.3g} ({where}): the scalar SE "
            f"equation has several fixed points there")
    if rtol is not None:
        alpha = np.minimum.accumulate(alpha)
    x.setflags(write=False)
    alpha.setflags(write=False)
    return x, alpha


class ParametricCurve:
    """One family's curve alpha = alpha_of(x, *params) (vectorised in x) on `points` log-spaced x in
    [x_min, x_max]; `rtol`: see `decreasing`; `bisection_steps`: None for brentq per alpha, else the steps of
    the vectorised bisection; `params`: the parameters' names and `context` a fixed one, for the messages."""

    def __init__(self, alpha_of, x_min, x_max, points, *, name, params, rtol=None, bisection_steps=None,
                 context=None, cache=64):
        self.alpha_of, self.x_min, self.x_max, self.points = alpha_of, x_min, x_max, points
        self.name, self.params, self.rtol, self.context = name, params, rtol, context
        self.bisection_steps = bisection_steps
        self.table = lru_cache(maxsize=cache)(self._table)

    def where(self, values):
        parts = [self.context] if self.context else []
        return ", ".join(parts + [f"{n} = {v}" for n, v in zip(self.params, values)])

    def _table(self, *params):
        """(x, alpha(x)) on the grid, read-only (cached per parameter set: `table`)."""
        x = np.logspace(math.log10(self.x_min), math.log10(self.x_max), self.points)
        alpha = np.asarray(self.alpha_of(x, *params), float)
        return decreasing(x, alpha, rtol=self.rtol, name=self.name, where=self.where(params))

    def solve(self, alpha, params, *, error_of, small_noise, large_noise=None, prior_error=None):
        """(error, x) arrays for an array of alpha (module docstring). error_of(x, alpha): the error at a root;
        small_noise(alpha) -> (error, x) for alpha >= alpha(x_min); large_noise(alpha): the upper end of the
        bracket [x_max, large_noise(alpha)] for alpha below alpha(x_max) (None: ValueError there);
        prior_error: the error at alpha = 0 (x = inf), or None (alpha = 0 is then below the curve)."""
        x_grid, curve = self.table(*params)
        alpha = np.asarray(alpha, float)
        flat = alpha.ravel()
        x = np.full(flat.shape, np.nan)
        error = np.full(flat.shape, np.nan)
        prior = flat == 0.0 if prior_error is not None else np.zeros(flat.shape, dtype=bool)
        x[prior], error[prior] = np.inf, prior_error
        above = flat >= curve[0]
        if np.any(above):
            error[above], x[above] = small_noise(flat[above])
        inside = ~(prior | above)
        if np.any(inside):
            a = flat[inside]
            i = np.searchsorted(-curve, -a)  # curve[i-1] > a >= curve[i]; i = len(curve): beyond x_max
            beyond = i == len(curve)
            if large_noise is None and np.any(a <= curve[-1]):
                raise ValueError(f"alpha = {a[a <= curve[-1]][0]} is below the curve's range ({curve[-1]:.3g} at "
                                 f"{self.name} = {x_grid[-1]:g})")
            root = (self._brentq(a, i, x_grid, params) if self.bisection_steps is None
                    else self._bisect(a, i, beyond, x_grid, params, large_noise))
            x[inside], error[inside] = root, error_of(root, a)
        return error.reshape(alpha.shape), x.reshape(alpha.shape)

    def _bisect(self, a, i, beyond, x_grid, params, large_noise):
        """Vectorised bisection in log x inside each bracketing cell, or on [x_max, large_noise(a)]."""
        i = np.minimum(i, len(x_grid) - 1)
        lo = np.where(beyond, math.log(x_grid[-1]), np.log(x_grid[i - 1]))
        with np.errstate(divide="ignore"):
            hi = np.where(beyond, np.log(np.maximum(large_noise(a), x_grid[-1])), np.log(x_grid[i]))
        # alpha decreasing: above the target, the root lies at larger x
        log_x = bisect_arrays(lambda mid: self.alpha_of(np.exp(mid), *params) > a, lo, hi, self.bisection_steps)
        return np.exp(log_x)

    def _brentq(self, a, i, x_grid, params):
        """brentq in log x inside each bracketing cell, one alpha at a time; a cell without a sign change (alpha(x)
        flat to rounding there, within the table's rtol) gives its midpoint."""
        root = np.empty(a.shape)
        last = len(x_grid) - 1
        for j, (target, cell) in enumerate(zip(a, i)):
            log_target = math.log(target)

            def f(log_x):
                return math.log(float(self.alpha_of(np.array([math.exp(log_x)]), *params)[0])) - log_target

            lo, hi = math.log(x_grid[max(cell - 1, 0)]), math.log(x_grid[min(cell, last)])
            try:
                log_x = optimize.brentq(f, lo, hi, xtol=1e-14, rtol=4 * np.finfo(float).eps)
            except ValueError:
                log_x = (lo + hi) / 2.0
            root[j] = math.exp(log_x)
        return root
