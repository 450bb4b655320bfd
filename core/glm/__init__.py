"""The generalised linear model family: separable priors (priors.py), the scalar channels of
core/channel.py (channels.py), scalar SE (se.py), GAMP (gamp.py), thresholds (thresholds.py), the
model and its methods (model.py) and figures (figures.py)."""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its model,
#: its sweep specs (sweeps/), its papers, their agreement checks and its figures
FAMILY = Family(
    models={
        "glm": "seqphase.core.glm.model:GLMModel",
    },
    package="seqphase.core.glm",
    sweeps="sweeps",
    reference="",
    papers="seqphase.core.glm.papers:PAPERS",
    checks="seqphase.core.glm.checks:CHECKS",
    figures="seqphase.core.glm.figures",
)
