"""Multi-index models y = g(W x / sqrt d), W in R^{p x d}: channels, p x p state evolution, GAMP, the
thresholds and the grand staircase, the model (methods se, gamp, threshold) and its figures."""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its model,
#: its sweep specs (sweeps/), its papers, their agreement checks and its figures
FAMILY = Family(
    models={
        "multiindex": "seqphase.core.multiindex.model:MultiIndexModel",
    },
    package="seqphase.core.multiindex",
    sweeps="sweeps",
    reference="",
    papers="seqphase.core.multiindex.papers:PAPERS",
    checks="seqphase.core.multiindex.checks:CHECKS",
    figures="seqphase.core.multiindex.figures",
)
