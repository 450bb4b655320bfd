"""The algorithm's own word on a threshold: GAMP on finite instances at several sizes d, the onset of each
transition at each d by a stated rule, and its extrapolation d -> infinity.

A family's `onset` method (a subclass of `OnsetMethod` in its model.py) says which overlaps a GAMP run
yields (`observables`), which transition each one signals (`transitions`: name -> observable), and how
one instance runs (`run_instance`). Everything else is written once here: the works (one per size d,
alpha of the transition's window and seed), the rule, the extrapolation and the stored layout.

The rule (onset method version 2 of every family; smi's version 3 changed its channel, not the rule, its
version 4 the design and the stopping rule below), per
transition and size d, on the final overlap of `n_seeds` independent instances at each alpha of a uniform
window [lo, hi]:

1. the mean overlap m_d(alpha) over the seeds whose GAMP run did not diverge (final overlap finite and
   <= DIVERGED = 2; version 1 had no such guard; more than half diverged at an alpha fails the point);
2. the onset at d is where m_d crosses `level / sqrt(d)` upwards for the last time (linear interpolation
   between the two window alphas around it): an estimate that learned nothing overlaps the signal by
   O(1/sqrt(d)) (GAMP's collapses to ~0 below an onset), so the level marks "out of the floor" at every d
   with the same meaning. Its standard error: the spread of the crossings of bootstrap resamples of the
   seeds (each alpha's seeds resampled);
3. d -> infinity: weighted least squares of the per-d onsets against d^-nu (`correction`, default
   nu = 1/3), the intercept with its standard error (scaled by sqrt(chi2 / dof) when the sizes scatter
   more than their errors).
   Two terms shift the finite-d onset upwards: the level itself (level / (slope sqrt(d)), nu = 1/2) and
   the finite-size rounding of the transition, which is slower where the onset is a spectral (BBP-like)
   transition of the linearised algorithm (nu = 1/3). On phase retrieval (d = 250..4000, 16 seeds, level 2)
   nu = 1/3 gives 0.486 +- 0.037 for the exact 1/2, nu = 1/2 0.550 +- 0.028, nu = 1 0.613 +- 0.024; on the
   multi-index y = z1 z2 (SE: 0.5938; d = 250..2000, run after this default was fixed) nu = 1/3 gives
   0.520 +- 0.081, nu = 1/2 0.616 +- 0.049, nu = 1 0.714 +- 0.026 (docs/validation/onset.md).

Fitting the rise instead (a quadratic through the mean overlaps above the floor, extrapolated to zero)
was tried and dropped: at d = 250 the rise of phase retrieval starts 0.3 above 1/2 and its curvature
changes there, so the quadratic's zero moved by more than its bootstrap error, or had no real root.

A window that does not bracket the crossing at some d (the mean already above the level at lo, or still
below at hi, or in more than 10% of the resamples) makes the point fail with that reason
(`OnsetWindowError`), so a user widens the window; nothing is extrapolated from a half-seen onset.

Two designs run the rule (setting `design`, where a family's settings hold `design_settings`; smi's onset
version 4 does, and runs the sequential one by default; glm's and multiindex's run the grid unless a spec
sets design = sequential, without the stopping rule):

- grid: every alpha of each window at every size, `n_seeds` seeds each.
- sequential: sizes in ascending order; each starts from the two adjacent window alphas around the onset
  the smaller sizes predict (none yet: the window's middle pair; one: its onset; more: the straight line in
  d^-nu through them), and its window grows by one alpha at its low end while the mean there is above the
  level in more than `margin` of the seed resamples, at its high end while a resample of the next alpha's
  seeds could still fall below the level (probability > `margin` under the end's seed noise taken three
  times: the least favourable non-decreasing mean; `end_doubts`), and at both ends (where the
  grid has alphas) while the rule's own bootstrap still refuses it (the crossing leaves the window in > 10%
  of the resamples). Then, while the extrapolation's s.e. exceeds the transition's target `<t>_se`,
  `seed_batch` more seeds run at every alpha of the size where they shrink the intercept's variance most
  per cost (alpha x d x seeds; `cheapest_gain`), up to `max_seeds`. An instance is the grid's instance of
  the same (size, alpha step, seed), on the same stream, so where the grid's means beyond a size's window
  lie on their side of the level its onset at that size is the grid's, bit for bit; the bootstrap draws
  differ. Each step is a round of works (`Method.tasks`), both transitions side by side.

The stopping rule (`stop_test`, settings stop_window, stop_fraction, stop_envelope and stop_flat): an instance
stops before the iteration cap once every layer's overlap has settled over the last stop_window iterations:
stayed below stop_fraction x level / sqrt(d) with the fastest recent growth of its envelope (its largest
value over stop_envelope iterations, which spans the troughs of an oscillation), continued to the cap,
staying below that bound (`settled_low`: its final overlap at the cap would be below the level), or stood
still (`settled_flat`: within stop_flat of its value). Every layer, not only the one the transition reads: an overlap at zero
while another layer is still being learned can turn and escape once that layer has settled.
"""

from __future__ import annotations

import json
import math

import numpy as np

from seqphase.core.errors import ParameterError
from seqphase.core.models import Layout, Method, Param, Variable, Work
from seqphase.core.search import check_bracket

