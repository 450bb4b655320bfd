"""The onset's stopping rule and sequential design (core/onset.py): the rule's decision on trajectories of
known growth, the GAMP loop's stop hook, and the design on a toy method whose instances have a known mean
curve (its per-size onsets are the grid's on the same instances; it runs fewer of them; it adds seeds until
its target or its cap; a window edge is refused)."""

import json
import math

from pathlib import Path

import numpy as np
import pytest

from seqphase.core import onset
from seqphase.core.models import Param, drive


# -- the stopping rule ---------------------------------------------------------------------------------
def test_an_overlap_at_zero_is_settled_and_a_rising_one_is_not():
    bound = 1e-3
    assert onset.settled_low([1e-14] * 21, bound=bound, remaining=100)
    assert onset.settled_low(np.geomspace(1e-4, 1e-6, 21), bound=bound, remaining=100)  # decaying
    assert not onset.settled_low([2e-3] + [1e-6] * 20, bound=bound, remaining=100)  # above the bound in the window
    assert not onset.settled_low([1e-6] * 20 + [np.nan], bound=bound, remaining=100)
    # a dip and a turn up: the window's first value is the largest, its last iterations grow by 1.3 each
    dip = [1e-4 * 0.5 ** k for k in range(10)] + [1e-4 * 0.5 ** 9 * 1.3 ** k for k in range(1, 11)]
    assert dip[0] > dip[-1] and not onset.settled_low(dip, bound=bound, remaining=100)


@pytest.mark.parametrize("rate", [1.01, 1.05])
def test_a_steady_growth_is_stopped_exactly_when_its_projection_stays_below_the_bound(rate):
    """x_k = x0 rate^k: the projection after `remaining` more iterations is x_t rate^remaining, so the rule
    stops iff that is below the bound (checked on both sides of the remaining count where it crosses)."""
    bound, x0 = 1e-2, 1e-5
    path = x0 * rate ** np.arange(21)
    crossing = math.log(bound / path[-1]) / math.log(rate)  # remaining iterations at which it reaches the bound
    assert onset.settled_low(path, bound=bound, remaining=math.floor(crossing) - 1)
    assert not onset.settled_low(path, bound=bound, remaining=math.ceil(crossing) + 1)


def test_below_the_floor_growth_is_not_seen():
    """Under STOP_FLOOR * bound values count as the floor: a rise from 1e-14 to 1e-12 is numerical zero."""
    bound = 1e-3
    assert onset.settled_low(np.geomspace(1e-14, 1e-12, 21), bound=bound, remaining=1000)
    assert not onset.settled_low(np.geomspace(1e-7, 1e-5, 21), bound=bound, remaining=1000)  # above it: seen


def test_stop_test_waits_for_every_layer():
    """A layer at zero does not stop the run while another layer is not settled: without the flat rule every
    layer must sit at zero; with it, the others may stand still instead."""
    def records(m11, m22):
        return [{"overlap": np.diag([a, b])} for a, b in zip(m11, m22)]

    zero, learned = [0.0] * 30, [0.5] * 30
    rising = list(np.linspace(0.05, 0.9, 30))
    low_only = onset.stop_test(2000, level=2.0, fraction=1e-3, cap=150, window=20)
    assert low_only(records(zero, zero))
    assert not low_only(records(zero, learned))  # layer 2 is not at zero
    assert not low_only(records(zero, zero)[:20])  # fewer iterations than the window
    with_flat = onset.stop_test(2000, level=2.0, fraction=1e-3, cap=150, window=20, flat=1e-2)
    assert with_flat(records(zero, learned)) and not with_flat(records(zero, rising))
    assert onset.stop_test(2000, level=2.0, fraction=1e-3, cap=150, window=0) is None


ESCAPES = Path(__file__).parent / "data" / "smi" / "onset-escape-c2-d1000.json"


def _first_stop(test, *layers):
    """The first iteration at which `test` stops a run whose per-iteration |M_ll| are `layers` (one list each)."""
    records = [{"overlap": np.diag(m)} for m in zip(*layers)]
    return next((t for t in range(1, len(records)) if test(records[:t + 1])), None)


