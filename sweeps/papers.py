"""The papers `seqphase reproduce` covers: one entry per paper, with the shipped sweeps that reproduce it.

Each `Paper` names its sweeps (`Run`: a shipped spec, the figure it reproduces, and the `--set` overrides of
its reduced `--quick` grid, the same mechanism as `seqphase run --set`), the docs page that discusses it and
the cost of a reproduction (`Cost`, from sweeps/costs.toml: `seqphase reproduce ID --quick --workers 2`
measured whole, and the full size as the sum of its runs' measured costs, `seqphase.sweeps.costs`). A `Run`
may also take its alpha grid from a published data file (`published_grid`): the agreement table then
compares at the published points themselves, with no interpolation. Quick runs are stored under NAME.quick so that they
never mix with the full-size results.

The entries live with their family (core/<family>/papers.py for the shipped ones), which registers them
(`Family.papers`); `PAPERS` collects every registered family's. A family's agreement checks live beside them
(`Family.checks`, core/<family>/checks.py): they read the stored results and the family's published data.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from dataclasses import dataclass, field, replace

from seqphase.core import registry
from seqphase.core.errors import SeqphaseError
from seqphase.core.family import families
from seqphase.sweeps.costs import Cost, full_cost, quick_cost  # noqa: F401 -- Cost, as before
from seqphase.sweeps.families import published_columns, reference

QUICK_SUFFIX = ".quick"


@dataclass(frozen=True)
class Run:
    """One sweep of a paper: a shipped spec, what it reproduces, and its reduced `--quick` grid."""

    spec: str
    figure: str                 # what it reproduces, e.g. "Fig. 1 (beta = 1, noiseless)"
    quick: tuple = ()           # --set overrides of the --quick size (NAME=VALUES)
    full: tuple = ()            # --set overrides at both sizes (e.g. a companion on a published grid)
    name: str = ""              # stored name at full size (default: the spec's)
    published_grid: tuple = ()  # (family, file, column, every k-th row at --quick): alpha from a published file
    why_quick: str = ""         # how --quick reduces it, in words (shown in the report)

    def stored_name(self, quick):
        base = self.name or self.spec
        return base + QUICK_SUFFIX if quick else base

    def overrides(self, quick):
        """The --set overrides of this run at the chosen size."""
        sets = list(self.full)
        if self.published_grid:
            sets.append("alpha=" + ",".join(f"{v:.12g}" for v in self.grid_values(quick)))
        if quick:
            sets += list(self.quick)
        return sets

    def grid_values(self, quick):
        family, file, column, every = self.published_grid
        values = published_columns(family, file)[column]
        values = values[values > 0]  # alpha > 0 for every model that takes a published grid
        return sorted(set(float(f"{v:.12g}") for v in (values[::every] if quick else values)))


@dataclass(frozen=True)
class Paper:
    id: str
    title: str
    authors: str
    arxiv: str
    venue: str
    docs: str                       # the docs page (relative to the repository) that discusses the paper
    runs: tuple
    notes: tuple = field(default_factory=tuple)
    family: str = ""                # the family that lists it (set when the papers are collected)

    @property
    def quick_cost(self):
        """The measured Cost of `seqphase reproduce ID --quick --workers 2` (sweeps/costs.toml), or None."""
        return quick_cost(self.id)

    @property
    def full_cost(self):
        """The Cost of the full reproduction: its runs' measured costs summed (`seqphase.sweeps.costs`)."""
        return full_cost(self)

    @property
    def cost_full(self):
        """The full reproduction's cost in words ("wall 263 s on 2 workers, 507 CPU-s (...)", or "not
        measured")."""
        return self.full_cost.text() if self.full_cost else "not measured"

    @property
    def cost_quick(self):
        """The `--quick` reproduction's cost in words."""
        return self.quick_cost.text() if self.quick_cost else "not measured"

    @property
    def sweeps(self):
        return [run.spec for run in self.runs]

    def run(self, spec):
        return next(r for r in self.runs if r.spec == spec or r.name == spec)

    def cite(self):
        return f"{self.authors}, \"{self.title}\", arXiv:{self.arxiv} ({self.venue})"


class _Papers(MutableMapping):
    """{paper id: Paper} of every registered family (`seqphase.core.family`), in the families' order, collected
    when first read (the families' papers modules import this one). A family whose papers cannot be imported
    is left out with a line in `unloadable`; a paper id that two families use is an error naming both. A
    mapping, so a test may put a paper in (`monkeypatch.setitem`)."""

    def __init__(self):
        self._papers = None
        self.unloadable = []

    def _table(self):
        if self._papers is None:
            papers = {}
            for family in families().values():
                if not family.papers:
                    continue
                try:
                    listed = registry.resolve(family.papers, f"model family {family.name!r}", error=SeqphaseError)
                except SeqphaseError as exc:
                    self.unloadable.append(f"the papers of {exc.one_line()}")
                    continue
                for paper in listed:
                    if paper.id in papers:
                        raise SeqphaseError("PAPER", f"paper {paper.id!r} is listed by two families: "
                                            f"{papers[paper.id].family!r} and {family.name!r}", "uninstall one of them")
                    papers[paper.id] = replace(paper, family=family.name)
            self._papers = papers
        return self._papers

    def __getitem__(self, paper_id):
        return self._table()[paper_id]

    def __setitem__(self, paper_id, paper):
        self._table()[paper_id] = paper

    def __delitem__(self, paper_id):
        del self._table()[paper_id]

    def __iter__(self):
        return iter(self._table())

    def __len__(self):
        return len(self._table())


PAPERS = _Papers()


def agreement_rows(paper, results):
    """The rows of the agreement table of `paper` (`seqphase.core.agreement.Row`): the check its family gives
    for it (`Family.checks`) on `results` ({run name: Dataset}) and the family's published data; no rows when
    the family has no check of it."""
    family = families().get(paper.family)
    if family is None:
        raise SeqphaseError("PAPER", f"paper {paper.id!r} names no registered family ({paper.family!r})",
                            "list it in a family's papers (Family.papers)")
    checks = registry.resolve(family.checks, f"model family {family.name!r}", error=SeqphaseError) \
        if family.checks else {}
    check = checks.get(paper.id)
    return [] if check is None else check(results, reference(family.name))


def get_paper(paper_id):
    if paper_id not in PAPERS:
        raise SeqphaseError("PAPER", f"no paper with id {paper_id!r}",
                            f"use one of {', '.join(PAPERS)} (seqphase reproduce --list)")
    return PAPERS[paper_id]