N_BOOT = 400        # bootstrap resamples of the seeds per size
# A final overlap above this comes from a GAMP run that diverged, not from an estimate: the overlaps are
# normalised so that the signal's is ~1, and an estimate (a posterior mean) has a norm at most the prior's,
# so |overlap| <= 1 + O(1/sqrt(d)) (SMI's raw |M22| reached 1.14 at d = 250). Such instances are left out of
# the mean (multi-index z1 z2 at d = 250: 4 of 240 ended at 419-4196 and dominated their alpha's mean).
DIVERGED = 2.0


class OnsetWindowError(RuntimeError):
    """The alpha window of a transition does not bracket its onset at some size (the point fails)."""


# -- the rule ---------------------------------------------------------------------------------------
def crossing(alphas, means, d, level):
    """The alpha where `means` (ascending alphas) crosses level / sqrt(d) upwards for the last time, linearly
    interpolated between the two window alphas around it. Raises OnsetWindowError when the window does
    not bracket the crossing (the mean is above the level at the lowest alpha, or below it at the highest)."""
    means = np.asarray(means, dtype=float)
    floor = level / math.sqrt(d)
    if means[0] >= floor:
        raise OnsetWindowError(f"at d = {d} the mean overlap {means[0]:.3g} at the window's lowest alpha "
                               f"{alphas[0]:g} is above the level {floor:.3g}: lower the window's lo")
    if means[-1] < floor:
        raise OnsetWindowError(f"at d = {d} the mean overlap {means[-1]:.3g} at the window's highest alpha "
                               f"{alphas[-1]:g} is below the level {floor:.3g}: raise the window's hi")
    j = int(np.flatnonzero(means < floor)[-1])
    f = (floor - means[j]) / (means[j + 1] - means[j])
    return float(alphas[j] + f * (alphas[j + 1] - alphas[j]))


def diverged(overlaps):
    """Instances whose GAMP run diverged: a final overlap that is not finite or above DIVERGED."""
    overlaps = np.asarray(overlaps, dtype=float)
    return ~(np.isfinite(overlaps) & (overlaps <= DIVERGED))


def onset_at_size(alphas, overlaps, d, *, level, rng, n_boot=N_BOOT):
    """(onset, s.e.) at one size from `overlaps` (alpha x seed, final overlaps of independent instances):
    the crossing of the mean over the instances that did not diverge, and the standard deviation of the
    crossings of bootstrap resamples (each alpha's seeds resampled with replacement). Raises
    OnsetWindowError when more than half the instances of some alpha diverged."""
    alphas, overlaps = np.asarray(alphas, dtype=float), np.asarray(overlaps, dtype=float)
    n_alpha, n = overlaps.shape
    bad = diverged(overlaps)
    worst = int(np.argmax(bad.sum(axis=1)))
    if 2 * bad[worst].sum() > n:
        raise OnsetWindowError(f"at d = {d}, alpha = {alphas[worst]:g} GAMP diverged on {int(bad[worst].sum())} of "
                               f"{n} instances (final overlap > {DIVERGED:g} or not finite): damp it (damping)")
    kept = np.where(bad, 0.0, overlaps)
    value = crossing(alphas, kept.sum(axis=1) / (~bad).sum(axis=1), d, level)
    picks = rng.integers(0, n, size=(n_boot, n_alpha, n))
    sums = np.take_along_axis(kept[None], picks, axis=2).sum(axis=2)  # (n_boot, n_alpha)
    counts = np.take_along_axis((~bad)[None], picks, axis=2).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts  # NaN where a resample drew only diverged instances of an alpha
    boot = []
    for row in means:
        try:
            boot.append(np.nan if np.isnan(row).any() else crossing(alphas, row, d, level))
        except OnsetWindowError:
            boot.append(np.nan)
    boot = np.asarray(boot)
    if np.isnan(boot).mean() > 0.1:
        raise OnsetWindowError(f"at d = {d} the crossing leaves the window in {np.isnan(boot).mean():.0%} of the "
                               f"seed resamples: widen the window")
    return value, float(np.nanstd(boot, ddof=1))


def onsets_by_size(alphas, overlaps, sizes, *, level, rng):
    """(onsets, s.e.), one per size: `onset_at_size` of overlaps[i] (alpha x seed) at sizes[i] on the window
    `alphas` every size shares, the sizes in order (the order in which the bootstrap draws from `rng`, so a
    point's stored s.e. are reproduced)."""
    return onsets_by_window([alphas] * len(sizes), overlaps, sizes, level=level, rng=rng)


def onsets_by_window(windows, overlaps, sizes, *, level, rng):
    """`onsets_by_size` where each size has its own window: overlaps[i] (alpha x seed) on windows[i]."""
    pairs = [onset_at_size(a, o, d, level=level, rng=rng) for a, o, d in zip(windows, overlaps, sizes)]
    return np.array([v for v, _ in pairs], dtype=float), np.array([e for _, e in pairs], dtype=float)


# -- the stopping rule: an instance whose fate is decided stops before the iteration cap ----------------
#: Below this fraction of the stopping bound an overlap counts as that floor: an estimate that has lost the
#: signal sits at the machine-precision zero of its layer (|M11| ~ 1e-14 below alpha_1 in smi), where the
#: ratio of two values is noise, not growth. Hiding a growth from under the floor lets through a rise of
#: at most 1 / STOP_FLOOR = 10^4 in the remaining iterations (at least 1.09 per iteration over 100 of them)
#: before the bound is reached, faster than any rise logged next to an onset.
STOP_FLOOR = 1e-4