def test_the_rule_does_not_stop_a_late_escape_of_logged_smi_runs():
    """Two logged GAMP runs of smi at c = 2, alpha = 0.8, d = 1000 (no early stop; tests/data/smi): seed 8's
    |M11| decays to 1.1e-5 at iteration 26 while |M22| is being learned, then grows ~1.28 an iteration to 0.195
    (above the level 0.063); seed 13's |M11| grows while it oscillates, from troughs below every value before
    them, to 0.036 at the cap. A stop must keep the rule's promise: on the capped run's side of the level, and
    at zero only if the capped run ends below the bound. The rule of onset version 6 (the watched layer alone,
    its growth measured into the current value only) broke it on both, stopping them at zero at iterations 25
    and 30."""
    runs = json.loads(ESCAPES.read_text())["runs"]
    for run in runs:
        d, cap, level = run["d"], run["cap"], run["level"]
        m11, m22 = np.array(run["m11"]), np.array(run["m22"])
        rule, bound = _shipped_rule(d, level, cap)  # the sweep's rule
        t = _first_stop(rule, m11, m22)
        final = m11[-1]
        if t is not None:  # stopped: at the capped run's side of the level, and at zero only if it stays there
            assert (m11[t] > level / math.sqrt(d)) == (final > level / math.sqrt(d)), (run["key"], t)
            assert m11[t] >= bound or final < bound, (run["key"], t, final)


OSCILLATIONS = Path(__file__).parent / "data" / "smi" / "onset-oscillation-c0.1-d2000.json"
REGROWTH = Path(__file__).parent / "data" / "smi" / "onset-regrowth-c1-d2000.json"


def _shipped_rule(d, level, cap, **change):
    from seqphase.core.models import get_model

    shipped = {k: p.default for k, p in get_model("smi").method("onset").settings.items()}
    settings = {"fraction": shipped["stop_fraction"], "window": shipped["stop_window"], "flat": shipped["stop_flat"],
                "envelope": shipped["stop_envelope"], **change}
    return onset.stop_test(d, level=level, cap=cap, **settings), settings["fraction"] * level / math.sqrt(d)


def test_a_decay_through_oscillations_stops_at_zero_on_the_envelope():
    """Three logged GAMP runs of smi at c = 0.1, alpha = 0.25, d = 2000 (no early stop; tests/data/smi): |M22|
    decays from ~1e-3 to ~1e-6 while it oscillates through zero (troughs down to 1e-8). On the envelope the
    rule stops each at zero, and the capped run ends below the bound there; on the raw values (envelope 1,
    onset version 7's rule) each trough-to-peak pair reads as growth and seed 1 runs to the cap."""
    for run in json.loads(OSCILLATIONS.read_text())["runs"]:
        rule, bound = _shipped_rule(run["d"], run["level"], run["cap"])
        t = _first_stop(rule, run["m11"], run["m22"])
        assert t is not None and t < 120, (run["key"], t)
        assert run["m22"][t] < bound and run["m22"][-1] < bound and run["m11"][-1] < bound, run["key"]
        if run["key"].endswith("-s1"):
            raw, _ = _shipped_rule(run["d"], run["level"], run["cap"], envelope=1)
            t_raw = _first_stop(raw, run["m11"], run["m22"])
            assert t_raw is None or t_raw >= run["cap"]  # at the cap the run ends anyway


def test_a_growth_back_past_an_earlier_bump_is_not_stopped_at_zero():
    """A logged run of smi at c = 1, alpha = 0.7, d = 2000 (the watched |M11|, tests/data/smi): it bumps to
    4e-6, falls to 0 and grows back past the bump to 9.5e-3 at the cap, above the bound. While the bump is in
    its reach the envelope reads the regrowth as flat; the layer's current value, a new high over the
    envelope's span, says it is rising, and the rule waits."""
    run = json.loads(REGROWTH.read_text())
    rule, bound = _shipped_rule(run["d"], run["level"], run["cap"])
    m11 = run["m11"]
    assert m11[-1] > bound
    t = _first_stop(rule, m11)
    assert t is None or m11[t] >= bound, t


