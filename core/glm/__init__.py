"""The generalised linear model family: separable priors (priors.py), the scalar channels of
core/channel.py (channels.py), scalar SE (se.py), GAMP (gamp.py), thresholds (thresholds.py), the
model and its methods (model.py) and figures (figures.py)."""

from seqphase.core.family import Family

#: the family as seqphase registers it (pyproject.toml, entry-point group "seqphase.models"): its models; its
#: sweep specs (sweeps/), published data (reference/), papers (papers.py) and agreement checks (checks.py)
#: are where every family keeps them
FAMILY = Family(package=__name__, models={"glm": "seqphase.core.glm.model:GLMModel"})