def settled_low(recent, *, bound, remaining):
    """Whether an overlap trajectory has settled below `bound` for good, judged on `recent`, its |overlap| at
    the last w + 1 iterations (the current one last) with `remaining` iterations to the cap: all of them below
    the bound, and the fastest growth seen in the window, (later value / earlier value)^(1/k) over every pair
    of its iterations k apart, continued geometrically from the current value over the remaining iterations,
    keeps it below the bound. The fastest rate, not the window's average, and over every pair, not only into
    the current value: an overlap that decays from the start's O(1/sqrt(d)) and then turns up (a late escape
    from the uninformative point) has grown over its last iterations although the window's first value is the
    larger, and one that grows while it oscillates (smi's |M11| at c = 2 near alpha_1) may sit in a trough
    just now, below every value before it. Values under STOP_FLOOR * bound count as that floor."""
    recent = np.asarray(recent, dtype=float)
    if len(recent) < 2 or not np.all(np.isfinite(recent)) or recent.max() >= bound:
        return False
    logs = np.log(np.maximum(recent, STOP_FLOOR * bound))
    later, earlier = np.triu_indices(len(logs), k=1)[::-1]  # every pair (earlier < later)
    log_rate = max(0.0, float(np.max((logs[later] - logs[earlier]) / (later - earlier))))
    return bool(logs[-1] + log_rate * max(remaining, 0) < math.log(bound))


def settled_flat(recent, *, floor, rtol):
    """Whether an overlap trajectory has stopped moving, judged on `recent`, its |overlap| at the last w + 1
    iterations: all of them at or above `floor` (below it an overlap is `settled_low`'s to judge: near zero a
    relative change is noise) and their range at most `rtol` of the current value."""
    recent = np.asarray(recent, dtype=float)
    if len(recent) < 2 or not np.all(np.isfinite(recent)) or recent.min() < floor:
        return False
    return bool(recent.max() - recent.min() <= rtol * recent[-1])


def stop_test(d, *, level, fraction, cap, window, flat=0.0, envelope=1):
    """The stopping rule of one instance as a test on GAMP's records (`core/gamp.py`, `iterate(stop=...)`;
    each record's "overlap" is the overlap matrix M), with bound = fraction * level / sqrt(d) and `cap` the
    iteration cap. True once, over the last `window` iterations, every layer's |M_ll| has either
    `settled_low` under the bound or, with flat > 0, `settled_flat` (range <= flat of its value, all values at
    or above the bound): the run's overlaps have stopped moving, so its final values are the capped run's to
    about that fraction.

    `settled_low` judges the layer's envelope, its largest |M_ll| over the last `envelope` iterations at each
    iteration of the window (1: the values themselves), and projects from the envelope's current value. An
    overlap near zero often decays while it oscillates through zero (smi at c = 0.1 in the alpha_2 window:
    |M22| falls from 1e-3 to 1e-6 with a period of 10 to 12 iterations and troughs down to 1e-8): each
    trough-to-peak pair of the raw values reads as growth by 10 to 10^3 an iteration, so the raw rule never
    stops it, while the envelope spans the troughs and decays with the peaks. A growth, smooth or while it
    oscillates (smi at c = 2: period ~13, each peak 2.5 to 3 times the one before), still raises the
    envelope. The envelope remembers an earlier bump for `envelope` iterations, under which a growth from the
    trough after it would read as flat: a layer whose current value is at least every other value over the
    envelope's span is rising now and is not settled low (smi at c = 1, d = 2000, alpha = 0.7: |M11| bumps to
    4e-6, falls to 0, and grows back past the bump at ~1 to 7% an iteration to 9.5e-3 at the cap). The first
    `window + envelope - 1` iterations are never stopped.

    Every layer, and not only the one a transition reads, for two reasons. The growth that
    `settled_low` extrapolates is that of a stationary map: while another layer is still being learned the
    watched overlap's map changes under it, and an overlap that decays through the window can turn and
    escape once the other layer has settled (smi at c = 2, d = 1000, alpha = 0.8: |M11| fell to 1.1e-5 at
    iteration 26 while |M22| rose to 0.98, then grew by ~1.28 an iteration to 0.195 at the cap; watched
    alone, it was stopped at zero at iteration 25). And an overlap stored beside the watched one (smi's
    |M11| in the alpha_2 window) is not cut off mid-rise.

    None when `window` is 0 (no early stop)."""
    if window <= 0:
        return None
    bound = fraction * level / math.sqrt(d)

    span = window + envelope - 1  # iterations before the current one that the test reads
    if envelope < 1:
        raise ValueError(f"envelope = {envelope}: the envelope spans at least 1 iteration")

    def decided(records):
        t = len(records) - 1
        if t < span:
            return False
        # |M_ll| over the window and the envelope's reach before it: (span + 1, layers)
        diagonals = np.abs(np.array([np.diagonal(np.atleast_2d(r["overlap"])) for r in records[t - span:]]))
        # the envelope at each iteration of the window: (window + 1, layers)
        peaks = np.lib.stride_tricks.sliding_window_view(diagonals, envelope, axis=0).max(axis=-1)
        # a layer at a new high over the envelope's span is rising now, whatever the envelope says; at the floor
        # (`settled_low`'s STOP_FLOOR) it is at zero, not rising
        floored = np.maximum(diagonals[-envelope:], STOP_FLOOR * bound)
        rising = ((floored[-1] > STOP_FLOOR * bound) & (floored[-1] >= floored[:-1].max(axis=0)) if envelope > 1
                  else np.zeros(diagonals.shape[1], dtype=bool))
        return all((not up and settled_low(p, bound=bound, remaining=cap - t))
                   or (flat > 0 and settled_flat(m[-(window + 1):], floor=bound, rtol=flat))
                   for p, m, up in zip(peaks.T, diagonals.T, rising))

    return decided