def test_the_envelope_spans_troughs_but_not_a_steady_growth():
    """A decaying oscillation (period 11, troughs 1e-3 of the peak) settles on the envelope; the same
    oscillation growing by 1.08 an iteration does not, though its current value may be a trough."""
    t = np.arange(60)
    wave = np.abs(np.cos(2 * np.pi * t / 11)) + 1e-3
    decaying, growing = 1e-4 * 0.97 ** t * wave, 1e-7 * 1.08 ** t * wave
    for path, stops in ((decaying, True), (growing, False)):
        rule = onset.stop_test(2000, level=2.0, fraction=1e-2, cap=150, window=20, envelope=12)
        records = [{"overlap": np.diag([m, 1e-14])} for m in path]
        assert any(rule(records[:k + 1]) for k in range(31, 60)) == stops
    raw = onset.stop_test(2000, level=2.0, fraction=1e-2, cap=150, window=20)
    assert not any(raw([{"overlap": np.diag([m, 1e-14])} for m in decaying[:k + 1]]) for k in range(20, 60))
    with pytest.raises(ValueError, match="envelope"):
        onset.stop_test(2000, level=2.0, fraction=1e-2, cap=150, window=20, envelope=0)


def test_a_growth_seen_anywhere_in_the_window_counts():
    """An overlap that grows while it oscillates: the current value is a trough, below every earlier value of
    the window, yet it grew by 3 in one iteration before; the projection takes that rate."""
    bound = 1e-3
    path = 1e-5 * 1.1 ** np.arange(21) * (1.5 + np.cos(np.arange(21) * 2 * np.pi / 10))
    path[-1] = 0.3 * path[:-1].min()
    assert not onset.settled_low(path, bound=bound, remaining=100)
    # a smooth decay has no growing pair: it is settled
    assert onset.settled_low(np.geomspace(1e-4, 1e-7, 21), bound=bound, remaining=130)


def test_an_overlap_that_stands_still_above_the_bound_is_flat_and_a_moving_one_is_not():
    floor = 1e-4
    assert onset.settled_flat([0.178] * 20 + [0.1781], floor=floor, rtol=1e-2)
    assert onset.settled_flat(0.1 + 1e-4 * np.sin(np.arange(21)), floor=floor, rtol=1e-2)  # jitter of 2e-3 relative
    assert not onset.settled_flat(np.linspace(0.10, 0.11, 21), floor=floor, rtol=1e-2)  # a drift of 9% of its value
    assert not onset.settled_flat([5e-5] * 21, floor=floor, rtol=1e-2)  # under the floor: settled_low's to judge
    assert not onset.settled_flat([0.5] * 20 + [np.nan], floor=floor, rtol=1e-2)
    # the range, not the net change: a cycle that returns to its start is moving
    assert not onset.settled_flat(0.1 + 0.02 * np.sin(np.linspace(0, 2 * np.pi, 21)), floor=floor, rtol=1e-2)


def test_stop_test_with_flat_stops_only_when_every_layer_has_stopped_moving():
    def records(m11, m22):
        return [{"overlap": np.diag([a, b])} for a, b in zip(m11, m22)]

    learned, rising, zero = [0.5] * 30, list(np.linspace(0.05, 0.2, 30)), [1e-14] * 30
    flat = onset.stop_test(2000, level=2.0, fraction=1e-3, cap=150, window=20, flat=1e-2)
    plain = onset.stop_test(2000, level=2.0, fraction=1e-3, cap=150, window=20)
    assert flat(records([0.12] * 30, learned)) and not plain(records([0.12] * 30, learned))
    assert not flat(records([0.12] * 30, rising))  # the watched layer stands still, the other still rises
    assert not flat(records(rising, learned))
    assert flat(records(zero, learned)) and flat(records([0.12] * 30, zero))  # a layer at zero is decided too
    assert not flat(records([0.12] * 30, learned)[:20])  # fewer iterations than the window


