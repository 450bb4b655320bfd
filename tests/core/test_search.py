"""core/search.py: the bisection placement against the serial bisection written out here (bit for bit,
whatever k), the k-section's stated error bound against it, the ends, a guess, unevaluable probes, and
routes side by side."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seqphase.core.models import Work, drive
from seqphase.core.search import bisect, first_points, relative_gap, section_search, side_by_side, single


def serial_bisection(pred, lo, hi, rtol, geometric=False):
    """The reference: the serial bisection of a monotone predicate (False below, True above), as a plain
    loop. Returns (value, lo, hi); NaN when the predicate holds at lo or not at hi."""
    if pred(lo) or not pred(hi):
        return math.nan, math.nan, math.nan
    while hi - lo > rtol * hi:
        mid = math.sqrt(lo * hi) if geometric else 0.5 * (lo + hi)
        if pred(mid):
            hi = mid
        else:
            lo = mid
    return (math.sqrt(lo * hi) if geometric else 0.5 * (lo + hi)), lo, hi


def above(x, root, strict=True):
    return x > root if strict else x >= root


def probe_of(root, calls=None, strict=True):
    def probe(x):
        if calls is not None:
            calls.append(x)
        return above, {"x": x, "root": root, "strict": strict}
    return probe


def rounds_of(search):
    """Drive a search, returning (its value, the number of probes of each round)."""
    sizes = []
    try:
        works = next(search)
        while True:
            sizes.append(len(works))
            works = search.send({w.key: w.fn(**w.kwargs) for w in works})
    except StopIteration as stop:
        return stop.value, sizes


@settings(max_examples=300, deadline=None, database=None)
@given(lo=st.floats(1e-4, 10.0), width=st.floats(1e-3, 100.0), where=st.floats(-0.2, 1.2),
       rtol=st.sampled_from([1e-2, 1e-4, 1e-7, 1e-9, 1e-12]), k=st.integers(1, 8), strict=st.booleans(),
       geometric=st.booleans())
def test_bisection_placement_is_the_serial_bisection_bit_for_bit(lo, width, where, rtol, k, strict, geometric):
    """For a monotone predicate (x > root or x >= root; the root inside the bracket, outside it, or at a
    probe), the bisection placement's value and final bracket are the serial bisection's, bit for bit,
    whatever k; a round holds at most k probes (k + 2 in round one: lo and hi), and k >= 2^j - 1 probes a
    round advance the bisection at least j levels."""
    hi = lo + width
    root = lo + where * width
    reference = serial_bisection(lambda x: above(x, root, strict), lo, hi, rtol, geometric)
    got, sizes = rounds_of(section_search("s", probe_of(root, strict=strict), lo, hi, rtol, k,
                                          placement="bisection", geometric=geometric))
    if math.isnan(reference[0]):
        assert math.isnan(got[0]) and got[1] == got[2] in (lo, hi)
    else:
        assert got == reference
        assert all(math.isfinite(v) for v in got)
    assert sizes[0] <= k + 2 and all(size <= k for size in sizes[1:])
    levels = 0
    a, b = lo, hi
    while b - a > rtol * b:  # the levels the serial bisection walks down
        levels += 1
        mid = math.sqrt(a * b) if geometric else 0.5 * (a + b)
        a, b = (a, mid) if above(mid, root, strict) else (mid, b)
    per_round = int(math.log2(k + 1))
    if not math.isnan(reference[0]):
        assert len(sizes) <= 1 + math.ceil(levels / per_round)


def test_bisect_runs_the_serial_bisection_in_this_process():
    calls = []

    def pred(x):
        calls.append(x)
        return x > 0.6857

    serial_calls = []

    def serial_pred(x):
        serial_calls.append(x)
        return x > 0.6857

    assert bisect(pred, 0.05, 3.0, 1e-6) == serial_bisection(serial_pred, 0.05, 3.0, 1e-6)
    assert sorted(calls) == sorted(serial_calls)  # k = 1: the serial bisection's probes, nothing wasted
    assert math.isnan(bisect(pred, 0.7, 3.0, 1e-6)[0]) and math.isnan(bisect(pred, 0.05, 0.6, 1e-6)[0])


def test_bisection_to_rtol_zero_ends_at_adjacent_floats():
    """rtol = 0: the bracket narrows until no float lies strictly inside (the serial loop would not end)."""
    value, a, b = bisect(lambda x: x > 0.1, 0.05, 3.0, 0.0, k=3)
    assert a <= 0.1 < b and b == math.nextafter(a, math.inf) and value in (a, b)


@settings(max_examples=200, deadline=None, database=None)
@given(root=st.floats(0.06, 2.99), rtol=st.sampled_from([1e-2, 1e-5, 1e-9]), k=st.integers(2, 8))
def test_k_section_lands_within_its_stated_bound_of_the_bisection(root, rtol, k):
    """Both final brackets contain the switch (x > root), so the two midpoints differ by at most half the
    sum of the widths, <= rtol x the larger upper end (the bound stated in core/search.py); the k-section
    takes at most 1 + ceil(log_{k+1}(width / (rtol x root))) rounds, k + 2 probes in round one, k after."""
    lo, hi = 0.05, 3.0
    (value, a, b), sizes = rounds_of(section_search("s", probe_of(root), lo, hi, rtol, k))
    assert a <= root < b and b - a <= rtol * b and value == 0.5 * (a + b)
    old, old_a, old_b = serial_bisection(lambda x: x > root, lo, hi, rtol)
    assert abs(value - old) <= rtol * max(b, old_b)
    assert sizes[0] <= k + 2 and all(size <= k for size in sizes[1:])
    assert len(sizes) <= 1 + math.ceil(math.log((hi - lo) / (rtol * root)) / math.log(k + 1))


@pytest.mark.parametrize("placement", ["even", "bisection"])
def test_no_switch_inside_the_bracket_returns_the_stated_ends(placement):
    def search(root, **ends):
        return drive(section_search("s", probe_of(root), 0.05, 3.0, 1e-3, placement=placement, **ends))

    assert math.isnan(search(0.01)[0]) and math.isnan(search(5.0)[0])  # true at lo; false at hi
    assert search(0.01, true_at_lo=0.05) == (0.05, 0.05, 0.05)
    assert search(5.0, false_at_hi=math.inf) == (math.inf, 3.0, 3.0)


def test_a_guess_puts_the_first_probes_around_it_and_saves_rounds():
    assert first_points(0.05, 20.0, 4, guess=2.0) == pytest.approx([0.05, 1.9, 2.0, 2.1, 2.2, 20.0], rel=1e-15)
    no_room_above = first_points(0.05, 2.15, 4, guess=2.0)  # 2.2 is outside: evenly spaced instead
    assert no_room_above == pytest.approx([0.05, 0.47, 0.89, 1.31, 1.73, 2.15], rel=1e-15)
    calls, calls_guess = [], []
    exact = drive(section_search("s", probe_of(2.03, calls), 0.05, 20.0, 1e-3, 4))
    guided = drive(section_search("s", probe_of(2.03, calls_guess), 0.05, 20.0, 1e-3, 4, guess=2.0))
    assert guided[1] < 2.03 <= guided[2] and exact[1] < 2.03 <= exact[2]
    assert len(calls_guess) < len(calls)


@pytest.mark.parametrize("root", [1.9999, 2.0, 2.0001, 2.05])
def test_a_guess_at_the_switch_is_not_returned_as_the_value(root):
    """The guess is probed itself, so the brackets are not centred on it: the value is the midpoint of a
    bracket around the switch (within rtol of it), not the guess by symmetry."""
    value, a, b = drive(section_search("s", probe_of(root), 0.05, 20.0, 1e-3, 4, guess=2.0))
    assert a <= root < b and b - a <= 1e-3 * b and value != 2.0


def none_at(x, bad):
    return None if x >= bad else False


@pytest.mark.parametrize("placement", ["even", "bisection"])
def test_a_probe_that_cannot_be_evaluated_ends_the_search_with_nan(placement):
    value, a, b = drive(section_search("s", lambda x: (none_at, {"x": x, "bad": 1.0}), 0.0, 4.0, 1e-3, 3,
                                       placement=placement))
    assert math.isnan(value) and a == b >= 1.0


def test_bad_placements_and_k_are_refused():
    with pytest.raises(ValueError, match="unknown placement"):
        next(section_search("s", probe_of(1.0), 0.0, 2.0, 1e-2, placement="golden"))
    with pytest.raises(ValueError, match="k >= 2"):
        next(section_search("s", probe_of(1.0), 0.0, 2.0, 1e-2, 1))
    with pytest.raises(ValueError, match="floor and a cap"):
        next(section_search("s", probe_of(1.0), 0.0, 2.0, 1e-2, placement="guided"))


def test_side_by_side_runs_routes_in_rounds_shares_equal_works_and_refuses_different_ones_under_one_key():
    gen = side_by_side([section_search("a", probe_of(1.0), 0.0, 2.0, 1e-2, 3),
                        single(Work("one", above, {"x": 2.0, "root": 1.0}))])
    first = next(gen)
    assert sorted(w.key for w in first) == ["a-0-0", "a-0-1", "a-0-2", "a-0-3", "a-0-4", "one"]
    ran = []

    def execute(work):
        ran.append(work.key)
        return work.fn(**work.kwargs)

    twice = Work("x", above, {"x": 1, "root": 0})
    assert drive(side_by_side([single(twice), single(Work("x", above, {"x": 1, "root": 0}))]), execute) == [True] * 2
    assert ran == ["x"]
    with pytest.raises(ValueError, match="different works under the key 'x'"):
        drive(side_by_side([single(twice), single(Work("x", above, {"x": 2, "root": 0}))]))


def test_relative_gap_of_two_routes():
    assert relative_gap(2.0, 1.0) == 0.5 and relative_gap(0.5, 0.5) == 0.0
    assert relative_gap(0.0, 0.0) == 0.0 and relative_gap(math.inf, math.inf) == 0.0  # trivial, hard: agreed
    assert math.isnan(relative_gap(0.0, 0.1)) and math.isnan(relative_gap(math.inf, 2.0))
    assert math.isnan(relative_gap(1.0, math.nan)) and math.isnan(relative_gap(math.nan, 1.0))
    assert math.isnan(relative_gap(1.0, math.inf))