CORRECTIONS = {"d^-1/3": 1.0 / 3.0, "d^-1/2": 0.5, "d^-1": 1.0}


def extrapolate(sizes, onsets, ses, correction="d^-1/3"):
    """(alpha_inf, s.e., chi2) of the weighted straight line onset(d) = alpha_inf + b d^-nu (nu from
    `correction`). Two sizes: the line through both (chi2 = 0); more: the s.e. is scaled by
    sqrt(chi2 / dof) when chi2 > dof (the line does not describe the sizes within their errors)."""
    x = np.asarray(sizes, dtype=float) ** -CORRECTIONS[correction]
    y, s = np.asarray(onsets, dtype=float), np.asarray(ses, dtype=float)
    w = 1.0 / np.maximum(s, 1e-12) ** 2
    X = np.stack([np.ones_like(x), x], axis=1)
    cov = np.linalg.inv(X.T @ (w[:, None] * X))
    beta = cov @ (X.T @ (w * y))
    chi2 = float(np.sum(w * (y - X @ beta) ** 2))
    dof = len(y) - 2
    scale = math.sqrt(chi2 / dof) if dof > 0 and chi2 > dof else 1.0
    return float(beta[0]), float(math.sqrt(cov[0, 0]) * scale), chi2


def instance_key(transition, d, step, seed):
    """The name of one instance's work: "<transition>-d<size>-a<alpha step>-s<seed>"."""
    return f"{transition}-d{d}-a{step}-s{seed}"


def parse_instance_key(key):
    """(transition, size, alpha step, seed) of an `instance_key`."""
    transition, d, step, seed = key.rsplit("-", 3)
    return transition, int(d[1:]), int(step[1:]), int(seed[1:])


# -- the sequential design -------------------------------------------------------------------------
def predicted_onset(sizes, onsets, d, correction):
    """Where the onset at size d is expected from the onsets at the smaller `sizes`: none yet -> None; one ->
    that onset; more -> the straight line in d^-nu through them (unweighted), at d."""
    if len(sizes) == 0:
        return None
    if len(sizes) == 1:
        return float(onsets[0])
    x = np.asarray(sizes, dtype=float) ** -CORRECTIONS[correction]
    slope, intercept = np.polyfit(x, np.asarray(onsets, dtype=float), 1)
    return float(intercept + slope * d ** -CORRECTIONS[correction])


def first_pair(alphas, guess):
    """The first of the two adjacent window steps a size starts from: those around `guess` (None: the
    window's middle pair)."""
    n = len(alphas)
    if guess is None:
        return (n - 2) // 2
    return int(np.clip(np.searchsorted(alphas, guess, side="right") - 1, 0, n - 2))


def end_doubts(overlaps, d, *, level, margin, beyond=True, n_boot=N_BOOT):
    """(low, high): whether a window's ends still doubt that the rule's crossing lies inside it, from `overlaps`
    (its alphas x seeds), with floor = level / sqrt(d):

    - low: the mean at its lowest alpha is at or above the floor in more than `margin` of the seed resamples
      (the rule's bootstrap needs the window to start below the floor; alphas below it cannot move the LAST
      crossing, so the low end's own mean is all that matters there);
    - high: a resample of the seeds (the rule's bootstrap) would find the mean of the next alpha beyond the
      window below the floor with probability more than `margin`. The rule takes the last upward crossing,
      so the window may only end where no alpha beyond it would move the rule's output, its crossing or the
      bootstrap's spread of crossings, to it. The mean is non-decreasing in alpha in expectation (more
      samples, no less overlap), so the next alpha's expectation is at least the end's, and the next alpha is
      the likeliest of those beyond to dip. Its resampled mean is then at least the end's expectation (known
      to the end's seed noise) plus the next alpha's own seed noise plus the resampling's: the end's
      resampled mean plus two independent resamples' deviations from the end's mean, three times the end's
      variance around it, the least favourable law that non-decreasing means allow. With margin 5% an end
      whose mean lies less than ~2.85 s.e. above the floor is not settled. Where the grid has no alpha
      beyond the window (`beyond` False) nothing there can move the crossing, and the end's own resampled
      mean below the floor is the doubt, as the low end's above it.

    The seeds are resampled by a generator of fixed seed, so a design's decisions are a function of its
    instances alone."""
    overlaps = np.asarray(overlaps, dtype=float)
    floor = level / math.sqrt(d)
    rng = np.random.default_rng(0)

    def resampled(row):
        return row[rng.integers(0, row.size, size=(n_boot, row.size))].mean(axis=1)

    low, high = (row[~diverged(row)] for row in (overlaps[0], overlaps[-1]))
    low_doubt = low.size == 0 or float(np.mean(resampled(low) >= floor)) > margin
    if high.size == 0:
        return low_doubt, True
    following = resampled(high)
    if beyond:
        following = following + (resampled(high) - high.mean()) + (resampled(high) - high.mean())
    return low_doubt, float(np.mean(following < floor)) > margin


