"""The measured costs (sweeps/costs.toml, seqphase.sweeps.costs): every shipped sweep and every paper has one,
and a full reproduction of more than a day says what cluster brings it under an hour."""

import re

import pytest

from seqphase.sweeps import costs
from seqphase.sweeps.costs import Cost, SweepCost, over_a_day, workers_for_hour
from seqphase.sweeps.papers import PAPERS


def _own_families():
    """seqphase's own families: costs.toml measures what seqphase ships, not a family installed beside it (the
    toy family of examples/ in a development environment)."""
    from seqphase.core.family import families

    return [family for family in families().values() if family.package.startswith("seqphase.")]


def _own_families_models():
    return {model for family in _own_families() for model in family.models}


def test_every_shipped_sweep_has_a_cost_record():
    from seqphase.api import list_sweeps

    own = _own_families_models()
    assert {"glm", "smi", "bsr"} <= own
    for sweep in (s for s in list_sweeps() if s["model"] in own):
        cost = sweep["cost"]
        assert cost is not None, sweep["name"]
        assert cost.points >= sweep["points"], sweep["name"]  # the setting axes (eps) count too
        assert cost.cpu_s > 0 and (cost.chain_s is None or cost.chain_s >= 0) and (cost.command.startswith("seqphase run " + sweep["name"]) or cost.source)
        assert cost.how == "whole" or re.fullmatch(r"estimated from \d+ of \d+ points", cost.how), cost.how
        assert cost.wall_s is None or cost.whole, sweep["name"]


def test_every_paper_has_measured_quick_and_full_costs():
    own = {family.name for family in _own_families()}
    assert len(own) == 6
    for paper in (p for p in PAPERS.values() if p.family in own):
        assert paper.quick_cost is not None and paper.full_cost is not None, paper.id
        assert "not measured" not in paper.cost_quick + paper.cost_full
        assert paper.full_cost.cpu_s >= max(costs.sweep_cost(r.stored_name(False)).cpu_s for r in paper.runs)


def test_the_full_cost_is_its_runs_summed():
    paper = PAPERS["glm"]
    runs = [costs.sweep_cost(r.stored_name(False)) for r in paper.runs]
    full = paper.full_cost
    assert full.cpu_s == pytest.approx(sum(r.cpu_s for r in runs))
    assert full.chain_s == pytest.approx(sum(r.chain_s for r in runs))
    assert full.wall_s == pytest.approx(sum(r.wall_estimate() for r in runs))
    assert full.estimated == (not all(r.whole for r in runs))


@pytest.mark.parametrize(("cpu_s", "chain_s", "workers"), [
    (3_600, 10, 1), (3_601, 10, 2), (86_400, 100, 24), (200_000, 3_599, 56), (200_000, 3_600, None)])
def test_workers_for_an_hour(cpu_s, chain_s, workers):
    assert workers_for_hour(cpu_s, chain_s) == workers


def test_more_than_a_day_says_so_with_the_cluster_or_the_chain():
    assert over_a_day(86_400, 5_000) == ""  # a day exactly: nothing to say
    assert over_a_day(100_000, 500) == "more than a day on 1 worker; under an hour on 28 workers"
    text = over_a_day(100_000, 4_000)
    assert "no cluster brings it under an hour" in text and "4000 s" in text
    made_up = Cost(wall_s=50_000, cpu_s=100_000, chain_s=500, estimated=True, covers="estimated")
    assert made_up.text() == ("wall ~50000 s on 2 workers, 100000 CPU-s (estimated; more than a day on 1 worker; "
                              "under an hour on 28 workers)")
    assert Cost(46, 79).text() == "wall 46 s on 2 workers, 79 CPU-s"


def test_a_sweep_cost_in_words():
    whole = SweepCost("s", 10, 1234.4, 2.0, "whole", "seqphase run s --workers 2", wall_s=700)
    part = SweepCost("s", 10, 1234.4, 900.0, "estimated from 2 of 10 points", "seqphase run s --set a=1 --workers 2")
    assert whole.text() == "1,234 CPU-s, wall 700 s on 2 workers" and whole.wall_estimate() == 700
    assert part.text() == "1,234 CPU-s (estimated from 2 of 10 points)" and part.wall_estimate() == 900


def test_written_costs_read_back(tmp_path):
    measured = {"machine": "2 cores, a CPU",
                "sweeps": {"a": {"points": 4, "cpu_s": 8.0, "chain_s": 1.0, "wall_s": 5.0, "how": "whole",
                                 "command": "seqphase run a --workers 2"}},
                "papers": {"glm": {"wall_s": 10.0, "cpu_s": 12.0, "workers": 2,
                                   "command": "seqphase reproduce glm --quick --workers 2"}}}
    path = costs.write_costs(measured, tmp_path / "costs.toml")
    again = costs.write_costs({"machine": "2 cores, a CPU", "sweeps": {"b": dict(measured["sweeps"]["a"])}}, path)
    import tomllib

    data = tomllib.loads(again.read_text())
    assert set(data["sweeps"]) == {"a", "b"} and data["papers"]["glm"]["quick"]["cpu_s"] == 12.0
    assert data["machine"]["command"] == costs.MEASURE
