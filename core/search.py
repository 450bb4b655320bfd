"""Threshold searches as graphs of tasks: routes side by side, and the one search loop (`section_search`).

A *route* is a generator that yields lists of `Work`s (core/models.py) and receives {key: result} for
each list, then returns its value: the form `Method.tasks` takes, so `drive` runs a route serially and
the driver runs its works as Dask tasks. `side_by_side` runs several routes at once (each round, the
works of every route still running go out as one list); `single` is a route of one work.

`section_search` locates the switch of a monotone predicate (False below, True above) on [lo, hi] in
rounds of up to k probes, a probe being one Work (or a route) that evaluates the predicate at one x. It
is the one search loop of seqphase: every threshold search, parallel or in one process (`bisect`), is a
section_search; a *placement* says where a round's probes go and what the final bracket gives:

* ``"bisection"``: the serial bisection, in parallel. The serial bisection of a bracket (pred(lo) False,
  pred(hi) True) is: while hi - lo > rtol hi, mid = (lo + hi) / 2 and the half holding the switch is
  kept; it returns (lo + hi) / 2 (NaN when the predicate holds already at lo or not at hi). Its probes
  form a binary tree of midpoints; a round probes the next k nodes of the tree below the current
  bracket, breadth first (its midpoint; then both quarter points; ...; none whose bracket is already
  narrow enough), and after the round the bisection is walked through the probed results as far as they
  go. So the value and the final bracket are the serial bisection's, bit for bit, whatever k: a method
  whose stored values come from a serial bisection runs its probes in parallel without changing a stored
  number. A round of k = 2^j - 1 probes advances it j levels, k = 2 probes 1.5 levels on average (the next
  node is known, the one after is one of two: the most two workers can gain on a bisection); the probes
  off the serial's path are spent in vain, k / (levels a round) times the serial's probes in all (4/3 at
  k = 2, 16/9 at k = 4), so k > 1 pays only where workers would otherwise idle. Round one also probes lo
  and hi.
* ``"even"``: a k-section. Round one probes lo, hi and k points inside (spread evenly, or at and
  around a guess); every later round k-sections the bracket [a, b], a the largest False probe below the
  smallest True probe b, so the bracket shrinks by k + 1 a round, until b - a <= rtol b (the bisection's
  stop rule); it returns (a + b) / 2. Error bound against the bisection of the same predicate to the same
  rtol: both final brackets contain the predicate's switch (monotone predicate), so the two midpoints
  differ by at most half the sum of the two bracket widths, <= rtol x the larger upper end. The glm,
  multiindex and quadratic-erm threshold graphs use it (their stored values come from it).
* ``"guided"``: the root of log f (a probe returns f > 0, increasing in x; the predicate is f > 1) for
  searches whose f is smooth (core/smi/thresholds.py). Round one probes k points from lo to hi (both
  included); while no probe has f > 1 the next round probes k points up to `cap`, while every probe has,
  k points from `floor`; with a bracket, two probes at the estimated root (inverse quadratic
  interpolation of log f) +- rtol a / 2 beside k - 2 section points (a plain k-section when that reaches
  the tolerance, or after a round of estimated probes that did not halve the bracket: every two rounds
  shrink it by k + 1 at least). It ends when b - a <= rtol b with the root of the line through
  (a, log f(a)), (b, log f(b)), or at a probe with |log f| < 1e-6.

k is a setting of the method (`K_SETTING`, `BISECTION_K_SETTING`), never the number of workers, so a
point's value does not depend on the cluster. `relative_gap` and `threshold_variables` are the two
routes' comparison and the variables every threshold method stores alike. This module imports no family
(shared numerics).
"""

from __future__ import annotations

import math

import numpy as np

from seqphase.core.errors import ParameterError
from seqphase.core.models import Param, Variable, Work, drive


def k_setting(default, low):
    """The `k` setting of a threshold method whose searches run in rounds of probes (`K_SETTING`,
    `BISECTION_K_SETTING`)."""
    return Param("k", "int", "probes a round of each threshold search (core/search.py; a setting, not the number "
                 "of workers, so results do not depend on the cluster; a bisection's value does not depend on k)",
                 default, low=low, high=64, low_inclusive=True)


#: the `k` setting of the methods whose searches are k-sections (glm, multiindex, quadratic-erm) or guided (smi)
K_SETTING = k_setting(4, low=2)

#: the `k` setting of the methods whose searches are bisections (aim, quadratic, bsr): 2 by default, the fastest
#: on two workers (1.5 levels a round for 2 probes; k = 4 gains 2.25 levels for 4 probes, which pays from four
#: workers on), 1 the serial bisection (no probe spent in vain: a sweep of many points on few workers)
BISECTION_K_SETTING = k_setting(2, low=1)