def cheapest_gain(sizes, ses, seeds, batch, costs, correction):
    """The size (an index into `sizes`, one of `costs`' keys) where `batch` more seeds shrink the variance of
    the extrapolated intercept most per unit of cost: each size's s.e. is taken to fall like 1/sqrt(seeds)."""
    x = np.asarray(sizes, dtype=float) ** -CORRECTIONS[correction]
    X = np.stack([np.ones_like(x), x], axis=1)
    ses = np.maximum(np.asarray(ses, dtype=float), 1e-12)

    def variance(s):
        return float(np.linalg.inv(X.T @ (X / s[:, None] ** 2))[0, 0])

    now = variance(ses)
    gains = {}
    for si, cost in costs.items():
        s = ses.copy()
        s[si] *= math.sqrt(seeds[si] / (seeds[si] + batch))
        gains[si] = (now - variance(s)) / cost
    return max(gains, key=gains.get)


# -- the method ------------------------------------------------------------------------------------
ONSET_SETTINGS = {
    "sizes": Param("sizes", "ints", "the dimensions d of the instances (at least two)", [250, 500, 1000],
                   low=20, high=100_000, low_inclusive=True),
    "n_seeds": Param("n_seeds", "int", "instances per size and alpha", 16, low=2, high=4096, low_inclusive=True),
    "level": Param("level", "float", "the onset at d is where the mean overlap crosses level / sqrt(d)", 2.0,
                   low=0.0, high=100.0),
    "correction": Param("correction", "choice", "finite-size shift of the onset, extrapolated away d -> infinity",
                        "d^-1/3", choices=tuple(CORRECTIONS)),
}


DESIGNS = ("grid", "sequential")


def design_settings(targets, default="sequential", stopping=True, stop_window=20, stop_fraction=1e-2,
                    stop_flat=1e-2, stop_envelope=12):
    """The settings of the sequential design (`OnsetMethod._sequential_tasks`) and, with `stopping`, of the
    stopping rule (`stop_test`): `targets` {transition: s.e. at which the design stops adding seeds},
    `default` the design a point runs unless a spec sets one. Only a family whose `run_instance` takes the
    stopping rule (`watch`) asks for it; without these settings a method runs the grid design, unstopped."""
    out = {
        "design": Param("design", "choice", "grid: every alpha of each window at every size and n_seeds seeds; "
                        "sequential: each size's alphas placed from the smaller sizes' onsets, seeds added "
                        "where they shrink the extrapolation's s.e. most per cost (core/onset.py)", default,
                        choices=DESIGNS),
        "max_seeds": Param("max_seeds", "int", "sequential: seeds per alpha at most (n_seeds to start)", 48,
                           low=2, high=4096, low_inclusive=True),
        "seed_batch": Param("seed_batch", "int", "sequential: seeds added at a time to one size", 8, low=1,
                            high=4096, low_inclusive=True),
        "margin": Param("margin", "float", "sequential: a window end is extended while the mean there (low end), "
                        "or a resample of the next alpha's mean (high end), is on the wrong side of the level "
                        "with more than this probability under the seeds' resampling", 0.05, low=0.0, high=0.1,
                        low_inclusive=False),
    }
    if stopping:
        out["stop_window"] = Param("stop_window", "int", "stopping rule: iterations over which an instance's "
                                   "overlaps must sit at zero or stand still (0: no early stop)", stop_window, low=0,
                                   high=10_000, low_inclusive=True)
        out["stop_fraction"] = Param("stop_fraction", "float", "stopping rule: 'zero' is below this fraction of "
                                     "the level / sqrt(d), with no growth that reaches it by the cap", stop_fraction,
                                     low=0.0, high=1.0)
        out["stop_envelope"] = Param("stop_envelope", "int", "stopping rule: the zero test reads each "
                                     "overlap's largest value over this many iterations, so that the troughs of "
                                     "an overlap that oscillates while it decays do not read as growth (1: the "
                                     "values themselves)", stop_envelope, low=1, high=10_000, low_inclusive=True)
        out["stop_flat"] = Param("stop_flat", "float", "stopping rule: an instance also stops once every layer's "
                                 "overlap has moved by at most this fraction of its value over stop_window "
                                 "iterations, or sits at zero (0: only the zero rule)", stop_flat, low=0.0,
                                 high=0.1, low_inclusive=True)
    for t, target in targets.items():
        out[f"{t}_se"] = Param(f"{t}_se", "float", f"sequential: add seeds until the s.e. of {t}_gamp is at "
                               "most this (0: never add)", target, low=0.0, low_inclusive=True)
    return out


def window_settings(transition, lo, hi, n):
    """The settings of one transition's alpha window: <transition>_lo, _hi, _n."""
    return {
        f"{transition}_lo": Param(f"{transition}_lo", "float", f"lowest alpha of the {transition} window", lo,
                                  low=0.0),
        f"{transition}_hi": Param(f"{transition}_hi", "float", f"highest alpha of the {transition} window", hi,
                                  low=0.0),
        f"{transition}_n": Param(f"{transition}_n", "int", f"alphas in the {transition} window (uniform)", n,
                                 low=2, high=200, low_inclusive=True),
    }