def test_the_smi_onset_runs_the_posterior_on_its_own_grid(monkeypatch):
    """The onset's instances take the posterior's grid from the settings (`posterior`, default 'coarse'; the
    SE keeps the channel's default, 'fine'), settings stored before the setting existed run on 'fine', and an
    explicit resolution (a rerun's) wins."""
    from seqphase.core.models import get_model
    from seqphase.core.smi import model as smi_model
    from seqphase.core.smi.channels import RESOLUTIONS, AttentionChannel, Resolution

    method = get_model("smi").method("onset")
    settings = {k: p.default for k, p in method.settings.items()}
    seen = []
    monkeypatch.setattr(smi_model, "gamp_instance", lambda *a, resolution, stop, **k: (seen.append(resolution), None))
    method.trace({"skip": 0.1, "depth": 2}, settings, 0.8, 40, 0)
    method.trace({"skip": 0.1, "depth": 2}, {**settings, "posterior": "fine"}, 0.8, 40, 0)
    method.trace({"skip": 0.1, "depth": 2}, {k: v for k, v in settings.items() if k != "posterior"}, 0.8, 40, 0)
    method.trace({"skip": 0.1, "depth": 2}, settings, 0.8, 40, 0, resolution=Resolution(tol_strip=1e-6))
    assert seen == [RESOLUTIONS["coarse"], Resolution(), Resolution(), Resolution(tol_strip=1e-6)]
    assert settings["posterior"] == "coarse" and AttentionChannel(2, 0.1).resolution == RESOLUTIONS["fine"]


def test_the_gamp_loop_ends_where_the_stop_test_says():
    from seqphase.core import gamp
    from seqphase.core.smi.channels import AttentionChannel
    from seqphase.core.smi.gamp import AttentionSteps, sample_instance

    ch = AttentionChannel(2, 1.0)
    rng = np.random.default_rng(3)
    X, W, _, u = sample_instance(ch, 1.0, 40, rng)
    full = gamp.iterate(AttentionSteps(ch, X, u, W, np.random.default_rng(4), n_gen=10), max_iter=8, damping=0.2,
                        tol=0.0)
    cut = gamp.iterate(AttentionSteps(ch, X, u, W, np.random.default_rng(4), n_gen=10), max_iter=8, damping=0.2,
                       tol=0.0, stop=lambda records: len(records) > 5)
    assert (full.n_iter, full.stopped) == (8, False) and (cut.n_iter, cut.stopped, cut.converged) == (5, True, False)
    assert np.array_equal(cut.overlap, full.overlap[:6])  # the same run, cut short


# -- the sequential design -----------------------------------------------------------------------------
ALPHA_INF, SHIFT = 0.5, 1.5  # toy onset at d: ALPHA_INF + SHIFT d^-1/3


class Toy(onset.OnsetMethod):
    """Instances with a known mean curve: |slope (alpha - a_d)_+ + N(0, 1) / sqrt(d)|, a_d as above."""

    observables = ("overlap",)
    transitions = {"alpha": "overlap"}
    slope = 2.0

    def run_instance(self, params, settings, alpha, d, stream, watch=None):
        rng = np.random.default_rng(stream)
        onset_d = ALPHA_INF + SHIFT * d ** (-1 / 3)
        value = abs(self.slope * max(alpha - onset_d, 0.0) + rng.standard_normal() / math.sqrt(d))
        return {"overlap": value, "n_iter": 1, "converged": 1, "stopped": 0}


def toy(**overrides):
    settings = {**onset.ONSET_SETTINGS, **onset.window_settings("alpha", 0.5, 1.6, 12),
                **onset.design_settings({"alpha": 0.0})}
    method = Toy(settings, version=1, doc="toy")
    values = {k: (list(p.default) if isinstance(p.default, (list, tuple)) else p.default) for k, p in settings.items()}
    values.update({"sizes": [250, 500, 1000, 2000], "n_seeds": 16, **overrides})
    return method, values


def run(method, settings, seed=7):
    asked = []

    def execute(work):
        asked.append(work.key)
        return work.fn(**work.kwargs)

    out = drive(method.tasks({}, settings, np.random.SeedSequence(seed)), execute)
    return out, asked