PLACEMENTS = ("bisection", "even", "guided")


def check_bracket(settings, lo="alpha_lo", hi="alpha_hi"):
    """Refuse a search bracket (or window) whose lower end is not below its upper end, naming the field."""
    if settings[lo] >= settings[hi]:
        raise ParameterError(f"method.{lo}", f"{lo} = {settings[lo]:g} is not below {hi} = {settings[hi]:g}",
                             f"set {lo} < {hi}")


def side_by_side(routes):
    """Run routes side by side (a route): returns their values, in order. Every round the works of all
    routes still running form one list; each route receives the results of its own works. Two routes
    may ask for the same work (an equal Work under the same key: it runs once); different works under
    one key are refused (prefix a route's keys with its name)."""
    routes = list(routes)
    values = [None] * len(routes)
    asks = {}
    for i, route in enumerate(routes):
        try:
            asks[i] = next(route)
        except StopIteration as stop:
            values[i] = stop.value
    while asks:
        works = {}
        for work in (work for ask in asks.values() for work in ask):
            if works.setdefault(work.key, work) is not work and works[work.key] != work:
                raise ValueError(f"side_by_side: two routes ask for different works under the key {work.key!r}")
        results = yield list(works.values())
        nxt = {}
        for i, ask in asks.items():
            try:
                nxt[i] = routes[i].send({work.key: results[work.key] for work in ask})
            except StopIteration as stop:
                values[i] = stop.value
        asks = nxt
    return values


def single(work):
    """A route of one work: returns its result."""
    return (yield [work])[work.key]


def relative_gap(reference, other):
    """|reference - other| / |reference|: how far two routes to one threshold land apart. Where the
    reference is 0 or not finite (a trivial or a hard threshold) or `other` is not finite: 0 when the two
    agree, else NaN."""
    if reference == 0 or not (math.isfinite(reference) and math.isfinite(other)):
        return 0.0 if reference == other else math.nan
    return abs(reference - other) / abs(reference)


def threshold_variables(reference, reference_doc, bisection_doc, dims=()):
    """The variables every threshold method stores alike: its reference value (`reference`,
    "alpha_closed_form" or "alpha_stability"), `alpha_bisection` (the search on the SE) and their
    `relative_gap`; each family adds its own beside them."""
    label = {"alpha_closed_form": "closed form", "alpha_stability": "stability"}[reference]
    return {reference: Variable(dims, "f8", reference_doc),
            "alpha_bisection": Variable(dims, "f8", bisection_doc),
            "relative_gap": Variable(dims, "f8", f"|{label} - bisection| / {label}")}


def first_points(lo, hi, k, guess=None, spread=0.05):
    """The probes of round one of the k-section: lo, hi and k points inside. Without a guess (or one whose
    points do not fit inside (lo, hi)), k evenly spaced points; with one, guess (1 + spread s) for s = 0,
    1, -1, 2, -2, 4, -4, ... (the first k): the guess itself and the points a walk from it visits first.
    The guess is a probe so that the first bracket is not centred on it (a bracket centred on the guess,
    k-sectioned with k even, would return the guess itself as the midpoint of its central cell)."""
    inner = [lo + (hi - lo) * j / (k + 1) for j in range(1, k + 1)]
    if guess is not None and math.isfinite(guess):
        steps = [0.0] + [sign * 2.0**j for j in range(k) for sign in (1.0, -1.0)]
        near = [guess * (1 + spread * step) for step in steps[:k]]
        if lo < min(near) and max(near) < hi:
            inner = near
    return sorted({float(lo), float(hi), *(float(x) for x in inner)})


class _Ends:
    """The ends of a bisection or k-section: (`true_at_lo`, lo, lo) when the predicate holds already at
    lo, (`false_at_hi`, hi, hi) when it does not at hi, None when [lo, hi] brackets the switch."""

    def __init__(self, lo, hi, rtol, k, true_at_lo, false_at_hi):
        self.lo, self.hi, self.rtol, self.k = lo, hi, rtol, k
        self.true_at_lo, self.false_at_hi = true_at_lo, false_at_hi
        self.seen = {}

    def record(self, xs, results):
        self.seen.update(zip(xs, (bool(result) for result in results)))

    def ends(self):
        if self.seen[self.lo]:
            return self.true_at_lo, self.lo, self.lo
        if not self.seen[self.hi]:
            return self.false_at_hi, self.hi, self.hi
        return None