class OnsetMethod(Method):
    """Onset of each transition by GAMP at several sizes (see the module docstring).

    A subclass sets `observables` (overlaps one instance returns, e.g. ("overlap",) or ("overlap_1",
    "overlap_2")), `transitions` ({name: observable}: the transition `alpha2` is read off `overlap_2`) and
    implements `run_instance(params, settings, alpha, d, stream)` -> {observable: final overlap,
    "n_iter": iterations run, "converged": 0/1}. Its settings are ONSET_SETTINGS, one `window_settings`
    per transition and the family's GAMP settings (without d and n_seeds).
    """

    observables: tuple = ()
    transitions: dict = None

    def windows(self, settings):
        """{transition: alpha grid}."""
        return {t: np.linspace(settings[f"{t}_lo"], settings[f"{t}_hi"], settings[f"{t}_n"])
                for t in self.transitions}

    def check(self, params, settings):
        sizes = settings["sizes"]
        if len(sizes) < 2:
            raise ParameterError("method.sizes", f"a finite-size extrapolation needs at least two sizes, got {sizes}",
                                 "give e.g. sizes = [250, 500, 1000]")
        for t in self.transitions:
            check_bracket(settings, f"{t}_lo", f"{t}_hi")
            for d in sizes:
                if round(settings[f"{t}_lo"] * d) < 1:
                    raise ParameterError(f"method.{t}_lo", f"alpha d = {settings[f'{t}_lo'] * d:g} < 1 at d = {d}: "
                                         "no sample", f"raise {t}_lo or the smallest size")

    def sequential(self, settings):
        """Whether the point runs the sequential design (its `design` setting; a family whose settings lack
        `design_settings` runs the grid)."""
        return settings.get("design", "grid") == "sequential"

    def seed_slots(self, settings):
        """Seeds an alpha may run, the length of the stored seed dim: n_seeds, or max_seeds where the
        sequential design may add seeds beyond n_seeds."""
        return max(settings["n_seeds"], settings["max_seeds"]) if self.sequential(settings) else settings["n_seeds"]

    def layout(self, settings):
        sequential = self.sequential(settings)
        dims = {"size": np.asarray(settings["sizes"]), "seed": np.arange(self.seed_slots(settings))}
        out = {}
        unrun = " (NaN: not run by the sequential design)" if sequential else ""
        for t in self.transitions:
            step, per = f"{t}_step", ("size", f"{t}_step", "seed")
            dims[step] = np.arange(settings[f"{t}_n"])
            out[f"{t}_gamp"] = Variable((), "f8", f"onset of {t} by GAMP, extrapolated d -> infinity "
                                        f"({settings['correction']})")
            out[f"{t}_gamp_se"] = Variable((), "f8", f"standard error of {t}_gamp")
            out[f"{t}_gamp_chi2"] = Variable((), "f8", f"chi2 of the extrapolation of {t} (dof = sizes - 2)")
            out[f"{t}_gamp_d"] = Variable(("size",), "f8", f"onset of {t} at each size d (the rule of core/onset.py)")
            out[f"{t}_gamp_d_se"] = Variable(("size",), "f8", f"bootstrap standard error of {t}_gamp_d")
            out[f"{t}_diverged"] = Variable(("size",), "i4", f"instances of the {t} window left out of the rule: "
                                            f"GAMP diverged (final overlap > {DIVERGED:g} or not finite)")
            out[f"{t}_alpha"] = Variable((step,), "f8", f"the alphas of the {t} window")
            for obs in self.observables:
                out[f"{t}_{obs}"] = Variable(per, "f8", f"final {obs} of each instance in the {t} window{unrun}")
            out[f"{t}_n_iter"] = Variable(per, "i4", "GAMP iterations run" + (" (-1: not run)" if sequential else ""))
            out[f"{t}_converged"] = Variable(per, "i1", "1 if GAMP met its tolerance" +
                                             (" (-1: not run)" if sequential else ""))
            if sequential:
                out[f"{t}_stopped"] = Variable(per, "i1", "1 if the stopping rule ended the run (-1: not run)")
                out[f"{t}_n_seeds"] = Variable(("size",), "i4", f"seeds run at each alpha of the {t} window at "
                                               "each size (seeds 0 .. n - 1)")
                out[f"{t}_step_lo"] = Variable(("size",), "i4", f"first step of the {t} window run at each size")
                out[f"{t}_step_hi"] = Variable(("size",), "i4", f"last step of the {t} window run at each size")
                out[f"{t}_rounds"] = Variable((), "i4", f"rounds of works the design of {t} took")
        return Layout(dims, out)

    def run_instance(self, params, settings, alpha, d, stream):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not define run_instance()")

    def stream(self, seed_sequence, t_index, size_index, step, seed):
        """The instance (transition t, size, alpha step, seed): its own child of the point's SeedSequence,
        so each is the same draw however the point is cut."""
        return np.random.SeedSequence(seed_sequence.entropy, pool_size=seed_sequence.pool_size,
                                      spawn_key=tuple(seed_sequence.spawn_key) + (t_index, size_index, step, seed))

    def instance_work(self, params, settings, seed_sequence, t, size_index, step, seed):
        """The Work of one instance: its key, its stream (`stream`) and, where the family's settings hold the
        stopping rule, the transition whose overlap that rule watches."""
        ti = list(self.transitions).index(t)
        d, alpha = int(settings["sizes"][size_index]), float(self.windows(settings)[t][step])
        kwargs = {"params": params, "settings": settings, "alpha": alpha, "d": d,
                  "stream": self.stream(seed_sequence, ti, size_index, step, seed)}
        if "stop_window" in settings:
            kwargs["watch"] = self.transitions[t]
        return Work(instance_key(t, d, step, seed), self.run_instance, kwargs)

    def tasks(self, params, settings, seed_sequence):
        if self.sequential(settings):
            return (yield from self._sequential_tasks(params, settings, seed_sequence))
        sizes, n = settings["sizes"], settings["n_seeds"]
        windows = self.windows(settings)
        works = []
        for t, alphas in windows.items():
            for si in range(len(sizes)):
                for j in range(len(alphas)):
                    for s in range(n):
                        works.append(self.instance_work(params, settings, seed_sequence, t, si, j, s))
        results = yield works
        out = {}
        boot_rng = np.random.default_rng(self.stream(seed_sequence, len(windows), 0, 0, 0))
        for t, alphas in windows.items():
            shape = (len(sizes), len(alphas), n)
            got = {k: np.empty(shape) for k in self.observables + ("n_iter", "converged")}
            for si, d in enumerate(sizes):
                for j in range(len(alphas)):
                    for s in range(n):
                        r = results[instance_key(t, d, j, s)]
                        for k in got:
                            got[k][si, j, s] = r[k]
            obs = got[self.transitions[t]]
            onsets, ses = onsets_by_size(alphas, obs, sizes, level=settings["level"], rng=boot_rng)
            out[f"{t}_gamp"], out[f"{t}_gamp_se"], out[f"{t}_gamp_chi2"] = extrapolate(
                sizes, onsets, ses, settings["correction"])
            out.update({f"{t}_gamp_d": onsets, f"{t}_gamp_d_se": ses, f"{t}_alpha": alphas,
                        f"{t}_diverged": diverged(obs).sum(axis=(1, 2)),
                        f"{t}_n_iter": got["n_iter"], f"{t}_converged": got["converged"]})
            out.update({f"{t}_{k}": got[k] for k in self.observables})
        return out

    # -- the sequential design ----------------------------------------------------------------------
    def _sequential_tasks(self, params, settings, seed_sequence):
        """The transitions' sequential designs side by side: each round yields the works every transition
        asks for next (`_design`), so the workers see both at once."""
        designs = {t: self._design(t, params, settings, seed_sequence) for t in self.transitions}
        asked = {t: next(g) for t, g in designs.items()}
        state = {}
        while asked:
            results = yield [w for works in asked.values() for w in works]
            for t in list(asked):
                try:
                    asked[t] = designs[t].send({w.key: results[w.key] for w in asked[t]})
                except StopIteration as stop:
                    state[t] = stop.value
                    del asked[t]
        out = {}
        for t, alphas in self.windows(settings).items():
            out.update(self._sequential_outputs(t, alphas, settings, seed_sequence, state[t]))
        return out

    def _boot_rng(self, seed_sequence, t):
        """The bootstrap draws of transition t's per-size s.e. (sequential design): the same whenever the
        design asks, so the s.e. it stops on is the one stored."""
        ti = list(self.transitions).index(t)
        return np.random.default_rng(self.stream(seed_sequence, len(self.transitions), ti, 0, 0))

    def _design(self, t, params, settings, seed_sequence):
        """Transition t's sequential design, a generator of rounds of works (module docstring, "The sequential
        design"); returns its state {"results", "span", "seeds", "rounds"}."""
        alphas = self.windows(settings)[t]
        sizes, obs = settings["sizes"], self.transitions[t]
        n0, n_max, batch = settings["n_seeds"], self.seed_slots(settings), settings["seed_batch"]
        level, margin, target = settings["level"], settings["margin"], settings[f"{t}_se"]
        results, span, seeds, rounds = {}, {}, {}, 0

        def run(si, steps, seed_range):
            nonlocal rounds
            rounds += 1
            got = yield [self.instance_work(params, settings, seed_sequence, t, si, j, s)
                         for j in steps for s in seed_range]
            results.update(got)

        def table(si):
            lo, hi = span[si]
            d = sizes[si]
            return np.array([[results[instance_key(t, d, j, s)][obs] for s in range(seeds[si])]
                             for j in range(lo, hi + 1)])

        def settle(si):
            """Extend size si's window until both ends lie on their side of the level (`end_doubts`) and the
            rule's bootstrap finds the crossing inside it (else both ends grow by one alpha, where the grid
            has one)."""
            while True:
                lo, hi = span[si]
                low_doubt, high_doubt = end_doubts(table(si), sizes[si], level=level, margin=margin,
                                                   beyond=hi + 1 < len(alphas))
                more = ([lo - 1] if low_doubt else []) + ([hi + 1] if high_doubt else [])
                if not more:
                    try:
                        onset_at_size(alphas[lo:hi + 1], table(si), sizes[si], level=level,
                                      rng=self._boot_rng(seed_sequence, t))
                        return
                    except OnsetWindowError:
                        bad = diverged(table(si))
                        # ends settled, yet > 10% of the resampled crossings leave: grow where the grid allows
                        more = [k for k in (lo - 1, hi + 1) if 0 <= k < len(alphas)]
                        if not more or np.any(2 * bad.sum(axis=1) > bad.shape[1]):
                            raise  # the whole grid, or an alpha where most runs diverged: no window helps
                if min(more) < 0 or max(more) >= len(alphas):
                    side = "lo" if min(more) < 0 else "hi"
                    raise OnsetWindowError(f"at d = {sizes[si]} the {t} crossing lies at the window's edge (alpha "
                                           f"= {alphas[0 if side == 'lo' else -1]:g}): "
                                           f"{'lower' if side == 'lo' else 'raise'} {t}_{side}")
                span[si] = [min([lo] + more), max([hi] + more)]
                yield from run(si, more, range(seeds[si]))

        def onsets(upto):
            return onsets_by_window([alphas[span[si][0]:span[si][1] + 1] for si in range(upto)],
                                    [table(si) for si in range(upto)], sizes[:upto], level=level,
                                    rng=self._boot_rng(seed_sequence, t))

        for si, d in enumerate(sizes):
            guess = predicted_onset(sizes[:si], onsets(si)[0] if si else [], d, settings["correction"])
            j = first_pair(alphas, guess)
            span[si], seeds[si] = [j, j + 1], n0
            yield from run(si, [j, j + 1], range(n0))
            yield from settle(si)
        while True:
            values, ses = onsets(len(sizes))
            _, se, _ = extrapolate(sizes, values, ses, settings["correction"])
            costs = {si: batch * sizes[si] * alphas[span[si][0]:span[si][1] + 1].sum()
                     for si in range(len(sizes)) if seeds[si] + batch <= n_max}
            if target <= 0 or se <= target or not costs:
                break
            si = cheapest_gain(sizes, ses, [seeds[i] for i in range(len(sizes))], batch, costs,
                               settings["correction"])
            lo, hi = span[si]
            yield from run(si, range(lo, hi + 1), range(seeds[si], seeds[si] + batch))
            seeds[si] += batch
            yield from settle(si)
        return {"results": results, "span": span, "seeds": seeds, "rounds": rounds}

    def _sequential_outputs(self, t, alphas, settings, seed_sequence, state):
        """The stored outputs of transition t's sequential design: every run instance in its (size, step, seed)
        cell, NaN / -1 elsewhere, and the rule on each size's window."""
        sizes = settings["sizes"]
        shape = (len(sizes), len(alphas), self.seed_slots(settings))
        got = {k: np.full(shape, np.nan) for k in self.observables}
        flags = {k: np.full(shape, -1, dtype=int) for k in ("n_iter", "converged", "stopped")}
        span, seeds = state["span"], state["seeds"]
        for key, r in state["results"].items():
            _, d, j, s = parse_instance_key(key)
            cell = (list(sizes).index(d), j, s)
            for k in self.observables:
                got[k][cell] = r[k]
            for k in flags:
                flags[k][cell] = int(r.get(k, 0))
        windows = [alphas[span[si][0]:span[si][1] + 1] for si in range(len(sizes))]
        obs = [got[self.transitions[t]][si, span[si][0]:span[si][1] + 1, :seeds[si]] for si in range(len(sizes))]
        onsets, ses = onsets_by_window(windows, obs, sizes, level=settings["level"],
                                       rng=self._boot_rng(seed_sequence, t))
        bad = [int(diverged(o).sum()) for o in obs]
        out = {f"{t}_{k}": v for k, v in got.items()}
        out[f"{t}_gamp"], out[f"{t}_gamp_se"], out[f"{t}_gamp_chi2"] = extrapolate(sizes, onsets, ses,
                                                                                   settings["correction"])
        out.update({f"{t}_gamp_d": onsets, f"{t}_gamp_d_se": ses, f"{t}_alpha": alphas,
                    f"{t}_diverged": np.array(bad), f"{t}_n_iter": flags["n_iter"],
                    f"{t}_converged": flags["converged"], f"{t}_stopped": flags["stopped"],
                    f"{t}_n_seeds": np.array([seeds[si] for si in range(len(sizes))]),
                    f"{t}_step_lo": np.array([span[si][0] for si in range(len(sizes))]),
                    f"{t}_step_hi": np.array([span[si][1] for si in range(len(sizes))]),
                    f"{t}_rounds": state["rounds"]})
        return out

    def figure(self, plt, ds, companions):
        return plot_onset(plt, ds, self)


