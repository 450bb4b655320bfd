"""Sequence multi-index models / deep tied attention (Troiani et al., arXiv:2502.00901; docs/explanation/smi.md)."""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its model,
#: its sweep specs (sweeps/), its published data (reference/), its papers, their agreement checks and its figures
FAMILY = Family(
    models={
        "smi": "seqphase.core.smi.model:SMIModel",
    },
    package="seqphase.core.smi",
    sweeps="sweeps",
    reference="reference",
    papers="seqphase.core.smi.papers:PAPERS",
    checks="seqphase.core.smi.checks:CHECKS",
    figures="seqphase.core.smi.figures",
)