class _Bisection(_Ends):
    """The serial bisection, k probes a round (module docstring); `geometric`: midpoints sqrt(lo hi)."""

    def __init__(self, lo, hi, rtol, k, true_at_lo, false_at_hi, geometric):
        super().__init__(lo, hi, rtol, k, true_at_lo, false_at_hi)
        self.geometric = geometric
        self.a, self.b = lo, hi  # the serial bisection's bracket, walked as far as the probes allow

    def mid(self, a, b):
        return math.sqrt(a * b) if self.geometric else 0.5 * (a + b)

    def narrow(self, a, b):
        """The stop rule, b - a <= rtol b, or a bracket of adjacent floats (no midpoint strictly inside:
        where the serial bisection would loop for ever, e.g. rtol = 0)."""
        return b - a <= self.rtol * b or not a < self.mid(a, b) < b

    def nodes(self, a, b):
        """The next k nodes the bisection of [a, b] may visit, breadth first."""
        out, brackets = [], [(a, b)]
        while brackets and len(out) < self.k:
            a, b = brackets.pop(0)
            if not self.narrow(a, b):
                m = self.mid(a, b)
                out.append(m)
                brackets += [(a, m), (m, b)]
        return out

    def first(self):
        return [self.lo, self.hi, *self.nodes(self.lo, self.hi)]

    def next(self):
        end = self.ends()
        if end is not None:
            return end
        a, b = self.a, self.b
        while not self.narrow(a, b) and self.mid(a, b) in self.seen:
            m = self.mid(a, b)
            a, b = (a, m) if self.seen[m] else (m, b)
        self.a, self.b = a, b
        if self.narrow(a, b):
            return self.mid(a, b), a, b
        return self.nodes(a, b)


class _Even(_Ends):
    """The k-section (module docstring), round one around `guess` when there is one."""

    def __init__(self, lo, hi, rtol, k, true_at_lo, false_at_hi, guess, spread):
        super().__init__(lo, hi, rtol, k, true_at_lo, false_at_hi)
        self.guess, self.spread = guess, spread

    def first(self):
        return first_points(self.lo, self.hi, self.k, self.guess, self.spread)

    def next(self):
        end = self.ends()
        if end is not None:
            return end
        b = min(x for x in self.seen if self.seen[x])
        a = max(x for x in self.seen if x < b)
        if b - a <= self.rtol * b:
            return 0.5 * (a + b), a, b
        return [a + (b - a) * j / (self.k + 1) for j in range(1, self.k + 1)]


class _Guided:
    """The root of log f with moving brackets and interpolated probes (module docstring)."""

    def __init__(self, lo, hi, rtol, k, floor, cap):
        if floor is None or cap is None:
            raise ValueError("the guided placement needs a floor and a cap")
        self.lo, self.hi, self.rtol, self.k, self.floor, self.cap = lo, hi, rtol, k, floor, cap
        self.seen = {}  # x -> log f(x)
        self.section_next = False  # the next bracketed round is a plain k-section
        self.estimated = None  # (whether the last bracketed round was estimated, its bracket's width)

    def record(self, xs, results):
        self.seen.update(zip(xs, np.log(results)))

    def bracket(self):
        """(a, b): the adjacent probes around the first crossing of log f (log f(a) <= 0 < log f(b));
        (top, None) when no probe has log f > 0, (None, bottom) when every probe has."""
        xs = sorted(self.seen)
        up = [x for x in xs if self.seen[x] > 0]
        if not up:
            return xs[-1], None
        below = [x for x in xs if x < up[0]]
        return (below[-1] if below else None), up[0]

    def root_estimate(self, a, b):
        """Where log f crosses 0 in [a, b]: inverse quadratic interpolation through a, b and the probe
        nearest to the bracket (log f is smooth, so this is far closer than the secant once the probes
        are spread), the secant when there is no third probe or the estimate leaves the bracket."""
        logs = self.seen
        fa, fb = logs[a], logs[b]
        secant = a - fa * (b - a) / (fb - fa)
        others = [x for x in logs if x not in (a, b)]
        if not others:
            return secant
        c = min(others, key=lambda x: a - x if x < a else x - b)
        fc = logs[c]
        if len({fa, fb, fc}) < 3:
            return secant
        m = (a * fb * fc / ((fa - fb) * (fa - fc)) + b * fa * fc / ((fb - fa) * (fb - fc))
             + c * fa * fb / ((fc - fa) * (fc - fb)))
        return m if a < m < b else secant

    def first(self):
        return [self.lo + (self.hi - self.lo) * j / (self.k - 1) for j in range(self.k)]

    def next(self):
        k, logs = self.k, self.seen
        a, b = self.bracket()
        if self.estimated is not None:
            estimated, width = self.estimated
            self.section_next = estimated and (a is None or b is None or b - a > 0.5 * width)
            self.estimated = None
        if b is None:  # the root lies above every probe
            if a >= self.cap:
                return np.inf, self.cap, np.inf
            return [a + (self.cap - a) * j / k for j in range(1, k + 1)]
        if a is None:  # below every probe
            if b <= self.floor:
                return self.floor, -np.inf, self.floor
            return [self.floor + (b - self.floor) * j / k for j in range(k)]
        for x in (a, b):
            if abs(logs[x]) < 1e-6:
                return x, x, x
        fa, fb = logs[a], logs[b]
        if b - a <= self.rtol * b:
            return a - fa * (b - a) / (fb - fa), a, b
        tau = self.rtol * a  # two probes tau apart around the root end the search
        estimated = not self.section_next and b - a > (k + 1) * tau
        xs = []
        if estimated:
            m = self.root_estimate(a, b)
            xs = [x for x in (m - 0.5 * tau, m + 0.5 * tau) if a < x < b]
        rest = k - len(xs)
        xs += [a + (b - a) * j / (rest + 1) for j in range(1, rest + 1)]
        self.estimated = (estimated, b - a)
        return xs


