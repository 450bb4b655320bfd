"""Sequence multi-index models / deep tied attention (Troiani et al., arXiv:2502.00901; docs/explanation/smi.md)."""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its models; its
#: sweep specs (sweeps/), published data (reference/), papers (papers.py) and agreement checks (checks.py)
#: are where every family keeps them
FAMILY = Family(package=__name__, models={"smi": "seqphase.core.smi.model:SMIModel"})
