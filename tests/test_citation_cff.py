"""CITATION.cff and the Cite page cite what the code ships: the papers of `seqphase reproduce`, by arXiv id."""

from __future__ import annotations

from pathlib import Path

import yaml

from seqphase.sweeps.papers import PAPERS

ROOT = Path(__file__).resolve().parents[1]


def citation():
    return yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))


def test_citation_file_names_the_software_and_its_license():
    cff = citation()
    assert cff["cff-version"] == "1.2.0"
    assert cff["title"] == "seqphase" and cff["type"] == "software"
    assert cff["license"] == "MIT"
    assert cff["authors"] == [{"name": "The seqphase developers"}]
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")


def test_citation_references_are_the_papers_of_the_sweeps():
    cited = {}
    for reference in citation()["references"]:
        ids = [i["value"] for i in reference["identifiers"] if i["value"].startswith("arXiv:")]
        assert len(ids) == 1, reference
        cited[ids[0]] = reference
    assert set(cited) == {f"arXiv:{paper.arxiv}" for paper in PAPERS.values()}
    for paper in PAPERS.values():
        reference = cited[f"arXiv:{paper.arxiv}"]
        assert reference["title"] == paper.title
        assert [a["family-names"] for a in reference["authors"]] == paper.authors.split(", ")
