"""What the shipped sweeps and the papers' reproductions cost, from the measurements in `sweeps/costs.toml`.

The file holds one record a sweep (`[sweeps.NAME]`), one a stored name of a paper that runs a spec with
other overrides (`[runs.NAME]`: a published alpha grid, fixed parameters) and one a paper's `--quick`
reproduction (`[papers.ID.quick]`), each with the command that reruns it; `python
benchmarks/measure_costs.py --write-costs` writes it. A paper's full reproduction is every one of its runs
at spec size, one after another on one cluster (`seqphase.reproduce`), so its cost is derived here: CPU-s
and longest chain summed over its runs.

Units: CPU-s = user + system seconds of the driver and its workers (where a record's `source` says it was
not rerun: the works' seconds of an earlier task log); wall = seconds on `workers` local workers; chain = the
longest chain of works of one point, the wall no number of workers goes below.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from importlib import resources

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    import tomli as tomllib

DAY_S = 86_400.0
HOUR_S = 3_600.0
MEASURE = "python benchmarks/measure_costs.py"


@dataclass(frozen=True)
class SweepCost:
    """The measured cost of one sweep (or paper run) at spec size."""

    name: str
    points: int                 # points of the sweep at spec size
    cpu_s: float                # CPU-s of the whole sweep (measured, or per point x points)
    chain_s: float | None       # the longest chain of one point's works (None: not recorded)
    how: str                    # "whole", or "estimated from k of n points"
    command: str                # the command of the points measured
    wall_s: float | None = None  # wall on `workers` workers, where run whole
    workers: int = 2
    source: str = ""            # where the figure comes from when not from measure_costs.py itself

    @property
    def whole(self):
        return self.how == "whole"

    def wall_estimate(self):
        """Wall on `workers` workers: measured where run whole, else max(chain, CPU-s / workers)."""
        return self.wall_s if self.wall_s is not None else max(self.chain_s or 0.0, self.cpu_s / self.workers)

    def text(self):
        """The cost in words, e.g. "1,185 CPU-s (estimated from 2 of 10 points)" or "5 CPU-s, wall 4 s on 2
        workers"."""
        text = f"{self.cpu_s:,.0f} CPU-s"
        if self.wall_s is not None:
            return f"{text}, wall {self.wall_s:,.0f} s on {self.workers} workers"
        return f"{text} ({self.how})"


@dataclass(frozen=True)
class Cost:
    """A reproduction's cost: `seqphase reproduce ID [--quick] --workers WORKERS` into an empty store, the
    report included, measured (quick) or summed over its runs' records (full)."""

    wall_s: float               # wall seconds on `workers` workers
    cpu_s: float                # CPU seconds, user + system, of the driver and its workers
    workers: int = 2
    covers: str = ""            # what the figure is when not one measured command, printed after it
    conditions: str = ""        # how it was measured, when it matters (kept with the figure, not printed)
    chain_s: float = 0.0        # the longest chain: the runs' chains added (they run one after another)
    estimated: bool = False     # wall and CPU-s extrapolated from subsets of some runs' points

    def text(self):
        wall = f"wall {'~' if self.estimated else ''}{self.wall_s:.0f} s on {self.workers} workers"
        text = f"{wall}, {self.cpu_s:.0f} CPU-s"
        notes = [n for n in (self.covers, over_a_day(self.cpu_s, self.chain_s)) if n]
        return f"{text} ({'; '.join(notes)})" if notes else text


def workers_for_hour(cpu_s, chain_s, hour=HOUR_S):
    """The workers that bring a run of `cpu_s` CPU-s under `hour` seconds: ceil(cpu_s / hour); None where its
    longest chain `chain_s` is an hour or more (no number of workers gets it under the hour)."""
    if chain_s >= hour:
        return None
    return max(1, math.ceil(cpu_s / hour))


def over_a_day(cpu_s, chain_s):
    """'' for a run of at most a day on one worker; otherwise the words that say so and the cluster that
    brings it under an hour (or that the longest chain rules the hour out)."""
    if cpu_s <= DAY_S:
        return ""
    workers = workers_for_hour(cpu_s, chain_s)
    if workers is None:
        return (f"more than a day on 1 worker; no cluster brings it under an hour: its longest chain is "
                f"{chain_s:.0f} s")
    return f"more than a day on 1 worker; under an hour on {workers} workers"


@functools.cache
def _records():
    source = resources.files("seqphase.sweeps").joinpath("costs.toml")
    return tomllib.loads(source.read_text(encoding="utf-8")) if source.is_file() else {}


def _sweep_cost(name, record):
    fields = {k: record[k] for k in ("points", "cpu_s", "how", "command")}
    return SweepCost(name=name, chain_s=record.get("chain_s"), wall_s=record.get("wall_s"),
                     workers=record.get("workers", 2),
                     source=record.get("source", ""), **fields)