def plot_onset(plt, ds, method):
    """Per transition: the mean overlap against alpha at each size with its level, and the per-size onsets
    against d^-nu with the extrapolation."""
    transitions = list(method.transitions)
    fig, axes = plt.subplots(len(transitions), 2, figsize=(10, 3.6 * len(transitions)), squeeze=False)
    other = [dim for dim in ds[f"{transitions[0]}_gamp"].dims]
    point = {dim: 0 for dim in other}  # the figure of a multi-point sweep draws its first point
    sizes = ds["size"].values
    settings = json.loads(ds.attrs.get("spec_resolved", "{}")).get("settings", {})
    correction = settings.get("correction", "d^-1/3")
    level = settings.get("level", 2.0)
    for row, t in zip(axes, transitions):
        sub = ds.isel(point) if point else ds
        alphas = sub[f"{t}_alpha"].values
        obs = sub[f"{t}_{method.transitions[t]}"].values
        for si, d in enumerate(sizes):
            m = obs[si].mean(axis=1)
            se = obs[si].std(axis=1, ddof=1) / math.sqrt(obs.shape[-1])
            line = row[0].errorbar(alphas, m, yerr=se, marker="o", ms=3, lw=1, capsize=2, label=f"d = {d}")
            row[0].axhline(level / math.sqrt(d), ls=":", lw=0.8, color=line[0].get_color())
        row[0].set_xlabel("alpha")
        row[0].set_ylabel(method.transitions[t])
        row[0].set_title(f"{t}: GAMP final overlap (mean +- s.e.; dotted: level / sqrt(d))")
        row[0].legend(fontsize=8)
        x = sizes ** -CORRECTIONS[correction]
        row[1].errorbar(x, sub[f"{t}_gamp_d"].values, yerr=sub[f"{t}_gamp_d_se"].values, fmt="o", capsize=3,
                        label="onset at d")
        inf, inf_se = float(sub[f"{t}_gamp"]), float(sub[f"{t}_gamp_se"])
        row[1].errorbar([0.0], [inf], yerr=[inf_se], fmt="s", color="k", capsize=3, label=f"d -> inf: {inf:.4f}")
        row[1].set_xlabel(correction)
        row[1].set_ylabel(f"{t} onset")
        row[1].legend(fontsize=8)
    fig.tight_layout()
    return fig