def test_the_design_finds_the_grids_onsets_with_fewer_instances():
    method, settings = toy()
    seq, asked = run(method, settings)
    grid, grid_asked = run(method, {**settings, "design": "grid"})
    assert len(asked) == len(set(asked)) and set(asked) < set(grid_asked)
    assert len(asked) < 0.5 * len(grid_asked)
    # the same instances (same streams), and the grid's means beyond each size's window lie on their side
    # of the level: the crossing is the grid's, bit for bit
    assert np.array_equal(seq["alpha_gamp_d"], grid["alpha_gamp_d"])
    lo, hi = seq["alpha_step_lo"], seq["alpha_step_hi"]
    assert np.all(hi - lo >= 1) and np.all(seq["alpha_n_seeds"] == 16)
    for si in range(4):
        cells = seq["alpha_overlap"][si]
        run_steps = ~np.isnan(cells).all(axis=1)
        assert np.array_equal(np.flatnonzero(run_steps), np.arange(lo[si], hi[si] + 1))
        np.testing.assert_array_equal(cells[run_steps][:, :16], grid["alpha_overlap"][si, lo[si]:hi[si] + 1])
    assert seq["alpha_rounds"] >= 4  # at least one round a size: each placed from the smaller ones
    # the same onsets, so the extrapolations differ only through the bootstrap s.e. (their weights)
    assert abs(seq["alpha_gamp"] - grid["alpha_gamp"]) < 0.5 * grid["alpha_gamp_se"]


def test_seeds_are_added_until_the_target_and_never_past_the_cap():
    method, settings = toy()
    base, _ = run(method, settings)
    target = 0.7 * base["alpha_gamp_se"]
    more, asked = run(method, {**settings, "alpha_se": target, "max_seeds": 64})
    assert more["alpha_gamp_se"] <= target and more["alpha_n_seeds"].max() > 16
    assert all((n - 16) % 8 == 0 for n in more["alpha_n_seeds"])
    capped, _ = run(method, {**settings, "alpha_se": 1e-6, "max_seeds": 24})
    assert capped["alpha_n_seeds"].max() <= 24 and capped["alpha_gamp_se"] > 1e-6
    assert capped["alpha_overlap"].shape[-1] == 24  # the seed dim is max_seeds


def test_a_crossing_outside_the_window_is_refused_with_its_reason():
    method, settings = toy(alpha_lo=1.3, alpha_hi=2.0, alpha_n=8)  # the onset at d = 2000 is 0.62
    with pytest.raises(onset.OnsetWindowError, match="lower alpha_lo"):
        run(method, settings)


def test_a_window_the_rules_bootstrap_refuses_grows_at_both_ends(monkeypatch):
    """Ends that look settled, yet the rule's bootstrap refuses the window (here: any window under 4 alphas):
    the design widens it at both ends instead of failing the point."""
    method, settings = toy()
    real, refused = onset.onset_at_size, []

    def picky(alphas, overlaps, d, **kwargs):
        if len(alphas) < 4:
            refused.append(d)
            raise onset.OnsetWindowError(f"at d = {d} the crossing leaves the window in 50% of the seed resamples")
        return real(alphas, overlaps, d, **kwargs)

    monkeypatch.setattr(onset, "onset_at_size", picky)
    out, _ = run(method, settings)
    assert refused and np.all(out["alpha_step_hi"] - out["alpha_step_lo"] >= 3)  # grown where the grid allows


class PlateauToy(Toy):
    """A mean that leaves the floor at a_d onto a plateau 0.5 s.e. (of a 16-seed mean) above the level for 0.3
    in alpha, then rises: its 16-seed means cross the level up and down across the plateau, so the rule's LAST
    upward crossing can lie past an alpha whose mean is safely above the level."""

    def run_instance(self, params, settings, alpha, d, stream, watch=None):
        rng = np.random.default_rng(stream)
        onset_d = ALPHA_INF + SHIFT * d ** (-1 / 3)
        noise = rng.standard_normal() / math.sqrt(d)
        if alpha < onset_d:
            value = abs(noise)
        else:
            plateau = (settings["level"] + 0.5 / math.sqrt(settings["n_seeds"])) / math.sqrt(d)
            value = plateau + self.slope * max(alpha - onset_d - 0.3, 0.0) + noise
        return {"overlap": value, "n_iter": 1, "converged": 1, "stopped": 0}


def own_mean_doubts(overlaps, d, *, level, margin, beyond=True, n_boot=onset.N_BOOT, end_doubts=onset.end_doubts):
    """The high end judged on its own resampled mean alone, as if the grid had no alpha beyond it."""
    return end_doubts(overlaps, d, level=level, margin=margin, beyond=False, n_boot=n_boot)


