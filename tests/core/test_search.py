"""core/search.py: the k-section of a monotone predicate against the bisection of the same predicate
(`numerics.bisect_monotone`), on predicates whose switch is known in closed form."""

import math

import pytest

from seqphase.core.models import Work, drive
from seqphase.core.numerics import bisect_monotone
from seqphase.core.search import first_points, section_search, side_by_side, single


def above(x, root):
    return x > root


def probe_of(root, calls=None):
    def probe(x):
        if calls is not None:
            calls.append(x)
        return above, {"x": x, "root": root}
    return probe


@pytest.mark.parametrize("root", [0.2075, 0.6857, 1.4926318, 2.999])
@pytest.mark.parametrize("k", [2, 4, 7])
def test_k_section_brackets_the_switch_and_lands_within_rtol_of_the_bisection(root, k):
    """Both final brackets contain the switch (x > root), so the two midpoints differ by at most half the
    sum of the widths, <= rtol x the larger upper end (the bound stated in core/search.py); the k-section
    takes at most 1 + ceil(log_{k+1}(width / (rtol x root))) rounds."""
    lo, hi, rtol = 0.05, 3.0, 1e-5
    value, a, b = drive(section_search("s", probe_of(root), lo, hi, rtol, k))
    assert a < root <= b and b - a <= rtol * b and value == 0.5 * (a + b)
    old = bisect_monotone(lambda x: x > root, lo, hi, rtol)
    assert abs(value - old) <= rtol * max(b, old * (1 + rtol))
    rounds = 0
    gen = section_search("s", probe_of(root), lo, hi, rtol, k)
    try:
        works = next(gen)
        while True:
            rounds += 1
            assert len(works) <= (k + 2 if rounds == 1 else k)
            works = gen.send({w.key: w.fn(**w.kwargs) for w in works})
    except StopIteration:
        pass
    assert rounds <= 1 + math.ceil(math.log((hi - lo) / (rtol * root)) / math.log(k + 1))


def test_no_switch_inside_the_bracket_returns_the_stated_ends():
    assert math.isnan(drive(section_search("s", probe_of(0.01), 0.05, 3.0, 1e-3))[0])  # true at lo
    assert math.isnan(drive(section_search("s", probe_of(5.0), 0.05, 3.0, 1e-3))[0])   # false at hi
    assert drive(section_search("s", probe_of(0.01), 0.05, 3.0, 1e-3, true_at_lo=0.05))[0] == 0.05
    assert drive(section_search("s", probe_of(5.0), 0.05, 3.0, 1e-3, false_at_hi=math.inf))[0] == math.inf


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


def test_a_probe_that_cannot_be_evaluated_ends_the_search_with_nan():
    value, a, b = drive(section_search("s", lambda x: (none_at, {"x": x, "bad": 1.0}), 0.0, 4.0, 1e-3, 3))
    assert math.isnan(value) and a == b == 1.0


def test_side_by_side_runs_routes_in_rounds_and_refuses_shared_keys():
    gen = side_by_side([section_search("a", probe_of(1.0), 0.0, 2.0, 1e-2, 3),
                        single(Work("one", above, {"x": 2.0, "root": 1.0}))])
    first = next(gen)
    assert sorted(w.key for w in first) == ["a-0-0", "a-0-1", "a-0-2", "a-0-3", "a-0-4", "one"]
    with pytest.raises(ValueError, match="share a work key"):
        drive(side_by_side([single(Work("x", above, {"x": 1, "root": 0})),
                            single(Work("x", above, {"x": 1, "root": 0}))]))