def section_search(name, probe, lo, hi, rtol, k=4, *, placement="even", guess=None, spread=0.05,
                   geometric=False, floor=None, cap=None, true_at_lo=math.nan, false_at_hi=math.nan,
                   max_rounds=200):
    """Switch of a monotone predicate on [lo, hi] in rounds of up to k probes (a route; module docstring).

    `probe(x)`: the evaluation at x, either (fn, kwargs), a work keyed "<name>-<round>-<j>", or a route
    with its own keys. Its result is the predicate (a bool; f > 0 with placement "guided"), or None where
    it cannot be evaluated (e.g. a curve that cannot be mapped): that ends the search with (NaN, x, x), x
    the lowest such probe of the round. Returns (value, a, b): the value from the final bracket [a, b];
    with "bisection" and "even", (`true_at_lo`, lo, lo) when the predicate holds already at lo and
    (`false_at_hi`, hi, hi) when it does not at hi (the serial bisection's: NaN and NaN). Options:
    `guess`, `spread` ("even": round one around the guess), `geometric` ("bisection": midpoints
    sqrt(lo hi)), `floor`, `cap` ("guided": how far the bracket may move; (floor, -inf, floor) when f > 1
    at floor, (inf, cap, inf) when f <= 1 at cap). Raises after `max_rounds` rounds."""
    if placement == "bisection":
        if k < 1:
            raise ValueError(f"section_search needs k >= 1 probes a round, got {k}")
        place = _Bisection(lo, hi, rtol, k, true_at_lo, false_at_hi, geometric)
    elif placement in ("even", "guided"):
        if k < 2:
            raise ValueError(f"section_search ({placement}) needs k >= 2 probes a round, got {k}")
        place = (_Even(lo, hi, rtol, k, true_at_lo, false_at_hi, guess, spread) if placement == "even"
                 else _Guided(lo, hi, rtol, k, floor, cap))
    else:
        raise ValueError(f"unknown placement {placement!r} (one of {PLACEMENTS})")
    xs = place.first()
    for r in range(max_rounds + 1):
        xs = sorted({float(x) for x in xs} - place.seen.keys())
        routes = []
        for j, x in enumerate(xs):
            made = probe(x)
            routes.append(single(Work(f"{name}-{r}-{j}", *made)) if isinstance(made, tuple) else made)
        results = yield from side_by_side(routes)
        bad = [x for x, result in zip(xs, results) if result is None]
        if bad:
            return math.nan, bad[0], bad[0]
        place.record(xs, results)
        step = place.next()
        if isinstance(step, tuple):
            return step
        xs = step
    raise RuntimeError(f"{name}: the bracket [{lo:g}, {hi:g}] did not narrow to rtol = {rtol:g} in "
                       f"{max_rounds} rounds")


def _call(predicate, x):
    return predicate(x)


def bisect(predicate, lo, hi, rtol, *, k=1, **options):
    """The serial bisection of `predicate` (a plain function of x) in this process: `section_search` with
    the bisection placement driven here, k probes a round (the value does not depend on k). Returns
    (value, a, b); NaN when the predicate holds already at lo or not at hi."""
    return drive(section_search("bisection", lambda x: (_call, {"predicate": predicate, "x": x}), lo, hi, rtol,
                                k, placement="bisection", **options))