def test_a_window_does_not_end_where_the_next_alpha_may_still_dip_below_the_level(monkeypatch):
    """On the plateau the design's windows hold the grid's last crossing at every size of every stream; the
    high end judged on its own mean alone stops short of it on some of the same streams."""
    settings = {**onset.ONSET_SETTINGS, **onset.window_settings("alpha", 0.5, 1.6, 12),
                **onset.design_settings({"alpha": 0.0})}
    method = PlateauToy(settings, version=1, doc="plateau toy")
    values = {k: (list(p.default) if isinstance(p.default, (list, tuple)) else p.default) for k, p in settings.items()}
    values.update({"sizes": [250, 500, 1000, 2000], "n_seeds": 16})
    seeds = range(5)
    grid = [run(method, {**values, "design": "grid"}, seed)[0]["alpha_gamp_d"] for seed in seeds]
    for seed, onsets in zip(seeds, grid):
        np.testing.assert_array_equal(run(method, values, seed)[0]["alpha_gamp_d"], onsets)
    monkeypatch.setattr(onset, "end_doubts", own_mean_doubts)
    short = [not np.array_equal(run(method, values, seed)[0]["alpha_gamp_d"], onsets)
             for seed, onsets in zip(seeds, grid)]
    assert any(short)


def test_the_high_end_is_settled_by_the_next_alphas_law_the_low_end_by_its_own_mean():
    """The high end: a resample of the next alpha, at least the end's mean plus three times its seed noise,
    is below the floor with probability Phi(-k / sqrt(3)) when the end's mean is k s.e. above it (k = 2: 12%,
    doubted at margin 5%; k = 4: 1%, settled). The low end: its own mean, k s.e. below, above the floor with
    probability Phi(-k) (k = 2: 2%, settled)."""
    d, level, n = 1000, 2.0, 64
    floor = level / math.sqrt(d)
    z = np.random.default_rng(3).standard_normal(n)
    z = 0.01 * (z - z.mean()) / z.std()  # the seeds' spread exactly 0.01 (their mean's s.e. 0.01 / sqrt(n))

    def at(k):
        return floor + k * 0.01 / math.sqrt(n) + z
    assert onset.end_doubts(np.array([at(-6), at(2.0)]), d, level=level, margin=0.05) == (False, True)
    assert onset.end_doubts(np.array([at(-6), at(4.0)]), d, level=level, margin=0.05) == (False, False)
    assert onset.end_doubts(np.array([at(-2.0), at(6)]), d, level=level, margin=0.05) == (False, False)
    assert onset.end_doubts(np.array([at(-1.0), at(6)]), d, level=level, margin=0.05) == (True, False)
    # at the grid's last alpha nothing beyond can dip: the end's own mean, 2 s.e. above, is settled
    assert onset.end_doubts(np.array([at(-6), at(2.0)]), d, level=level, margin=0.05, beyond=False) == (False, False)


def test_the_design_helpers():
    assert onset.first_pair(np.linspace(0, 1, 7), None) == 2
    assert onset.first_pair(np.linspace(0, 1, 11), 0.35) == 3 and onset.first_pair(np.linspace(0, 1, 11), 5.0) == 9
    # a straight line in d^-1/3 through two onsets predicts the third exactly
    line = [0.5 + 1.5 * d ** (-1 / 3) for d in (250, 500, 1000)]
    assert onset.predicted_onset([250, 500], line[:2], 1000, "d^-1/3") == pytest.approx(line[2], rel=1e-12)
    assert onset.predicted_onset([], [], 250, "d^-1/3") is None
    d, level = 1000, 2.0
    floor = level / math.sqrt(d)
    window = np.array([[0.0] * 16, [3 * floor] * 16])
    assert onset.end_doubts(window, d, level=level, margin=0.05) == (False, False)
    assert onset.end_doubts(window[::-1], d, level=level, margin=0.05) == (True, True)
    # with equal s.e. and costs the extrapolation to d -> infinity gains most from an end of the range
    pick = onset.cheapest_gain([250, 500, 1000, 2000], [0.01] * 4, [16] * 4, 8, {i: 1.0 for i in range(4)},
                               "d^-1/3")
    assert pick in (0, 3)
    assert onset.cheapest_gain([250, 500, 1000, 2000], [0.01] * 4, [16] * 4, 8,
                               {0: 1.0, 1: 1.0, 2: 1.0, 3: 1000.0}, "d^-1/3") == 0