def machine():
    """The machine the figures were measured on, in words."""
    return _records().get("machine", {}).get("description", "")


def sweep_costs():
    """{sweep name: SweepCost} of every shipped sweep that has a record."""
    return {name: _sweep_cost(name, rec) for name, rec in _records().get("sweeps", {}).items()}


def sweep_cost(name):
    """The SweepCost of a shipped sweep, or of a paper's stored name (`[runs.NAME]`); None without a record."""
    records = _records()
    for table in ("sweeps", "runs"):
        if name in records.get(table, {}):
            return _sweep_cost(name, records[table][name])
    return None


def quick_cost(paper_id):
    """The measured Cost of `seqphase reproduce ID --quick --workers 2`, or None."""
    rec = _records().get("papers", {}).get(paper_id, {}).get("quick")
    return Cost(rec["wall_s"], rec["cpu_s"], rec.get("workers", 2)) if rec else None


def full_cost(paper):
    """The Cost of a paper's full reproduction: its runs' records summed (they run one after another on one
    cluster); None if a run has no record."""
    costs = [sweep_cost(run.stored_name(False)) for run in paper.runs]
    if any(c is None for c in costs):
        return None
    estimated = not all(c.whole for c in costs)
    covers = "estimated: some sweeps from a subset of their points" if estimated else "its sweeps run whole"
    return Cost(wall_s=sum(c.wall_estimate() for c in costs), cpu_s=sum(c.cpu_s for c in costs),
                workers=costs[0].workers, covers=covers, chain_s=sum(c.chain_s or 0.0 for c in costs),
                estimated=estimated)


# -- writing (benchmarks/measure_costs.py --write-costs) ---------------------------------------------------

_HEADER = """\
# What each shipped sweep and each paper's reproduction costs, measured on the machine below with 2 local
# workers: `python benchmarks/measure_costs.py` (its docstring says how), then `--write-costs` to write this
# file. Read by seqphase.sweeps.costs (`seqphase list`, `seqphase reproduce --list`, the docs' tables).
#
# [sweeps.NAME] / [runs.NAME]: points at spec size; cpu_s = CPU-s (user + system) of the driver and its
# workers for the whole sweep (per point x points where `how` says "estimated from k of n points"); chain_s =
# the longest chain of one point's works (the run record's); wall_s = wall on 2 workers, where run whole;
# measured_* = what the measured points took (measured_work_s: the run record's work_s, the works' wall on
# their workers); command = the command of the points measured; source = where a figure comes from when
# measure_costs.py did not run it. [papers.ID.quick]: `seqphase reproduce ID --quick --workers 2` whole, wall
# and CPU-s (user + system) of the process tree.
"""


def _toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _toml_table(header, record, keys):
    lines = [f"[{header}]"]
    lines += [f"{key} = {_toml_value(record[key])}" for key in keys if key in record]
    return lines + [""]


_SWEEP_KEYS = ("points", "cpu_s", "chain_s", "wall_s", "workers", "how", "measured_points", "measured_cpu_s",
               "measured_work_s", "measured_wall_s", "command", "source", "failed")


def render_costs(records):
    """The text of costs.toml for `records` ({"machine": {...}, "sweeps": {...}, "runs": {...}, "papers": {...}})."""
    lines = [_HEADER]
    lines += _toml_table("machine", records.get("machine", {}), ("description", "workers", "command"))
    for table in ("sweeps", "runs"):
        for name in sorted(records.get(table, {})):
            lines += _toml_table(f"{table}.{name}", records[table][name], _SWEEP_KEYS)
    for paper_id in sorted(records.get("papers", {})):
        lines += _toml_table(f"papers.{paper_id}.quick", records["papers"][paper_id]["quick"],
                             ("wall_s", "cpu_s", "workers", "command"))
    return "\n".join(lines).rstrip("\n") + "\n"


def write_costs(measured, path=None):
    """Merge a measure_costs.py result ({"machine": text, "sweeps", "runs", "papers"}) into costs.toml (the
    source tree's, or `path`): the records it holds replace those of the same names, the others are kept."""
    from pathlib import Path

    path = Path(path or Path(__file__).with_name("costs.toml"))
    records = tomllib.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    records["machine"] = {"description": measured.get("machine", ""), "workers": 2, "command": MEASURE}
    for table in ("sweeps", "runs"):
        records.setdefault(table, {}).update(measured.get(table, {}))
    for paper_id, rec in measured.get("papers", {}).items():
        records.setdefault("papers", {})[paper_id] = {"quick": rec}
    path.write_text(render_costs(records), encoding="utf-8")
    _records.cache_clear()
    return path
