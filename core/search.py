"""Threshold searches as graphs of tasks: routes side by side, and root searches in rounds of k probes.

A *route* is a generator that yields lists of `Work`s (core/models.py) and receives {key: result} for
each list, then returns its value: the form `Method.tasks` takes, so `drive` runs a route serially and
the driver runs its works as Dask tasks. `side_by_side` runs several routes at once (each round, the
works of every route still running go out as one list); `single` is a route of one work.

`section_search` locates the switch of a monotone predicate (False below, True above) in rounds of k
probes, a probe being one Work that evaluates the predicate at one x. Round one probes lo, hi and k
points inside (spread evenly, or at and around a guess); every later round is a k-section of the bracket
[a, b], a the largest False probe below the smallest True probe b, so the bracket shrinks by k + 1 a
round, and the search stops with the stop rule of `numerics.narrow_bracket` (b - a <= rtol b),
returning the bracket's midpoint as the bisection does. Error bound against the bisection of the same
predicate to the same rtol: both final brackets contain the predicate's switch (monotone predicate),
so the two midpoints differ by at most half the sum of the two bracket widths, <= rtol x the larger
upper end. k is a setting of the method, never the number of workers, so a point's value does not
depend on the cluster. This module imports no family (shared numerics).
"""

from __future__ import annotations

import math

from seqphase.core.errors import ParameterError
from seqphase.core.models import Param, Work

#: the `k` setting of every threshold method whose searches run as k-sections
K_SETTING = Param("k", "int", "probes a round of each threshold search (a k-section: the bracket shrinks by k + 1 "
                  "a round; not the number of workers, so results do not depend on the cluster)", 4, low=2, high=64,
                  low_inclusive=True)


def check_bracket(settings, lo="alpha_lo", hi="alpha_hi"):
    """Refuse a search bracket (or window) whose lower end is not below its upper end, naming the field."""
    if settings[lo] >= settings[hi]:
        raise ParameterError(f"method.{lo}", f"{lo} = {settings[lo]:g} is not below {hi} = {settings[hi]:g}",
                             f"set {lo} < {hi}")


def start_all(routes):
    """Start generators: ({index: what each yielded first}, [return value of each that returned at once,
    else None]). The first step of running routes side by side (here and core/smi/thresholds.py)."""
    values = [None] * len(routes)
    asks = {}
    for i, route in enumerate(routes):
        try:
            asks[i] = next(route)
        except StopIteration as stop:
            values[i] = stop.value
    return asks, values


def side_by_side(routes):
    """Run routes side by side (a route): returns their values, in order. Every round the works of all
    routes still running form one list; each route receives the results of its own works. The routes'
    work keys must be distinct (prefix them with the route's name)."""
    routes = list(routes)
    asks, values = start_all(routes)
    while asks:
        keys = [work.key for works in asks.values() for work in works]
        if len(set(keys)) != len(keys):
            raise ValueError(f"side_by_side: two routes share a work key ({sorted(keys)})")
        results = yield [work for works in asks.values() for work in works]
        nxt = {}
        for i, works in asks.items():
            try:
                nxt[i] = routes[i].send({work.key: results[work.key] for work in works})
            except StopIteration as stop:
                values[i] = stop.value
        asks = nxt
    return values


def single(work):
    """A route of one work: returns its result."""
    return (yield [work])[work.key]


def first_points(lo, hi, k, guess=None, spread=0.05):
    """The probes of round one: lo, hi and k points inside. Without a guess (or one whose points do not
    fit inside (lo, hi)), k evenly spaced points; with one, guess (1 + spread s) for s = 0, 1, -1, 2, -2,
    4, -4, ... (the first k): the guess itself and the points a walk from it visits first. The guess is a
    probe so that the first bracket is not centred on it (a bracket centred on the guess, k-sectioned
    with k even, would return the guess itself as the midpoint of its central cell)."""
    inner = [lo + (hi - lo) * j / (k + 1) for j in range(1, k + 1)]
    if guess is not None and math.isfinite(guess):
        steps = [0.0] + [sign * 2.0**j for j in range(k) for sign in (1.0, -1.0)]
        near = [guess * (1 + spread * step) for step in steps[:k]]
        if lo < min(near) and max(near) < hi:
            inner = near
    return sorted({float(lo), float(hi), *(float(x) for x in inner)})


def section_search(name, probe, lo, hi, rtol, k=4, guess=None, spread=0.05, true_at_lo=math.nan,
                   false_at_hi=math.nan, max_rounds=200):
    """Switch of a monotone predicate on [lo, hi] in rounds of k probes (a route; module docstring).

    `probe(x)` -> (fn, kwargs): the work that returns the predicate at x (a bool); the works are keyed
    "<name>-<round>-<j>". Returns (value, a, b): the midpoint of the final bracket and its ends;
    (`true_at_lo`, lo, lo) when the predicate holds already at lo, (`false_at_hi`, hi, hi) when it
    does not at hi (bisect_monotone: NaN and NaN; bisect_alpha: lo and inf). A probe that returns None
    (the predicate cannot be evaluated there, e.g. a curve that cannot be mapped) ends the search with
    (NaN, x, x), x the lowest such probe of the round."""
    if k < 2:
        raise ValueError(f"section_search needs k >= 2 probes a round, got {k}")
    seen = {}

    def ask(xs, r):
        xs = [x for x in xs if x not in seen]
        works = [Work(f"{name}-{r}-{j}", *probe(x)) for j, x in enumerate(xs)]
        results = yield works
        for x, work in zip(xs, works):
            seen[x] = None if results[work.key] is None else bool(results[work.key])
        return min((x for x in xs if seen[x] is None), default=None)

    bad = yield from ask(first_points(lo, hi, k, guess, spread), 0)
    if bad is not None:
        return math.nan, bad, bad
    if seen[lo]:
        return true_at_lo, lo, lo
    if not seen[hi]:
        return false_at_hi, hi, hi
    for r in range(1, max_rounds + 1):
        xs = sorted(seen)
        b = min(x for x in xs if seen[x])
        a = max(x for x in xs if x < b)
        if b - a <= rtol * b:
            return 0.5 * (a + b), a, b
        bad = yield from ask([a + (b - a) * j / (k + 1) for j in range(1, k + 1)], r)
        if bad is not None:
            return math.nan, bad, bad
    raise RuntimeError(f"{name}: the bracket did not narrow to rtol = {rtol:g} in {max_rounds} rounds")