def test_the_smi_onset_declares_the_design_and_its_layout_holds_max_seeds():
    from seqphase.core.models import get_model

    method = get_model("smi").method("onset")
    assert method.version >= 4 and method.settings["design"].default == "sequential"  # the design since v4
    settings = get_model("smi").check_settings("onset", {})
    layout = method.layout(settings)
    assert len(layout.extra_dims["seed"]) == settings["max_seeds"]
    assert {"alpha1_stopped", "alpha1_n_seeds", "alpha2_step_lo"} <= set(layout.variables)
    assert isinstance(method.settings["alpha1_se"], Param)


def test_the_smi_sequential_point_runs_as_rounds_of_works_and_equals_the_serial_run(tmp_path, client):
    """A tiny smi point (d = 20, 40; 3 seeds to start, 3 more at a time up to 6; 12 iterations) through the real
    local cluster and the store: its rounds of works give the serial `Method.run`'s outputs bit for bit, NaN /
    -1 where the design ran nothing. (Sizes this small only exercise the machinery.)"""
    from seqphase.cluster.driver import run_sweep
    from seqphase.core.models import check_outputs, get_model, point_stream
    from seqphase.results.store import Store
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    window = "\n".join(f"{t}_lo = 0.2\n{t}_hi = 3.0\n{t}_n = 8\n{t}_se = 0.01" for t in ("alpha2", "alpha1"))
    spec = tmp_path / "smi-seq.toml"
    spec.write_text('name = "smi-seq"\nmodel = "smi"\nseed = 47\n[params]\nskip = 1.0\n[method]\nname = "onset"\n'
                    'sizes = [20, 40]\nn_seeds = 3\nmax_seeds = 6\nseed_batch = 3\nmax_iter = 12\n' + window + "\n")
    plan = plan_sweep(load_sweep(str(spec)))
    group = Store(tmp_path / "s.zarr").prepare(plan)
    summary = run_sweep(plan, group, client, progress=False)
    assert (summary.done, summary.failed) == (1, 0)
    point = plan.points[0]
    model = get_model("smi")
    params, settings = plan.point_inputs(point)
    expected = check_outputs(model, "onset", settings,
                             model.run("onset", params, settings, point_stream(plan.sweep.seed, point.seed_key)))
    for t in ("alpha2", "alpha1"):
        for name in ("gamp", "gamp_se", "gamp_d", "overlap_1", "overlap_2", "n_iter", "stopped", "n_seeds",
                     "step_lo", "step_hi", "rounds"):
            got = group.read(f"{t}_{name}")[group.index_of(point)]
            assert np.array_equal(got, expected[f"{t}_{name}"], equal_nan=True), (t, name)
        ran = expected[f"{t}_n_iter"] >= 0
        assert np.array_equal(ran, np.isfinite(expected[f"{t}_overlap_1"]))  # NaN exactly where nothing ran
        assert expected[f"{t}_n_seeds"].max() == 6  # the target 0.01 is out of reach: seeds up to max_seeds


@pytest.mark.parametrize("sweep", ["glm-phase-retrieval-onset", "multiindex-z1z2-onset"])
def test_the_glm_and_multiindex_onsets_take_the_design_on_request_and_keep_their_hashes(sweep):
    """Their design settings are later_settings: at their defaults (the grid) they stay out of the sweep's
    identity, so the stored points keep their hashes; design = sequential enters it (another point)."""
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    grid = plan_sweep(load_sweep(sweep))
    added = set(onset.design_settings({"alpha": 0.0}, stopping=False))
    assert grid.sweep.settings["design"] == "grid" and not added & set(grid.identity["settings"])
    sequential = plan_sweep(load_sweep(sweep, overrides=["design=sequential"]))
    assert sequential.identity["settings"]["design"] == "sequential"
    assert not (added - {"design"}) & set(sequential.identity["settings"])
    assert sequential.points[0].hash != grid.points[0].hash
    assert "alpha_step_lo" in sequential.layout.variables and "alpha_step_lo" not in grid.layout.variables
