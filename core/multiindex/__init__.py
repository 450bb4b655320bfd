"""Multi-index models y = g(W x / sqrt d), W in R^{p x d}: channels, p x p state evolution, GAMP, the
thresholds and the grand staircase, the model (methods se, gamp, threshold) and its figures."""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its models; its
#: sweep specs (sweeps/), published data (reference/), papers (papers.py) and agreement checks (checks.py)
#: are where every family keeps them
FAMILY = Family(package=__name__, models={"multiindex": "seqphase.core.multiindex.model:MultiIndexModel"})
